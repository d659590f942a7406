//! Unfurling: a level's looplet nest for its dimension (finch-language-and-levels.md §4).
//! Positions are 0-based, indices 1-based (stored `idx` values are 0-based, so the index
//! of entry `q` is `idx[q] + 1`).
//!
//! * Dense (read and update): `Lookup(i -> child((p)·shape + i - 1))`.
//! * SparseList (read, walk): `Thunk(q = ptr[p]; q_stop = ptr[p+1]; i_last = idx[q_stop-1]+1
//!   or 0) -> Sequence(Phase(stop = i_last, Stepper(seek: scansearch; preamble: i = idx[q]+1;
//!   stop = i; chunk = Spike(FillLeaf(fill), child(q)); next: q += 1)), Phase(Run(FillLeaf(fill))))`.
//! * The structured levels (`unfurl_structured`, `structured_follow`), SparseCOO modes
//!   (`coo_list`) and the output levels (`unfurl_*_out`; SparseHash groups in `hash.rs`)
//!   follow the same pattern.
//!
//! The looplets of every level live here, with the lowerer; `formats/` holds each level's
//! storage and invariants.

use std::rc::Rc;

use super::convert::LevelParams;
use super::Lowerer;
use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::LevelKind;
use crate::kernel::{KExpr, KStmt};
use crate::looplets::{Counted, Fiber, Looplet, Stepper, Tensor};

impl Lowerer {
    /// The fill value of a tensor's leaf.
    pub(super) fn fill_of(&self, t: usize) -> Value {
        self.tensors[t].format.fill_value()
    }

