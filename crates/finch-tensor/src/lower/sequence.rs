//! The Sequence rule (a loop split into phases, each lowered on its own), and terms walked
//! to the end of the extent as one stepper instead of phases that split the loop for
//! every combination of walks still running.

use super::*;

impl Lowerer {
    /// Sequence: one loop per phase of the first Sequence, each clipped to the extent and
    /// guarded against being empty; other Sequences are handled inside those loops.
    pub(super) fn rule_sequence(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let phases = self
            .looplets(&body, index)?
            .into_iter()
            .find_map(|l| match l {
                Looplet::Sequence(p) => Some(p),
                _ => None,
            })
            .ok_or_else(|| Error::Program("internal: no sequence".into()))?;
        if let Some(merged) = self.walks_to_the_end(index, &body, &lo, &hi)? {
            return self.dispatch(index, lo, hi, merged);
        }
        let guard = self.short_circuit_guard(&body);
        let mut out = Vec::new();
        let mut start = lo.clone();
        for (k, (stop, phase)) in phases.iter().enumerate() {
            let end = match stop {
                Some(s) if k + 1 < phases.len() => bounds::fold_min_max(
                    KExpr::Op(Op::Min, vec![hi.clone(), s.clone()]),
                    &self.at_most,
                ),
                _ => hi.clone(),
            };
            let next = bounds::fold_min_max(
                KExpr::Op(Op::Max, vec![lo.clone(), end.clone() + 1]),
                &self.at_most,
            );
            // A phase that ends one index after the previous one (a SparsePoint's stored
            // index) holds at most that index: lowered at it, with no loop.
            let single = k
                .checked_sub(1)
                .and_then(|j| phases[j].0.as_ref())
                .zip(stop.as_ref())
                .filter(|(prev, s)| **prev == (*s).clone() - 1)
                .filter(|_| k + 1 < phases.len())
                .map(|(_, s)| s.clone());
            // A phase the bounds prover shows empty (its start exceeds its end whatever the
            // sizes) emits nothing: e.g. the padding before index 1 of `A[~(i + 1)]`.
            if single.is_none() && bounds::provably_empty(&start, &end, &self.at_most) {
                start = next;
                continue;
            }
            let is_sequence = |l: &Looplet| matches!(l, Looplet::Sequence(_));
            let phase_body = self.replace_first(body.clone(), index, is_sequence, phase)?;
            if let Some(s) = single {
                let code = self.lower(Stmt::Loop {
                    index: index.into(),
                    lo: s.clone(),
                    hi: s.clone(),
                    body: Box::new(phase_body),
                })?;
                if !code.is_empty() {
                    let inside = KExpr::Op(
                        Op::And,
                        vec![
                            KExpr::bin(Op::Le, lo.clone(), s.clone()),
                            KExpr::bin(Op::Le, s, hi.clone()),
                        ],
                    );
                    let phase_code = vec![KStmt::If {
                        cond: inside,
                        then: code,
                        otherwise: vec![],
                    }];
                    unless_short_circuited(&mut out, &guard, phase_code);
                }
                start = next;
                continue;
            }
            let s_local = self.fresh(&format!("{index}_phase_start"), ScalarType::I64);
            let e_local = self.fresh(&format!("{index}_phase_stop"), ScalarType::I64);
            if let KExpr::Local(x) = end {
                // The phase stop is that local's value (the prover may compare with it).
                self.at_most.extend([(x, e_local), (e_local, x)]);
            }
            // A constant start stays visible to the rules below (a seek to index 1 is free).
            let phase_lo = match &start {
                KExpr::Lit(_) => start.clone(),
                _ => KExpr::Local(s_local),
            };
            let code = self.lower(Stmt::Loop {
                index: index.into(),
                lo: phase_lo,
                hi: KExpr::Local(e_local),
                body: Box::new(phase_body),
            })?;
            // Phases whose body vanished (e.g. a run of fill values) cost nothing; one the
            // prover shows non-empty (a block's indices) needs no test.
            if !code.is_empty() {
                let non_empty = bounds::provably_le(&start, &end, &self.at_most);
                let mut phase_code = vec![
                    KStmt::Assign(s_local, start.clone()),
                    KStmt::Assign(e_local, end),
                ];
                if non_empty {
                    phase_code.extend(code);
                } else {
                    phase_code.push(KStmt::If {
                        cond: KExpr::bin(Op::Le, KExpr::Local(s_local), KExpr::Local(e_local)),
                        then: code,
                        otherwise: vec![],
                    });
                }
                unless_short_circuited(&mut out, &guard, phase_code);
            }
            start = next;
        }
        Ok(out)
    }

