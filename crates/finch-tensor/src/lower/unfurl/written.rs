//! Written levels read as the kernel writes them: each output level's write side
//! (SparseList, SparseBlockList, run-length, SparseInterval, SparseBand, SparseByteMap,
//! SparsePoint)
//! handing out positions and claiming them on the first write.

use super::*;
use crate::kernel::{BufId, LocalId};

impl Lowerer {
    /// A SparseList level written in order (extrude), or one mode of a SparseCOO level
    /// (`coo = Some((mode, modes))`). The first write of an index claims position `qos`
    /// (growing the buffers by doubling when full, starting the value from the declared
    /// initial value); after the index's statements a written index is recorded in `idx`:
    /// its 0-based index for SparseList, its linear position over every mode down to here
    /// for SparseCOO (split into coordinates at freeze). The first mode counts the fiber's
    /// entries into `ptr[p + 1]`; SparseCOO modes above the last hand the linear position
    /// down, as Dense levels do.
    pub(in crate::lower) fn unfurl_list_out(
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
        let start = self.level_local(t, depth, "qos_start");
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

    /// A written SparseBlockList: each written index appends its value at `qos`; one that
    /// does not follow the fiber's last written index opens a new block (growing `idx`
    /// and `ofs` by doubling). After each written index the current block's last index and
    /// end are updated; after the fiber, its block count is stored. An index at or before
    /// the last one written sets `conflict`.
    pub(in crate::lower) fn unfurl_block_list_out(
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

    /// A written RunList or SparseRunList (AcceptRun): a run `lo..=hi` written at once
    /// gets the child position `qos` (grown by doubling, starting from the fill); after its
    /// statements a written run is recorded. A RunList first closes any gap since the
    /// fiber's last covered index with a fill run, and after the fiber a final fill run
    /// reaches the end, so its runs tile the fiber. A run starting at or before the last
    /// covered index sets `conflict`.
    pub(in crate::lower) fn unfurl_runs_out(
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
    pub(in crate::lower) fn unwritten_runs_as_one(
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

    /// A written SparseInterval (AcceptRun): a run's value goes to a scratch slot (the
    /// value slot after the last fiber's); after the run, an empty fiber takes it as its
    /// interval, a touching run of the same value extends the interval, and any other run
    /// sets `conflict`. Values equal to the fill at run time are not written, and a run
    /// whose value ends up the fill is not recorded.
    pub(in crate::lower) fn unfurl_interval_out(
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

    /// A written SparseBand: the fiber's first written index fixes its origin; index `i`
    /// lands at child position `start + (i - origin)`, the buffer growing (with the fill)
    /// to reach it, so unwritten indices inside the band hold the fill. After the fiber,
    /// its last index and width are stored and the cursor moves past the band. An index
    /// at or before the last one written sets `conflict` (kept in bounds).
    pub(in crate::lower) fn unfurl_band_out(
        &mut self,
        f: &Fiber,
        [idx, ofs]: [crate::kernel::BufId; 2],
        [qos, start, origin, last, dirty, conflict]: [crate::kernel::LocalId; 6],
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let (val, init) = self.written_leaf(t, depth, "SparseBand")?;
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

    /// A written SparseByteMap (an output or a workspace). Written: random access to the
    /// dense child position `p·shape + i`; after an index's statements, a first write
    /// sets its flag and appends the position to `srt` (doubling it when full). Read back
    /// (root level only, after the writes of earlier statements): `srt` is sorted and the
    /// level is walked like any sorted list, or followed through its flags.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::lower) fn unfurl_byte_map_out(
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

    /// A SparsePoint output: every index of fiber `p` writes child position `p`; after
    /// an index's statements a write records it, and a second index is a conflict. A
    /// value that ends up the fill is not recorded (as the reference stores its result),
    /// and the position starts from the declared value again.
    pub(super) fn unfurl_point_out(
        &mut self,
        f: &Fiber,
        shape: LocalId,
        idx: BufId,
        dirty: LocalId,
        conflict: LocalId,
    ) -> Result<Looplet> {
        let (t, depth, pos) = (f.tensor, f.depth + 1, f.pos.clone());
        let name = self.tensors[t].name.clone();
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
        self.written_only(f, &name)?;
        Ok(Looplet::LookupWrite {
            body: Rc::new(move |_i: KExpr| {
                Fiber::hollow_leaf(t, depth, at.clone(), hollow.clone())
            }),
            epilogue: Rc::new(record),
        })
    }

    /// A run-length workspace read back after its writes: the one fiber bounded by the
    /// runs written so far (`qos` of them) and walked like stored runs.
    pub(super) fn unfurl_runs_read_back(
        &mut self,
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
            preamble.push(self.unwritten_runs_as_one(f, shape, ptr, right, qos)?);
        }
        let body = self.unfurl_structured(f, kind, shape, &bufs, None)?;
        Ok(Looplet::Thunk {
            preamble,
            body: Box::new(body),
            epilogue: vec![],
        })
    }
}
