//! `SparseBlockList(child)`: variable-length blocks of stored indices per fiber (VBL);
//! indices inside a block that hold fill are stored explicitly.
//!
//! Buffers: `ptr` (length `P + 1`, over blocks), `idx` (one per block: its last index)
//! and `ofs` (blocks + 1, over child positions). Block `r` of fiber `p` (`r in ptr[p] ..<
//! ptr[p+1]`) stores indices `idx[r] + 1 - w ..= idx[r]`, `w = ofs[r+1] - ofs[r]`, with
//! child positions `ofs[r] ..< ofs[r+1]`. Invariants:
//! * **I1**–**I4** as SparseList for `ptr` over the blocks
//! * **I5** `len(ofs) == blocks + 1`, `ofs[0] == 0`, and every block is non-empty
//! * **I6** a block lies in `0 .. shape`
//! * **I7** within a fiber each block starts after the previous one ends
//!
//! Properties: ordered, unique, not full. Protocols: read walk, gallop,
//! follow (a binary search over the block ends).

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::output::{OutBufs, OutputAt};
use super::registry::kit as registry;
use super::sparse_list::validate_ptr;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (sorted block ends: searched or galloped).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: false,
    accept_run: false,
};

/// What a kernel wrote that the level cannot hold, when it flags a conflict: the run is
/// made again with the output recorded as entries (`engine`), and this is the error if
/// the result cannot be stored that way either.
pub(crate) const WRITE_CONFLICT: &str =
    "a SparseBlockList level is written in increasing index order, once per index, but the program wrote an index at or before one already written";

/// Storage of a SparseBlockList level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseBlockListStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into the blocks.
    pub ptr: Vec<usize>,
    /// Last index of each block.
    pub idx: Vec<usize>,
    /// Block boundaries into the child positions.
    pub ofs: Vec<usize>,
    /// The child level (one position per index of each block).
    pub child: Box<LevelStorage>,
}

impl SparseBlockListStorage {
    /// Names of the kernel buffers, in `kernel_buffers` order.
    pub const BUFFERS: &'static [&'static str] = &["ptr", "idx", "ofs"];

    /// First index of block `r`.
    fn first(&self, r: usize) -> usize {
        self.idx[r] + 1 - (self.ofs[r + 1] - self.ofs[r])
    }

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseBlockList",
            invariant,
            detail,
        };
        let blocks = validate_ptr(depth, "SparseBlockList", &self.ptr, parents, self.idx.len())?;
        if self.ofs.len() != blocks + 1 || self.ofs[0] != 0 {
            return Err(bad(
                "I5 len(ofs) == blocks + 1 and ofs[0] == 0",
                format!(
                    "len(ofs) = {} for {blocks} blocks, ofs[0] = {:?}",
                    self.ofs.len(),
                    self.ofs.first()
                ),
            ));
        }
        if let Some(r) = (0..blocks).find(|&r| self.ofs[r + 1] <= self.ofs[r]) {
            return Err(bad(
                "I5 every block is non-empty (ofs strictly increasing)",
                format!(
                    "ofs[{r}] = {} then ofs[{}] = {}",
                    self.ofs[r],
                    r + 1,
                    self.ofs[r + 1]
                ),
            ));
        }
        for r in 0..blocks {
            let w = self.ofs[r + 1] - self.ofs[r];
            if self.idx[r] >= self.shape || w > self.idx[r] + 1 {
                return Err(bad(
                    "I6 a block lies within the shape",
                    format!(
                        "block {r}: width {w} ending at {} with shape {}",
                        self.idx[r], self.shape
                    ),
                ));
            }
        }
        for p in 0..parents {
            for r in self.ptr[p]..self.ptr[p + 1].saturating_sub(1) {
                if self.first(r + 1) <= self.idx[r] {
                    return Err(bad(
                        "I7 blocks of a fiber are ordered and disjoint",
                        format!(
                            "fiber {p}: block {r} ends at {} but block {} starts at {}",
                            self.idx[r],
                            r + 1,
                            self.first(r + 1)
                        ),
                    ));
                }
            }
        }
        Ok(self.ofs[blocks])
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for r in self.ptr[p]..self.ptr[p + 1] {
            let first = self.first(r);
            for q in self.ofs[r]..self.ofs[r + 1] {
                let i = first + q - self.ofs[r];
                out.push((i, i, q));
            }
        }
        out
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.ptr),
            KernelBuf::Indices(&self.idx),
            KernelBuf::Indices(&self.ofs),
        ]
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt { m, e, groups, .. } = *at;
    let mut child_groups = Vec::new();
    let (mut ptr, mut idx, mut ofs) = (vec![0], Vec::new(), vec![0]);
    for &(lo, hi) in groups {
        let found = index_groups(e, m, lo, hi);
        for (k, &(i, g)) in found.iter().enumerate() {
            // A block ends where the next stored index is not adjacent.
            child_groups.push(g);
            if found.get(k + 1).is_none_or(|&(j, _)| j != i + 1) {
                idx.push(i);
                ofs.push(child_groups.len());
            }
        }
        ptr.push(idx.len());
    }
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparseBlockList(SparseBlockListStorage {
        shape: size,
        ptr,
        idx,
        ofs,
        child: Box::new(c),
    }))
}

