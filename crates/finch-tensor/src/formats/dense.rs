//! `Dense(child)`: every index of the mode is stored.
//!
//! Buffers: none; only the size `shape`. Child position of `(p, i)` is `p·shape + i`
//! (0-based). Invariants (checked by `validate`):
//! * **I1** `P·shape` (the child position count) does not overflow.
//!
//! Properties: ordered, unique, full, locate. Protocols (compiler, issue #3): read
//! default/follow (Lookup); update extrude/laminate.

use super::format::Capabilities;
use super::level::LevelStorage;
use crate::error::{Error, Result};

/// What the level can do (a lookup either way; written at any index).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: true,
    accept_run: false,
};

/// Storage of a Dense level.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseStorage {
    /// Size of the mode.
    pub shape: usize,
    /// The child level.
    pub child: Box<LevelStorage>,
}

impl DenseStorage {
    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        parents.checked_mul(self.shape).ok_or(Error::Invalid {
            depth,
            level: "Dense",
            invariant: "I1 position count fits",
            detail: format!("{parents} × {} overflows", self.shape),
        })
    }

    /// The child position of index `i` in fiber `p`.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        (i < self.shape).then(|| p * self.shape + i)
    }
}
