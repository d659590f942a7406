//! `Pattern()`: the leaf that stores nothing. A position that exists reads `true`; the
//! fill is `false`. So `Dense(Pattern())` is all `true`, and a sparse level over
//! `Pattern()` stores exactly the `true` entries (a graph's adjacency structure).
//!
//! Invariants: none (it has no buffers).

/// Storage of a Pattern leaf (empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PatternStorage;
