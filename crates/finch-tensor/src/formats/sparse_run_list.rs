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
use super::registry::kit as registry;
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

/// What a kernel wrote that the level cannot hold, when it flags a conflict: the run is
/// made again with the output recorded as entries (`engine`), and this is the error if
/// the result cannot be stored that way either.
pub(crate) const WRITE_CONFLICT: &str =
    "a run-length level is written in increasing index order, once per index, but the program wrote an index at or before one already written";

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
    /// Names of the kernel buffers, in `kernel_buffers` order.
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

/// Freezes a written SparseRunList output (`engine::freeze`): see
/// [`super::run_list::freeze_runs`].
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    super::run_list::freeze_runs(bufs, false, at.size, &at.fill)
}

impl registry::StoredLevel for SparseRunListStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseRunList
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseRunListStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseRunListStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparseRunListStorage::kernel_buffers(self)
    }

    fn positions(&self, parents: usize) -> usize {
        self.ptr.get(parents).copied().unwrap_or(0)
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseRunList;

impl registry::Level for SparseRunList {
    fn name(&self) -> &'static str {
        "SparseRunList"
    }

    fn capabilities(&self) -> registry::Capabilities {
        CAPABILITIES
    }

    fn build(&self, _: registry::LevelKind, at: &registry::BuildAt) -> Result<LevelStorage> {
        build(at)
    }

    fn assemble_output(
        &self,
        _: registry::LevelKind,
        at: &registry::OutputAt,
        bufs: registry::OutBufs,
    ) -> Result<LevelStorage> {
        from_output(at, bufs)
    }

    fn read_params(
        &self,
        kind: registry::LevelKind,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        _: registry::IndexWidth,
    ) -> Vec<registry::LevelParams> {
        vec![crate::lower::kit::structured_read_params(
            kernel,
            at,
            kind,
            SparseRunListStorage::BUFFERS,
        )]
    }

    fn unfurl_structured(
        &self,
        lw: &mut registry::Lowerer,
        cx: &registry::StructuredFiber,
    ) -> Result<registry::Looplet> {
        lowering::unfurl_read(lw, cx)
    }

    fn written_params(
        &self,
        _: registry::LevelKind,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        child: &registry::LevelFormat,
    ) -> Option<Vec<registry::LevelParams>> {
        lowering::written_in_order(kernel, at, child).map(|p| vec![p])
    }

    fn freeze_output(&self, bufs: &mut registry::OutBufs, at: &registry::FreezeAt) -> Result<()> {
        freeze_output(bufs, at)
    }

    fn write_conflict(&self) -> Option<&'static str> {
        Some(WRITE_CONFLICT)
    }
}

/// The level's looplets and kernel parameters: how the lowerer reads and writes it.
pub(crate) mod lowering {
    use crate::lower::kit::*;

    /// Sparse runs: a stepper over runs, each fill before `left` then its child.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        if cx.follow {
            return unfurl_follow(lw, cx);
        }
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let gallop = cx.gallop;
        let l = KExpr::Local;
        let child = cx.child();
        let (ptr, left, right) = (cx.buf(0)?, cx.buf(1)?, cx.buf(2)?);
        let q = lw.level_local(t, depth, "q");
        let q_stop = lw.level_local(t, depth, "q_stop");
        let i_last = lw.level_local(t, depth, "i_last");
        lw.at_most.push((i_last, shape));
        let stepper = Stepper {
            seek: Box::new(seek_on(q, q_stop, right)),
            preamble: vec![],
            stop: plus1(KExpr::load(right, l(q))),
            chunk: Looplet::Sequence(vec![
                (Some(KExpr::load(left, l(q))), cx.fill_run()),
                (None, Looplet::Run(Box::new(child(l(q))))),
            ]),
            next: vec![KStmt::Assign(q, plus1(l(q)))],
            counted: Some(Counted {
                more: KExpr::bin(Op::Lt, l(q), l(q_stop)),
                last: l(i_last),
                first: None,
            }),
            outside: None,
        };
        Ok(Looplet::Thunk {
            preamble: cx.bounds_where(
                fiber_bounds(ptr, right, pos, q, q_stop, i_last),
                zeros(&[q, q_stop, i_last]),
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(l(i_last)), walker(stepper, gallop)),
                (None, cx.fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Follow: a binary search over the ends of the fiber's runs, a hit when the index is
    /// not before its run's `left`.
    fn unfurl_follow(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let left = cx.buf(1)?;
        let ends = cx.buf(2)?;
        lw.follow_by_search(cx, ends, Rc::new(move |r| Some(KExpr::load(left, r))), None)
    }

    /// A SparseRunList level written in order.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        matches!(child, LevelFormat::Element(_))
            .then(|| crate::formats::run_list::lowering::out_params(kernel, at, false))
    }
}
