//! `Pattern()`: the leaf that stores nothing. A position that exists reads `true`; the
//! fill is `false`. So `Dense(Pattern())` is all `true`, and a sparse level over
//! `Pattern()` stores exactly the `true` entries (a graph's adjacency structure).
//!
//! Invariants: none (it has no buffers).

/// Storage of a Pattern leaf (empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PatternStorage;

use super::level::LevelStorage;
use crate::error::{Error, Result};
use crate::tensor::build::Entries;

/// Builds the leaf from sorted entries (`tensor::build`): every position must hold an
/// entry that is `true`.
pub(crate) fn build(e: &Entries, groups: &[(usize, usize)]) -> Result<LevelStorage> {
    // A position with no entry, or (a 0-d tensor) whose entry is `false`.
    let holds_false = |&(lo, hi): &(usize, usize)| {
        lo == hi || e.vals[lo..hi].iter().any(|v| v.as_bool() != Some(true))
    };
    if let Some(p) = groups.iter().position(holds_false) {
        return Err(Error::Program(format!(
            "a Pattern() leaf reads `true` at every stored position, but position {p} \
             holds `false` (a level above it stores positions that hold the fill: \
             Dense, a band or block, a run, a bytemap); use Element(false) instead"
        )));
    }
    Ok(LevelStorage::Pattern(PatternStorage))
}