    /// Three or more sorted walks coiterated (`Sequence(Phase(stepper), Phase(Run(fill)))`
    /// each): the phases of each walk would split the loop into one loop per combination
    /// of the walks still running (`2^n`). A walk whose fill alone does not make the body
    /// vanish (a term of a sum, not a factor of a product, whose phases do vanish) becomes
    /// one stepper over the whole extent instead, whose stop lies past `hi` once its
    /// entries are exhausted. Levels of consecutive indices (bands, intervals, points,
    /// blocks, sparse runs: [`ToTheEnd`]) are walked to the end too, segment by segment
    /// ([`Self::walk_to_the_end`]), where more than [`MAX_VARIANT_STEPPERS`] operands are
    /// coiterated: their phases would make `3^n` loops (2 MB of C for six bands), but
    /// below that size those loops run 10-25 % faster than the shared one (measured on
    /// sums of three and four bands). `None` when no walk is rewritten.
    pub(super) fn walks_to_the_end(
        &mut self,
        index: &str,
        body: &Stmt,
        lo: &KExpr,
        hi: &KExpr,
    ) -> Result<Option<Stmt>> {
        let looplets = self.looplets(body, index)?;
        let parts: Vec<Option<(ToTheEnd, Value)>> = looplets.iter().map(to_the_end_parts).collect();
        let blockwise = |kind: &ToTheEnd| match kind {
            ToTheEnd::Padded { inner, .. } => !matches!(**inner, ToTheEnd::Walk(_)),
            other => !matches!(other, ToTheEnd::Walk(_)),
        };
        let walks = parts
            .iter()
            .filter(|p| matches!(p, Some((kind, _)) if !blockwise(kind)))
            .count();
        let blocks = parts
            .iter()
            .filter(|p| matches!(p, Some((kind, _)) if blockwise(kind)))
            .count();
        let steppers = looplets
            .iter()
            .filter(|l| matches!(l, Looplet::Stepper(_)))
            .count();
        let take_blocks = self.compact || walks + blocks + steppers > MAX_VARIANT_STEPPERS;
        let coiterated = walks + steppers + if take_blocks { blocks } else { 0 };
        if !self.shares_one_loop(coiterated, looplets.len()) {
            return Ok(None);
        }
        let mut merged = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            let Some((kind, fill)) = part else {
                continue;
            };
            if !take_blocks && blockwise(kind) {
                continue;
            }
            let without = |v: Value| {
                self.rewrite(body.clone(), index, &mut |n, _| {
                    if n == k {
                        Repl::Consume(Tensor::FillLeaf(v))
                    } else {
                        Repl::Keep
                    }
                })
            };
            let at_fill = without(*fill)?;
            // Walked to the end, a padded walk reads its fill where it read the pad: only
            // where the body does the same with both (`coalesce(x[~(i + c)], 0.0)` over a
            // fill of 0.0). The simplified statements differ at most in what replaced the
            // operand, so their printed forms tell.
            if let ToTheEnd::Padded { pad, .. } = kind {
                let at_pad = without(*pad)?;
                let (a, b) = (
                    simplify_stmt(at_pad, self),
                    simplify_stmt(at_fill.clone(), self),
                );
                if format!("{a:?}") != format!("{b:?}") {
                    continue;
                }
            }
            if !self.fill_decides(at_fill) {
                merged.push(k);
            }
        }
        if merged.is_empty() {
            return Ok(None);
        }
        let past = hi.clone() + 1;
        let mut walked = Vec::new();
        let mut shared = Vec::new();
        for (k, part) in parts.into_iter().enumerate() {
            walked.push(match part {
                Some((kind, fill)) if merged.contains(&k) => {
                    let ends = [lo, &past];
                    let (init, s) = self.walk_to_the_end(index, kind, fill, ends, &mut shared);
                    let walk = Looplet::Stepper(Rc::new(s));
                    Some(match init.is_empty() {
                        true => walk,
                        false => Looplet::Thunk {
                            preamble: init,
                            body: Box::new(walk),
                            epilogue: vec![],
                        },
                    })
                }
                _ => None,
            });
        }
        let body = self.rewrite(body.clone(), index, &mut |n, _| match walked.get(n) {
            Some(Some(l)) => Repl::Looplet(l.clone()),
            _ => Repl::Keep,
        })?;
        Ok(Some(body))
    }

    /// `kind` as one stepper over the whole extent (`start` to `past - 1`), with the code
    /// that starts it: a sorted walk as [`stepper_to_the_end`] makes it; levels of
    /// consecutive indices step from segment to segment (the fill before a block, the
    /// block, ...), each child their middle read where the segment is a block and the fill
    /// elsewhere (a [`Tensor::Present`]), so that no child changes when a step ends before
    /// its stop and the coiterating loop needs no branch on it.
    ///
    /// Blocks with the same bounds and fill (reads of one Dense level at one shift, as in
    /// a 2-D stencil) share one segment walk (`shared`): the first walks it, the others
    /// read their middle where its `inside` holds and never advance it themselves.
    pub(super) fn walk_to_the_end(
        &mut self,
        index: &str,
        kind: ToTheEnd,
        fill: Value,
        [start, past]: [&KExpr; 2],
        shared: &mut Vec<SharedSegments>,
    ) -> (Vec<KStmt>, Stepper) {
        let (first, last, middle, blocks) = match kind {
            ToTheEnd::Walk(s) => return (vec![], stepper_to_the_end(s, past)),
            ToTheEnd::Padded {
                inner, preamble, ..
            } => {
                let (init, s) = self.walk_to_the_end(index, *inner, fill, [start, past], shared);
                return (preamble.into_iter().chain(init).collect(), s);
            }
            ToTheEnd::Block {
                first,
                last,
                middle,
            } => (first, last, middle, None),
            ToTheEnd::Blocks {
                blocks,
                before,
                middle,
            } => {
                let first = before + 1;
                (first, blocks.stop.clone(), middle, Some(blocks))
            }
        };
        let same = |x: &&SharedSegments| {
            blocks.is_none() && x.first == first && x.last == last && x.fill == fill
        };
        if let Some(x) = shared.iter().find(same) {
            let (inside, stop) = (x.inside, x.stop);
            let follower = Stepper {
                seek: Box::new(|_| vec![]),
                preamble: vec![],
                stop: KExpr::Local(stop),
                chunk: present_middle(&middle, KExpr::Local(inside), fill),
                next: vec![],
                counted: None,
                outside: Some(crate::looplets::Segments {
                    inside,
                    fill,
                    block: middle,
                }),
            };
            return (vec![], follower);
        }
        let inside = self.fresh(&format!("{index}_in_block"), ScalarType::Bool);
        let stop = self.fresh(&format!("{index}_segment_stop"), ScalarType::I64);
        if blocks.is_none() {
            shared.push(SharedSegments {
                first: first.clone(),
                last: last.clone(),
                fill,
                inside,
                stop,
            });
        }
        let chunk = present_middle(&middle, KExpr::Local(inside), fill);
        let segments = move |seek, next| Stepper {
            seek,
            preamble: vec![],
            stop: KExpr::Local(stop),
            chunk,
            next,
            counted: None,
            outside: Some(crate::looplets::Segments {
                inside,
                fill,
                block: middle,
            }),
        };
        let minus1 = |e: KExpr| e - 1;
        let set = |x: LocalId, e: KExpr| KStmt::Assign(x, e);
        let Some(b) = blocks else {
            // One block: the segment before it, the block, the rest; an empty one skipped.
            let past = past.clone();
            let enter = move |at: KExpr| {
                let (first, last) = (first.clone(), last.clone());
                let ahead = KExpr::bin(Op::Lt, at.clone(), first.clone());
                let within = KExpr::bin(Op::Le, at.clone(), last.clone());
                vec![
                    set(
                        inside,
                        KExpr::Op(
                            Op::And,
                            vec![
                                KExpr::bin(Op::Le, first.clone(), at.clone()),
                                within.clone(),
                            ],
                        ),
                    ),
                    set(
                        stop,
                        KExpr::Op(
                            Op::IfElse,
                            vec![
                                ahead,
                                minus1(first),
                                KExpr::Op(Op::IfElse, vec![within, last, past.clone()]),
                            ],
                        ),
                    ),
                ]
            };
            let next = enter(KExpr::Local(stop) + 1);
            // Entered at the loop's start, as the blocks below: a loop split into phases
            // may skip its first phase (`for i = 6:6` over a mode of size 5), and a later
            // phase's segments, shared with the first, never seek (they were left at
            // index 1, before their first block, and the loop stopped advancing).
            let init = enter(start.clone());
            let first_start = start.clone();
            let seek = move |at: KExpr| match at {
                at if at == first_start => vec![],
                at => enter(at),
            };
            return (init, segments(Box::new(seek), next));
        };
        // Blocks: the segment before each block, then the block; past the last, the rest.
        let more = b
            .counted
            .as_ref()
            .map_or(KExpr::Lit(Value::Bool(false)), |c| c.more.clone());
        let (loader, past) = (b.clone(), past.clone());
        let load = move |at: KExpr| {
            let mut then = loader.preamble.clone();
            then.push(set(inside, KExpr::bin(Op::Le, first.clone(), at)));
            then.push(set(
                stop,
                KExpr::Op(
                    Op::IfElse,
                    vec![
                        KExpr::Local(inside),
                        loader.stop.clone(),
                        minus1(first.clone()),
                    ],
                ),
            ));
            vec![KStmt::If {
                cond: more.clone(),
                then,
                otherwise: vec![
                    set(inside, KExpr::Lit(Value::Bool(false))),
                    set(stop, past.clone()),
                ],
            }]
        };
        let mut on = b.next.clone();
        on.extend(load(KExpr::Local(stop) + 1));
        let next = vec![KStmt::If {
            cond: KExpr::Local(inside),
            then: on,
            otherwise: vec![
                set(inside, KExpr::Lit(Value::Bool(true))),
                set(stop, b.stop.clone()),
            ],
        }];
        // A shifted walk's blocks may end before the loop's start: seek there first. Seeks
        // only move forward, so not to index 1 when the loop starts before it (a read at
        // `j + 1` runs `j` from 0): the blocks ending before 1 would be skipped.
        let mut init = (b.seek)(start.clone());
        init.extend(load(start.clone()));
        let first_start = start.clone();
        let seek = move |start: KExpr| {
            if start == first_start {
                return vec![];
            }
            let mut code = (b.seek)(start.clone());
            code.extend(load(start));
            code
        };
        (init, segments(Box::new(seek), next))
    }
}

