//! `SparseByteMap(child)`: a dense flag per index plus the sorted list of set indices
//! (TACO's workspace): random access by flag, iteration over the list; child positions
//! are dense (`p·shape + i`), so unset children exist and hold fill.
//!
//! Buffers: `ptr` (length `P + 1`, over `srt`), `tbl` (bool, length `P·shape`) and `srt`
//! (the set indices of each fiber, in order). Invariants:
//! * **I1**–**I4** as SparseList for `ptr` over `srt`
//! * **I5** `len(tbl) == P·shape`
//! * **I6** `srt` is strictly increasing within a fiber, each listed index `< shape` has
//!   its flag set, and every set flag is listed
//! * **I7** children at unset positions are all fill (a Pattern leaf is exempt: it
//!   stores nothing, and reads go through the flags)
//!
//! Properties: ordered, unique, not full, random access. Protocols: read walk, gallop,
//! follow.

use super::format::{Capabilities, LevelFormat};
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
use super::sparse_list::validate_ptr;
use super::PatternStorage;
use crate::error::{Error, Result};
use crate::tensor::build::*;
use crate::tensor::Buffer;

/// What the level can do (a flag per index: read directly; written at any index, again and again).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: true,
    accept_run: false,
};

/// Storage of a SparseByteMap level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseByteMapStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into `srt`.
    pub ptr: Vec<usize>,
    /// One flag per index of every fiber (`Buffer::Bool`, length `P·shape`).
    pub tbl: Buffer,
    /// The set indices of each fiber, sorted.
    pub srt: Vec<usize>,
    /// The child level (`P·shape` positions).
    pub child: Box<LevelStorage>,
}

