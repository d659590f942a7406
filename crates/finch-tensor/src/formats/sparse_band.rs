//! `SparseBand(child)`: one contiguous block of stored indices per fiber (a band or
//! skyline matrix row); indices inside the block that hold fill are stored explicitly.
//!
//! Buffers: `idx` (length `P`, the block's last index) and `ofs` (length `P + 1`). Fiber
//! `p` has width `w = ofs[p+1] - ofs[p]`, stores indices `idx[p] + 1 - w ..= idx[p]` with
//! child positions `ofs[p] ..< ofs[p+1]` in order; `w = 0` is an empty fiber.
//! Invariants:
//! * **I1** `len(idx) == P`, `len(ofs) == P + 1`, `ofs[0] == 0`
//! * **I2** `ofs` is non-decreasing
//! * **I3** a non-empty block lies in `0 .. shape`: `idx[p] < shape`, `w <= idx[p] + 1`
//! * **I4** an empty fiber's `idx[p] <= shape` (it is otherwise ignored)
//!
//! Properties: ordered, unique, not full. Protocols: read walk, follow.

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
use super::sparse_list::validate_ptr;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (one block per fiber: a check, nothing to gallop over).
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
    "a SparseBand level is written in increasing index order, once per index, but the program wrote an index at or before one already written";

/// Storage of a SparseBand level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseBandStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Last stored index per fiber.
    pub idx: Vec<usize>,
    /// Block boundaries into the child positions.
    pub ofs: Vec<usize>,
    /// The child level (one position per index of each block).
    pub child: Box<LevelStorage>,
}

impl SparseBandStorage {
    /// Names of the kernel buffers, in `kernel_buffers` order.
    pub const BUFFERS: &'static [&'static str] = &["idx", "ofs"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseBand",
            invariant,
            detail,
        };
        if self.idx.len() != parents {
            return Err(bad(
                "I1 len(idx) == P",
                format!("len(idx) = {} for P = {parents}", self.idx.len()),
            ));
        }
        let total = self.ofs.last().copied().unwrap_or(0);
        validate_ptr(depth, "SparseBand", &self.ofs, parents, total)?;
        for p in 0..parents {
            let w = self.ofs[p + 1] - self.ofs[p];
            let last = self.idx[p];
            if w > 0 && (last >= self.shape || w > last + 1) {
                return Err(bad(
                    "I3 the block lies within the shape",
                    format!(
                        "fiber {p}: block of width {w} ending at {last} with shape {}",
                        self.shape
                    ),
                ));
            }
            if w == 0 && last > self.shape {
                return Err(bad(
                    "I4 an empty fiber's idx <= shape",
                    format!("fiber {p}: idx = {last} with shape {}", self.shape),
                ));
            }
        }
        Ok(total)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        let (lo, hi) = (self.ofs[p], self.ofs[p + 1]);
        let first = (self.idx[p] + 1).saturating_sub(hi - lo);
        (lo..hi)
            .map(|q| (first + q - lo, first + q - lo, q))
            .collect()
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![KernelBuf::Indices(&self.idx), KernelBuf::Indices(&self.ofs)]
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
    let mut ofs = vec![0];
    for &(lo, hi) in groups {
        let found = index_groups(e, m, lo, hi);
        match (found.first(), found.last()) {
            (Some(&(first, _)), Some(&(last, _))) => {
                let mut k = 0;
                for i in first..=last {
                    if found[k].0 == i {
                        child_groups.push(found[k].1);
                        k += 1;
                    } else {
                        child_groups.push((lo, lo));
                    }
                }
                idx.push(last);
            }
            _ => idx.push(0),
        }
        ofs.push(child_groups.len());
    }
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparseBand(SparseBandStorage {
        shape: size,
        idx,
        ofs,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs { val, ptr, idx, .. } = bufs;
    Ok(LevelStorage::SparseBand(super::SparseBandStorage {
        shape: at.size(),
        idx,
        ofs: ptr,
        child: at.child_of(val)?,
    }))
}

/// Allocates a written SparseBand (`engine`): per-fiber last index (and width, in `ptr`).
pub(crate) fn allocate_output(b: &mut OutBufs, at: &super::output::AllocateAt) -> Result<()> {
    b.idx = super::output::index_vec(at.parents, 0)?;
    Ok(())
}

/// Freezes a written SparseBand output (`engine::freeze`): widths become offsets, values
/// are trimmed, and fills dropped ([`drop_band_fills`]).
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    super::output::prefix_sum(&mut bufs.ptr);
    let n = bufs.ptr.last().copied().unwrap_or(0);
    bufs.val.truncate(n);
    drop_band_fills(bufs, &at.fill)
}

