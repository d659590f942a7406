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

use super::format::{Capabilities, IndexWidth};
use super::level::LevelStorage;
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
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

    /// How `ptr` and `idx` differ from the declared index width, if they do.
    pub fn index_width_mismatch(&self, index: IndexWidth) -> Option<String> {
        (self.ptr.width() != index || self.idx.width() != index).then(|| {
            format!(
                "{} ptr and {} idx",
                self.ptr.width().name(),
                self.idx.width().name()
            )
        })
    }

    /// The stored indices of fiber `p` as `(index, index, child position)`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        (self.ptr.at(p)..self.ptr.at(p + 1))
            .map(|q| (self.idx.at(q), self.idx.at(q), q))
            .collect()
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

impl registry::StoredLevel for SparseListStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseList
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseListStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseListStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        vec![
            registry::KernelBuf::of(&self.ptr),
            registry::KernelBuf::of(&self.idx),
        ]
    }

    fn positions(&self, parents: usize) -> usize {
        self.ptr.get(parents).unwrap_or(0)
    }

    fn index_width_mismatch(&self, index: registry::IndexWidth) -> Option<String> {
        SparseListStorage::index_width_mismatch(self, index)
    }

    fn get(&self, p: usize, coords: &[usize]) -> Option<registry::Value> {
        let q = SparseListStorage::locate(self, p, *coords.first()?)?;
        self.child.get(q, &coords[1..])
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseList;

impl registry::Level for SparseList {
    fn name(&self) -> &'static str {
        "SparseList"
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

    fn takes_narrow_indices(&self) -> bool {
        true
    }

    fn read_params(
        &self,
        _: registry::LevelKind,
        kernel: &mut registry::Kernel,
        at: &registry::LevelAt,
        index: registry::IndexWidth,
    ) -> Vec<registry::LevelParams> {
        vec![lowering::read_params(kernel, at, index)]
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
}

/// The level's kernel parameters: how the lowerer reads and writes it.
pub mod lowering {
    use crate::lower::kit::*;

    /// `w .= v` of a sorted vector workspace inside a loop: it starts empty (its one
    /// fiber's count is 0 until a write ends); entries are written again from position
    /// 0, and a claim sets each value.
    pub(crate) fn reset(p: &OutParams) -> Vec<KStmt> {
        vec![
            KStmt::Assign(p.qos, KExpr::int(0)),
            KStmt::Assign(p.dirty, KExpr::Lit(Value::Bool(false))),
            KStmt::Store {
                buf: p.ptr,
                index: KExpr::int(1),
                value: KExpr::int(0),
            },
        ]
    }

    /// Freezes the level in the kernel, before a later statement reads it: its
    /// per-fiber counts become offsets, `ptr[p] += ptr[p - 1]` (`p` a fresh local).
    pub(crate) fn freeze_in_kernel(out: &OutParams, p: LocalId) -> Vec<KStmt> {
        let ptr = out.ptr;
        let at = |e: KExpr| KExpr::load(ptr, e);
        let prev = KExpr::Local(p) - 1;
        vec![KStmt::For {
            var: p,
            lo: KExpr::int(1),
            hi: KExpr::Len(ptr),
            body: vec![KStmt::Store {
                buf: ptr,
                index: KExpr::Local(p),
                value: at(KExpr::Local(p)) + at(prev),
            }],
        }]
    }

    /// A SparseList level read by the kernel (or a written one read back after the
    /// kernel froze it): fiber `p`'s sorted indices `idx[ptr[p] .. ptr[p+1]]` (only where
    /// `present` holds, if given), walked, galloped or searched.
    pub(crate) fn unfurl_read(
        lw: &mut Lowerer,
        f: &Fiber,
        [ptr, idx]: [BufId; 2],
        shape: LocalId,
        present: Option<&KExpr>,
    ) -> Looplet {
        let list = SortedList {
            entries: Entries::of_fiber(ptr, present),
            idx,
            child_of: Rc::new(|q| q),
            shape,
            runs: false,
        };
        lw.sorted_read(f, list)
    }

    /// How a kernel writes the level: written in order; the leaf grows with the entries; it records the indices a Pattern leaf is written at; and the kernel can freeze it to read it back.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        child_grows: true,
        records_pattern: true,
        freezes_in_kernel: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A SparseList level of an output, written in order (extrude): `ptr` holds per-fiber
    /// counts until the run time prefix-sums it; `idx` grows by doubling.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of the mode.
        pub shape: LocalId,
        /// Per-fiber counts (`P + 1` entries, prefix-summed after the kernel).
        pub ptr: BufId,
        /// Stored indices (0-based), growable.
        pub idx: BufId,
        /// The next free position.
        pub qos: LocalId,
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
            vec![(self.ptr, OutArray::Ptr), (self.idx, OutArray::Idx)]
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, present: Option<&KExpr>) -> Result<Looplet> {
            if f.protocols.is_written() {
                return unfurl_write(lw, f, self);
            }
            // Read by a later statement, after the kernel froze it: a sorted list.
            Ok(unfurl_read(
                lw,
                f,
                [self.ptr, self.idx],
                self.shape,
                present,
            ))
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparseList)
        }

        fn reads_itself_where(&self, read: bool) -> bool {
            read
        }

        fn reset_workspace(&self, _: Option<(BufId, Value)>, _: LocalId) -> Option<Vec<KStmt>> {
            Some(reset(self))
        }

        fn freeze_in_kernel(&self, p: LocalId) -> Option<Vec<KStmt>> {
            Some(freeze_in_kernel(self, p))
        }

        fn searchable(&self) -> bool {
            true
        }
    }

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
        Some(LevelParams::written(OutParams {
            shape: at.shape,
            ptr,
            idx,
            qos,
            dirty,
        }))
    }

    /// A SparseList level read by a kernel: `ptr` over `idx`, of the level's index width.
    pub(crate) fn read_params(kernel: &mut Kernel, at: &LevelAt, index: IndexWidth) -> LevelParams {
        let ptr = kernel.index_buf(at.named("ptr"), index);
        let idx = kernel.index_buf(at.named("idx"), index);
        LevelParams::read(ReadParams {
            shape: at.shape,
            ptr,
            idx,
        })
    }

    /// A SparseList level read by a kernel: `ptr` and `idx` buffers and the shape.
    #[derive(Clone, Debug)]
    pub(crate) struct ReadParams {
        /// Size of the mode.
        shape: LocalId,
        /// Fiber boundaries.
        ptr: BufId,
        /// Stored indices (0-based).
        idx: BufId,
    }

    impl ReadLevel for ReadParams {
        fn clone_box(&self) -> Box<dyn ReadLevel> {
            Box::new(self.clone())
        }

        fn shape(&self) -> LocalId {
            self.shape
        }

        fn read_buffers(&self) -> (Vec<BufId>, bool) {
            (vec![self.ptr, self.idx], true)
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, present: Option<&KExpr>) -> Result<Looplet> {
            Ok(unfurl_read(
                lw,
                f,
                [self.ptr, self.idx],
                self.shape,
                present,
            ))
        }

        fn reads_itself_where(&self, read: bool) -> bool {
            read
        }
    }

    /// A SparseList level written in order, as the kernel writes it.
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            shape,
            ptr,
            idx,
            qos,
            dirty,
        } = *p;
        unfurl_list_out(lw, f, shape, [ptr, idx], [qos, dirty], None)
    }

    /// A SparseList level written in order (extrude), or one mode of a SparseCOO level
    /// (`coo = Some((mode, modes))`). The first write of an index claims position `qos`
    /// (growing the buffers by doubling when full, starting the value from the declared
    /// initial value); after the index's statements a written index is recorded in `idx`:
    /// its 0-based index for SparseList, its linear position over every mode down to here
    /// for SparseCOO (split into coordinates at freeze). The first mode counts the fiber's
    /// entries into `ptr[p + 1]`; SparseCOO modes above the last hand the linear position
    /// down, as Dense levels do.
    pub(crate) fn unfurl_list_out(
        lw: &mut Lowerer,
        f: &Fiber,
        shape: crate::kernel::LocalId,
        [ptr, idx]: [crate::kernel::BufId; 2],
        [qos, dirty]: [crate::kernel::LocalId; 2],
        coo: Option<(usize, usize)>,
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let l = KExpr::Local;
        let (mode, modes) = coo.unwrap_or((0, 1));
        let linear = linear_position(pos.clone(), shape);
        let fill = lw.fill_of(t);
        let inner = if mode + 1 < modes {
            dense_lookup(f, shape)
        } else {
            // The values grow with the indices (a Pattern leaf has none).
            let leaf = lw.written_values(t, depth, "sparse output")?;
            let grown = KExpr::Op(Op::Max, vec![KExpr::Len(idx) * 2, KExpr::int(1)]);
            // `idx` last: both grow to twice its length before.
            let mut grow = vec![];
            let mut claim = vec![];
            if let Some((val, init)) = leaf {
                grow.push(KStmt::Resize {
                    buf: val,
                    len: grown.clone(),
                    fill: init,
                });
                claim.push(KStmt::Store {
                    buf: val,
                    index: l(qos),
                    value: KExpr::Lit(init),
                });
            }
            grow.push(KStmt::Resize {
                buf: idx,
                len: grown,
                fill: Value::I64(0),
            });
            claim.insert(
                0,
                KStmt::If {
                    cond: KExpr::bin(Op::Ge, l(qos), KExpr::Len(idx)),
                    then: grow,
                    otherwise: vec![],
                },
            );
            claim.push(KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true))));
            let hollow = crate::looplets::Hollow::claiming(dirty, claim);
            let is_coo = coo.is_some();
            // A written value that ends up the fill is not kept (as the reference stores
            // its result): its slot is claimed again by the next write.
            let kept = leaf.map(|(val, _)| not_fill(KExpr::Load(val, Box::new(l(qos))), fill));
            let record = move |i: KExpr| {
                let index = if is_coo { linear(i) } else { i - 1 };
                let mut keep = vec![
                    KStmt::Store {
                        buf: idx,
                        index: l(qos),
                        value: index,
                    },
                    KStmt::Assign(qos, l(qos) + 1),
                ];
                if let Some(kept) = &kept {
                    keep = vec![KStmt::If {
                        cond: kept.clone(),
                        then: keep,
                        otherwise: vec![],
                    }];
                }
                keep.push(KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))));
                vec![KStmt::If {
                    cond: l(dirty),
                    then: keep,
                    otherwise: vec![],
                }]
            };
            Looplet::LookupWrite {
                body: Rc::new(move |_i: KExpr| {
                    Fiber::hollow_leaf(t, depth, l(qos), hollow.clone())
                }),
                epilogue: Rc::new(record),
            }
        };
        if mode > 0 {
            return Ok(inner);
        }
        // The fiber's count; the run time prefix-sums the counts at freeze.
        let start = lw.level_local(t, depth, "qos_start");
        Ok(Looplet::Thunk {
            preamble: vec![KStmt::Assign(start, l(qos))],
            body: Box::new(inner),
            epilogue: vec![KStmt::Store {
                buf: ptr,
                index: pos + 1,
                value: l(qos) - l(start),
            }],
        })
    }
}
