//! `SparsePoint(child)`: at most one stored index per fiber (Finch's SparsePinpoint), e.g.
//! a permutation matrix or a diagonal in `Dense(SparsePoint(...))`.
//!
//! Buffers: `idx` (length `P`). Fiber `p` stores index `idx[p]` with child position `p`;
//! `idx[p] == shape` marks an empty fiber, whose child must then hold only fill.
//! Invariants:
//! * **I1** `len(idx) == P`
//! * **I2** `idx[p] <= shape` (`shape` = empty)
//! * **I3** the child of an empty fiber is all fill
//!
//! Properties: ordered, unique, not full. Protocols: read walk, follow.

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (one entry per fiber: a check, nothing to gallop over).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: false,
    follow: true,
    append: true,
    insert: false,
    accept_run: false,
};

/// Storage of a SparsePoint level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparsePointStorage {
    /// Size of the mode.
    pub shape: usize,
    /// The stored index of each fiber, or `shape` when the fiber is empty.
    pub idx: Vec<usize>,
    /// The child level (one position per fiber).
    pub child: Box<LevelStorage>,
}

impl SparsePointStorage {
    /// Names of the kernel buffers, in [`Self::kernel_buffers`] order.
    pub const BUFFERS: &'static [&'static str] = &["idx"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparsePoint",
            invariant,
            detail,
        };
        if self.idx.len() != parents {
            return Err(bad(
                "I1 len(idx) == P",
                format!("len(idx) = {} for P = {parents}", self.idx.len()),
            ));
        }
        if let Some(p) = self.idx.iter().position(|&i| i > self.shape) {
            return Err(bad(
                "I2 idx <= shape (shape marks an empty fiber)",
                format!("idx[{p}] = {} with shape {}", self.idx[p], self.shape),
            ));
        }
        Ok(parents)
    }

    /// I3, checked once the child level is known to be well formed (it reads the child's
    /// values).
    pub fn validate_unstored(&self, depth: usize) -> Result<()> {
        let empty = (0..self.idx.len()).filter(|&p| self.idx[p] == self.shape);
        self.child
            .empty_fibers_hold_fill(depth, "SparsePoint", empty)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        match self.idx[p] {
            i if i < self.shape => vec![(i, i, p)],
            _ => vec![],
        }
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![KernelBuf::Indices(&self.idx)]
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt { m, e, groups, .. } = *at;
    let mut child_groups = Vec::new();
    let mut idx = Vec::with_capacity(groups.len());
    for (p, &(lo, hi)) in groups.iter().enumerate() {
        match index_groups(e, m, lo, hi).as_slice() {
            [] => {
                idx.push(size);
                child_groups.push((lo, lo));
            }
            [(i, g)] => {
                idx.push(*i);
                child_groups.push(*g);
            }
            more => {
                return Err(Error::Program(format!(
                    "SparsePoint stores at most one index per fiber, but fiber {p} \
                     has {} (indices {})",
                    more.len(),
                    first_few(more.iter().map(|(i, _)| (i + 1).to_string()))
                )))
            }
        }
    }
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparsePoint(SparsePointStorage {
        shape: size,
        idx,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs { val, idx, .. } = bufs;
    Ok(LevelStorage::SparsePoint(super::SparsePointStorage {
        shape: at.size(),
        idx,
        child: at.child_of(val)?,
    }))
}

/// The level's looplets and kernel parameters: how the lowerer reads and writes it.
pub(crate) mod lowering {
    use crate::lower::kit::*;

    /// One index `i` per fiber (`shape` when empty): fill, the child at `i`, fill.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        if cx.follow {
            return unfurl_follow(lw, cx);
        }
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let fill_run = || cx.fill_run();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
        let i = lw.level_local(t, depth, "i");
        // An empty fiber stores index `shape` (0-based): past every index.
        Ok(Looplet::Thunk {
            preamble: bounds_where(
                vec![KStmt::Assign(i, plus1(KExpr::load(buf(0)?, pos.clone())))],
                vec![KStmt::Assign(i, plus1(l(shape)))],
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(minus1(l(i))), fill_run()),
                (Some(l(i)), Looplet::Run(Box::new(child(pos)))),
                (None, fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Follow: a check against the fiber's one index; a miss reads fill.
    fn unfurl_follow(_lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let (pos, fill, child) = (cx.pos.clone(), cx.fill, cx.child());
        let idx = cx.buf(0)?;
        Ok(Looplet::Lookup(Rc::new(move |i: KExpr| Tensor::Switch {
            pre: vec![],
            cond: KExpr::bin(Op::Eq, plus1(KExpr::load(idx, pos.clone())), i),
            then: Box::new(child(pos.clone())),
            otherwise: Box::new(Tensor::FillLeaf(fill)),
        })))
    }

    /// A SparsePoint level written in order: one index, and a flag for a second one.
    /// `None` unless the level is right above an Element leaf.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        if !matches!(child, LevelFormat::Element(_)) {
            return None;
        }
        let idx = at.buf(kernel, "idx", false);
        let dirty = at.local(kernel, "dirty", ScalarType::Bool);
        let conflict = at.local(kernel, "conflict", ScalarType::Bool);
        kernel.outputs.push(conflict);
        Some(LevelParams::SparsePointOut {
            shape: at.shape,
            idx,
            dirty,
            conflict,
        })
    }
}