/// The level's storage from the buffers a kernel wrote it into, frozen
/// (`engine::freeze`): `shape` holds the sizes of the modes from the root down to this
/// level's, `last` this level's and `rest` those above it.
pub(crate) fn from_output(at: &OutputAt, bufs: OutBufs) -> Result<LevelStorage> {
    let OutBufs {
        val, ptr, idx, aux, ..
    } = bufs;
    Ok(LevelStorage::SparseBlockList(
        super::SparseBlockListStorage {
            shape: at.size(),
            ptr,
            idx,
            ofs: aux,
            child: at.child_of(val)?,
        },
    ))
}

/// Allocates a written SparseBlockList (`engine`): block ends start with the first
/// block's start.
pub(crate) fn allocate_output(b: &mut OutBufs, _at: &super::output::AllocateAt) -> Result<()> {
    b.aux = vec![0];
    Ok(())
}

/// Freezes a written SparseBlockList output (`engine::freeze`): block counts become
/// offsets, the block and value arrays are trimmed, and fills dropped
/// ([`drop_block_fills`]).
pub(crate) fn freeze_output(bufs: &mut OutBufs, at: &super::output::FreezeAt) -> Result<()> {
    super::output::prefix_sum(&mut bufs.ptr);
    let blocks = bufs.ptr.last().copied().unwrap_or(0);
    bufs.idx.truncate(blocks);
    bufs.aux.truncate(blocks + 1);
    let n = bufs.aux.get(blocks).copied().unwrap_or(0);
    bufs.val.truncate(n);
    drop_block_fills(bufs, &at.fill)
}

/// Rebuilds the blocks of a frozen SparseBlockList output (`ptr` block offsets, `idx`
/// block ends, `aux` value offsets) from its values other than the fill, in maximal runs
/// of consecutive indices, as the reference stores its result.
fn drop_block_fills(bufs: &mut OutBufs, fill: &crate::algebra::Value) -> Result<()> {
    let mut ptr = vec![0];
    let (mut ends, mut ofs) = (Vec::new(), vec![0]);
    let mut val = crate::tensor::Buffer::new(bufs.val.scalar_type());
    for p in 0..bufs.ptr.len().saturating_sub(1) {
        let mut prev: Option<usize> = None;
        for b in bufs.ptr[p]..bufs.ptr[p + 1] {
            let (lo, hi, last) = (bufs.aux[b], bufs.aux[b + 1], bufs.idx[b]);
            for q in lo..hi {
                let v = bufs
                    .val
                    .get(q)
                    .ok_or_else(|| Error::Program("internal: block values".into()))?;
                if v.same(fill) {
                    continue;
                }
                let i = last - (hi - 1 - q);
                val.push(v)?;
                match (prev, ends.last_mut(), ofs.last_mut()) {
                    // The value extends the current block.
                    (Some(j), Some(end), Some(o)) if j + 1 == i => (*end, *o) = (i, val.len()),
                    _ => {
                        ends.push(i);
                        ofs.push(val.len());
                    }
                }
                prev = Some(i);
            }
        }
        ptr.push(ends.len());
    }
    (bufs.ptr, bufs.idx, bufs.aux, bufs.val) = (ptr, ends, ofs, val);
    Ok(())
}

impl registry::StoredLevel for SparseBlockListStorage {
    fn kind(&self) -> registry::LevelKind {
        registry::LevelKind::SparseBlockList
    }

    fn child(&self) -> &LevelStorage {
        &self.child
    }

