//! `Element(fill)`: the leaf storing one value per position.
//!
//! Buffers: `val`. Invariants:
//! * **I1** `len(val) == P` (one value per parent position)
//! * **I2** `val` has the fill value's type

use crate::algebra::Value;
use crate::error::{Error, Result};
use crate::tensor::Buffer;

/// Storage of an Element leaf.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementStorage {
    /// The fill (background) value.
    pub fill: Value,
    /// One value per position.
    pub val: Buffer,
}

impl ElementStorage {
    /// Checks the invariants for `parents` positions.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        if self.fill.scalar_type() != Some(self.val.scalar_type()) {
            return Err(Error::Invalid {
                depth,
                level: "Element",
                invariant: "I2 val has the fill's type",
                detail: format!(
                    "fill {} but val holds {}",
                    self.fill,
                    self.val.scalar_type()
                ),
            });
        }
        if self.val.len() != parents {
            return Err(Error::Invalid {
                depth,
                level: "Element",
                invariant: "I1 len(val) == P",
                detail: format!("len(val) = {} for P = {parents}", self.val.len()),
            });
        }
        Ok(parents)
    }
}
