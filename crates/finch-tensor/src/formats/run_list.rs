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
//!
//! The run-length write side lives here for both run-length levels: SparseRunList's module
//! asks this one for its kernel parameters (`lowering::out_params`), its write looplets
//! (`lowering::unfurl_write`, `unfurl_read_back`) and its freeze (`freeze_runs`).

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
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
    /// Names of the kernel buffers, in `kernel_buffers` order.
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

/// Freezes a written RunList output (`engine::freeze`): see [`freeze_runs`].
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    freeze_runs(bufs, true, at.size, &at.fill)
}

/// Freezes a written RunList (`dense`) or SparseRunList: run counts become offsets, the
/// arrays are trimmed, touching runs of equal values are merged (Finch's `merge`), and a
/// SparseRunList drops runs that hold the fill, so the result is canonical.
pub(crate) fn freeze_runs(
    bufs: &mut OutBufs,
    dense: bool,
    size: usize,
    fill: &crate::algebra::Value,
) -> Result<()> {
    let parents = bufs.ptr.len().saturating_sub(1);
    let mut q = 0;
    let (mut ptr, mut left, mut right) = (vec![0], Vec::new(), Vec::new());
    let mut vals = crate::tensor::Buffer::new(bufs.val.scalar_type());
    for p in 0..parents {
        let end = q + bufs.ptr[p + 1];
        let first = right.len();
        while q < end {
            let (l, r) = (if dense { 0 } else { bufs.aux[q] }, bufs.idx[q]);
            let v = bufs
                .val
                .get(q)
                .ok_or_else(|| Error::Program("internal: run values".into()))?;
            if !dense && v.same(fill) {
                q += 1;
                continue;
            }
            // A run of values the same as the fill holds the fill itself (`0.0`, not
            // `-0.0`), as the reference's does.
            let v = if v.same(fill) { *fill } else { v };
            let touches = right.len() > first
                && (dense || right.last().is_some_and(|&prev: &usize| prev + 1 == l))
                && vals.get(vals.len() - 1).is_some_and(|u| u.same(&v));
            if touches {
                if let Some(last) = right.last_mut() {
                    *last = r;
                }
            } else {
                left.push(l);
                right.push(r);
                vals.push(v)?;
            }
            q += 1;
        }
        // A RunList fiber the kernel never reached (its output declared but not written
        // there) is one run of fill.
        if dense && right.len() == first && size > 0 {
            left.push(0);
            right.push(size - 1);
            vals.push(*fill)?;
        }
        ptr.push(right.len());
    }
    bufs.ptr = ptr;
    bufs.idx = right;
    bufs.aux = if dense { Vec::new() } else { left };
    bufs.val = vals;
    Ok(())
}

