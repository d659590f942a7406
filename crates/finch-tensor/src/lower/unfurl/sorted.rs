//! Sorted lists of entries (SparseList, SparseCOO, a written list read back): walked,
//! galloped or searched.

use super::*;

impl Lowerer {
    /// A sorted list read by the protocol the access asks: follow (binary search), gallop
    /// or walk.
    pub(crate) fn sorted_read(&mut self, f: &Fiber, list: SortedList) -> Looplet {
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
    pub(crate) fn sorted_walk(
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
        let plus1 = |e: KExpr| e + 1;
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
    pub(in crate::lower) fn sorted_follow(
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
        let plus1 = |e: KExpr| e + 1;
        let SortedList {
            entries,
            idx,
            child_of,
            runs,
            ..
        } = list;
        let run_end = runs.then(|| self.level_local(t, depth, "run_end"));
        Looplet::Lookup(Rc::new(move |i: KExpr| {
            let target = i - 1;
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

/// `q = ptr[p]; q_stop = ptr[p+1]; i_last = last[q_stop - 1] + 1` (or 0 for an empty
/// fiber), where `last[q]` is entry `q`'s last 0-based index.
pub(crate) fn fiber_bounds(
    ptr: crate::kernel::BufId,
    last: crate::kernel::BufId,
    pos: KExpr,
    q: crate::kernel::LocalId,
    q_stop: crate::kernel::LocalId,
    i_last: crate::kernel::LocalId,
) -> Vec<KStmt> {
    let first = KExpr::load(ptr, pos.clone());
    let stop = KExpr::load(ptr, pos + 1);
    entry_bounds(first, stop, last, q, q_stop, i_last)
}

/// `q = first; q_stop = stop; i_last = last[q_stop - 1] + 1` (or 0 when there are no
/// entries), where `last[q]` is entry `q`'s last 0-based index.
pub(in crate::lower) fn entry_bounds(
    first: KExpr,
    stop: KExpr,
    last: crate::kernel::BufId,
    q: crate::kernel::LocalId,
    q_stop: crate::kernel::LocalId,
    i_last: crate::kernel::LocalId,
) -> Vec<KStmt> {
    let l = KExpr::Local;
    let plus1 = |e: KExpr| e + 1;
    vec![
        KStmt::Assign(q, first),
        KStmt::Assign(q_stop, stop),
        KStmt::If {
            cond: KExpr::bin(Op::Lt, l(q), l(q_stop)),
            then: vec![KStmt::Assign(
                i_last,
                plus1(KExpr::load(last, l(q_stop) - 1)),
            )],
            otherwise: vec![KStmt::Assign(i_last, KExpr::int(0))],
        },
    ]
}

/// Seek for a stepper over entries `q ..< q_stop` whose last 0-based indices `last[q]`
/// increase: when the entry at `q` ends before `start`, binary-search the first that
/// does not (one comparison when the cursor is already in place).
pub(crate) fn seek_on(
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
                cond: KExpr::bin(Op::Lt, KExpr::load(last, l(q)) + 1, start.clone()),
                then: vec![KStmt::Assign(
                    q,
                    KExpr::Search {
                        buf: last,
                        value: Box::new(start - 1),
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