/// Does truncating the looplet (a step ending before its stop) change it? Only a Spike
/// (which loses its tail) does; runs, sequences and lookups are self-similar.
pub(super) fn truncation_changes(l: &Looplet) -> bool {
    match l {
        Looplet::Spike { .. } => true,
        Looplet::Thunk { body, .. } => truncation_changes(body),
        Looplet::Switch(cases) => cases.iter().any(|(_, l)| truncation_changes(l)),
        _ => false,
    }
}

/// A stepper's child over a step ending at or before the child's stop, where `ends` holds
/// when it ends at it: a spike keeps its repeated part and ends in its tail only if
/// `ends`, else in the repeated part; a child that truncation leaves as it is stays. `None`
/// for other children.
pub(super) fn spike_where(l: &Looplet, ends: &KExpr) -> Option<Looplet> {
    match l {
        Looplet::Spike { body, tail } => Some(Looplet::Spike {
            body: body.clone(),
            tail: Box::new(Tensor::Switch {
                pre: vec![],
                cond: ends.clone(),
                then: tail.clone(),
                otherwise: body.clone(),
            }),
        }),
        Looplet::Thunk {
            preamble,
            body,
            epilogue,
        } => Some(Looplet::Thunk {
            preamble: preamble.clone(),
            body: Box::new(spike_where(body, ends)?),
            epilogue: epilogue.clone(),
        }),
        other if !truncation_changes(other) => Some(other.clone()),
        _ => None,
    }
}