impl SparseByteMapStorage {
    /// Names of the kernel buffers, in `kernel_buffers` order.
    pub const BUFFERS: &'static [&'static str] = &["ptr", "tbl", "srt"];

    fn flags(&self) -> &[bool] {
        match &self.tbl {
            Buffer::Bool(v) => v,
            _ => &[],
        }
    }

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseByteMap",
            invariant,
            detail,
        };
        validate_ptr(depth, "SparseByteMap", &self.ptr, parents, self.srt.len())?;
        let n = self.shape;
        let total = parents.checked_mul(n).ok_or_else(|| {
            bad(
                "I5 len(tbl) == P·shape",
                format!("{parents} × {n} overflows"),
            )
        })?;
        if !matches!(self.tbl, Buffer::Bool(_)) || self.tbl.len() != total {
            return Err(bad(
                "I5 len(tbl) == P·shape",
                format!(
                    "tbl holds {} {} values for P·shape = {total}",
                    self.tbl.len(),
                    self.tbl.scalar_type()
                ),
            ));
        }
        let flags = self.flags();
        for p in 0..parents {
            let seg = &self.srt[self.ptr[p]..self.ptr[p + 1]];
            if let Some(k) = seg.iter().position(|&i| i >= n) {
                return Err(bad(
                    "I6 listed indices < shape",
                    format!(
                        "fiber {p}: srt[{}] = {} with shape {n}",
                        self.ptr[p] + k,
                        seg[k]
                    ),
                ));
            }
            if let Some(k) = seg.windows(2).position(|w| w[0] >= w[1]) {
                return Err(bad(
                    "I6 srt strictly increasing within a fiber",
                    format!("fiber {p}: {} then {}", seg[k], seg[k + 1]),
                ));
            }
            if let Some(&i) = seg.iter().find(|&&i| !flags[p * n + i]) {
                return Err(bad(
                    "I6 every listed index has its flag set",
                    format!("fiber {p}: index {i} is listed but its flag is unset"),
                ));
            }
            let set = flags[p * n..(p + 1) * n].iter().filter(|&&b| b).count();
            if set != seg.len() {
                return Err(bad(
                    "I6 every set flag is listed",
                    format!(
                        "fiber {p}: {set} flags set but {} indices listed",
                        seg.len()
                    ),
                ));
            }
        }
        Ok(total)
    }

    /// I7, checked once the child level is known to be well formed (it reads the child's
    /// values). A Pattern leaf stores nothing; its positions read through the flags.
    pub fn validate_unstored(&self, depth: usize) -> Result<()> {
        if matches!(*self.child, LevelStorage::Pattern(_)) {
            return Ok(());
        }
        let (flags, n) = (self.flags(), self.shape);
        match (0..flags.len()).find(|&q| !flags[q] && !self.child.is_fill_at(q)) {
            Some(q) => Err(Error::Invalid {
                depth,
                level: "SparseByteMap",
                invariant: "I7 children at unset positions are all fill",
                detail: format!(
                    "fiber {}, index {}: unset but stores a value",
                    q / n.max(1),
                    q % n.max(1)
                ),
            }),
            None => Ok(()),
        }
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        self.srt[self.ptr[p]..self.ptr[p + 1]]
            .iter()
            .map(|&i| (i, i, p * self.shape + i))
            .collect()
    }

    /// The child position of index `i` in fiber `p`, if set.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        let q = p.checked_mul(self.shape)?.checked_add(i)?;
        (i < self.shape && *self.flags().get(q)?).then_some(q)
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.ptr),
            KernelBuf::Values(&self.tbl),
            KernelBuf::Indices(&self.srt),
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
    let total = positions(groups.len(), size, "SparseByteMap")?;
    let (mut ptr, mut srt, mut tbl) = (vec![0], Vec::new(), Vec::new());
    reserve(&mut tbl, total, "SparseByteMap")?;
    tbl.resize(total, false);
    reserve(&mut child_groups, total, "SparseByteMap")?;
    for (p, &(lo, hi)) in groups.iter().enumerate() {
        let found = index_groups(e, m, lo, hi);
        let mut k = 0;
        for i in 0..size {
            if found.get(k).is_some_and(|&(j, _)| j == i) {
                child_groups.push(found[k].1);
                tbl[p * size + i] = true;
                srt.push(i);
                k += 1;
            } else {
                child_groups.push((lo, lo));
            }
        }
        ptr.push(srt.len());
    }
    // A Pattern leaf needs no storage: the flags say which positions are set.
    let c = if let LevelFormat::Pattern = child {
        LevelStorage::Pattern(PatternStorage)
    } else {
        at.child_of(&child_groups)?
    };
    Ok(LevelStorage::SparseByteMap(SparseByteMapStorage {
        shape: size,
        ptr,
        tbl: Buffer::Bool(tbl),
        srt,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs {
        val,
        ptr,
        idx,
        flags,
        ..
    } = bufs;
    Ok(LevelStorage::SparseByteMap(super::SparseByteMapStorage {
        shape: at.size(),
        ptr,
        tbl: flags,
        srt: idx,
        child: at.child_of(val)?,
    }))
}

/// Allocates a written SparseByteMap (`engine`): dense child positions (all at the
/// initial value) and a flag per position, over the modes from the root down to the
/// level. A Pattern leaf has no values: the flags are the entries.
pub(crate) fn allocate_output(b: &mut OutBufs, at: &super::output::AllocateAt) -> Result<()> {
    let total = crate::tensor::checked_len(at.positions)?;
    if at.has_values {
        b.val = crate::tensor::Buffer::filled(at.ty, total, at.init)?;
    }
    b.flags = crate::tensor::Buffer::filled(
        crate::algebra::ScalarType::Bool,
        total,
        crate::algebra::Value::Bool(false),
    )?;
    Ok(())
}

/// Freezes a written SparseByteMap (`engine::freeze`): the set positions (linear, in write
/// order; `at.count` of them) are sorted and split into fibers; a set position whose value
/// ended up the fill is not kept (as the reference stores its result).
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    let count = at
        .count
        .filter(|&n| n <= bufs.idx.len())
        .ok_or_else(|| Error::Program("internal: SparseByteMap count".into()))?;
    let n = at.size.max(1);
    bufs.idx.truncate(count);
    let fill = at.fill;
    let OutBufs {
        idx, val, flags, ..
    } = bufs;
    let mut cleared = Vec::new();
    idx.retain(|&q| {
        let kept = !val.get(q).is_some_and(|v| v.same(&fill));
        if !kept {
            cleared.push(q);
        }
        kept
    });
    for q in cleared {
        flags.set(q, crate::algebra::Value::Bool(false))?;
    }
    bufs.idx.sort_unstable();
    bufs.ptr.iter_mut().for_each(|c| *c = 0);
    for q in bufs.idx.iter_mut() {
        let p = *q / n;
        if let Some(c) = bufs.ptr.get_mut(p + 1) {
            *c += 1;
        }
        *q %= n;
    }
    super::output::prefix_sum(&mut bufs.ptr);
    Ok(())
}

impl registry::StoredLevel for SparseByteMapStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseByteMap
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseByteMapStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseByteMapStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparseByteMapStorage::kernel_buffers(self)
    }

    /// Every set position, across fibers.
    fn positions(&self, _: usize) -> usize {
        self.srt.len()
    }

    fn validate_unstored(&self, depth: usize) -> Result<()> {
        SparseByteMapStorage::validate_unstored(self, depth)
    }

    fn get(&self, p: usize, coords: &[usize]) -> Option<registry::Value> {
        let q = SparseByteMapStorage::locate(self, p, *coords.first()?)?;
        self.child.get(q, &coords[1..])
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseByteMap;

impl registry::Level for SparseByteMap {
    fn name(&self) -> &'static str {
        "SparseByteMap"
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
            SparseByteMapStorage::BUFFERS,
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

    /// A vector written in any order ([`registry::LevelKind::ANY_ORDER_VECTOR`]).
    fn any_order_params(
        &self,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        modes: usize,
    ) -> Option<Vec<registry::LevelParams>> {
        (modes == 1).then(|| vec![lowering::out_params(kernel, at)])
    }
}

/// The level's looplets and kernel parameters: how the lowerer reads and writes it.
pub mod lowering {
    use crate::lower::kit::*;

    /// `w .= v` of a bytemap workspace inside a loop: it clears only the positions it
    /// set (TACO's workspace), so the cost follows the previous entries, not the size;
    /// `leaf` is the leaf's values and the value they start from (none for a Pattern
    /// leaf); `q` a fresh local.
    pub(crate) fn reset(p: &OutParams, leaf: Option<(BufId, Value)>, q: LocalId) -> Vec<KStmt> {
        let at = KExpr::load(p.srt, KExpr::Local(q));
        let mut body = vec![KStmt::Store {
            buf: p.tbl,
            index: at.clone(),
            value: KExpr::Lit(Value::Bool(false)),
        }];
        if let Some((val, v)) = leaf {
            body.push(KStmt::Store {
                buf: val,
                index: at,
                value: KExpr::Lit(v),
            });
        }
        vec![
            KStmt::For {
                var: q,
                lo: KExpr::int(0),
                hi: KExpr::Local(p.nsrt),
                body,
            },
            KStmt::Assign(p.nsrt, KExpr::int(0)),
        ]
    }

    /// How a kernel writes the level: any order, repeated; its flags record a Pattern leaf's writes; child positions are dense.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        repeated: true,
        marks_dense_children: true,
        records_pattern: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A SparseByteMap level of an output or workspace, written in any order (laminate):
    /// a flag per position, dense child positions `p·shape + i`, and the list `srt` of the
    /// set positions (linear, unsorted while written, grown by doubling) with its length
    /// in `nsrt`. Read back (root level only) after sorting `srt`.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of the mode.
        pub shape: LocalId,
        /// Fiber boundaries into `srt` (set before reads, and by the run time at freeze).
        pub ptr: BufId,
        /// One flag per position.
        pub tbl: BufId,
        /// The set positions.
        pub srt: BufId,
        /// How many positions `srt` lists (a kernel output).
        pub nsrt: LocalId,
        /// Whether the current index was written.
        pub dirty: LocalId,
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
            vec![
                (self.ptr, OutArray::Ptr),
                (self.tbl, OutArray::Flags),
                (self.srt, OutArray::Idx),
            ]
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            unfurl_write(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparseByteMap)
        }

        fn reset_workspace(&self, leaf: Option<(BufId, Value)>, q: LocalId) -> Option<Vec<KStmt>> {
            Some(reset(self, leaf, q))
        }

        fn entry_count(&self) -> Option<LocalId> {
            Some(self.nsrt)
        }
    }

    /// A sorted list of set indices over dense child positions `pos·shape + i`.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let gallop = cx.gallop;
        let f = cx.fiber;
        let fill = cx.fill;
        let present = cx.present;
        let protocols = cx.fiber.protocols;
        let l = KExpr::Local;
        let child = cx.child();
        let (ptr, tbl, srt) = (cx.buf(0)?, cx.buf(1)?, cx.buf(2)?);
        let base = pos.clone() * l(shape);
        if f.protocols.follows(f.depth) {
            // follow: the flag decides between the child and fill.
            return Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                let q = base.clone() + minus1(i);
                Tensor::Switch {
                    pre: vec![],
                    cond: KExpr::load(tbl, q.clone()),
                    then: Box::new(child(q)),
                    otherwise: Box::new(Tensor::FillLeaf(fill)),
                }
            })));
        }
        let child_of: ChildOf = Rc::new(move |q| base.clone() + KExpr::load(srt, q));
        let list = SortedList {
            entries: Entries::of_fiber(ptr, present),
            idx: srt,
            child_of,
            shape,
            runs: false,
        };
        Ok(lw.sorted_walk(t, depth, f.pos.clone(), protocols, list, gallop))
    }

    /// A SparseByteMap level written in any order above an Element or a Pattern leaf.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        matches!(child, LevelFormat::Element(_) | LevelFormat::Pattern)
            .then(|| out_params(kernel, at))
    }

    /// A written SparseByteMap (an output or a workspace). Written: random access to the
    /// dense child position `p·shape + i`; after an index's statements, a first write
    /// sets its flag and appends the position to `srt` (doubling it when full). Read back
    /// (root level only, after the writes of earlier statements): `srt` is sorted and the
    /// level is walked like any sorted list, or followed through its flags.
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            shape,
            ptr,
            tbl,
            srt,
            nsrt,
            dirty,
        } = *p;
        let (t, depth, pos, protocols) = (f.tensor, f.depth + 1, f.pos.clone(), f.protocols);
        let name = lw.tensors[t].name.clone();
        let l = KExpr::Local;
        let fill = lw.fill_of(t);
        let base = pos.clone() * l(shape);
        if !f.protocols.is_written() {
            if f.depth != 0 {
                return Err(Error::Unsupported(format!(
                    "reading the SparseByteMap level of `{name}` below the root after writing it (only a SparseByteMap vector can be read back so far)"
                )));
            }
            if f.protocols.follows(f.depth) {
                return Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    let q = base.clone() + (i - 1);
                    Tensor::Switch {
                        pre: vec![],
                        cond: KExpr::load(tbl, q.clone()),
                        then: Box::new(Tensor::Fiber(Fiber {
                            tensor: t,
                            depth,
                            pos: q,
                            end: None,
                            hollow: None,
                            protocols,
                        })),
                        otherwise: Box::new(Tensor::FillLeaf(fill)),
                    }
                })));
            }
            // Freeze for reading: sort the set positions and bound the one fiber.
            let freeze = vec![
                KStmt::Sort {
                    buf: srt,
                    lo: KExpr::int(0),
                    hi: l(nsrt),
                },
                KStmt::Store {
                    buf: ptr,
                    index: KExpr::int(0),
                    value: KExpr::int(0),
                },
                KStmt::Store {
                    buf: ptr,
                    index: KExpr::int(1),
                    value: l(nsrt),
                },
            ];
            let child_of: ChildOf = Rc::new(move |q| KExpr::load(srt, q));
            let gallop = f.protocols.gallops(f.depth);
            let walk = lw.sorted_walk(
                t,
                depth,
                pos,
                protocols,
                SortedList {
                    entries: Entries::Fiber(ptr),
                    idx: srt,
                    child_of,
                    shape,
                    runs: false,
                },
                gallop,
            );
            return Ok(Looplet::Thunk {
                preamble: freeze,
                body: Box::new(walk),
                epilogue: vec![],
            });
        }
        if !matches!(
            lw.tensors[t].levels.get(depth),
            Some(LevelParams::Element { .. } | LevelParams::Pattern)
        ) {
            return Err(Error::Program(format!(
                "internal: `{name}` has no leaf under its SparseByteMap level"
            )));
        }
        // Dense child positions exist already: a write only marks the index; storing the
        // fill still stores (the position may hold a value from an earlier statement).
        let hollow = crate::looplets::Hollow {
            dirty,
            claim: vec![KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true)))],
            skip_fill: false,
            skip_fill_values: false,
            fill_claims: false,
            repeated: false,
        };
        let position = move |i: KExpr| base.clone() + (i - 1);
        let at = position.clone();
        let record = move |i: KExpr| {
            let q = position(i);
            let grown = KExpr::Op(Op::Max, vec![KExpr::Len(srt) * 2, KExpr::int(1)]);
            vec![KStmt::If {
                cond: l(dirty),
                then: vec![
                    KStmt::If {
                        cond: KExpr::Op(Op::Not, vec![KExpr::load(tbl, q.clone())]),
                        then: vec![
                            KStmt::Store {
                                buf: tbl,
                                index: q.clone(),
                                value: KExpr::Lit(Value::Bool(true)),
                            },
                            KStmt::If {
                                cond: KExpr::bin(Op::Ge, l(nsrt), KExpr::Len(srt)),
                                then: vec![KStmt::Resize {
                                    buf: srt,
                                    len: grown,
                                    fill: Value::I64(0),
                                }],
                                otherwise: vec![],
                            },
                            KStmt::Store {
                                buf: srt,
                                index: l(nsrt),
                                value: q,
                            },
                            KStmt::Assign(nsrt, l(nsrt) + 1),
                        ],
                        otherwise: vec![],
                    },
                    KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                ],
                otherwise: vec![],
            }]
        };
        Ok(Looplet::LookupWrite {
            body: Rc::new(move |i: KExpr| Fiber::hollow_leaf(t, depth, at(i), hollow.clone())),
            epilogue: Rc::new(record),
        })
    }

    /// A written SparseByteMap level `depth` of `name`: its buffers and cursors.
    pub(crate) fn out_params(kernel: &mut Kernel, at: &LevelAt) -> LevelParams {
        let (name, depth, shape) = (at.name, at.depth, at.shape);
        let mut buf = |what: &str, ty, growable| {
            kernel.buf(format!("{name}_lvl{depth}_{what}"), ty, true, growable)
        };
        let ptr = buf("ptr", ScalarType::I64, false);
        let tbl = buf("tbl", ScalarType::Bool, false);
        let srt = buf("srt", ScalarType::I64, true);
        let nsrt = kernel.local(format!("{name}_lvl{depth}_nsrt"), ScalarType::I64);
        kernel.outputs.push(nsrt);
        let dirty = kernel.local(format!("{name}_lvl{depth}_dirty"), ScalarType::Bool);
        LevelParams::written(OutParams {
            shape,
            ptr,
            tbl,
            srt,
            nsrt,
            dirty,
        })
    }
}
