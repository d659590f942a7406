//! Written levels read as the kernel writes them, handing out positions and claiming them
//! on the first write: the write sides shared by several levels (a list written in order,
//! for SparseList and SparseCOO; runs, for RunList and SparseRunList, and their read-back
//! as a workspace). The other levels' write sides are in their modules' `lowering`.

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
