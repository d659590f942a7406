//! `Element(fill)`: the leaf storing one value per position.
//!
//! Buffers: `val`. Invariants:
//! * **I1** `len(val) == P` (one value per parent position)
//! * **I2** `val` has the fill value's type

use super::level::LevelStorage;
use crate::algebra::Value;
use crate::error::{Error, Result};
use crate::tensor::build::Entries;
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

/// Builds the leaf from sorted entries (`tensor::build`): position `p` holds the value
/// of the entry in `groups[p]`, or the fill where there is none.
pub(crate) fn build(fill: Value, e: &Entries, groups: &[(usize, usize)]) -> Result<LevelStorage> {
    let ty = fill
        .scalar_type()
        .ok_or_else(|| Error::Program("an Element fill cannot be `missing`".into()))?;
    let mut val = Buffer::new(ty);
    val.reserve(groups.len());
    for &(lo, hi) in groups {
        val.push(if lo < hi { e.vals[lo] } else { fill })?;
    }
    Ok(LevelStorage::Element(ElementStorage { fill, val }))
}
