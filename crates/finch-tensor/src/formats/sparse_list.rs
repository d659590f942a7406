//! `SparseList(child)`: each fiber stores a sorted list of indices (CSR/CSC, DCSR).
//!
//! Buffers: `ptr` (length `P + 1`) and `idx`. Fiber `p` holds entries
//! `q in ptr[p] .. ptr[p+1]` with index `idx[q]` and child position `q`. Invariants:
//! * **I1** `len(ptr) == P + 1`
//! * **I2** `ptr[0] == 0`
//! * **I3** `ptr` is non-decreasing
//! * **I4** `ptr[P] == len(idx)`
//! * **I5** `idx[q] < shape`
//! * **I6** `idx` is strictly increasing within each fiber
//!
//! Properties: ordered, unique, compact, not full. Protocols (compiler, issue #3): read
//! walk, gallop, follow; update extrude.

use super::format::Capabilities;
use super::level::LevelStorage;
use super::output::{OutBufs, OutputAt};
use crate::error::{Error, Result};
use crate::tensor::build::*;
use crate::tensor::{IndexInt, IndexVec};

/// What the level can do (sorted indices: searched or galloped; appended in order).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: false,
    accept_run: false,
};

/// Storage of a SparseList level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseListStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into `idx` (the same width as `idx`).
    pub ptr: IndexVec,
    /// Stored indices, 0-based.
    pub idx: IndexVec,
    /// The child level (one position per stored index).
    pub child: Box<LevelStorage>,
}

/// Checks the `ptr` array shared by SparseList-like levels (invariants I1–I4 above, with
/// `entries` the length `ptr[P]` must reach). Returns the entry count.
pub(crate) fn validate_ptr<T: IndexInt>(
    depth: usize,
    level: &'static str,
    ptr: &[T],
    parents: usize,
    entries: usize,
) -> Result<usize> {
    let bad = |invariant: &'static str, detail: String| Error::Invalid {
        depth,
        level,
        invariant,
        detail,
    };
    if ptr.len() != parents.saturating_add(1) {
        return Err(bad(
            "I1 len(ptr) == P + 1",
            format!("len(ptr) = {} for P = {parents}", ptr.len()),
        ));
    }
    if ptr[0].to_usize() != 0 {
        return Err(bad("I2 ptr[0] == 0", format!("ptr[0] = {:?}", ptr[0])));
    }
    if let Some(p) = (0..parents).find(|&p| ptr[p] > ptr[p + 1]) {
        return Err(bad(
            "I3 ptr non-decreasing",
            format!(
                "ptr[{p}] = {:?} > ptr[{}] = {:?}",
                ptr[p],
                p + 1,
                ptr[p + 1]
            ),
        ));
    }
    if ptr[parents].to_usize() != entries {
        return Err(bad(
            "I4 ptr[P] == number of entries",
            format!(
                "ptr[{parents}] = {:?} but there are {entries} entries",
                ptr[parents]
            ),
        ));
    }
    Ok(entries)
}

impl SparseListStorage {
    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        match (&self.ptr, &self.idx) {
            (IndexVec::Wide(ptr), IndexVec::Wide(idx)) => {
                validate_fibers(depth, self.shape, ptr, idx, parents)
            }
            (IndexVec::Narrow(ptr), IndexVec::Narrow(idx)) => {
                validate_fibers(depth, self.shape, ptr, idx, parents)
            }
            _ => Err(Error::Invalid {
                depth,
                level: "SparseList",
                invariant: "I0 ptr and idx have one width",
                detail: format!(
                    "ptr is {} and idx is {}",
                    self.ptr.width().name(),
                    self.idx.width().name()
                ),
            }),
        }
    }

    /// The child position of index `i` in fiber `p` (binary search), if stored.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        self.idx.search(self.ptr.at(p), self.ptr.at(p + 1), i)
    }
}

/// I1–I6 over `ptr` and `idx` of one width.
fn validate_fibers<T: IndexInt>(
    depth: usize,
    shape: usize,
    ptr: &[T],
    idx: &[T],
    parents: usize,
) -> Result<usize> {
    let n = validate_ptr(depth, "SparseList", ptr, parents, idx.len())?;
    if let Some(q) = idx.iter().position(|&i| i.to_usize() >= shape) {
        return Err(Error::Invalid {
            depth,
            level: "SparseList",
            invariant: "I5 idx < shape",
            detail: format!("idx[{q}] = {:?} with shape {shape}", idx[q]),
        });
    }
    for p in 0..parents {
        let lo = ptr[p].to_usize();
        let fiber = &idx[lo..ptr[p + 1].to_usize()];
        if let Some(k) = fiber.windows(2).position(|w| w[0] >= w[1]) {
            let q = lo + k;
            return Err(Error::Invalid {
                depth,
                level: "SparseList",
                invariant: "I6 idx strictly increasing within a fiber",
                detail: format!(
                    "fiber {p}: idx[{q}] = {:?} then idx[{}] = {:?}",
                    idx[q],
                    q + 1,
                    idx[q + 1]
                ),
            });
        }
    }
    Ok(n)
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt {
        m,
        e,
        groups,
        index,
        ..
    } = *at;
    let mut child_groups = Vec::new();
    let (ptr, idx) = sorted_lists(e, m, groups, &mut child_groups);
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparseList(SparseListStorage {
        shape: size,
        ptr: IndexVec::with_width(ptr, index, "a SparseList level's ptr")?,
        idx: IndexVec::with_width(idx, index, "a SparseList level's idx")?,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs { val, ptr, idx, .. } = bufs;
    Ok(LevelStorage::SparseList(super::SparseListStorage {
        shape: at.size(),
        ptr: IndexVec::with_width(ptr, at.index, "a SparseList output's ptr")?,
        idx: IndexVec::with_width(idx, at.index, "a SparseList output's idx")?,
        child: at.child_of(val)?,
    }))
}

/// Freezes a written SparseList output (`engine::freeze`): see
/// [`super::output::freeze_list`].
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    super::output::freeze_list(bufs, at);
    Ok(())
}

/// The level's kernel parameters: how the lowerer reads and writes it.
pub(crate) mod lowering {
    use crate::lower::kit::*;

    /// A SparseList level written in order.
    /// `None` unless the level is right above an Element or a Pattern leaf.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        if !matches!(child, LevelFormat::Element(_) | LevelFormat::Pattern) {
            return None;
        }
        let ptr = at.buf(kernel, "ptr", false);
        let idx = at.buf(kernel, "idx", true);
        let qos = at.local(kernel, "qos", ScalarType::I64);
        let dirty = at.local(kernel, "dirty", ScalarType::Bool);
        Some(LevelParams::SparseListOut {
            shape: at.shape,
            ptr,
            idx,
            qos,
            dirty,
        })
    }

    /// A SparseList level read by a kernel: `ptr` over `idx`, of the level's index width.
    pub(crate) fn read_params(kernel: &mut Kernel, at: &LevelAt, index: IndexWidth) -> LevelParams {
        let ptr = kernel.index_buf(at.named("ptr"), index);
        let idx = kernel.index_buf(at.named("idx"), index);
        LevelParams::SparseList {
            shape: at.shape,
            ptr,
            idx,
        }
    }
}
