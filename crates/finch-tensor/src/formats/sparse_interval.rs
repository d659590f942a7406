//! `SparseInterval(child)`: one run of stored indices per fiber, all reading the same
//! child (a single band of a constant).
//!
//! Buffers: `left`, `right` (length `P` each, inclusive, 0-based). Fiber `p` stores
//! indices `left[p] ..= right[p]`, all with child position `p`; `right[p] < left[p]`
//! marks an empty fiber (canonically `left = 1, right = 0`), whose child must hold fill.
//! Invariants:
//! * **I1** `len(left) == len(right) == P`
//! * **I2** a non-empty run lies in `0 .. shape`
//! * **I3** the child of an empty fiber is all fill
//!
//! Properties: ordered, unique, not full. Protocols: read walk, follow.

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (one run per fiber: a check, nothing to gallop over; takes a whole run).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: false,
    follow: true,
    append: true,
    insert: false,
    accept_run: true,
};

/// What a kernel wrote that the level cannot hold, when it flags a conflict: the run is
/// made again with the output recorded as entries (`engine`), and this is the error if
/// the result cannot be stored that way either.
pub(crate) const WRITE_CONFLICT: &str =
    "a SparseInterval level stores one run of equal values per fiber, but the program wrote another";

/// Storage of a SparseInterval level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseIntervalStorage {
    /// Size of the mode.
    pub shape: usize,
    /// First stored index per fiber.
    pub left: Vec<usize>,
    /// Last stored index per fiber (`< left` when empty).
    pub right: Vec<usize>,
    /// The child level (one position per fiber).
    pub child: Box<LevelStorage>,
}