/// The stepper and fill of a sorted walk, `Sequence(Phase(Stepper(Spike(fill, ..))),
/// Phase(Run(fill)))` with the stepper counting stored positions; `None` for anything else.
pub(super) fn sorted_walk_parts(l: &Looplet) -> Option<(Rc<Stepper>, Value)> {
    let Looplet::Sequence(phases) = l else {
        return None;
    };
    let [(Some(_), Looplet::Stepper(s)), (None, Looplet::Run(rest))] = phases.as_slice() else {
        return None;
    };
    let (Looplet::Spike { body, .. }, Tensor::FillLeaf(fill), Some(_)) =
        (&s.chunk, &**rest, &s.counted)
    else {
        return None;
    };
    matches!(&**body, Tensor::FillLeaf(v) if v == fill).then(|| (s.clone(), *fill))
}

/// A run of fill and its value.
pub(super) fn fill_run_of(l: &Looplet) -> Option<Value> {
    match l {
        Looplet::Run(t) => match &**t {
            Tensor::FillLeaf(v) => Some(*v),
            _ => None,
        },
        _ => None,
    }
}

/// A block's middle phase: a Lookup, or a Run of a stored subfiber.
pub(super) fn is_block_middle(l: &Looplet) -> bool {
    match l {
        Looplet::Lookup(_) => true,
        Looplet::Run(t) => !matches!(**t, Tensor::FillLeaf(_)),
        _ => false,
    }
}

