//! The buffers a kernel writes an output into, and the level storage they become when
//! the run freezes it.

use super::format::{IndexWidth, LevelFormat};
use super::level::LevelStorage;
use super::{ElementStorage, PatternStorage};
use crate::algebra::ScalarType;
use crate::error::{Error, Result};
use crate::tensor::{fmt_shape, Buffer};

/// The buffers of an output: values, and for a sparse output its counts and indices (for
/// a SparseByteMap: `ptr`, the flags and the set positions in `idx`).
pub(crate) struct OutBufs {
    pub(crate) val: Buffer,
    pub(crate) ptr: Vec<usize>,
    pub(crate) idx: Vec<usize>,
    pub(crate) flags: Buffer,
    /// A second index array (a SparseBlockList's block ends).
    pub(crate) aux: Vec<usize>,
}

impl OutBufs {
    /// Only values (the leaf below a sparse level).
    pub(crate) fn values(val: Buffer) -> OutBufs {
        OutBufs {
            val,
            ptr: vec![],
            idx: vec![],
            flags: Buffer::new(ScalarType::Bool),
            aux: vec![],
        }
    }
}

/// The storage of an output of level format `lf` from the buffers a kernel wrote (its
/// written level's arrays, values below), each level's part asked of its module.
pub(crate) fn assemble(lf: &LevelFormat, shape: &[usize], bufs: OutBufs) -> Result<LevelStorage> {
    match lf {
        LevelFormat::Element(fill) => Ok(LevelStorage::Element(ElementStorage {
            fill: *fill,
            val: bufs.val,
        })),
        LevelFormat::Inner { kind, index, child } => {
            if shape.is_empty() {
                return Err(Error::Program(format!(
                    "internal: shape {}",
                    fmt_shape(shape)
                )));
            }
            kind.assemble_output(
                &OutputAt {
                    index: *index,
                    child,
                    shape,
                },
                bufs,
            )
        }
        // A Pattern leaf stores nothing (its level records the positions).
        LevelFormat::Pattern => Ok(LevelStorage::Pattern(PatternStorage)),
    }
}

/// Where an output level is assembled: its index width, the format below it, and the
/// sizes of the modes from the root down to its own (its size last).
pub(crate) struct OutputAt<'a> {
    pub(crate) index: IndexWidth,
    pub(crate) child: &'a LevelFormat,
    pub(crate) shape: &'a [usize],
}

impl OutputAt<'_> {
    /// The size of the level's mode.
    pub(crate) fn size(&self) -> usize {
        self.shape[self.shape.len() - 1]
    }

    /// The sizes of the modes above the level.
    pub(crate) fn above(&self) -> &[usize] {
        &self.shape[..self.shape.len() - 1]
    }

    /// The level below a one-mode level, holding the values `val`.
    pub(crate) fn child_of(&self, val: Buffer) -> Result<Box<LevelStorage>> {
        Ok(Box::new(assemble(
            self.child,
            self.above(),
            OutBufs::values(val),
        )?))
    }
}
