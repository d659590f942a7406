//! Structured levels read (SparsePoint, SparseInterval, SparseBand, SparseBlockList,
//! RunList, SparseRunList, SparseByteMap, SparseHash): walked segment by segment, or
//! searched (`follow`).

use super::*;

impl Lowerer {
    /// Follow (random access) into a structured level: a check against the fiber's single
    /// entry, run or block (SparsePoint, SparseInterval, SparseBand), or a binary search
    /// over the sorted ends of its runs or blocks (RunList, SparseRunList,
    /// SparseBlockList); a miss reads fill.
    pub(in crate::lower) fn structured_follow(
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
        let plus1 = |e: KExpr| e + 1;
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
                    let width = end.clone() - KExpr::load(ofs, pos.clone());
                    let first = plus1(last.clone() - width);
                    Tensor::Switch {
                        pre: vec![],
                        cond: within(first, i.clone(), last.clone()),
                        then: child((end - one()) - (last - i)),
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
                                    let width = KExpr::load(ofs, r.clone() + 1)
                                        - KExpr::load(ofs, r.clone());
                                    Some((KExpr::load(idx, r) - width) + 1)
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
                    let target = i - 1;
                    let hit = match start(l(r)) {
                        Some(s) => KExpr::bin(Op::Le, s, target.clone()),
                        None => KExpr::Lit(Value::Bool(true)),
                    };
                    // A block's values are consecutive, ending at `ofs[r+1]`.
                    let at = match ofs {
                        Some(ofs) => {
                            (KExpr::load(ofs, plus1(l(r))) - 1)
                                - (KExpr::load(ends, l(r)) - target.clone())
                        }
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

    /// The looplets of the structured levels (finch-language-and-levels.md §4).
    pub(in crate::lower) fn unfurl_structured(
        &mut self,
        f: &Fiber,
        kind: LevelKind,
        shape: crate::kernel::LocalId,
        bufs: &[crate::kernel::BufId],
        present: Option<&KExpr>,
    ) -> Result<Looplet> {
        let follow = f.protocols.follows(f.depth);
        if follow && kind != LevelKind::SparseByteMap && kind != LevelKind::SparseHash {
            return self.structured_follow(f, kind, bufs);
        }
        let cx = StructuredFiber {
            fiber: f,
            tensor: f.tensor,
            depth: f.depth + 1,
            pos: f.pos.clone(),
            fill: self.fill_of(f.tensor),
            kind,
            shape,
            bufs,
            present,
            gallop: f.protocols.gallops(f.depth),
        };
        Ok(match kind {
            LevelKind::SparsePoint => self.unfurl_sparse_point(&cx)?,
            LevelKind::SparseInterval => self.unfurl_sparse_interval(&cx)?,
            LevelKind::SparseBand => self.unfurl_sparse_band(&cx)?,
            LevelKind::RunList => self.unfurl_run_list(&cx)?,
            LevelKind::SparseRunList => self.unfurl_sparse_run_list(&cx)?,
            LevelKind::SparseBlockList => self.unfurl_sparse_block_list(&cx)?,
            LevelKind::SparseByteMap => self.unfurl_sparse_byte_map(&cx)?,
            LevelKind::SparseHash => self.unfurl_sparse_hash(&cx)?,
            LevelKind::Dense | LevelKind::SparseList | LevelKind::SparseCoo(_) => {
                return Err(Error::Program(format!(
                    "internal: {} is not a structured level",
                    kind.name()
                )))
            }
        })
    }

    /// One index `i` per fiber (`shape` when empty): fill, the child at `i`, fill.
    fn unfurl_sparse_point(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let fill_run = || cx.fill_run();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
        let i = self.level_local(t, depth, "i");
        // An empty fiber stores index `shape` (0-based): past every index.
        Ok(Looplet::Thunk {
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
        })
    }

    /// One run `left..=right` of one child: fill, the child repeated, fill.
    fn unfurl_sparse_interval(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let fill_run = || cx.fill_run();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
        let (lo, hi) = (
            self.level_local(t, depth, "left"),
            self.level_local(t, depth, "right"),
        );
        Ok(Looplet::Thunk {
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
        })
    }

    /// One block `first..=last` with consecutive child positions: fill, random
    /// access into the block, fill.
    fn unfurl_sparse_band(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let fill_run = || cx.fill_run();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
        let (idx, ofs) = (buf(0)?, buf(1)?);
        let q1 = self.level_local(t, depth, "q_stop");
        let last = self.level_local(t, depth, "last");
        let before = self.level_local(t, depth, "before");
        let width = l(q1) - KExpr::load(ofs, pos.clone());
        // `0 <= before <= last <= shape`: a block lies in the level (I3), and the
        // clamp holds an empty fiber's `last` (I4 allows `shape + 1`) in it too. So
        // over the level's whole extent the phases need no clamping of their own.
        self.at_most.extend([
            (last, shape),
            (before, last),
            (crate::lower::bounds::ZERO, before),
        ]);
        Ok(Looplet::Thunk {
            preamble: bounds_where(
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
                (Some(l(before)), fill_run()),
                (
                    Some(l(last)),
                    Looplet::Lookup(Rc::new(move |i: KExpr| {
                        // child(q_stop - 1 - (last - i))
                        child((minus1(l(q1)) - l(last)) + i)
                    })),
                ),
                (None, fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Runs tiling the fiber: a stepper over runs, each a Run of its child.
    /// Under a present condition (see `unfurl_present`), a fiber where it fails is
    /// one run of fill over the whole dimension: its runs are read only where it
    /// holds.
    fn unfurl_run_list(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let gallop = cx.gallop;
        let fill = cx.fill;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
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
        Ok(Looplet::Thunk {
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
        })
    }

    /// Sparse runs: a stepper over runs, each fill before `left` then its child.
    fn unfurl_sparse_run_list(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let gallop = cx.gallop;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let fill_run = || cx.fill_run();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
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
        Ok(Looplet::Thunk {
            preamble: bounds_where(
                fiber_bounds(ptr, right, pos, q, q_stop, i_last),
                zeros(&[q, q_stop, i_last]),
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(l(i_last)), walker(stepper, gallop)),
                (None, fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// Blocks: a stepper (or jumper) over blocks, each fill before its first index
    /// then random access into its consecutive child positions.
    fn unfurl_sparse_block_list(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let t = cx.tensor;
        let depth = cx.depth;
        let pos = cx.pos.clone();
        let shape = cx.shape;
        let gallop = cx.gallop;
        let present = cx.present;
        let l = KExpr::Local;
        let child = cx.child();
        let fill_run = || cx.fill_run();
        let buf = |k: usize| cx.buf(k);
        let bounds_where =
            |preamble: Vec<KStmt>, empty: Vec<KStmt>| where_present(present, preamble, empty);
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
                    plus1(l(b_last) - (l(b_end) - KExpr::load(ofs, l(r)))),
                ),
            ],
            stop: l(b_last),
            chunk: Looplet::Sequence(vec![
                (Some(minus1(l(b_first))), fill_run()),
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
            preamble: bounds_where(
                fiber_bounds(ptr, idx, pos, r, r_stop, i_last),
                zeros(&[r, r_stop, i_last]),
            ),
            body: Box::new(Looplet::Sequence(vec![
                (Some(l(i_last)), walker(stepper, gallop)),
                (None, fill_run()),
            ])),
            epilogue: vec![],
        })
    }

    /// A sorted list of set indices over dense child positions `pos·shape + i`.
    fn unfurl_sparse_byte_map(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
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
        let buf = |k: usize| cx.buf(k);
        let (ptr, tbl, srt) = (buf(0)?, buf(1)?, buf(2)?);
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
        Ok(self.sorted_walk(t, depth, f.pos.clone(), protocols, list, gallop))
    }

    /// Sorted entries with a child position each.
    fn unfurl_sparse_hash(&mut self, cx: &StructuredFiber) -> Result<Looplet> {
        let shape = cx.shape;
        let f = cx.fiber;
        let present = cx.present;
        let buf = |k: usize| cx.buf(k);
        let (ptr, idx, posbuf) = (buf(0)?, buf(1)?, buf(2)?);
        let child_of: ChildOf = Rc::new(move |q| KExpr::load(posbuf, q));
        let list = SortedList {
            entries: Entries::of_fiber(ptr, present),
            idx,
            child_of,
            shape,
            runs: false,
        };
        Ok(self.sorted_read(f, list))
    }
}

/// One fiber of a structured level being unfurled, with what every level's rule needs.
struct StructuredFiber<'a> {
    fiber: &'a Fiber,
    tensor: usize,
    /// The depth of the fiber's children.
    depth: usize,
    pos: KExpr,
    fill: Value,
    kind: LevelKind,
    shape: crate::kernel::LocalId,
    bufs: &'a [crate::kernel::BufId],
    /// Where the fiber is present (see `unfurl_present`); elsewhere it has no entries.
    present: Option<&'a KExpr>,
    gallop: bool,
}

impl StructuredFiber<'_> {
    /// The child fiber at a position.
    fn child(&self) -> impl Fn(KExpr) -> Tensor + Copy + 'static {
        let (tensor, depth, protocols) = (self.tensor, self.depth, self.fiber.protocols);
        move |pos: KExpr| {
            Tensor::Fiber(Fiber {
                tensor,
                depth,
                pos,
                end: None,
                hollow: None,
                protocols,
            })
        }
    }

    /// A run of the fill.
    fn fill_run(&self) -> Looplet {
        Looplet::Run(Box::new(Tensor::FillLeaf(self.fill)))
    }

    /// The level's `k`-th buffer.
    fn buf(&self, k: usize) -> Result<crate::kernel::BufId> {
        self.bufs.get(k).copied().ok_or_else(|| {
            Error::Program(format!(
                "internal: {} level without buffer {k}",
                self.kind.name()
            ))
        })
    }
}

fn plus1(e: KExpr) -> KExpr {
    e + 1
}

fn minus1(e: KExpr) -> KExpr {
    e - 1
}
