//! 0-d tensors: `Scalar(fill)`, `SparseScalar(fill)`, `ShortCircuitScalar(fill)`.
//!
//! Buffers: the value `val`; SparseScalar also `dirty` (written since declared).
//! Invariants:
//! * **I1** `val` has the fill value's type
//! * **I2** a SparseScalar not written since declared holds its fill (`!dirty` implies
//!   `val == fill`): compiled reads of it are the fill

use super::format::ScalarKind;
use crate::algebra::Value;
use crate::error::{Error, Result};

/// Storage of a 0-d tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarStorage {
    /// Which scalar.
    pub kind: ScalarKind,
    /// The fill (initial) value.
    pub fill: Value,
    /// The current value.
    pub val: Value,
    /// SparseScalar: whether it was written since it was declared (`val != fill` is not
    /// enough: a write may store the fill). Always false for the other kinds.
    pub dirty: bool,
}

impl ScalarStorage {
    /// Checks the invariants.
    pub fn validate(&self) -> Result<()> {
        if self.val.scalar_type() != self.fill.scalar_type() || self.val.is_missing() {
            return Err(Error::Invalid {
                depth: 1,
                level: self.kind.name(),
                invariant: "I1 val has the fill's type",
                detail: format!("fill {} but val {}", self.fill, self.val),
            });
        }
        if self.kind.tracks_writes() && !self.dirty && !self.val.same(&self.fill) {
            return Err(Error::Invalid {
                depth: 1,
                level: self.kind.name(),
                invariant: "I2 not dirty implies val == fill",
                detail: format!("val {} with fill {} but dirty = false", self.val, self.fill),
            });
        }
        Ok(())
    }
}
