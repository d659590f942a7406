//! `RunList(child)`: runs of equal subfibers that tile the whole dimension (dense
//! run-length encoding); equal neighbouring runs are merged when built.
//!
//! Buffers: `ptr` (length `P + 1`, over runs) and `right` (one per run: its last index).
//! Run `q` of fiber `p` covers `right[q-1] + 1 ..= right[q]` (from 0 for the fiber's first
//! run) and reads child position `q`. Invariants:
//! * **I1**–**I4** as SparseList for `ptr` over the runs
//! * **I5** when `shape > 0`, every fiber has at least one run, `right` is strictly
//!   increasing within it and its last run ends at `shape - 1`
//!
//! Properties: ordered, unique, full. Protocols: read walk, gallop,
//! follow (a binary search over the run ends).

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::sparse_list::validate_ptr;
use super::SparseRunListStorage;
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

/// Storage of a RunList level.
#[derive(Clone, Debug, PartialEq)]
pub struct RunListStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into the runs.
    pub ptr: Vec<usize>,
    /// Last index of each run.
    pub right: Vec<usize>,
    /// The child level (one position per run).
    pub child: Box<LevelStorage>,
}

impl RunListStorage {
    /// Names of the kernel buffers, in [`Self::kernel_buffers`] order.
    pub const BUFFERS: &'static [&'static str] = &["ptr", "right"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let runs = validate_ptr(depth, "RunList", &self.ptr, parents, self.right.len())?;
        if self.shape == 0 {
            return Ok(runs);
        }
        for p in 0..parents {
            let seg = &self.right[self.ptr[p]..self.ptr[p + 1]];
            let problem = if seg.is_empty() {
                Some("it has no run".to_string())
            } else if let Some(k) = seg.windows(2).position(|w| w[0] >= w[1]) {
                Some(format!("right = {} then {}", seg[k], seg[k + 1]))
            } else if seg[seg.len() - 1] != self.shape - 1 {
                Some(format!(
                    "its last run ends at {} instead of {}",
                    seg[seg.len() - 1],
                    self.shape - 1
                ))
            } else {
                None
            };
            if let Some(detail) = problem {
                return Err(Error::Invalid {
                    depth,
                    level: "RunList",
                    invariant: "I5 runs tile the dimension",
                    detail: format!("fiber {p}: {detail}"),
                });
            }
        }
        Ok(runs)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        let mut start = 0;
        (self.ptr[p]..self.ptr[p + 1])
            .map(|q| {
                let run = (start, self.right[q], q);
                start = self.right[q] + 1;
                run
            })
            .collect()
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.ptr),
            KernelBuf::Indices(&self.right),
        ]
    }
}

/// Builds a RunList (`dense`) or SparseRunList level from sorted entries (`tensor::build`):
/// per parent group, its runs of equal values, each run's entries below it.
pub(crate) fn build_runs(dense: bool, at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt {
        child,
        m,
        e,
        groups,
        ..
    } = *at;
    let mut child_groups = Vec::new();
    let fill = child.fill_value();
    let (mut ptr, mut left, mut right) = (vec![0], Vec::new(), Vec::new());
    for &(lo, hi) in groups {
        for (a, b, g) in runs_of(e, m, lo, hi, size, &fill, dense) {
            left.push(a);
            right.push(b);
            child_groups.push(g);
        }
        ptr.push(right.len());
    }
    let c = Box::new(at.child_of(&child_groups)?);
    Ok(if dense {
        LevelStorage::RunList(RunListStorage {
            shape: size,
            ptr,
            right,
            child: c,
        })
    } else {
        LevelStorage::SparseRunList(SparseRunListStorage {
            shape: size,
            ptr,
            left,
            right,
            child: c,
        })
    })
}

/// Builds the level from sorted entries (`tensor::build`), runs of fill included.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    build_runs(true, at)
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs { val, ptr, idx, .. } = bufs;
    Ok(LevelStorage::RunList(super::RunListStorage {
        shape: at.size(),
        ptr,
        right: idx,
        child: at.child_of(val)?,
    }))
}

/// Freezes a written RunList output (`engine::freeze`): see [`super::output::freeze_runs`].
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    super::output::freeze_runs(bufs, true, at.size, &at.fill)
}

/// The level's looplets and kernel parameters: how the lowerer reads and writes it.
pub(crate) mod lowering {
    use crate::lower::kit::*;

    /// Runs tiling the fiber: a stepper over runs, each a Run of its child.
    /// Under a present condition (see `unfurl_present`), a fiber where it fails is
    /// one run of fill over the whole dimension: its runs are read only where it
    /// holds.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        if cx.follow {
            return unfurl_follow(lw, cx);
        }
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let gallop = cx.gallop;
        let fill = cx.fill;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
        let (ptr, right) = (buf(0)?, buf(1)?);
        let q = lw.level_local(t, depth, "q");
        let q_stop = lw.level_local(t, depth, "q_stop");
        let seek = seek_on(q, q_stop, right);
        let (seek, stop, run): (SeekCode, KExpr, Tensor) = match present {
            None => (Box::new(seek), plus1(KExpr::load(right, l(q))), child(l(q))),
            Some(cond) => {
                let (c, run) = (cond.clone(), child(l(q)));
                let Tensor::Fiber(fiber) = run else {
                    return Err(Error::Program("internal: a run's child".into()));
                };
                (
                    Box::new(move |start| where_present(Some(&c), seek(start), vec![])),
                    KExpr::Op(
                        Op::IfElse,
                        vec![cond.clone(), plus1(KExpr::load(right, l(q))), l(shape)],
                    ),
                    Tensor::Present {
                        cond: cond.clone(),
                        fiber,
                        fill,
                    },
                )
            }
        };
        let stepper = Stepper {
            seek,
            preamble: vec![],
            stop,
            chunk: Looplet::Run(Box::new(run)),
            next: vec![KStmt::Assign(q, plus1(l(q)))],
            counted: Some(Counted {
                more: KExpr::bin(Op::Lt, l(q), l(q_stop)),
                last: l(shape),
                first: None,
            }),
            outside: None,
        };
        Ok(Looplet::Thunk {
            preamble: bounds_where(
                vec![
                    KStmt::Assign(q, KExpr::load(ptr, pos.clone())),
                    KStmt::Assign(q_stop, KExpr::load(ptr, plus1(pos))),
                ],
                vec![
                    KStmt::Assign(q, KExpr::int(0)),
                    KStmt::Assign(q_stop, KExpr::int(1)),
                ],
            ),
            body: Box::new(walker(stepper, gallop)),
            epilogue: vec![],
        })
    }

    /// Follow: a binary search over the ends of the fiber's runs.
    fn unfurl_follow(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let ends = cx.buf(1)?;
        lw.follow_by_search(cx, ends, Rc::new(|_| None), None)
    }

    /// A RunList level written in order.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        matches!(child, LevelFormat::Element(_)).then(|| runs_out(kernel, at, true))
    }
}