/// Drops the fill values at the ends of each band of a frozen SparseBand output (`ptr`
/// the value offsets, `idx` each band's last index), so that, as the reference stores its
/// result, each band runs from its first value other than the fill to its last.
fn drop_band_fills(bufs: &mut OutBufs, fill: &crate::algebra::Value) -> Result<()> {
    let is_fill = |q: usize| bufs.val.get(q).is_some_and(|v| v.same(fill));
    let mut ptr = vec![0];
    let mut idx = Vec::with_capacity(bufs.idx.len());
    let mut val = crate::tensor::Buffer::new(bufs.val.scalar_type());
    for (p, &last) in bufs.idx.iter().enumerate() {
        let (lo, hi) = (bufs.ptr[p], bufs.ptr[p + 1]);
        let first = (lo..hi).find(|&q| !is_fill(q));
        let end = (lo..hi).rev().find(|&q| !is_fill(q));
        match (first, end) {
            (Some(a), Some(b)) => {
                for q in a..=b {
                    let v = bufs
                        .val
                        .get(q)
                        .ok_or_else(|| Error::Program("internal: band values".into()))?;
                    // Inside the band, a value the same as the fill is the fill itself.
                    val.push(if v.same(fill) { *fill } else { v })?;
                }
                // Position `hi - 1` holds index `last`.
                idx.push(last - (hi - 1 - b));
            }
            _ => idx.push(0),
        }
        ptr.push(val.len());
    }
    (bufs.ptr, bufs.idx, bufs.val) = (ptr, idx, val);
    Ok(())
}