impl registry::StoredLevel for RunListStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::RunList
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(RunListStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        RunListStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        RunListStorage::kernel_buffers(self)
    }

    fn positions(&self, parents: usize) -> usize {
        self.ptr.get(parents).copied().unwrap_or(0)
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct RunList;

impl registry::Level for RunList {
    fn name(&self) -> &'static str {
        "RunList"
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
            RunListStorage::BUFFERS,
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
pub mod lowering {
    use crate::lower::kit::*;

    /// `w .= v` of a run-length workspace inside a loop: it starts over, and later
    /// writes overwrite its runs.
    pub(crate) fn reset(p: &OutParams) -> Vec<KStmt> {
        vec![KStmt::Assign(p.qos, KExpr::int(0))]
    }

    /// How a kernel writes the level: written in order (RunList and SparseRunList alike); a child position per run.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        child_grows: true,
        vector_read_back: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A RunList or SparseRunList level of an output, written in order through AcceptRun:
    /// each written run (a whole extent where the value is constant, else one index) gets
    /// a child position; a RunList also fills the gaps with fill runs so its runs tile the
    /// fiber. `ptr` holds per-fiber run counts until the run time prefix-sums it (and
    /// merges touching runs of equal values); `left`/`right` grow by doubling.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// RunList (tiling) or SparseRunList.
        pub dense: bool,
        /// Size of the mode.
        pub shape: LocalId,
        /// Per-fiber run counts (`P + 1`, prefix-summed after the kernel).
        pub ptr: BufId,
        /// First index of each run (SparseRunList), growable.
        pub left: Option<BufId>,
        /// Last index of each run, growable.
        pub right: BufId,
        /// The next free run (= child position).
        pub qos: LocalId,
        /// The run count when the fiber began.
        pub start: LocalId,
        /// The fiber's last covered index (`-1` before any).
        pub last: LocalId,
        /// Whether the current run was written.
        pub dirty: LocalId,
        /// Set when a run is written out of order (a kernel output).
        pub conflict: LocalId,
    }

    impl WrittenLevel for OutParams {
        fn clone_box(&self) -> Box<dyn WrittenLevel> {
            Box::new(self.clone())
        }

        fn write_traits(&self) -> WriteTraits {
            WRITE_TRAITS
        }

        fn shape(&self) -> LocalId {
            self.shape
        }

        fn claim_state_mut(&mut self) -> (&mut LocalId, Option<&mut LocalId>) {
            (&mut self.dirty, None)
        }

        fn output_arrays(&self) -> Vec<(BufId, OutArray)> {
            let mut v = vec![(self.ptr, OutArray::Ptr), (self.right, OutArray::Idx)];
            v.extend(self.left.map(|l| (l, OutArray::Aux)));
            v
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            if !f.protocols.is_written() && f.depth == 0 {
                return unfurl_read_back(lw, f, self);
            }
            let name = lw.tensors[f.tensor].name.clone();
            lw.written_only(f, &name)?;
            unfurl_write(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(if self.dense {
                LevelKind::RunList
            } else {
                LevelKind::SparseRunList
            })
        }

        fn conflict_flag(&self) -> Option<LocalId> {
            Some(self.conflict)
        }

        fn reset_workspace(&self, _: Option<(BufId, Value)>, _: LocalId) -> Option<Vec<KStmt>> {
            Some(reset(self))
        }
    }

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
        let (ptr, right) = (cx.buf(0)?, cx.buf(1)?);
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
            preamble: cx.bounds_where(
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
        matches!(child, LevelFormat::Element(_)).then(|| out_params(kernel, at, true))
    }

    /// A written run-length level (RunList or SparseRunList), as the kernel writes it.
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            dense,
            shape,
            ptr,
            left,
            right,
            qos,
            start,
            last,
            dirty,
            conflict,
        } = *p;
        unfurl_runs_out(
            lw,
            f,
            dense,
            shape,
            [Some(ptr), left, Some(right)],
            [qos, start, last, dirty, conflict],
        )
    }

    /// A run-length workspace read back after its writes (the root level only).
    pub(crate) fn unfurl_read_back(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        unfurl_runs_read_back(lw, f, p.dense, p.shape, [p.ptr, p.right], p.left, p.qos)
    }

    /// A written RunList or SparseRunList (AcceptRun): a run `lo..=hi` written at once
    /// gets the child position `qos` (grown by doubling, starting from the fill); after its
    /// statements a written run is recorded. A RunList first closes any gap since the
    /// fiber's last covered index with a fill run, and after the fiber a final fill run
    /// reaches the end, so its runs tile the fiber. A run starting at or before the last
    /// covered index sets `conflict`.
    pub(crate) fn unfurl_runs_out(
        lw: &mut Lowerer,
        f: &Fiber,
        dense: bool,
        shape: crate::kernel::LocalId,
        [ptr, left, right]: [Option<crate::kernel::BufId>; 3],
        [qos, start, last, dirty, conflict]: [crate::kernel::LocalId; 5],
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (Some(ptr), Some(right)) = (ptr, right) else {
            return Err(Error::Program("internal: run level buffers".into()));
        };
        let (val, init) = lw.written_leaf(t, depth, "run-length")?;
        let l = KExpr::Local;
        let int = KExpr::int;
        // Room for run `qos` in every run array (and the values).
        let room = move || {
            let need = l(qos) + 1;
            let grow = |buf, fill| grow_to(buf, need.clone(), fill);
            let mut v = vec![grow(val, init), grow(right, Value::I64(0))];
            if let Some(left) = left {
                v.push(grow(left, Value::I64(0)));
            }
            v
        };
        // A fill run over `from..=to` (0-based), for a RunList's gaps.
        let fill_run = move |from: KExpr, to: KExpr| {
            let mut v = room();
            v.push(KStmt::Store {
                buf: val,
                index: l(qos),
                value: KExpr::Lit(init),
            });
            v.push(KStmt::Store {
                buf: right,
                index: l(qos),
                value: to.clone(),
            });
            let _ = from;
            v.push(KStmt::Assign(last, to));
            v.push(KStmt::Assign(qos, l(qos) + 1));
            v
        };
        let body = move |lo: KExpr, _hi: KExpr| {
            let lo0 = lo - 1;
            let mut claim = vec![KStmt::If {
                cond: KExpr::bin(Op::Le, lo0.clone(), l(last)),
                then: vec![KStmt::Assign(conflict, KExpr::Lit(Value::Bool(true)))],
                otherwise: vec![],
            }];
            if dense {
                claim.push(KStmt::If {
                    cond: KExpr::bin(Op::Gt, lo0.clone(), l(last) + 1),
                    then: fill_run(l(last) + 1, lo0 - 1),
                    otherwise: vec![],
                });
            }
            claim.extend(room());
            claim.push(KStmt::Store {
                buf: val,
                index: l(qos),
                value: KExpr::Lit(init),
            });
            claim.push(KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true))));
            Fiber::hollow_leaf(
                t,
                depth,
                l(qos),
                crate::looplets::Hollow::claiming(dirty, claim),
            )
        };
        let record = move |lo: KExpr, hi: KExpr| {
            let mut then = vec![KStmt::Store {
                buf: right,
                index: l(qos),
                value: hi.clone() - 1,
            }];
            if let Some(left) = left {
                then.push(KStmt::Store {
                    buf: left,
                    index: l(qos),
                    value: lo - 1,
                });
            }
            then.extend([
                KStmt::Assign(last, hi - 1),
                KStmt::Assign(qos, l(qos) + 1),
                KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
            ]);
            vec![KStmt::If {
                cond: l(dirty),
                then,
                otherwise: vec![],
            }]
        };
        let mut epilogue = Vec::new();
        if dense {
            // Close the fiber with a fill run up to its end.
            epilogue.push(KStmt::If {
                cond: KExpr::bin(Op::Lt, l(last), l(shape) - 1),
                then: fill_run(l(last) + 1, l(shape) - 1),
                otherwise: vec![],
            });
        }
        epilogue.push(KStmt::Store {
            buf: ptr,
            index: pos + 1,
            value: l(qos) - l(start),
        });
        Ok(Looplet::Thunk {
            preamble: vec![KStmt::Assign(start, l(qos)), KStmt::Assign(last, int(-1))],
            body: Box::new(Looplet::AcceptRun {
                body: Rc::new(body),
                epilogue: Rc::new(record),
            }),
            epilogue,
        })
    }

    /// A RunList workspace read where no write has reached it since it was declared (its
    /// write loop skipped, as over an empty column, or simplified away, as a `+=` of
    /// zeros) holds no run, yet a RunList's runs tile its fiber, and its walks and gallops
    /// read a run without asking whether there is one (reading stale values or outside
    /// the run buffers). Such a fiber is read as one run of its declared value over the
    /// whole mode. That run goes to slot 0 without being counted in `qos`, so the next
    /// write after the next declaration starts over it. A written fiber always has a run
    /// (its epilogue closes it with one), so `qos == 0` means unwritten.
    fn unwritten_runs_as_one(
        lw: &Lowerer,
        f: &Fiber,
        shape: crate::kernel::LocalId,
        ptr: crate::kernel::BufId,
        right: crate::kernel::BufId,
        qos: crate::kernel::LocalId,
    ) -> Result<KStmt> {
        let (val, init) = lw.written_leaf(f.tensor, f.depth + 1, "RunList")?;
        let (l, int) = (KExpr::Local, KExpr::int);
        let store = |buf, value| KStmt::Store {
            buf,
            index: int(0),
            value,
        };
        Ok(KStmt::If {
            cond: KExpr::Op(
                Op::And,
                vec![
                    KExpr::bin(Op::Eq, l(qos), int(0)),
                    KExpr::bin(Op::Lt, int(0), l(shape)),
                ],
            ),
            then: vec![
                grow_to(val, int(1), init),
                grow_to(right, int(1), Value::I64(0)),
                store(val, KExpr::Lit(init)),
                store(right, l(shape) - 1),
                KStmt::Store {
                    buf: ptr,
                    index: int(1),
                    value: int(1),
                },
            ],
            otherwise: vec![],
        })
    }

    /// A run-length workspace read back after its writes: the one fiber bounded by the
    /// runs written so far (`qos` of them) and walked like stored runs.
    fn unfurl_runs_read_back(
        lw: &mut Lowerer,
        f: &Fiber,
        dense: bool,
        shape: LocalId,
        [ptr, right]: [BufId; 2],
        left: Option<BufId>,
        qos: LocalId,
    ) -> Result<Looplet> {
        // A run-length workspace read back after its writes: bound the one
        // fiber by the runs written so far and walk it like stored runs.
        let (kind, bufs) = match left {
            Some(left) => (LevelKind::SparseRunList, vec![ptr, left, right]),
            None => (LevelKind::RunList, vec![ptr, right]),
        };
        let mut preamble = vec![
            KStmt::Store {
                buf: ptr,
                index: KExpr::int(0),
                value: KExpr::int(0),
            },
            KStmt::Store {
                buf: ptr,
                index: KExpr::int(1),
                value: KExpr::Local(qos),
            },
        ];
        if dense {
            preamble.push(unwritten_runs_as_one(lw, f, shape, ptr, right, qos)?);
        }
        let body = lw.unfurl_structured(f, kind, shape, &bufs, None)?;
        Ok(Looplet::Thunk {
            preamble,
            body: Box::new(body),
            epilogue: vec![],
        })
    }

    /// A RunList (`dense`) or SparseRunList level written in order.
    pub(crate) fn out_params(kernel: &mut Kernel, at: &LevelAt, dense: bool) -> LevelParams {
        let ptr = at.buf(kernel, "ptr", false);
        let left = (!dense).then(|| at.buf(kernel, "left", true));
        let right = at.buf(kernel, "right", true);
        let (qos, start, last) = (
            at.local(kernel, "qos", ScalarType::I64),
            at.local(kernel, "start", ScalarType::I64),
            at.local(kernel, "last", ScalarType::I64),
        );
        let (dirty, conflict) = at.write_flags(kernel);
        LevelParams::written(OutParams {
            dense,
            shape: at.shape,
            ptr,
            left,
            right,
            qos,
            start,
            last,
            dirty,
            conflict,
        })
    }
}
