//! The buffers a kernel writes an output into, and the level storage they become when
//! the run freezes it.

use super::format::{IndexWidth, LevelFormat};
use super::level::LevelStorage;
use super::{ElementStorage, PatternStorage};
use crate::algebra::{ScalarType, Value};
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

/// What freezing a written level in place needs besides its buffers.
pub(crate) struct FreezeAt {
    /// The size of the level's mode.
    pub(crate) size: usize,
    /// The output's fill value.
    pub(crate) fill: Value,
    /// The count the kernel returned for a level that counts its entries (a
    /// SparseByteMap's set positions).
    pub(crate) count: Option<usize>,
    /// A SparseList output the kernel froze itself (its counts are offsets already).
    pub(crate) frozen_in_kernel: bool,
}

/// Per-fiber counts to offsets, in place.
pub(crate) fn prefix_sum(counts: &mut [usize]) {
    for p in 1..counts.len() {
        counts[p] += counts[p - 1];
    }
}

/// Freezes a list written in order (SparseList, SparseCOO): counts become offsets (unless
/// the kernel froze it), buffers are trimmed.
pub(crate) fn freeze_list(bufs: &mut OutBufs, at: &FreezeAt) {
    if bufs.ptr.is_empty() {
        return;
    }
    if !at.frozen_in_kernel {
        prefix_sum(&mut bufs.ptr);
    }
    let n = bufs.ptr[bufs.ptr.len() - 1];
    bufs.idx.truncate(n);
    bufs.val.truncate(n);
}

/// What allocating a written level's buffers before its kernel runs needs.
pub(crate) struct AllocateAt<'a> {
    /// Parent positions: the product of the Dense sizes above the level.
    pub(crate) parents: usize,
    /// The size of the level's mode.
    pub(crate) size: usize,
    /// The sizes of the modes from the root down to the level's.
    pub(crate) positions: &'a [usize],
    /// The values' type and initial value.
    pub(crate) ty: ScalarType,
    pub(crate) init: Value,
    /// Whether the leaf stores values (an Element leaf, not a Pattern).
    pub(crate) has_values: bool,
}

/// `n` copies of `x` (an output level's initial positions), or an error when memory
/// cannot hold them: a size taken from a huge input is an error, not an aborted process.
pub(crate) fn index_vec(n: usize, x: usize) -> Result<Vec<usize>> {
    let mut v = Vec::new();
    crate::tensor::resize_fallibly(&mut v, n, x)?;
    Ok(v)
}