/// A block's middle phase (a Lookup or a Run) where `cond` holds, `fill` where it does not.
pub(super) fn present_middle(middle: &Looplet, cond: KExpr, fill: Value) -> Looplet {
    let present = move |t: Tensor| unfurl::present_where(t, &cond, fill);
    match middle {
        Looplet::Lookup(f) => {
            let f = f.clone();
            Looplet::Lookup(Rc::new(move |i| present(f(i))))
        }
        Looplet::Run(t) => Looplet::Run(Box::new(present((**t).clone()))),
        other => other.clone(),
    }
}

/// `kind` with a block clipped to end by `end`, the last index of its level: walked to
/// the end of the extent, a padded read is read past its level's last index too, where
/// the padding stood. An empty SparsePoint fiber's entry is the index after the level's
/// last, which a shift by `c` brings into a loop that runs past `n - c`: the walk read
/// the entry of a fiber the level may not have (another fiber's value, or outside the
/// value buffer).
pub(super) fn block_ending_by(kind: ToTheEnd, end: &KExpr) -> ToTheEnd {
    match kind {
        ToTheEnd::Block {
            first,
            last,
            middle,
        } => ToTheEnd::Block {
            first,
            last: KExpr::Op(Op::Min, vec![last, end.clone()]),
            middle,
        },
        other => other,
    }
}

