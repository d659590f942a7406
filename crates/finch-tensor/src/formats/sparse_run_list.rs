//! `SparseRunList(child)`: sparse runs of equal subfibers; indices between runs hold fill.
//!
//! Buffers: `ptr` (length `P + 1`, over runs), `left` and `right` (one per run, inclusive).
//! Run `q` of fiber `p` (`q in ptr[p] ..< ptr[p+1]`) covers `left[q] ..= right[q]` and
//! reads child position `q`. Invariants:
//! * **I1**–**I4** as SparseList for `ptr` over the runs
//! * **I5** `len(left) == len(right)`, `left[q] <= right[q] < shape`
//! * **I6** within a fiber each run starts after the previous one ends
//!
//! Properties: ordered, unique, not full. Protocols: read walk, gallop,
//! follow (a binary search over the run ends).

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::sparse_list::validate_ptr;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (sorted run ends: searched or galloped; takes whole runs).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: false,
    accept_run: true,
};

/// Storage of a SparseRunList level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseRunListStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into the runs.
    pub ptr: Vec<usize>,
    /// First index of each run.
    pub left: Vec<usize>,
    /// Last index of each run.
    pub right: Vec<usize>,
    /// The child level (one position per run).
    pub child: Box<LevelStorage>,
}

impl SparseRunListStorage {
    /// Names of the kernel buffers, in [`Self::kernel_buffers`] order.
    pub const BUFFERS: &'static [&'static str] = &["ptr", "left", "right"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseRunList",
            invariant,
            detail,
        };
        if self.left.len() != self.right.len() {
            return Err(bad(
                "I5 len(left) == len(right)",
                format!(
                    "len(left) = {}, len(right) = {}",
                    self.left.len(),
                    self.right.len()
                ),
            ));
        }
        let runs = validate_ptr(depth, "SparseRunList", &self.ptr, parents, self.right.len())?;
        if let Some(q) =
            (0..runs).find(|&q| self.left[q] > self.right[q] || self.right[q] >= self.shape)
        {
            return Err(bad(
                "I5 left <= right < shape",
                format!(
                    "run {q}: {}..={} with shape {}",
                    self.left[q], self.right[q], self.shape
                ),
            ));
        }
        for p in 0..parents {
            for q in self.ptr[p]..self.ptr[p + 1].saturating_sub(1) {
                if self.left[q + 1] <= self.right[q] {
                    return Err(bad(
                        "I6 runs of a fiber are ordered and disjoint",
                        format!(
                            "fiber {p}: run {q} ends at {} but run {} starts at {}",
                            self.right[q],
                            q + 1,
                            self.left[q + 1]
                        ),
                    ));
                }
            }
        }
        Ok(runs)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        (self.ptr[p]..self.ptr[p + 1])
            .map(|q| (self.left[q], self.right[q], q))
            .collect()
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.ptr),
            KernelBuf::Indices(&self.left),
            KernelBuf::Indices(&self.right),
        ]
    }
}

/// Builds the level from sorted entries (`tensor::build`), as a RunList that stores no
/// runs of fill.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    super::run_list::build_runs(false, at)
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs {
        val, ptr, idx, aux, ..
    } = bufs;
    Ok(LevelStorage::SparseRunList(super::SparseRunListStorage {
        shape: at.size(),
        ptr,
        left: aux,
        right: idx,
        child: at.child_of(val)?,
    }))
}
