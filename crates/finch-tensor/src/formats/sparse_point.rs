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
use super::registry::kit as registry;
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

/// What a kernel wrote that the level cannot hold, when it flags a conflict: the run is
/// made again with the output recorded as entries (`engine`), and this is the error if
/// the result cannot be stored that way either.
pub(crate) const WRITE_CONFLICT: &str =
    "a SparsePoint level stores one index per fiber, but the program wrote two indices of one fiber";

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
    /// Names of the kernel buffers, in `kernel_buffers` order.
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

/// Allocates a written SparsePoint (`engine`): one child position per fiber, every fiber
/// empty (its index `size`).
pub(crate) fn allocate_output(b: &mut OutBufs, at: &super::output::AllocateAt) -> Result<()> {
    b.val = crate::tensor::Buffer::filled(at.ty, at.parents, at.init)?;
    b.ptr = Vec::new();
    b.idx = super::output::index_vec(at.parents, at.size)?;
    Ok(())
}

/// Freezes a written SparsePoint output (`engine::freeze`): see [`drop_point_fills`].
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    drop_point_fills(bufs, at.size, &at.fill);
    Ok(())
}

/// Empties a written SparsePoint fiber whose one entry ended up the fill (written, then
/// updated back: `y[j] <<xor>>= true` twice), as the reference stores its result: its
/// index becomes `size`, the empty mark, and its value slot already holds the fill the
/// child of an empty fiber must hold. A Pattern leaf has no values: nothing to compare.
fn drop_point_fills(bufs: &mut OutBufs, size: usize, fill: &crate::algebra::Value) {
    for (p, i) in bufs.idx.iter_mut().enumerate() {
        if *i != size && bufs.val.get(p).is_some_and(|v| v.same(fill)) {
            *i = size;
        }
    }
}

impl registry::StoredLevel for SparsePointStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparsePoint
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparsePointStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparsePointStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparsePointStorage::kernel_buffers(self)
    }

    fn positions(&self, parents: usize) -> usize {
        parents
    }

    fn validate_unstored(&self, depth: usize) -> Result<()> {
        SparsePointStorage::validate_unstored(self, depth)
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparsePoint;

impl registry::Level for SparsePoint {
    fn name(&self) -> &'static str {
        "SparsePoint"
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
            SparsePointStorage::BUFFERS,
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

    /// How a kernel writes the level: written in order; one child position per fiber, whose index and value a later pass adds to.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        keeps_fibers: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A SparsePoint level of an output, written in order (extrude): `idx` (one per fiber,
    /// `shape` when empty) and dense child positions (one per fiber). A fiber written at
    /// two indices sets `conflict` (the run time reports it).
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of the mode.
        pub shape: LocalId,
        /// The stored index per fiber.
        pub idx: BufId,
        /// Whether the current index was written.
        pub dirty: LocalId,
        /// Set when the data does not fit the level (a kernel output).
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
            vec![(self.idx, OutArray::Idx)]
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            unfurl_write(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparsePoint)
        }

        fn conflict_flag(&self) -> Option<LocalId> {
            Some(self.conflict)
        }
    }

    /// One index `i` per fiber (`shape` when empty): fill, the child at `i`, fill.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        if cx.follow {
            return unfurl_follow(lw, cx);
        }
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let l = KExpr::Local;
        let child = cx.child();
        let i = lw.level_local(t, depth, "i");
        // An empty fiber stores index `shape` (0-based): past every index.
        Ok(Looplet::Thunk {
            preamble: cx.bounds_where(
                vec![KStmt::Assign(
                    i,
                    plus1(KExpr::load(cx.buf(0)?, pos.clone())),
                )],
                vec![KStmt::Assign(i, plus1(l(shape)))],
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(minus1(l(i))), cx.fill_run()),
                (Some(l(i)), Looplet::Run(Box::new(child(pos)))),
                (None, cx.fill_run()),
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
        let (dirty, conflict) = at.write_flags(kernel);
        Some(LevelParams::written(OutParams {
            shape: at.shape,
            idx,
            dirty,
            conflict,
        }))
    }

    /// A SparsePoint output: every index of fiber `p` writes child position `p`; after
    /// an index's statements a write records it, and a second index is a conflict. A
    /// value that ends up the fill is not recorded (as the reference stores its result),
    /// and the position starts from the declared value again.
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            shape,
            idx,
            dirty,
            conflict,
        } = *p;
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let name = lw.tensors[t].name.clone();
        // Every index of fiber `p` writes child position `p`; after an index's
        // statements a write records it, and a second index is a conflict. A
        // value that ends up the fill is not recorded (as the reference stores its
        // result), and the position starts from the declared value again.
        let l = KExpr::Local;
        let (val, init) = lw.written_leaf(t, depth, "SparsePoint")?;
        let kept = not_fill(KExpr::load(val, pos.clone()), lw.fill_of(t));
        let hollow = crate::looplets::Hollow {
            dirty,
            claim: vec![KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true)))],
            skip_fill: true,
            skip_fill_values: true,
            fill_claims: false,
            repeated: false,
        };
        let at = pos.clone();
        let record = move |i: KExpr| {
            let i0 = i - 1;
            let held = KExpr::load(idx, pos.clone());
            vec![KStmt::If {
                cond: l(dirty),
                then: vec![
                    KStmt::If {
                        cond: KExpr::Op(
                            Op::And,
                            vec![
                                KExpr::bin(Op::Ne, held.clone(), l(shape)),
                                KExpr::bin(Op::Ne, held, i0.clone()),
                            ],
                        ),
                        then: vec![KStmt::Assign(conflict, KExpr::Lit(Value::Bool(true)))],
                        otherwise: vec![],
                    },
                    KStmt::If {
                        cond: kept.clone(),
                        then: vec![KStmt::Store {
                            buf: idx,
                            index: pos.clone(),
                            value: i0,
                        }],
                        otherwise: vec![KStmt::Store {
                            buf: val,
                            index: pos.clone(),
                            value: KExpr::Lit(init),
                        }],
                    },
                    KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                ],
                otherwise: vec![],
            }]
        };
        lw.written_only(f, &name)?;
        Ok(Looplet::LookupWrite {
            body: Rc::new(move |_i: KExpr| {
                Fiber::hollow_leaf(t, depth, at.clone(), hollow.clone())
            }),
            epilogue: Rc::new(record),
        })
    }
}