    /// The looplet nest of fiber `f` where `cond` holds, `fill` everywhere where it does
    /// not ([`Tensor::Present`]): a Dense level hands the condition down to its children; a
    /// SparseList or a walked structured level has no entries where it fails (a RunList
    /// one run of fill; its fiber's bounds are read only where it holds); a searched
    /// structured level searches only where it holds; any other level is one `Switch` on
    /// it. Only a Dense level takes in a `fill` other than the tensor's own (`missing`
    /// outside a shifted read of a Dense parent): the others' missing entries read as
    /// theirs.
    pub(super) fn unfurl_present(
        &mut self,
        f: &Fiber,
        cond: &KExpr,
        fill: Value,
    ) -> Result<Looplet> {
        if *cond == KExpr::Lit(Value::Bool(false)) {
            // A fiber that is never present (a level's missing fiber keeping its bounds,
            // `absent_fibers_keep_bounds`) is its fill at every index, and so is each of
            // its subfibers, still never present: walking its level would copy the
            // statement into every phase of a walk over nothing.
            let below = Tensor::Present {
                cond: cond.clone(),
                fiber: Fiber {
                    depth: f.depth + 1,
                    pos: KExpr::int(0),
                    end: None,
                    ..f.clone()
                },
                fill,
            };
            return Ok(Looplet::Run(Box::new(below)));
        }
        let level = self.tensors[f.tensor].levels.get(f.depth).cloned();
        let level = match level {
            Some(LevelParams::Dense { .. }) => level,
            _ if fill != self.fill_of(f.tensor) => None,
            _ => level,
        };
        match level {
            Some(LevelParams::Dense { shape }) => {
                let Looplet::Lookup(child) = dense_lookup(f, shape) else {
                    return Err(Error::Program("internal: a Dense level's lookup".into()));
                };
                let cond = cond.clone();
                Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    present_where(child(i), &cond, fill)
                })))
            }
            Some(LevelParams::SparseList { ptr, idx, shape })
            | Some(LevelParams::SparseListOut {
                ptr, idx, shape, ..
            }) if !f.protocols.is_written() => {
                let mut list = SortedList::of_list(ptr, idx, shape);
                list.entries = Entries::FiberWhere(ptr, cond.clone());
                Ok(self.sorted_read(f, list))
            }
            Some(LevelParams::Coo {
                shape,
                ptr,
                tbl,
                mode: 0,
                modes,
            }) => {
                let name = self.tensors[f.tensor].name.clone();
                let list = coo_list(f, &name, [shape], [ptr], &tbl, [0, modes], Some(cond))?;
                Ok(self.sorted_read(f, list))
            }
            Some(LevelParams::Structured { kind, shape, bufs })
                if !f.protocols.follows(f.depth) && !f.protocols.is_written() =>
            {
                self.check_protocols(f, kind)?;
                self.unfurl_structured(f, kind, shape, &bufs, Some(cond))
            }
            Some(LevelParams::Structured { .. })
                if f.protocols.follows(f.depth) && !f.protocols.is_written() =>
            {
                // Searched: each search runs, and its hit counts, only where `cond` holds.
                let Looplet::Lookup(search) = self.unfurl(f)? else {
                    return Err(Error::Program("internal: a search is a lookup".into()));
                };
                let cond = cond.clone();
                Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    present_where(search(i), &cond, fill)
                })))
            }
            _ => Ok(Looplet::Switch(vec![
                (cond.clone(), self.unfurl(f)?),
                (
                    KExpr::Lit(Value::Bool(true)),
                    Looplet::Run(Box::new(Tensor::FillLeaf(fill))),
                ),
            ])),
        }
    }

    /// The looplet nest of fiber `f` for the dimension of its level.
    pub(super) fn unfurl(&mut self, f: &Fiber) -> Result<Looplet> {
        let info = &self.tensors[f.tensor];
        let name = info.name.clone();
        let level = info.levels.get(f.depth).cloned().ok_or_else(|| {
            Error::Program(format!("internal: `{name}` has no level {}", f.depth + 1))
        })?;
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let level = self.own_claim_state(level, t, depth);
        let hash = super::hash::HashTable::of(&level);
        match level {
            LevelParams::Dense { shape } => Ok(dense_lookup(f, shape)),
            LevelParams::SparseList { ptr, idx, shape } => {
                Ok(self.sorted_read(f, SortedList::of_list(ptr, idx, shape)))
            }
            LevelParams::Structured { kind, shape, bufs } => {
                self.check_protocols(f, kind)?;
                self.unfurl_structured(f, kind, shape, &bufs, None)
            }
            LevelParams::SparseListOut {
                ptr, idx, shape, ..
            } if !f.protocols.is_written() => {
                // Read by a later statement, after the kernel froze it: a sorted list.
                Ok(self.sorted_read(f, SortedList::of_list(ptr, idx, shape)))
            }
            LevelParams::SparseListOut {
                shape,
                ptr,
                idx,
                qos,
                dirty,
            } => self.unfurl_list_out(f, shape, [ptr, idx], [qos, dirty], None),
            LevelParams::CooOut {
                shape,
                ptr,
                idx,
                qos,
                dirty,
                mode,
                modes,
                ..
            } => {
                self.written_only(f, &name)?;
                self.unfurl_list_out(f, shape, [ptr, idx], [qos, dirty], Some((mode, modes)))
            }
            LevelParams::HashOut {
                shape, mode, modes, ..
            } => {
                let (h, view) = hash.ok_or_else(|| {
                    Error::Program(format!("internal: `{name}`'s SparseHash table"))
                })?;
                if !f.protocols.is_written() {
                    self.unfurl_hash_read(f, shape, [mode, modes], h, view)
                } else {
                    self.unfurl_hash_out(f, shape, [mode, modes], h)
                }
            }
            LevelParams::Coo {
                shape,
                ptr,
                tbl,
                mode,
                modes,
            } => {
                let list = coo_list(f, &name, [shape], [ptr], &tbl, [mode, modes], None)?;
                Ok(self.sorted_read(f, list))
            }
            LevelParams::SparseByteMapOut {
                shape,
                ptr,
                tbl,
                srt,
                nsrt,
                dirty,
            } => self.unfurl_byte_map_out(f, shape, ptr, tbl, srt, nsrt, dirty),
            LevelParams::SparsePointOut {
                shape,
                idx,
                dirty,
                conflict,
            } => {
                // Every index of fiber `p` writes child position `p`; after an index's
                // statements a write records it, and a second index is a conflict. A
                // value that ends up the fill is not recorded (as the reference stores its
                // result), and the position starts from the declared value again.
                let l = KExpr::Local;
                let (val, init) = self.written_leaf(t, depth, "SparsePoint")?;
                let kept = not_fill(KExpr::load(val, pos.clone()), self.fill_of(t));
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
                    let i0 = KExpr::bin(Op::Sub, i, KExpr::int(1));
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
                self.written_only(f, &name)?;
                Ok(Looplet::LookupWrite {
                    body: Rc::new(move |_i: KExpr| {
                        Fiber::hollow_leaf(t, depth, at.clone(), hollow.clone())
                    }),
                    epilogue: Rc::new(record),
                })
            }
            LevelParams::SparseBlockListOut {
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
            } => {
                self.written_only(f, &name)?;
                self.unfurl_block_list_out(
                    f,
                    [ptr, idx, ofs],
                    [qos, blocks, first_block, last, dirty, conflict],
                )
            }
            LevelParams::RunsOut {
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
            } => {
                if !f.protocols.is_written() && f.depth == 0 {
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
                        preamble.push(self.unwritten_runs_as_one(f, shape, ptr, right, qos)?);
                    }
                    let body = self.unfurl_structured(f, kind, shape, &bufs, None)?;
                    return Ok(Looplet::Thunk {
                        preamble,
                        body: Box::new(body),
                        epilogue: vec![],
                    });
                }
                self.written_only(f, &name)?;
                self.unfurl_runs_out(
                    f,
                    dense,
                    shape,
                    [Some(ptr), left, Some(right)],
                    [qos, start, last, dirty, conflict],
                )
            }
            LevelParams::SparseIntervalOut {
                left,
                right,
                dirty,
                conflict,
                ..
            } => {
                self.written_only(f, &name)?;
                self.unfurl_interval_out(f, left, right, dirty, conflict)
            }
            LevelParams::SparseBandOut {
                idx,
                ofs,
                qos,
                start,
                origin,
                last,
                dirty,
                conflict,
                ..
            } => {
                self.written_only(f, &name)?;
                self.unfurl_band_out(f, [idx, ofs], [qos, start, origin, last, dirty, conflict])
            }
            LevelParams::Element { .. } | LevelParams::Pattern => Err(Error::Program(format!(
                "internal: the leaf of `{name}` indexed by a loop"
            ))),
        }
    }

    /// Written level `level` (at `depth`, 1-based) of tensor `t` with a claim flag of its
    /// own, and for a hash table an entry local of its own, where the access is nested in
    /// the statements of an index another access of the level writes (`y[~(i + 2)] = v`
    /// beside `y[i] = x[i]`): sharing them, the inner write would find the outer index
    /// claimed and write its entry, and its record would take the outer index's flag.
    fn own_claim_state(&mut self, mut level: LevelParams, t: usize, depth: usize) -> LevelParams {
        let (dirty, at) = match &mut level {
            LevelParams::HashOut { dirty, at, .. } => (dirty, Some(at)),
            LevelParams::SparseListOut { dirty, .. }
            | LevelParams::CooOut { dirty, .. }
            | LevelParams::SparseByteMapOut { dirty, .. }
            | LevelParams::SparsePointOut { dirty, .. }
            | LevelParams::SparseBlockListOut { dirty, .. }
            | LevelParams::RunsOut { dirty, .. }
            | LevelParams::SparseIntervalOut { dirty, .. }
            | LevelParams::SparseBandOut { dirty, .. } => (dirty, None),
            _ => return level,
        };
        if self.open_claims.contains(dirty) {
            let name = format!("{}_lvl{depth}_dirty", self.tensors[t].name);
            *dirty = self.kernel.local(name, ScalarType::Bool);
            if let Some(at) = at {
                *at = self.level_local(t, depth, "at");
            }
        }
        level
    }

    /// The value buffer of the Element leaf (at `depth`) under a written sparse level, and
    /// the value a claimed position starts from: the declared initial value in the element
    /// type (checked equal to the fill when the program was converted).
    pub(super) fn written_leaf(
        &self,
        t: usize,
        depth: usize,
        level: &str,
    ) -> Result<(crate::kernel::BufId, Value)> {
        let Some(LevelParams::Element { val, .. }) = self.tensors[t].levels.get(depth) else {
            return Err(Error::Program(format!(
                "internal: `{}` has no leaf under its {level} level",
                self.tensors[t].name
            )));
        };
        let fill = self.fill_of(t);
        let init = self.tensors[t]
            .init
            .and_then(|v| v.convert_exact(fill.scalar_type().unwrap_or(ScalarType::F64)))
            .unwrap_or(fill);
        Ok((*val, init))
    }

    /// [`Self::written_leaf`], or `None` for a Pattern leaf, which stores no values (writing
    /// `true` claims the index).
    pub(super) fn written_values(
        &self,
        t: usize,
        depth: usize,
        level: &str,
    ) -> Result<Option<(crate::kernel::BufId, Value)>> {
        match self.tensors[t].levels.get(depth) {
            Some(LevelParams::Pattern) => Ok(None),
            _ => self.written_leaf(t, depth, level).map(Some),
        }
    }

    /// A SparseList level written in order (extrude), or one mode of a SparseCOO level
    /// (`coo = Some((mode, modes))`). The first write of an index claims position `qos`
    /// (growing the buffers by doubling when full, starting the value from the declared
    /// initial value); after the index's statements a written index is recorded in `idx`:
    /// its 0-based index for SparseList, its linear position over every mode down to here
    /// for SparseCOO (split into coordinates at freeze). The first mode counts the fiber's
    /// entries into `ptr[p + 1]`; SparseCOO modes above the last hand the linear position
    /// down, as Dense levels do.
    fn unfurl_list_out(
        &mut self,
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
        let fill = self.fill_of(t);
        let inner = if mode + 1 < modes {
            dense_lookup(f, shape)
        } else {
            // The values grow with the indices (a Pattern leaf has none).
            let leaf = self.written_values(t, depth, "sparse output")?;
            let grown = KExpr::Op(
                Op::Max,
                vec![
                    KExpr::bin(Op::Mul, KExpr::Len(idx), KExpr::int(2)),
                    KExpr::int(1),
                ],
            );
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
                let index = if is_coo {
                    linear(i)
                } else {
                    KExpr::bin(Op::Sub, i, KExpr::int(1))
                };
                let mut keep = vec![
                    KStmt::Store {
                        buf: idx,
                        index: l(qos),
                        value: index,
                    },
                    KStmt::Assign(qos, KExpr::bin(Op::Add, l(qos), KExpr::int(1))),
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
        let start = self.level_local(t, depth, "qos_start");
        Ok(Looplet::Thunk {
            preamble: vec![KStmt::Assign(start, l(qos))],
            body: Box::new(inner),
            epilogue: vec![KStmt::Store {
                buf: ptr,
                index: KExpr::bin(Op::Add, pos, KExpr::int(1)),
                value: KExpr::bin(Op::Sub, l(qos), l(start)),
            }],
        })
    }

    /// Levels written in order cannot be read back in the same kernel.
    pub(super) fn written_only(&self, f: &Fiber, name: &str) -> Result<()> {
        if !f.protocols.is_written() {
            return Err(Error::Unsupported(format!(
                "reading the output `{name}` in the kernel that writes it"
            )));
        }
        Ok(())
    }

    /// A written SparseBlockList: each written index appends its value at `qos`; one that
    /// does not follow the fiber's last written index opens a new block (growing `idx`
    /// and `ofs` by doubling). After each written index the current block's last index and
    /// end are updated; after the fiber, its block count is stored. An index at or before
    /// the last one written sets `conflict`.
    fn unfurl_block_list_out(
        &mut self,
        f: &Fiber,
        [ptr, idx, ofs]: [crate::kernel::BufId; 3],
        [qos, blocks, first_block, last, dirty, conflict]: [crate::kernel::LocalId; 6],
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = self.written_leaf(t, depth, "SparseBlockList")?;
        let l = KExpr::Local;
        let int = KExpr::int;
        let body = move |i: KExpr| {
            let i0 = KExpr::bin(Op::Sub, i, int(1));
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
                            KExpr::bin(Op::Ne, i0, KExpr::bin(Op::Add, l(last), int(1))),
                        ],
                    ),
                    then: vec![
                        grow_to(idx, KExpr::bin(Op::Add, l(blocks), int(1)), Value::I64(0)),
                        grow_to(ofs, KExpr::bin(Op::Add, l(blocks), int(2)), Value::I64(0)),
                        KStmt::Assign(blocks, KExpr::bin(Op::Add, l(blocks), int(1))),
                    ],
                    otherwise: vec![],
                },
                grow_to(val, KExpr::bin(Op::Add, l(qos), int(1)), init),
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
            let i0 = KExpr::bin(Op::Sub, i, int(1));
            let block = KExpr::bin(Op::Sub, l(blocks), int(1));
            vec![KStmt::If {
                cond: l(dirty),
                then: vec![
                    KStmt::Assign(last, i0.clone()),
                    KStmt::Store {
                        buf: idx,
                        index: block,
                        value: i0,
                    },
                    KStmt::Assign(qos, KExpr::bin(Op::Add, l(qos), int(1))),
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
                index: KExpr::bin(Op::Add, pos, int(1)),
                value: KExpr::bin(Op::Sub, l(blocks), l(first_block)),
            }],
        })
    }

    /// A written RunList or SparseRunList (AcceptRun): a run `lo..=hi` written at once
    /// gets the child position `qos` (grown by doubling, starting from the fill); after its
    /// statements a written run is recorded. A RunList first closes any gap since the
    /// fiber's last covered index with a fill run, and after the fiber a final fill run
    /// reaches the end, so its runs tile the fiber. A run starting at or before the last
    /// covered index sets `conflict`.
    fn unfurl_runs_out(
        &mut self,
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
        let (val, init) = self.written_leaf(t, depth, "run-length")?;
        let l = KExpr::Local;
        let int = KExpr::int;
        // Room for run `qos` in every run array (and the values).
        let room = move || {
            let need = KExpr::bin(Op::Add, l(qos), int(1));
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
            v.push(KStmt::Assign(qos, KExpr::bin(Op::Add, l(qos), int(1))));
            v
        };
        let body = move |lo: KExpr, _hi: KExpr| {
            let lo0 = KExpr::bin(Op::Sub, lo, int(1));
            let mut claim = vec![KStmt::If {
                cond: KExpr::bin(Op::Le, lo0.clone(), l(last)),
                then: vec![KStmt::Assign(conflict, KExpr::Lit(Value::Bool(true)))],
                otherwise: vec![],
            }];
            if dense {
                claim.push(KStmt::If {
                    cond: KExpr::bin(Op::Gt, lo0.clone(), KExpr::bin(Op::Add, l(last), int(1))),
                    then: fill_run(
                        KExpr::bin(Op::Add, l(last), int(1)),
                        KExpr::bin(Op::Sub, lo0, int(1)),
                    ),
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
                value: KExpr::bin(Op::Sub, hi.clone(), int(1)),
            }];
            if let Some(left) = left {
                then.push(KStmt::Store {
                    buf: left,
                    index: l(qos),
                    value: KExpr::bin(Op::Sub, lo, int(1)),
                });
            }
            then.extend([
                KStmt::Assign(last, KExpr::bin(Op::Sub, hi, int(1))),
                KStmt::Assign(qos, KExpr::bin(Op::Add, l(qos), int(1))),
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
                cond: KExpr::bin(Op::Lt, l(last), KExpr::bin(Op::Sub, l(shape), int(1))),
                then: fill_run(
                    KExpr::bin(Op::Add, l(last), int(1)),
                    KExpr::bin(Op::Sub, l(shape), int(1)),
                ),
                otherwise: vec![],
            });
        }
        epilogue.push(KStmt::Store {
            buf: ptr,
            index: KExpr::bin(Op::Add, pos, int(1)),
            value: KExpr::bin(Op::Sub, l(qos), l(start)),
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
        &self,
        f: &Fiber,
        shape: crate::kernel::LocalId,
        ptr: crate::kernel::BufId,
        right: crate::kernel::BufId,
        qos: crate::kernel::LocalId,
    ) -> Result<KStmt> {
        let (val, init) = self.written_leaf(f.tensor, f.depth + 1, "RunList")?;
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
                store(right, KExpr::bin(Op::Sub, l(shape), int(1))),
                KStmt::Store {
                    buf: ptr,
                    index: int(1),
                    value: int(1),
                },
            ],
            otherwise: vec![],
        })
    }

    /// A written SparseInterval (AcceptRun): a run's value goes to a scratch slot (the
    /// value slot after the last fiber's); after the run, an empty fiber takes it as its
    /// interval, a touching run of the same value extends the interval, and any other run
    /// sets `conflict`. Values equal to the fill at run time are not written, and a run
    /// whose value ends up the fill is not recorded.
    fn unfurl_interval_out(
        &mut self,
        f: &Fiber,
        left: crate::kernel::BufId,
        right: crate::kernel::BufId,
        dirty: crate::kernel::LocalId,
        conflict: crate::kernel::LocalId,
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = self.written_leaf(t, depth, "SparseInterval")?;
        let fill = self.fill_of(t);
        let l = KExpr::Local;
        let int = KExpr::int;
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
            let (lo0, hi0) = (
                KExpr::bin(Op::Sub, lo, int(1)),
                KExpr::bin(Op::Sub, hi, int(1)),
            );
            let (lp, rp) = (
                KExpr::load(left, pos.clone()),
                KExpr::load(right, pos.clone()),
            );
            let value = KExpr::load(val, scratch.clone());
            let empty = KExpr::bin(Op::Gt, lp.clone(), rp.clone());
            let extends = KExpr::Op(
                Op::And,
                vec![
                    KExpr::bin(Op::Eq, KExpr::bin(Op::Add, rp, int(1)), lo0.clone()),
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

    /// A written SparseBand: the fiber's first written index fixes its origin; index `i`
    /// lands at child position `start + (i - origin)`, the buffer growing (with the fill)
    /// to reach it, so unwritten indices inside the band hold the fill. After the fiber,
    /// its last index and width are stored and the cursor moves past the band. An index
    /// at or before the last one written sets `conflict` (kept in bounds).
    fn unfurl_band_out(
        &mut self,
        f: &Fiber,
        [idx, ofs]: [crate::kernel::BufId; 2],
        [qos, start, origin, last, dirty, conflict]: [crate::kernel::LocalId; 6],
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = self.written_leaf(t, depth, "SparseBand")?;
        let l = KExpr::Local;
        let int = KExpr::int;
        let at = move |i: KExpr| {
            KExpr::bin(
                Op::Add,
                l(start),
                KExpr::bin(Op::Sub, KExpr::bin(Op::Sub, i, int(1)), l(origin)),
            )
        };
        let body = move |i: KExpr| {
            let i0 = KExpr::bin(Op::Sub, i.clone(), int(1));
            let need = KExpr::bin(Op::Add, at(i.clone()), int(1));
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
                    KStmt::Assign(last, KExpr::bin(Op::Sub, i, int(1))),
                    KStmt::Assign(dirty, KExpr::Lit(Value::Bool(false))),
                ],
                otherwise: vec![],
            }]
        };
        let width = KExpr::bin(Op::Add, KExpr::bin(Op::Sub, l(last), l(origin)), int(1));
        let next = KExpr::bin(Op::Add, pos.clone(), int(1));
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
                    KStmt::Assign(qos, KExpr::bin(Op::Add, l(start), width)),
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

    /// A written SparseByteMap (an output or a workspace). Written: random access to the
    /// dense child position `p·shape + i`; after an index's statements, a first write
    /// sets its flag and appends the position to `srt` (doubling it when full). Read back
    /// (root level only, after the writes of earlier statements): `srt` is sorted and the
    /// level is walked like any sorted list, or followed through its flags.
    #[allow(clippy::too_many_arguments)]
    fn unfurl_byte_map_out(
        &mut self,
        f: &Fiber,
        shape: crate::kernel::LocalId,
        ptr: crate::kernel::BufId,
        tbl: crate::kernel::BufId,
        srt: crate::kernel::BufId,
        nsrt: crate::kernel::LocalId,
        dirty: crate::kernel::LocalId,
    ) -> Result<Looplet> {
        let (t, depth, pos, protocols) = (f.tensor, f.depth + 1, f.pos.clone(), f.protocols);
        let name = self.tensors[t].name.clone();
        let l = KExpr::Local;
        let fill = self.fill_of(t);
        let base = KExpr::bin(Op::Mul, pos.clone(), l(shape));
        if !f.protocols.is_written() {
            if f.depth != 0 {
                return Err(Error::Unsupported(format!(
                    "reading the SparseByteMap level of `{name}` below the root after writing it (only a SparseByteMap vector can be read back so far)"
                )));
            }
            if f.protocols.follows(f.depth) {
                return Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                    let q =
                        KExpr::bin(Op::Add, base.clone(), KExpr::bin(Op::Sub, i, KExpr::int(1)));
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
            let walk = self.sorted_walk(
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
            self.tensors[t].levels.get(depth),
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
        let position = move |i: KExpr| {
            KExpr::bin(Op::Add, base.clone(), KExpr::bin(Op::Sub, i, KExpr::int(1)))
        };
        let at = position.clone();
        let record = move |i: KExpr| {
            let q = position(i);
            let grown = KExpr::Op(
                Op::Max,
                vec![
                    KExpr::bin(Op::Mul, KExpr::Len(srt), KExpr::int(2)),
                    KExpr::int(1),
                ],
            );
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
                            KStmt::Assign(nsrt, KExpr::bin(Op::Add, l(nsrt), KExpr::int(1))),
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

    /// Follow (random access) into a structured level: a check against the fiber's single
    /// entry, run or block (SparsePoint, SparseInterval, SparseBand), or a binary search
    /// over the sorted ends of its runs or blocks (RunList, SparseRunList,
    /// SparseBlockList); a miss reads fill.
    fn structured_follow(
        &mut self,
        f: &Fiber,
        kind: LevelKind,
        bufs: &[crate::kernel::BufId],
    ) -> Result<Looplet> {
        let (t, depth, pos, protocols) = (f.tensor, f.depth + 1, f.pos.clone(), f.protocols);
        let fill = self.fill_of(t);
        let buf = |k: usize| {
            bufs.get(k).copied().ok_or_else(|| {
                Error::Program(format!(
                    "internal: {} level without buffer {k}",
                    kind.name()
                ))
            })
        };
        let l = KExpr::Local;
        let one = || KExpr::int(1);
        let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
        let child = move |q: KExpr| {
            Box::new(Tensor::Fiber(Fiber {
                tensor: t,
                depth,
                pos: q,
                end: None,
                hollow: None,
                protocols,
            }))
        };
        let within = |lo: KExpr, x: KExpr, hi: KExpr| {
            KExpr::Op(
                Op::And,
                vec![KExpr::bin(Op::Le, lo, x.clone()), KExpr::bin(Op::Le, x, hi)],
            )
        };
        // The 0-based target is `i - 1` throughout.
        Ok(match kind {
            LevelKind::SparsePoint => {
                let idx = buf(0)?;
                Looplet::Lookup(Rc::new(move |i: KExpr| Tensor::Switch {
                    pre: vec![],
                    cond: KExpr::bin(Op::Eq, plus1(KExpr::load(idx, pos.clone())), i),
                    then: child(pos.clone()),
                    otherwise: Box::new(Tensor::FillLeaf(fill)),
                }))
            }
            LevelKind::SparseInterval => {
                let (left, right) = (buf(0)?, buf(1)?);
                Looplet::Lookup(Rc::new(move |i: KExpr| Tensor::Switch {
                    pre: vec![],
                    cond: within(
                        plus1(KExpr::load(left, pos.clone())),
                        i,
                        plus1(KExpr::load(right, pos.clone())),
                    ),
                    then: child(pos.clone()),
                    otherwise: Box::new(Tensor::FillLeaf(fill)),
                }))
            }
            LevelKind::SparseBand => {
                let (idx, ofs) = (buf(0)?, buf(1)?);
                // Block `last - width + 1 ..= last` at child positions ending at ofs[p+1].
                Looplet::Lookup(Rc::new(move |i: KExpr| {
                    let last = plus1(KExpr::load(idx, pos.clone()));
                    let end = KExpr::load(ofs, plus1(pos.clone()));
                    let width = KExpr::bin(Op::Sub, end.clone(), KExpr::load(ofs, pos.clone()));
                    let first = plus1(KExpr::bin(Op::Sub, last.clone(), width));
                    Tensor::Switch {
                        pre: vec![],
                        cond: within(first, i.clone(), last.clone()),
                        then: child(KExpr::bin(
                            Op::Sub,
                            KExpr::bin(Op::Sub, end, one()),
                            KExpr::bin(Op::Sub, last, i),
                        )),
                        otherwise: Box::new(Tensor::FillLeaf(fill)),
                    }
                }))
            }
            LevelKind::RunList | LevelKind::SparseRunList | LevelKind::SparseBlockList => {
                let ptr = buf(0)?;
                // The sorted ends searched, and how a found entry `r` starts (0-based).
                let (ends, start): (crate::kernel::BufId, Rc<dyn Fn(KExpr) -> Option<KExpr>>) =
                    match kind {
                        LevelKind::RunList => (buf(1)?, Rc::new(|_| None)),
                        LevelKind::SparseRunList => {
                            let left = buf(1)?;
                            (buf(2)?, Rc::new(move |r| Some(KExpr::load(left, r))))
                        }
                        _ => {
                            let (idx, ofs) = (buf(1)?, buf(2)?);
                            (
                                idx,
                                Rc::new(move |r: KExpr| {
                                    let width = KExpr::bin(
                                        Op::Sub,
                                        KExpr::load(
                                            ofs,
                                            KExpr::bin(Op::Add, r.clone(), KExpr::int(1)),
                                        ),
                                        KExpr::load(ofs, r.clone()),
                                    );
                                    Some(KExpr::bin(
                                        Op::Add,
                                        KExpr::bin(Op::Sub, KExpr::load(idx, r), width),
                                        KExpr::int(1),
                                    ))
                                }),
                            )
                        }
                    };
                let block = kind == LevelKind::SparseBlockList;
                let ofs = if block { Some(buf(2)?) } else { None };
                let r = self.level_local(t, depth, "r");
                let hi = self.level_local(t, depth, "r_stop");
                let found = self.kernel.local(
                    format!("{}_lvl{depth}_found", self.tensors[t].name),
                    ScalarType::Bool,
                );
                Looplet::Lookup(Rc::new(move |i: KExpr| {
                    let target = KExpr::bin(Op::Sub, i, KExpr::int(1));
                    let hit = match start(l(r)) {
                        Some(s) => KExpr::bin(Op::Le, s, target.clone()),
                        None => KExpr::Lit(Value::Bool(true)),
                    };
                    // A block's values are consecutive, ending at `ofs[r+1]`.
                    let at = match ofs {
                        Some(ofs) => KExpr::bin(
                            Op::Sub,
                            KExpr::bin(Op::Sub, KExpr::load(ofs, plus1(l(r))), KExpr::int(1)),
                            KExpr::bin(Op::Sub, KExpr::load(ends, l(r)), target.clone()),
                        ),
                        None => l(r),
                    };
                    Tensor::Switch {
                        pre: vec![
                            KStmt::Assign(hi, KExpr::load(ptr, plus1(pos.clone()))),
                            KStmt::Assign(
                                r,
                                KExpr::Search {
                                    buf: ends,
                                    value: Box::new(target),
                                    lo: Box::new(KExpr::load(ptr, pos.clone())),
                                    hi: Box::new(l(hi)),
                                },
                            ),
                            KStmt::Assign(found, KExpr::Lit(Value::Bool(false))),
                            KStmt::If {
                                cond: KExpr::bin(Op::Lt, l(r), l(hi)),
                                then: vec![KStmt::Assign(found, hit)],
                                otherwise: vec![],
                            },
                        ],
                        cond: l(found),
                        then: child(at),
                        otherwise: Box::new(Tensor::FillLeaf(fill)),
                    }
                }))
            }
            other => {
                return Err(Error::Program(format!(
                    "internal: follow into a {} level",
                    other.name()
                )))
            }
        })
    }

    /// Rejects a read protocol the level does not support, naming both.
    fn check_protocols(&self, f: &Fiber, kind: LevelKind) -> Result<()> {
        let follow = f.protocols.follows(f.depth);
        let gallop = f.protocols.gallops(f.depth);
        let can = kind.capabilities();
        let asked = match (follow && !can.follow, gallop && !can.gallop) {
            (true, _) => "follow",
            (_, true) => "gallop",
            _ => return Ok(()),
        };
        let supported = can.protocols();
        Err(Error::Unsupported(format!(
            "the {} level of `{}` (mode {}) does not support the {asked} protocol; it supports {}",
            kind.name(),
            self.tensors[f.tensor].name,
            self.tensors[f.tensor].format.ndims() - f.depth,
            supported.join(", ")
        )))
    }

    /// A fresh `i64` local named after the level.
    pub(super) fn level_local(
        &mut self,
        t: usize,
        depth: usize,
        what: &str,
    ) -> crate::kernel::LocalId {
        let name = format!("{}_lvl{depth}_{what}", self.tensors[t].name);
        self.kernel.local(name, ScalarType::I64)
    }

    /// The looplets of the structured levels (finch-language-and-levels.md §4).
    fn unfurl_structured(
        &mut self,
        f: &Fiber,
        kind: LevelKind,
        shape: crate::kernel::LocalId,
        bufs: &[crate::kernel::BufId],
        present: Option<&KExpr>,
    ) -> Result<Looplet> {
        let (t, depth, pos, protocols) = (f.tensor, f.depth + 1, f.pos.clone(), f.protocols);
        let fill = self.fill_of(t);
        let l = KExpr::Local;
        // Under a present condition (see `unfurl_present`) the fiber's bounds are read only
        // where it holds; elsewhere `empty` sets them to a fiber with no entries.
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
        let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
        let minus1 = |e: KExpr| KExpr::bin(Op::Sub, e, KExpr::int(1));
        let child = move |q: KExpr| {
            Tensor::Fiber(Fiber {
                tensor: t,
                depth,
                pos: q,
                end: None,
                hollow: None,
                protocols,
            })
        };
        let fill_run = || Looplet::Run(Box::new(Tensor::FillLeaf(fill)));
        let buf = |k: usize| {
            bufs.get(k).copied().ok_or_else(|| {
                Error::Program(format!(
                    "internal: {} level without buffer {k}",
                    kind.name()
                ))
            })
        };
        let follow = f.protocols.follows(f.depth);
        let gallop = f.protocols.gallops(f.depth);
        if follow && kind != LevelKind::SparseByteMap && kind != LevelKind::SparseHash {
            return self.structured_follow(f, kind, bufs);
        }
        Ok(match kind {
            // One index `i` per fiber (`shape` when empty): fill, the child at `i`, fill.
            LevelKind::SparsePoint => {
                let i = self.level_local(t, depth, "i");
                // An empty fiber stores index `shape` (0-based): past every index.
                Looplet::Thunk {
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
                }
            }
            // One run `left..=right` of one child: fill, the child repeated, fill.
            LevelKind::SparseInterval => {
                let (lo, hi) = (
                    self.level_local(t, depth, "left"),
                    self.level_local(t, depth, "right"),
                );
                Looplet::Thunk {
                    preamble: bounds_where(
                        vec![
                            KStmt::Assign(lo, plus1(KExpr::load(buf(0)?, pos.clone()))),
                            KStmt::Assign(hi, plus1(KExpr::load(buf(1)?, pos.clone()))),
                        ],
                        vec![
                            KStmt::Assign(lo, KExpr::int(1)),
                            KStmt::Assign(hi, KExpr::int(0)),
                        ],
                    ),
                    body: Box::new(Looplet::Sequence(vec![
                        (Some(minus1(l(lo))), fill_run()),
                        (Some(l(hi)), Looplet::Run(Box::new(child(pos)))),
                        (None, fill_run()),
                    ])),
                    epilogue: vec![],
                }
            }
            // One block `first..=last` with consecutive child positions: fill, random
            // access into the block, fill.
            LevelKind::SparseBand => {
                let (idx, ofs) = (buf(0)?, buf(1)?);
                let q1 = self.level_local(t, depth, "q_stop");
                let last = self.level_local(t, depth, "last");
                let before = self.level_local(t, depth, "before");
                let width = KExpr::bin(Op::Sub, l(q1), KExpr::load(ofs, pos.clone()));
                // `0 <= before <= last <= shape`: a block lies in the level (I3), and the
                // clamp holds an empty fiber's `last` (I4 allows `shape + 1`) in it too. So
                // over the level's whole extent the phases need no clamping of their own.
                self.at_most
                    .extend([(last, shape), (before, last), (super::bounds::ZERO, before)]);
                Looplet::Thunk {
                    preamble: bounds_where(
                        vec![
                            KStmt::Assign(q1, KExpr::load(ofs, plus1(pos.clone()))),
                            KStmt::Assign(
                                last,
                                KExpr::Op(Op::Min, vec![plus1(KExpr::load(idx, pos)), l(shape)]),
                            ),
                            KStmt::Assign(before, KExpr::bin(Op::Sub, l(last), width)),
                        ],
                        zeros(&[q1, last, before]),
                    ),
                    body: Box::new(Looplet::Sequence(vec![
                        (Some(l(before)), fill_run()),
                        (
                            Some(l(last)),
                            Looplet::Lookup(Rc::new(move |i: KExpr| {
                                // child(q_stop - 1 - (last - i))
                                child(KExpr::bin(
                                    Op::Add,
                                    KExpr::bin(Op::Sub, minus1(l(q1)), l(last)),
                                    i,
                                ))
                            })),
                        ),
                        (None, fill_run()),
                    ])),
                    epilogue: vec![],
                }
            }
            // Runs tiling the fiber: a stepper over runs, each a Run of its child.
            // Under a present condition (see `unfurl_present`), a fiber where it fails is
            // one run of fill over the whole dimension: its runs are read only where it
            // holds.
            LevelKind::RunList => {
                let (ptr, right) = (buf(0)?, buf(1)?);
                let q = self.level_local(t, depth, "q");
                let q_stop = self.level_local(t, depth, "q_stop");
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
                Looplet::Thunk {
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
                }
            }
            // Sparse runs: a stepper over runs, each fill before `left` then its child.
            LevelKind::SparseRunList => {
                let (ptr, left, right) = (buf(0)?, buf(1)?, buf(2)?);
                let q = self.level_local(t, depth, "q");
                let q_stop = self.level_local(t, depth, "q_stop");
                let i_last = self.level_local(t, depth, "i_last");
                self.at_most.push((i_last, shape));
                let stepper = Stepper {
                    seek: Box::new(seek_on(q, q_stop, right)),
                    preamble: vec![],
                    stop: plus1(KExpr::load(right, l(q))),
                    chunk: Looplet::Sequence(vec![
                        (Some(KExpr::load(left, l(q))), fill_run()),
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
                Looplet::Thunk {
                    preamble: bounds_where(
                        fiber_bounds(ptr, right, pos, q, q_stop, i_last),
                        zeros(&[q, q_stop, i_last]),
                    ),
                    body: Box::new(Looplet::Sequence(vec![
                        (Some(l(i_last)), walker(stepper, gallop)),
                        (None, fill_run()),
                    ])),
                    epilogue: vec![],
                }
            }
            // Blocks: a stepper (or jumper) over blocks, each fill before its first index
            // then random access into its consecutive child positions.
            LevelKind::SparseBlockList => {
                let (ptr, idx, ofs) = (buf(0)?, buf(1)?, buf(2)?);
                let r = self.level_local(t, depth, "r");
                let r_stop = self.level_local(t, depth, "r_stop");
                let i_last = self.level_local(t, depth, "i_last");
                self.at_most.push((i_last, shape));
                let b_last = self.level_local(t, depth, "block_last");
                let b_end = self.level_local(t, depth, "block_q_stop");
                let b_first = self.level_local(t, depth, "block_first");
                // A block is never empty: its first index is at most its last.
                self.at_most.push((b_first, b_last));
                let stepper = Stepper {
                    seek: Box::new(seek_on(r, r_stop, idx)),
                    preamble: vec![
                        KStmt::Assign(b_last, plus1(KExpr::load(idx, l(r)))),
                        KStmt::Assign(b_end, KExpr::load(ofs, plus1(l(r)))),
                        KStmt::Assign(
                            b_first,
                            plus1(KExpr::bin(
                                Op::Sub,
                                l(b_last),
                                KExpr::bin(Op::Sub, l(b_end), KExpr::load(ofs, l(r))),
                            )),
                        ),
                    ],
                    stop: l(b_last),
                    chunk: Looplet::Sequence(vec![
                        (Some(minus1(l(b_first))), fill_run()),
                        (
                            None,
                            Looplet::Lookup(Rc::new(move |j: KExpr| {
                                child(KExpr::bin(
                                    Op::Add,
                                    KExpr::bin(Op::Sub, minus1(l(b_end)), l(b_last)),
                                    j,
                                ))
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
                Looplet::Thunk {
                    preamble: bounds_where(
                        fiber_bounds(ptr, idx, pos, r, r_stop, i_last),
                        zeros(&[r, r_stop, i_last]),
                    ),
                    body: Box::new(Looplet::Sequence(vec![
                        (Some(l(i_last)), walker(stepper, gallop)),
                        (None, fill_run()),
                    ])),
                    epilogue: vec![],
                }
            }
            // A sorted list of set indices over dense child positions `pos·shape + i`.
            LevelKind::SparseByteMap => {
                let (ptr, tbl, srt) = (buf(0)?, buf(1)?, buf(2)?);
                let base = KExpr::bin(Op::Mul, pos.clone(), l(shape));
                if f.protocols.follows(f.depth) {
                    // follow: the flag decides between the child and fill.
                    return Ok(Looplet::Lookup(Rc::new(move |i: KExpr| {
                        let q = KExpr::bin(Op::Add, base.clone(), minus1(i));
                        Tensor::Switch {
                            pre: vec![],
                            cond: KExpr::load(tbl, q.clone()),
                            then: Box::new(child(q)),
                            otherwise: Box::new(Tensor::FillLeaf(fill)),
                        }
                    })));
                }
                let child_of: ChildOf =
                    Rc::new(move |q| KExpr::bin(Op::Add, base.clone(), KExpr::load(srt, q)));
                let list = SortedList {
                    entries: Entries::of_fiber(ptr, present),
                    idx: srt,
                    child_of,
                    shape,
                    runs: false,
                };
                self.sorted_walk(t, depth, f.pos.clone(), protocols, list, gallop)
            }
            // Sorted entries with a child position each.
            LevelKind::SparseHash => {
                let (ptr, idx, posbuf) = (buf(0)?, buf(1)?, buf(2)?);
                let child_of: ChildOf = Rc::new(move |q| KExpr::load(posbuf, q));
                let list = SortedList {
                    entries: Entries::of_fiber(ptr, present),
                    idx,
                    child_of,
                    shape,
                    runs: false,
                };
                self.sorted_read(f, list)
            }
            LevelKind::Dense | LevelKind::SparseList | LevelKind::SparseCoo(_) => {
                return Err(Error::Program(format!(
                    "internal: {} is not a structured level",
                    kind.name()
                )))
            }
        })
    }

    /// A sorted list read by the protocol the access asks: follow (binary search), gallop
    /// or walk.
    pub(super) fn sorted_read(&mut self, f: &Fiber, list: SortedList) -> Looplet {
        let (t, depth, pos, protocols) = (f.tensor, f.depth + 1, f.pos.clone(), f.protocols);
        if f.protocols.follows(f.depth) {
            self.sorted_follow(t, depth, pos, protocols, list)
        } else {
            let gallop = f.protocols.gallops(f.depth);
            self.sorted_walk(t, depth, pos, protocols, list, gallop)
        }
    }

    /// Walk (or gallop) over a sorted index list: `Thunk(q = ptr[p]; q_stop = ptr[p+1];
    /// i_last) -> Sequence(Phase(stop = i_last, Stepper(Spike(fill, child(q)))),
    /// Phase(Run(fill)))`.
    pub(super) fn sorted_walk(
        &mut self,
        t: usize,
        depth: usize,
        pos: KExpr,
        protocols: crate::looplets::Protocols,
        list: SortedList,
        gallop: bool,
    ) -> Looplet {
        let fill = self.fill_of(t);
        let q = self.level_local(t, depth, "q");
        let q_stop = self.level_local(t, depth, "q_stop");
        let i_last = self.level_local(t, depth, "i_last");
        let i_cur = self.level_local(t, depth, "i");
        let l = KExpr::Local;
        let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
        let SortedList {
            entries,
            idx,
            child_of,
            shape,
            runs,
        } = list;
        // 1-based, the last stored index is at most the size (a stored index is below it).
        self.at_most.push((i_last, shape));
        let mut preamble = vec![KStmt::Assign(i_cur, plus1(KExpr::load(idx, l(q))))];
        // A run of equal indices ends at `r`: scan forward from `q` (runs are short).
        let run_end = runs.then(|| self.level_local(t, depth, "run_end"));
        if let Some(r) = run_end {
            preamble.push(KStmt::Assign(r, plus1(l(q))));
            preamble.push(KStmt::While {
                cond: KExpr::bin(Op::Lt, l(r), l(q_stop)),
                body: vec![
                    KStmt::If {
                        cond: KExpr::bin(Op::Ne, KExpr::load(idx, l(r)), KExpr::load(idx, l(q))),
                        then: vec![KStmt::Break],
                        otherwise: vec![],
                    },
                    KStmt::Assign(r, plus1(l(r))),
                ],
            });
        }
        let stepper = Stepper {
            seek: Box::new(seek_on(q, q_stop, idx)),
            preamble,
            stop: l(i_cur),
            chunk: Looplet::Spike {
                body: Box::new(Tensor::FillLeaf(fill)),
                tail: Box::new(Tensor::Fiber(Fiber {
                    tensor: t,
                    depth,
                    pos: child_of(l(q)),
                    end: run_end.map(l),
                    hollow: None,
                    protocols,
                })),
            },
            next: vec![KStmt::Assign(q, run_end.map_or_else(|| plus1(l(q)), l))],
            counted: Some(Counted {
                more: KExpr::bin(Op::Lt, l(q), l(q_stop)),
                last: l(i_last),
                first: None,
            }),
            outside: None,
        };
        let walker = if gallop {
            Looplet::Jumper(Rc::new(stepper))
        } else {
            Looplet::Stepper(Rc::new(stepper))
        };
        let preamble = match entries {
            Entries::Until(end) => entry_bounds(pos, end, idx, q, q_stop, i_last),
            Entries::Fiber(ptr) => fiber_bounds(ptr, idx, pos, q, q_stop, i_last),
            Entries::FiberWhere(ptr, present) => where_present(
                Some(&present),
                fiber_bounds(ptr, idx, pos, q, q_stop, i_last),
                zeros(&[q, q_stop, i_last]),
            ),
        };
        Looplet::Thunk {
            epilogue: vec![],
            preamble,
            body: Box::new(Looplet::Sequence(vec![
                (Some(l(i_last)), walker),
                (None, Looplet::Run(Box::new(Tensor::FillLeaf(fill)))),
            ])),
        }
    }

    /// Follow (random access) into a sorted index list by binary search; a miss reads fill.
    pub(super) fn sorted_follow(
        &mut self,
        t: usize,
        depth: usize,
        pos: KExpr,
        protocols: crate::looplets::Protocols,
        list: SortedList,
    ) -> Looplet {
        let fill = self.fill_of(t);
        let name = self.tensors[t].name.clone();
        let r = self.level_local(t, depth, "r");
        let found = self
            .kernel
            .local(format!("{name}_lvl{depth}_found"), ScalarType::Bool);
        let hi = self.level_local(t, depth, "q_stop");
        let l = KExpr::Local;
        let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
        let SortedList {
            entries,
            idx,
            child_of,
            runs,
            ..
        } = list;
        let run_end = runs.then(|| self.level_local(t, depth, "run_end"));
        Looplet::Lookup(Rc::new(move |i: KExpr| {
            let target = KExpr::bin(Op::Sub, i, KExpr::int(1));
            let (lo, stop) = match &entries {
                Entries::Until(end) => (pos.clone(), end.clone()),
                Entries::Fiber(ptr) => (
                    KExpr::load(*ptr, pos.clone()),
                    KExpr::load(*ptr, plus1(pos.clone())),
                ),
                Entries::FiberWhere(ptr, present) => {
                    let or_none =
                        |e: KExpr| KExpr::Op(Op::IfElse, vec![present.clone(), e, KExpr::int(0)]);
                    (
                        or_none(KExpr::load(*ptr, pos.clone())),
                        or_none(KExpr::load(*ptr, plus1(pos.clone()))),
                    )
                }
            };
            let mut matched = vec![KStmt::Assign(
                found,
                KExpr::bin(Op::Eq, KExpr::load(idx, l(r)), target.clone()),
            )];
            // The run of entries equal to the target ends at the first greater one.
            if let Some(run_end) = run_end {
                matched.push(KStmt::Assign(
                    run_end,
                    KExpr::Search {
                        buf: idx,
                        value: Box::new(plus1(target.clone())),
                        lo: Box::new(l(r)),
                        hi: Box::new(l(hi)),
                    },
                ));
            }
            Tensor::Switch {
                pre: vec![
                    KStmt::Assign(hi, stop),
                    KStmt::Assign(
                        r,
                        KExpr::Search {
                            buf: idx,
                            value: Box::new(target),
                            lo: Box::new(lo),
                            hi: Box::new(l(hi)),
                        },
                    ),
                    KStmt::Assign(found, KExpr::Lit(Value::Bool(false))),
                    KStmt::If {
                        cond: KExpr::bin(Op::Lt, l(r), l(hi)),
                        then: matched,
                        otherwise: vec![],
                    },
                ],
                cond: l(found),
                then: Box::new(Tensor::Fiber(Fiber {
                    tensor: t,
                    depth,
                    pos: child_of(l(r)),
                    end: run_end.map(l),
                    hollow: None,
                    protocols,
                })),
                otherwise: Box::new(Tensor::FillLeaf(fill)),
            }
        }))
    }
}

/// The sorted entries of mode `mode` (of `modes`) of a SparseCOO level for fiber `f`: the
/// first mode's fiber `ptr[p] .. ptr[p+1]` (where `present` holds, if given), a later
/// mode's run of tuples sharing the outer coordinates.
fn coo_list(
    f: &Fiber,
    name: &str,
    [shape]: [crate::kernel::LocalId; 1],
    [ptr]: [crate::kernel::BufId; 1],
    tbl: &[crate::kernel::BufId],
    [mode, modes]: [usize; 2],
    present: Option<&KExpr>,
) -> Result<SortedList> {
    // Coordinates are stored innermost mode first.
    let idx = tbl.get(modes - 1 - mode).copied().ok_or_else(|| {
        Error::Program(format!(
            "internal: `{name}` has no coordinates for mode {mode}"
        ))
    })?;
    let entries = match (mode, &f.end) {
        (0, _) => Entries::of_fiber(ptr, present),
        (_, Some(end)) => Entries::Until(end.clone()),
        (_, None) => {
            return Err(Error::Program(format!(
                "internal: mode {} of `{name}`'s SparseCOO level reached without its run of tuples",
                mode + 1
            )))
        }
    };
    Ok(SortedList {
        entries,
        idx,
        child_of: Rc::new(|q| q),
        shape,
        runs: mode + 1 < modes,
    })
}

/// `code` where `present` holds (if given), `otherwise` where it does not.
fn where_present(present: Option<&KExpr>, code: Vec<KStmt>, otherwise: Vec<KStmt>) -> Vec<KStmt> {
    match present {
        Some(cond) => vec![KStmt::If {
            cond: cond.clone(),
            then: code,
            otherwise,
        }],
        None => code,
    }
}

/// Sets each of `xs` to 0 (the bounds of a fiber with no entries).
fn zeros(xs: &[crate::kernel::LocalId]) -> Vec<KStmt> {
    xs.iter()
        .map(|x| KStmt::Assign(*x, KExpr::int(0)))
        .collect()
}

/// Element `t` of a level read where `present` holds, `fill` where it does not: a subfiber
/// becomes a [`Tensor::Present`]; a search's result (a [`Tensor::Switch`] on a hit) runs
/// its search, and counts its hit, only where `present` holds; anything else not the fill
/// is a Switch on `present`.
pub(super) fn present_where(t: Tensor, present: &KExpr, fill: Value) -> Tensor {
    match t {
        Tensor::Switch {
            pre,
            cond,
            then,
            otherwise,
        } => Tensor::Switch {
            pre: match pre.is_empty() {
                true => pre,
                false => vec![KStmt::If {
                    cond: present.clone(),
                    then: pre,
                    otherwise: vec![],
                }],
            },
            cond: KExpr::Op(
                Op::IfElse,
                vec![present.clone(), cond, KExpr::Lit(Value::Bool(false))],
            ),
            then,
            otherwise,
        },
        Tensor::Fiber(fiber) => Tensor::Present {
            cond: present.clone(),
            fiber,
            fill,
        },
        // Present where both hold (a shifted read of a Dense level, itself read where a
        // shifted read of its parent is inside the parent's level).
        Tensor::Present {
            cond,
            fiber,
            fill: inner,
        } if inner == fill => Tensor::Present {
            cond: KExpr::Op(Op::And, vec![present.clone(), cond]),
            fiber,
            fill,
        },
        Tensor::FillLeaf(v) if v == fill => Tensor::FillLeaf(v),
        other => Tensor::Switch {
            pre: vec![],
            cond: present.clone(),
            then: Box::new(other),
            otherwise: Box::new(Tensor::FillLeaf(fill)),
        },
    }
}

/// `pos·shape + i - 1`: the child position of index `i` of fiber `pos` when every index
/// has one (Dense levels, and the modes above the last of written SparseCOO and
/// SparseHash levels).
pub(super) fn linear_position(
    pos: KExpr,
    shape: crate::kernel::LocalId,
) -> impl Fn(KExpr) -> KExpr {
    move |i: KExpr| {
        KExpr::bin(
            Op::Add,
            KExpr::bin(Op::Mul, pos.clone(), KExpr::Local(shape)),
            KExpr::bin(Op::Sub, i, KExpr::int(1)),
        )
    }
}

/// `Lookup(i -> child(pos·shape + i - 1))`: the looplet of a Dense level of fiber `f`.
pub(super) fn dense_lookup(f: &Fiber, shape: crate::kernel::LocalId) -> Looplet {
    let (tensor, depth, protocols) = (f.tensor, f.depth + 1, f.protocols);
    let linear = linear_position(f.pos.clone(), shape);
    Looplet::Lookup(Rc::new(move |i: KExpr| {
        Tensor::Fiber(Fiber {
            tensor,
            depth,
            pos: linear(i),
            end: None,
            hollow: None,
            protocols,
        })
    }))
}

/// A stepper over a level's entries, or a jumper when the access asks to gallop.
fn walker(stepper: Stepper, gallop: bool) -> Looplet {
    if gallop {
        Looplet::Jumper(Rc::new(stepper))
    } else {
        Looplet::Stepper(Rc::new(stepper))
    }
}

/// A stepper's seek: code that moves it to the child holding a start index.
type SeekCode = Box<dyn Fn(KExpr) -> Vec<KStmt>>;

/// Maps a list entry's position to its child position.
pub(super) type ChildOf = Rc<dyn Fn(KExpr) -> KExpr>;

/// A sorted per-fiber list: `ptr` over `idx`, children by `child_of(q)`.
pub(super) struct SortedList {
    pub(super) entries: Entries,
    pub(super) idx: crate::kernel::BufId,
    pub(super) child_of: ChildOf,
    /// The level's size: every stored index is below it (the level's invariants).
    pub(super) shape: crate::kernel::LocalId,
    /// For a SparseCOO mode above its last: entries with equal indices (nondecreasing
    /// here) form one child, the run `q .. r` handed down as a fiber with an `end`.
    pub(super) runs: bool,
}

impl SortedList {
    /// A SparseList level's entries: `ptr` over `idx`, each its own child position.
    fn of_list(
        ptr: crate::kernel::BufId,
        idx: crate::kernel::BufId,
        shape: crate::kernel::LocalId,
    ) -> SortedList {
        SortedList {
            entries: Entries::Fiber(ptr),
            idx,
            child_of: Rc::new(|q| q),
            shape,
            runs: false,
        }
    }
}

/// Where a sorted list's entries for fiber `pos` lie.
pub(super) enum Entries {
    /// `ptr[pos] .. ptr[pos+1]`.
    Fiber(crate::kernel::BufId),
    /// `pos .. end` (a SparseCOO mode below its first; a hash group read back).
    Until(KExpr),
    /// `ptr[pos] .. ptr[pos+1]` where the condition holds, none where it does not (a
    /// [`Tensor::Present`] fiber).
    FiberWhere(crate::kernel::BufId, KExpr),
}

impl Entries {
    /// `ptr[pos] .. ptr[pos+1]`, where `present` holds if given.
    fn of_fiber(ptr: crate::kernel::BufId, present: Option<&KExpr>) -> Entries {
        match present {
            Some(cond) => Entries::FiberWhere(ptr, cond.clone()),
            None => Entries::Fiber(ptr),
        }
    }
}

/// `q = ptr[p]; q_stop = ptr[p+1]; i_last = last[q_stop - 1] + 1` (or 0 for an empty
/// fiber), where `last[q]` is entry `q`'s last 0-based index.
fn fiber_bounds(
    ptr: crate::kernel::BufId,
    last: crate::kernel::BufId,
    pos: KExpr,
    q: crate::kernel::LocalId,
    q_stop: crate::kernel::LocalId,
    i_last: crate::kernel::LocalId,
) -> Vec<KStmt> {
    let first = KExpr::load(ptr, pos.clone());
    let stop = KExpr::load(ptr, KExpr::bin(Op::Add, pos, KExpr::int(1)));
    entry_bounds(first, stop, last, q, q_stop, i_last)
}

/// `q = first; q_stop = stop; i_last = last[q_stop - 1] + 1` (or 0 when there are no
/// entries), where `last[q]` is entry `q`'s last 0-based index.
fn entry_bounds(
    first: KExpr,
    stop: KExpr,
    last: crate::kernel::BufId,
    q: crate::kernel::LocalId,
    q_stop: crate::kernel::LocalId,
    i_last: crate::kernel::LocalId,
) -> Vec<KStmt> {
    let l = KExpr::Local;
    let plus1 = |e: KExpr| KExpr::bin(Op::Add, e, KExpr::int(1));
    vec![
        KStmt::Assign(q, first),
        KStmt::Assign(q_stop, stop),
        KStmt::If {
            cond: KExpr::bin(Op::Lt, l(q), l(q_stop)),
            then: vec![KStmt::Assign(
                i_last,
                plus1(KExpr::load(
                    last,
                    KExpr::bin(Op::Sub, l(q_stop), KExpr::int(1)),
                )),
            )],
            otherwise: vec![KStmt::Assign(i_last, KExpr::int(0))],
        },
    ]
}

/// Seek for a stepper over entries `q ..< q_stop` whose last 0-based indices `last[q]`
/// increase: when the entry at `q` ends before `start`, binary-search the first that
/// does not (one comparison when the cursor is already in place).
fn seek_on(
    q: crate::kernel::LocalId,
    q_stop: crate::kernel::LocalId,
    last: crate::kernel::BufId,
) -> impl Fn(KExpr) -> Vec<KStmt> {
    move |start: KExpr| {
        // Stored indices are at least 1, so seeking index 1 never moves the cursor.
        if start == KExpr::int(1) {
            return vec![];
        }
        let l = KExpr::Local;
        vec![KStmt::If {
            cond: KExpr::bin(Op::Lt, l(q), l(q_stop)),
            then: vec![KStmt::If {
                cond: KExpr::bin(
                    Op::Lt,
                    KExpr::bin(Op::Add, KExpr::load(last, l(q)), KExpr::int(1)),
                    start.clone(),
                ),
                then: vec![KStmt::Assign(
                    q,
                    KExpr::Search {
                        buf: last,
                        value: Box::new(KExpr::bin(Op::Sub, start, KExpr::int(1))),
                        lo: Box::new(l(q)),
                        hi: Box::new(l(q_stop)),
                    },
                )],
                otherwise: vec![],
            }],
            otherwise: vec![],
        }]
    }
}

/// Grows a buffer (doubling, at least to `need`) when `need` exceeds its length; new
/// elements are `fill`.
pub(super) fn grow_to(buf: crate::kernel::BufId, need: KExpr, fill: Value) -> KStmt {
    KStmt::If {
        cond: KExpr::bin(Op::Gt, need.clone(), KExpr::Len(buf)),
        then: vec![KStmt::Resize {
            buf,
            len: KExpr::Op(
                Op::Max,
                vec![KExpr::bin(Op::Mul, KExpr::Len(buf), KExpr::int(2)), need],
            ),
            fill,
        }],
        otherwise: vec![],
    }
}

/// Whether `value` is not the fill `fill`, as the reference decides what to store
/// ([`Value::same`]: `-0.0` is the fill `0.0`, and `NaN` the fill `NaN`).
fn not_fill(value: KExpr, fill: Value) -> KExpr {
    if fill.as_f64().is_some_and(f64::is_nan) {
        KExpr::bin(Op::Eq, value.clone(), value)
    } else {
        KExpr::bin(Op::Ne, value, KExpr::Lit(fill))
    }
}