impl SparseIntervalStorage {
    /// Names of the kernel buffers, in `kernel_buffers` order.
    pub const BUFFERS: &'static [&'static str] = &["left", "right"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseInterval",
            invariant,
            detail,
        };
        if self.left.len() != parents || self.right.len() != parents {
            return Err(bad(
                "I1 len(left) == len(right) == P",
                format!(
                    "len(left) = {}, len(right) = {} for P = {parents}",
                    self.left.len(),
                    self.right.len()
                ),
            ));
        }
        for p in 0..parents {
            let (l, r) = (self.left[p], self.right[p]);
            if l <= r && r >= self.shape {
                return Err(bad(
                    "I2 a run lies within the shape",
                    format!("fiber {p}: run {l}..={r} with shape {}", self.shape),
                ));
            }
            // Bounded even when empty, so 1-based arithmetic in kernels cannot overflow.
            if r < l && l > self.shape.saturating_add(1) {
                return Err(bad(
                    "I2 a run lies within the shape",
                    format!(
                        "fiber {p}: empty run with left = {l} beyond shape {}",
                        self.shape
                    ),
                ));
            }
        }
        Ok(parents)
    }

    /// I3, checked once the child level is known to be well formed (it reads the child's
    /// values).
    pub fn validate_unstored(&self, depth: usize) -> Result<()> {
        let empty = (0..self.left.len()).filter(|&p| self.right[p] < self.left[p]);
        self.child
            .empty_fibers_hold_fill(depth, "SparseInterval", empty)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        if self.left[p] <= self.right[p] {
            vec![(self.left[p], self.right[p], p)]
        } else {
            vec![]
        }
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.left),
            KernelBuf::Indices(&self.right),
        ]
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
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
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for (p, &(lo, hi)) in groups.iter().enumerate() {
        let runs = runs_of(e, m, lo, hi, size, &fill, false);
        match runs.as_slice() {
            [] => {
                left.push(1);
                right.push(0);
                child_groups.push((lo, lo));
            }
            [(a, b, g)] => {
                left.push(*a);
                right.push(*b);
                child_groups.push(*g);
            }
            more => {
                return Err(Error::Program(format!(
                    "SparseInterval stores one run of equal values per fiber, but \
                     fiber {p} has {} runs ({})",
                    more.len(),
                    first_few(more.iter().map(|(a, b, _)| format!("{}:{}", a + 1, b + 1)))
                )))
            }
        }
    }
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparseInterval(SparseIntervalStorage {
        shape: size,
        left,
        right,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs { val, ptr, idx, .. } = bufs;
    Ok(LevelStorage::SparseInterval(super::SparseIntervalStorage {
        shape: at.size(),
        left: idx,
        right: ptr,
        child: at.child_of(val)?,
    }))
}

/// Allocates a written SparseInterval (`engine`): every fiber empty (`left = 1`,
/// `right = 0`), one value slot per fiber plus a scratch slot for the run being written.
pub(crate) fn allocate_output(b: &mut OutBufs, at: &super::output::AllocateAt) -> Result<()> {
    b.val = crate::tensor::Buffer::filled(at.ty, at.parents + 1, at.init)?;
    b.ptr = super::output::index_vec(at.parents, 0)?;
    b.idx = super::output::index_vec(at.parents, 1)?;
    Ok(())
}

/// Freezes a written SparseInterval output (`engine::freeze`): the scratch value slot past
/// the fibers' values is dropped.
pub(crate) fn freeze_output(bufs: &mut OutBufs, _at: &super::output::FreezeAt) -> Result<()> {
    let n = bufs.idx.len();
    bufs.val.truncate(n);
    Ok(())
}

impl registry::StoredLevel for SparseIntervalStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseInterval
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseIntervalStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseIntervalStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparseIntervalStorage::kernel_buffers(self)
    }

    fn positions(&self, parents: usize) -> usize {
        parents
    }

    fn validate_unstored(&self, depth: usize) -> Result<()> {
        SparseIntervalStorage::validate_unstored(self, depth)
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseInterval;

impl registry::Level for SparseInterval {
    fn name(&self) -> &'static str {
        "SparseInterval"
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
            SparseIntervalStorage::BUFFERS,
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

    fn allocate_output(
        &self,
        bufs: &mut registry::OutBufs,
        at: &registry::AllocateAt,
    ) -> Result<()> {
        allocate_output(bufs, at)
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

    /// How a kernel writes the level: written in order; one child position per fiber.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A SparseInterval level of an output, written in order through AcceptRun: a written
    /// run lands in a scratch position (the last value slot); after it, the first run of
    /// a fiber becomes its interval, a touching run of the same value extends it, and
    /// anything else sets `conflict`.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of the mode.
        pub shape: LocalId,
        /// First index per fiber (`1` when empty).
        pub left: BufId,
        /// Last index per fiber (`0` when empty).
        pub right: BufId,
        /// Whether the current run was written.
        pub dirty: LocalId,
        /// Set when the data is not one run per fiber (a kernel output).
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
            vec![(self.left, OutArray::Idx), (self.right, OutArray::Ptr)]
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            let name = lw.tensors[f.tensor].name.clone();
            lw.written_only(f, &name)?;
            unfurl_write(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparseInterval)
        }

        fn conflict_flag(&self) -> Option<LocalId> {
            Some(self.conflict)
        }
    }

    /// One run `left..=right` of one child: fill, the child repeated, fill.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        if cx.follow {
            return unfurl_follow(lw, cx);
        }
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let l = KExpr::Local;
        let child = cx.child();
        let (lo, hi) = (
            lw.level_local(t, depth, "left"),
            lw.level_local(t, depth, "right"),
        );
        Ok(Looplet::Thunk {
            preamble: cx.bounds_where(
                vec![
                    KStmt::Assign(lo, plus1(KExpr::load(cx.buf(0)?, pos.clone()))),
                    KStmt::Assign(hi, plus1(KExpr::load(cx.buf(1)?, pos.clone()))),
                ],
                vec![
                    KStmt::Assign(lo, KExpr::int(1)),
                    KStmt::Assign(hi, KExpr::int(0)),
                ],
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(minus1(l(lo))), cx.fill_run()),
                (Some(l(hi)), Looplet::Run(Box::new(child(pos)))),
                (None, cx.fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Follow: a check against the fiber's one run; a miss reads fill.
    fn unfurl_follow(_lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let (pos, fill, child) = (cx.pos.clone(), cx.fill, cx.child());
        let (left, right) = (cx.buf(0)?, cx.buf(1)?);
        Ok(Looplet::Lookup(Rc::new(move |i: KExpr| Tensor::Switch {
            pre: vec![],
            cond: within(
                plus1(KExpr::load(left, pos.clone())),
                i,
                plus1(KExpr::load(right, pos.clone())),
            ),
            then: Box::new(child(pos.clone())),
            otherwise: Box::new(Tensor::FillLeaf(fill)),
        })))
    }

    /// A SparseInterval level written in order: one run of indices.
    /// `None` unless the level is right above an Element leaf.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        if !matches!(child, LevelFormat::Element(_)) {
            return None;
        }
        let left = at.buf(kernel, "left", false);
        let right = at.buf(kernel, "right", false);
        let (dirty, conflict) = at.write_flags(kernel);
        Some(LevelParams::written(OutParams {
            shape: at.shape,
            left,
            right,
            dirty,
            conflict,
        }))
    }

    /// A written SparseInterval (AcceptRun): a run's value goes to a scratch slot (the
    /// value slot after the last fiber's); after the run, an empty fiber takes it as its
    /// interval, a touching run of the same value extends the interval, and any other run
    /// sets `conflict`. Values equal to the fill at run time are not written, and a run
    /// whose value ends up the fill is not recorded.
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            left,
            right,
            dirty,
            conflict,
            ..
        } = *p;
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = lw.written_leaf(t, depth, "SparseInterval")?;
        let fill = lw.fill_of(t);
        let l = KExpr::Local;
        let _int = KExpr::int;
        let scratch = KExpr::Len(left);
        let hollow = crate::looplets::Hollow {
            dirty,
            claim: vec![KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true)))],
            skip_fill: true,
            skip_fill_values: true,
            fill_claims: false,
            repeated: false,
        };
        let at = scratch.clone();
        let body =
            move |_lo: KExpr, _hi: KExpr| Fiber::hollow_leaf(t, depth, at.clone(), hollow.clone());
        let record = move |lo: KExpr, hi: KExpr| {
            let (lo0, hi0) = ((lo - 1), hi - 1);
            let (lp, rp) = (
                KExpr::load(left, pos.clone()),
                KExpr::load(right, pos.clone()),
            );
            let value = KExpr::load(val, scratch.clone());
            let empty = KExpr::bin(Op::Gt, lp.clone(), rp.clone());
            let extends = KExpr::Op(
                Op::And,
                vec![
                    KExpr::bin(Op::Eq, rp + 1, lo0.clone()),
                    KExpr::bin(Op::Eq, value.clone(), KExpr::load(val, pos.clone())),
                ],
            );
            let kept = not_fill(value.clone(), fill);
            let placed = KStmt::If {
                cond: empty,
                then: vec![
                    KStmt::Store {
                        buf: val,
                        index: pos.clone(),
                        value,
                    },
                    KStmt::Store {
                        buf: left,
                        index: pos.clone(),
                        value: lo0,
                    },
                    KStmt::Store {
                        buf: right,
                        index: pos.clone(),
                        value: hi0.clone(),
                    },
                ],
                otherwise: vec![KStmt::If {
                    cond: extends,
                    then: vec![KStmt::Store {
                        buf: right,
                        index: pos.clone(),
                        value: hi0,
                    }],
                    otherwise: vec![KStmt::Assign(conflict, KExpr::Lit(Value::Bool(true)))],
                }],
            };
            // A run whose value is the fill is not stored (as the reference stores its
            // result): it is no part of the interval.
            vec![KStmt::If {
                cond: l(dirty),
                then: vec![
                    KStmt::If {
                        cond: kept,
                        then: vec![placed],
                        otherwise: vec![],
                    },
                    KStmt::Store {
                        buf: val,
                        index: scratch.clone(),
                        value: KExpr::Lit(init),
                    },
                    KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                ],
                otherwise: vec![],
            }]
        };
        Ok(Looplet::AcceptRun {
            body: Rc::new(body),
            epilogue: Rc::new(record),
        })
    }
}