/// How `l` can be walked to the end of the extent; `None` when it cannot.
pub(super) fn to_the_end_parts(l: &Looplet) -> Option<(ToTheEnd, Value)> {
    if let Some((s, fill)) = sorted_walk_parts(l) {
        return Some((ToTheEnd::Walk(s), fill));
    }
    let Looplet::Sequence(phases) = l else {
        return None;
    };
    match phases.as_slice() {
        [(Some(before), head), (Some(last), middle), (None, rest)] => {
            let fill = fill_run_of(head)?;
            if fill_run_of(rest) != Some(fill) {
                return None;
            }
            if is_block_middle(middle) {
                // A block padded with `missing` is a permissive read of a Dense level: its
                // `missing` outside reaches a `coalesce` (`Lowerer::coalesce_selects`) or
                // an assignment, which it makes a branch (the simplifier's `lift-missing`).
                let first = before.clone() + 1;
                let (last, middle) = (last.clone(), middle.clone());
                let block = ToTheEnd::Block {
                    first,
                    last,
                    middle,
                };
                return Some((block, fill));
            }
            let (preamble, inner) = match middle {
                Looplet::Thunk {
                    preamble,
                    body,
                    epilogue,
                } if epilogue.is_empty() => (preamble.clone(), &**body),
                other => (vec![], other),
            };
            let (inner, inner_fill) = to_the_end_parts(inner)?;
            if matches!(inner, ToTheEnd::Padded { .. }) {
                return None;
            }
            let inner = block_ending_by(inner, last);
            let (inner, pad) = (Box::new(inner), fill);
            Some((
                ToTheEnd::Padded {
                    inner,
                    preamble,
                    pad,
                },
                inner_fill,
            ))
        }
        [(Some(_), Looplet::Stepper(s)), (None, rest)] => {
            let fill = fill_run_of(rest)?;
            let Looplet::Sequence(chunk) = &s.chunk else {
                return None;
            };
            let [(Some(before), head), (None, middle)] = chunk.as_slice() else {
                return None;
            };
            let fits = s.counted.is_some() && fill_run_of(head) == Some(fill);
            (fits && is_block_middle(middle)).then(|| {
                let (before, middle) = (before.clone(), middle.clone());
                let blocks = s.clone();
                (
                    ToTheEnd::Blocks {
                        blocks,
                        before,
                        middle,
                    },
                    fill,
                )
            })
        }
        _ => None,
    }
}

/// Walk `s` (see [`sorted_walk_parts`]) over a whole extent ending at `past - 1`: while
/// entries remain (`counted.more`) it is `s`; after them its stop is `past`, beyond every
/// step, so it contributes the fill of its truncated child.
pub(super) fn stepper_to_the_end(s: Rc<Stepper>, past: &KExpr) -> Stepper {
    let more = s
        .counted
        .as_ref()
        .map_or(KExpr::Lit(Value::Bool(false)), |c| c.more.clone());
    let only_while = |code: Vec<KStmt>, more: &KExpr| -> Vec<KStmt> {
        if code.is_empty() {
            return code;
        }
        vec![KStmt::If {
            cond: more.clone(),
            then: code,
            otherwise: vec![],
        }]
    };
    let KExpr::Local(stop) = s.stop else {
        let inner = s.clone();
        let seek_more = more.clone();
        return Stepper {
            seek: Box::new(move |start| only_while((inner.seek)(start), &seek_more)),
            preamble: only_while(s.preamble.clone(), &more),
            stop: KExpr::Op(Op::IfElse, vec![more, s.stop.clone(), past.clone()]),
            chunk: s.chunk.clone(),
            next: s.next.clone(),
            counted: None,
            outside: None,
        };
    };
    // A sorted walk's preamble reads its entry's index into the stop local, and only
    // seeking and advancing change the entry: the stop is read there, once per entry
    // rather than once per step, and set past the end when the entries run out.
    let reload = vec![KStmt::If {
        cond: more.clone(),
        then: s.preamble.clone(),
        otherwise: vec![KStmt::Assign(stop, past.clone())],
    }];
    let (inner, after_seek) = (s.clone(), reload.clone());
    Stepper {
        seek: Box::new(move |start| {
            let mut code = only_while((inner.seek)(start), &more);
            code.extend(after_seek.iter().cloned());
            code
        }),
        preamble: vec![],
        stop: s.stop.clone(),
        chunk: s.chunk.clone(),
        next: s.next.iter().cloned().chain(reload).collect(),
        counted: None,
        outside: None,
    }
}

/// Moves stepper `s` to its next child where its current one ends at the step's end `st`.
pub(super) fn advance_where_ended(s: &Stepper, st: &KExpr) -> KStmt {
    advance_if(s, KExpr::bin(Op::Eq, s.stop.clone(), st.clone()))
}

/// Moves stepper `s` to its next child where `cond` holds.
pub(super) fn advance_if(s: &Stepper, cond: KExpr) -> KStmt {
    KStmt::If {
        cond,
        then: s.next.clone(),
        otherwise: vec![],
    }
}