impl registry::StoredLevel for SparseBandStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseBand
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseBandStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseBandStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparseBandStorage::kernel_buffers(self)
    }

    fn positions(&self, parents: usize) -> usize {
        self.ofs.get(parents).copied().unwrap_or(0)
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseBand;

impl registry::Level for SparseBand {
    fn name(&self) -> &'static str {
        "SparseBand"
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
            SparseBandStorage::BUFFERS,
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

    /// How a kernel writes the level: written in order; the band's values grow with its width.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        child_grows: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A SparseBand level of an output, written in order (extrude): the first written
    /// index of a fiber fixes its origin, later ones land at `start + (i - origin)` (gaps
    /// hold the fill); `ofs` holds per-fiber widths until the run time prefix-sums it.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of the mode.
        pub shape: LocalId,
        /// The last index per fiber.
        pub idx: BufId,
        /// Per-fiber widths (`P + 1` entries, prefix-summed after the kernel).
        pub ofs: BufId,
        /// The next free child position.
        pub qos: LocalId,
        /// The fiber's first child position.
        pub start: LocalId,
        /// The fiber's first written index (`-1` before any).
        pub origin: LocalId,
        /// The fiber's last written index.
        pub last: LocalId,
        /// Whether the current index was written.
        pub dirty: LocalId,
        /// Set when an index is written out of order (a kernel output).
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
            vec![(self.idx, OutArray::Idx), (self.ofs, OutArray::Ptr)]
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            let name = lw.tensors[f.tensor].name.clone();
            lw.written_only(f, &name)?;
            unfurl_write(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparseBand)
        }

        fn conflict_flag(&self) -> Option<LocalId> {
            Some(self.conflict)
        }
    }

    /// One block `first..=last` with consecutive child positions: fill, random
    /// access into the block, fill.
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
        let (idx, ofs) = (cx.buf(0)?, cx.buf(1)?);
        let q1 = lw.level_local(t, depth, "q_stop");
        let last = lw.level_local(t, depth, "last");
        let before = lw.level_local(t, depth, "before");
        let width = l(q1) - KExpr::load(ofs, pos.clone());
        // `0 <= before <= last <= shape`: a block lies in the level (I3), and the
        // clamp holds an empty fiber's `last` (I4 allows `shape + 1`) in it too. So
        // over the level's whole extent the phases need no clamping of their own.
        lw.at_most
            .extend([(last, shape), (before, last), (ZERO, before)]);
        Ok(Looplet::Thunk {
            preamble: cx.bounds_where(
                vec![
                    KStmt::Assign(q1, KExpr::load(ofs, plus1(pos.clone()))),
                    KStmt::Assign(
                        last,
                        KExpr::Op(Op::Min, vec![plus1(KExpr::load(idx, pos)), l(shape)]),
                    ),
                    KStmt::Assign(before, l(last) - width),
                ],
                zeros(&[q1, last, before]),
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(l(before)), cx.fill_run()),
                (
                    Some(l(last)),
                    Looplet::Lookup(Rc::new(move |i: KExpr| {
                        // child(q_stop - 1 - (last - i))
                        child((minus1(l(q1)) - l(last)) + i)
                    })),
                ),
                (None, cx.fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Follow: a check against the fiber's one block `last - width + 1 ..= last`, at
    /// child positions ending at `ofs[p+1]`; a miss reads fill.
    fn unfurl_follow(_lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let (pos, fill, child) = (cx.pos.clone(), cx.fill, cx.child());
        let (idx, ofs) = (cx.buf(0)?, cx.buf(1)?);
        Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
            let last = plus1(KExpr::load(idx, pos.clone()));
            let end = KExpr::load(ofs, plus1(pos.clone()));
            let width = end.clone() - KExpr::load(ofs, pos.clone());
            let first = plus1(last.clone() - width);
            Tensor::Switch {
                pre: vec![],
                cond: within(first, i.clone(), last.clone()),
                then: Box::new(child((end - KExpr::int(1)) - (last - i))),
                otherwise: Box::new(Tensor::FillLeaf(fill)),
            }
        })))
    }

    /// A SparseBand level written in order.
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
        let ofs = at.buf(kernel, "ofs", false);
        let (qos, start, origin, last) = (
            at.local(kernel, "qos", ScalarType::I64),
            at.local(kernel, "start", ScalarType::I64),
            at.local(kernel, "origin", ScalarType::I64),
            at.local(kernel, "last", ScalarType::I64),
        );
        let (dirty, conflict) = at.write_flags(kernel);
        Some(LevelParams::written(OutParams {
            shape: at.shape,
            idx,
            ofs,
            qos,
            start,
            origin,
            last,
            dirty,
            conflict,
        }))
    }

    /// A written SparseBand: the fiber's first written index fixes its origin; index `i`
    /// lands at child position `start + (i - origin)`, the buffer growing (with the fill)
    /// to reach it, so unwritten indices inside the band hold the fill. After the fiber,
    /// its last index and width are stored and the cursor moves past the band. An index
    /// at or before the last one written sets `conflict` (kept in bounds).
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            idx,
            ofs,
            qos,
            start,
            origin,
            last,
            dirty,
            conflict,
            ..
        } = *p;
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = lw.written_leaf(t, depth, "SparseBand")?;
        let l = KExpr::Local;
        let int = KExpr::int;
        let at = move |i: KExpr| l(start) + ((i - 1) - l(origin));
        let body = move |i: KExpr| {
            let i0 = i.clone() - 1;
            let need = at(i.clone()) + 1;
            let claim = vec![
                KStmt::If {
                    cond: KExpr::bin(Op::Le, i0.clone(), l(last)),
                    then: vec![KStmt::Assign(conflict, KExpr::Lit(Value::Bool(true)))],
                    otherwise: vec![],
                },
                KStmt::If {
                    cond: KExpr::Op(
                        Op::Or,
                        vec![
                            KExpr::bin(Op::Lt, l(origin), int(0)),
                            KExpr::bin(Op::Lt, i0.clone(), l(origin)),
                        ],
                    ),
                    then: vec![KStmt::Assign(origin, i0)],
                    otherwise: vec![],
                },
                grow_to(val, need, init),
                KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true))),
            ];
            Fiber::hollow_leaf(
                t,
                depth,
                at(i),
                crate::looplets::Hollow::claiming(dirty, claim),
            )
        };
        let record = move |i: KExpr| {
            vec![KStmt::If {
                cond: l(dirty),
                then: vec![
                    KStmt::Assign(last, i - 1),
                    KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                ],
                otherwise: vec![],
            }]
        };
        let width = (l(last) - l(origin)) + 1;
        let next = pos.clone() + 1;
        Ok(Looplet::Thunk {
            preamble: vec![
                KStmt::Assign(start, l(qos)),
                KStmt::Assign(origin, int(-1)),
                KStmt::Assign(last, int(-1)),
            ],
            body: Box::new(Looplet::LookupWrite {
                body: Rc::new(body),
                epilogue: Rc::new(record),
            }),
            epilogue: vec![KStmt::If {
                cond: KExpr::bin(Op::Ge, l(origin), int(0)),
                then: vec![
                    KStmt::Store {
                        buf: idx,
                        index: pos.clone(),
                        value: l(last),
                    },
                    KStmt::Store {
                        buf: ofs,
                        index: next.clone(),
                        value: width.clone(),
                    },
                    KStmt::Assign(qos, l(start) + width),
                ],
                otherwise: vec![
                    KStmt::Store {
                        buf: idx,
                        index: pos,
                        value: int(0),
                    },
                    KStmt::Store {
                        buf: ofs,
                        index: next,
                        value: int(0),
                    },
                ],
            }],
        })
    }
}