    fn shape(&self) -> Vec<usize> {
        vec![self.shape]
    }

    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(SparseBlockListStorage::children(self, p))
    }

    fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        SparseBlockListStorage::validate(self, depth, parents)
    }

    fn kernel_buffers(&self) -> Vec<registry::KernelBuf<'_>> {
        SparseBlockListStorage::kernel_buffers(self)
    }

    /// Blocks are numbered across fibers: the last block's end counts them all.
    fn positions(&self, _: usize) -> usize {
        self.ofs.last().copied().unwrap_or(0)
    }
}

/// The level in the registry (`formats/registry.rs`).
pub(crate) struct SparseBlockList;

impl registry::Level for SparseBlockList {
    fn name(&self) -> &'static str {
        "SparseBlockList"
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
            SparseBlockListStorage::BUFFERS,
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

    /// How a kernel writes the level: written in order; the blocks' values grow with the entries.
    pub(crate) const WRITE_TRAITS: WriteTraits = WriteTraits {
        extruded: true,
        child_grows: true,
        ..WriteTraits::READ_ONLY
    };

    /// The kernel parameters of the level written by a kernel (`LevelParams::Written`).
    /// A SparseBlockList level of an output, written in order (extrude): values are
    /// appended at `qos` like SparseList's; an index that does not follow the last one
    /// written starts a new block. `ptr` holds per-fiber block counts until the run time
    /// prefix-sums it; `idx` (block last index) and `ofs` (block ends) grow by doubling.
    #[derive(Clone, Debug)]
    pub struct OutParams {
        /// Size of the mode.
        pub shape: LocalId,
        /// Per-fiber block counts (`P + 1`, prefix-summed after the kernel).
        pub ptr: BufId,
        /// Last index of each block, growable.
        pub idx: BufId,
        /// Block boundaries into the values (`blocks + 1`), growable.
        pub ofs: BufId,
        /// The next free child position.
        pub qos: LocalId,
        /// The number of blocks so far.
        pub blocks: LocalId,
        /// The block count when the fiber began.
        pub first_block: LocalId,
        /// The fiber's last written index (`-1` before any).
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
            vec![
                (self.ptr, OutArray::Ptr),
                (self.idx, OutArray::Idx),
                (self.ofs, OutArray::Aux),
            ]
        }

        fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, _: Option<&KExpr>) -> Result<Looplet> {
            let name = lw.tensors[f.tensor].name.clone();
            lw.written_only(f, &name)?;
            unfurl_write(lw, f, self)
        }

        fn written_kind(&self) -> Option<LevelKind> {
            Some(LevelKind::SparseBlockList)
        }

        fn conflict_flag(&self) -> Option<LocalId> {
            Some(self.conflict)
        }
    }

    /// Blocks: a stepper (or jumper) over blocks, each fill before its first index
    /// then random access into its consecutive child positions.
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
        let (ptr, idx, ofs) = (cx.buf(0)?, cx.buf(1)?, cx.buf(2)?);
        let r = lw.level_local(t, depth, "r");
        let r_stop = lw.level_local(t, depth, "r_stop");
        let i_last = lw.level_local(t, depth, "i_last");
        lw.at_most.push((i_last, shape));
        let b_last = lw.level_local(t, depth, "block_last");
        let b_end = lw.level_local(t, depth, "block_q_stop");
        let b_first = lw.level_local(t, depth, "block_first");
        // A block is never empty: its first index is at most its last.
        lw.at_most.push((b_first, b_last));
        let stepper = Stepper {
            seek: Box::new(seek_on(r, r_stop, idx)),
            preamble: vec![
                KStmt::Assign(b_last, plus1(KExpr::load(idx, l(r)))),
                KStmt::Assign(b_end, KExpr::load(ofs, plus1(l(r)))),
                KStmt::Assign(
                    b_first,
                    plus1(l(b_last) - (l(b_end) - KExpr::load(ofs, l(r)))),
                ),
            ],
            stop: l(b_last),
            chunk: Looplet::Sequence(vec![
                (Some(minus1(l(b_first))), cx.fill_run()),
                (
                    None,
                    Looplet::Lookup(Rc::new(move |j: KExpr| {
                        child((minus1(l(b_end)) - l(b_last)) + j)
                    })),
                ),
            ]),
            next: vec![KStmt::Assign(r, plus1(l(r)))],
            counted: Some(Counted {
                more: KExpr::bin(Op::Lt, l(r), l(r_stop)),
                last: l(i_last),
                first: Some(b_first),
            }),
            outside: None,
        };
        Ok(Looplet::Thunk {
            preamble: cx.bounds_where(
                fiber_bounds(ptr, idx, pos, r, r_stop, i_last),
                zeros(&[r, r_stop, i_last]),
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(l(i_last)), walker(stepper, gallop)),
                (None, cx.fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Follow: a binary search over the last indices of the fiber's blocks, a hit when the
    /// index is not before its block's first.
    fn unfurl_follow(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let (idx, ofs) = (cx.buf(1)?, cx.buf(2)?);
        let start = Rc::new(move |r: KExpr| {
            let width = KExpr::load(ofs, r.clone() + 1) - KExpr::load(ofs, r.clone());
            Some((KExpr::load(idx, r) - width) + 1)
        });
        let ofs = cx.buf(2)?;
        lw.follow_by_search(cx, idx, start, Some(ofs))
    }

    /// A SparseBlockList level written in order.
    /// `None` unless the level is right above an Element leaf.
    pub(crate) fn written_in_order(
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<LevelParams> {
        if !matches!(child, LevelFormat::Element(_)) {
            return None;
        }
        let ptr = at.buf(kernel, "ptr", false);
        let idx = at.buf(kernel, "idx", true);
        let ofs = at.buf(kernel, "ofs", true);
        let (qos, blocks, first_block, last) = (
            at.local(kernel, "qos", ScalarType::I64),
            at.local(kernel, "blocks", ScalarType::I64),
            at.local(kernel, "first_block", ScalarType::I64),
            at.local(kernel, "last", ScalarType::I64),
        );
        let (dirty, conflict) = at.write_flags(kernel);
        Some(LevelParams::written(OutParams {
            shape: at.shape,
            ptr,
            idx,
            ofs,
            qos,
            blocks,
            first_block,
            last,
            dirty,
            conflict,
        }))
    }

    /// A written SparseBlockList: each written index appends its value at `qos`; one that
    /// does not follow the fiber's last written index opens a new block (growing `idx`
    /// and `ofs` by doubling). After each written index the current block's last index and
    /// end are updated; after the fiber, its block count is stored. An index at or before
    /// the last one written sets `conflict`.
    pub(crate) fn unfurl_write(lw: &mut Lowerer, f: &Fiber, p: &OutParams) -> Result<Looplet> {
        let OutParams {
            ptr,
            idx,
            ofs,
            qos,
            blocks,
            first_block,
            last,
            dirty,
            conflict,
            ..
        } = *p;
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = lw.written_leaf(t, depth, "SparseBlockList")?;
        let l = KExpr::Local;
        let int = KExpr::int;
        let body = move |i: KExpr| {
            let i0 = i - 1;
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
                            KExpr::bin(Op::Lt, l(last), int(0)),
                            KExpr::bin(Op::Ne, i0, l(last) + 1),
                        ],
                    ),
                    then: vec![
                        grow_to(idx, l(blocks) + 1, Value::I64(0)),
                        grow_to(ofs, l(blocks) + 2, Value::I64(0)),
                        KStmt::Assign(blocks, l(blocks) + 1),
                    ],
                    otherwise: vec![],
                },
                grow_to(val, l(qos) + 1, init),
                KStmt::Store {
                    buf: val,
                    index: l(qos),
                    value: KExpr::Lit(init),
                },
                KStmt::Assign(dirty, KExpr::Lit(Value::Bool(true))),
            ];
            Fiber::hollow_leaf(
                t,
                depth,
                l(qos),
                crate::looplets::Hollow::claiming(dirty, claim),
            )
        };
        let record = move |i: KExpr| {
            let i0 = i - 1;
            let block = l(blocks) - 1;
            vec![KStmt::If {
                cond: l(dirty),
                then: vec![
                    KStmt::Assign(last, i0.clone()),
                    KStmt::Store {
                        buf: idx,
                        index: block,
                        value: i0,
                    },
                    KStmt::Assign(qos, l(qos) + 1),
                    KStmt::Store {
                        buf: ofs,
                        index: l(blocks),
                        value: l(qos),
                    },
                    KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                ],
                otherwise: vec![],
            }]
        };
        Ok(Looplet::Thunk {
            preamble: vec![
                KStmt::Assign(first_block, l(blocks)),
                KStmt::Assign(last, int(-1)),
            ],
            body: Box::new(Looplet::LookupWrite {
                body: Rc::new(body),
                epilogue: Rc::new(record),
            }),
            epilogue: vec![KStmt::Store {
                buf: ptr,
                index: pos + 1,
                value: l(blocks) - l(first_block),
            }],
        })
    }
}
