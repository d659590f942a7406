//! The Stepper rule: coiterated steppers, each step lowered once per combination of
//! the steppers whose child ends it (up to `MAX_VARIANT_STEPPERS`), or once with a
//! Switch per spike's tail past that; short-circuit guards around the steps.

use super::*;

impl Lowerer {
    /// Stepper: a `while` loop over steps ending at the nearest stop; a stepper whose stop
    /// ends the step contributes its full chunk and advances, the others a truncated one.
    pub(super) fn rule_stepper(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let steppers: Vec<std::rc::Rc<Stepper>> = self
            .looplets(&body, index)?
            .into_iter()
            .filter_map(|l| match l {
                Looplet::Stepper(s) => Some(s),
                _ => None,
            })
            .collect();
        let i = self.fresh(&format!("{index}_step_start"), ScalarType::I64);
        let st = self.fresh(&format!("{index}_step_stop"), ScalarType::I64);
        let seek_to = match &lo {
            KExpr::Lit(_) => lo.clone(),
            _ => KExpr::Local(i),
        };
        // From index 1 no stepper seeks into the middle of a child.
        let from_one = matches!(lo, KExpr::Lit(Value::I64(1)));
        let mut out = vec![KStmt::Assign(i, lo)];
        for s in &steppers {
            out.extend((s.seek)(seek_to.clone()));
        }
        // Short-circuit (Finch paper §3.3.3): when the body only reduces into
        // ShortCircuitScalars and all of them hold an annihilator, the rest of the loop
        // cannot change anything: leave it (checked at every step of either loop below).
        let leave: Vec<KStmt> = self
            .short_circuit_guard(&body)
            .map(|guard| KStmt::If {
                cond: guard,
                then: vec![KStmt::Break],
                otherwise: vec![],
            })
            .into_iter()
            .collect();
        let mut step = leave.clone();
        for s in &steppers {
            step.extend(s.preamble.iter().cloned());
        }
        let mut stops = vec![hi.clone()];
        stops.extend(steppers.iter().map(|s| s.stop.clone()));
        step.push(KStmt::Assign(st, KExpr::Op(Op::Min, stops)));
        let (lo_step, st_step) = (KExpr::Local(i), KExpr::Local(st));
        let segments: Vec<(usize, crate::looplets::Segments)> = steppers
            .iter()
            .enumerate()
            .filter_map(|(n, s)| s.outside.clone().map(|x| (n, x)))
            .collect();
        // What one step costs (statements lowered), for the counted loop below.
        let before = self.lowered;
        let all = self.step_code(index, &body, &steppers, lo_step.clone(), st_step.clone())?;
        let step_cost = self.lowered - before;
        if segments.is_empty() {
            step.extend(all);
        } else {
            // A step where every segment walk is outside its blocks reads them as their
            // fill (a gap of a sum's terms does nothing): their steppers only advance.
            let none = self.step_with_segments_as(
                index,
                &body,
                &steppers,
                &segments,
                &|x| Repl::Consume(Tensor::FillLeaf(x.fill)),
                (lo_step.clone(), st_step.clone()),
            )?;
            let holds = |xs: &[&crate::looplets::Segments], op: Op| {
                xs.iter()
                    .map(|x| KExpr::Local(x.inside))
                    .reduce(|a, b| KExpr::Op(op, vec![a, b]))
                    .unwrap_or(KExpr::Lit(Value::Bool(false)))
            };
            let every: Vec<&crate::looplets::Segments> = segments.iter().map(|(_, x)| x).collect();
            let mut some = vec![KStmt::If {
                cond: holds(&every, Op::Or),
                then: all,
                otherwise: none,
            }];
            // Shifted reads of Dense levels (padded with `missing`) are inside their level
            // over most of the extent: there they read it directly, with no select.
            let padded: Vec<(usize, crate::looplets::Segments)> = segments
                .iter()
                .filter(|(_, x)| x.fill.is_missing())
                .cloned()
                .collect();
            if !padded.is_empty() {
                let within = self.step_with_segments_as(
                    index,
                    &body,
                    &steppers,
                    &padded,
                    &|x| Repl::Looplet(x.block.clone()),
                    (lo_step, st_step),
                )?;
                let each: Vec<&crate::looplets::Segments> = padded.iter().map(|(_, x)| x).collect();
                some = vec![KStmt::If {
                    cond: holds(&each, Op::And),
                    then: within,
                    otherwise: some,
                }];
            }
            step.extend(some);
        }
        step.push(KStmt::Assign(i, KExpr::Local(st) + 1));
        let general = KStmt::While {
            cond: KExpr::bin(Op::Le, KExpr::Local(i), hi.clone()),
            body: step,
        };
        // One stepper over stored positions (Finch's common case: a SparseList walked
        // against dense operands): where the extent reaches its last stop, every remaining
        // step is whole, so the loop counts positions with no per-step clipping.
        if let ([only], true) = (steppers.as_slice(), step_cost <= COUNTED_STEP_PAST) {
            if let Some(counted) = &only.counted {
                let mut fast = leave;
                fast.extend(only.preamble.iter().cloned());
                // The stop may read the stepper's state, which `next` advances: fix it first.
                fast.push(KStmt::Assign(st, only.stop.clone()));
                if let KExpr::Local(x) = only.stop {
                    // In the counted loop the step ends at the child's stop.
                    self.at_most.extend([(x, st), (st, x)]);
                }
                // From index 1 (no seek into a child), and then from one past the previous
                // child's stop, a step starts at or before the child's first stored index.
                if let Some(first) = counted.first.filter(|_| from_one) {
                    self.at_most.push((i, first));
                }
                fast.extend(self.stepper_variants(
                    index,
                    &body,
                    (&steppers, &[None]),
                    KExpr::Local(i),
                    KExpr::Local(st),
                    1,
                    &mut vec![true],
                )?);
                fast.push(KStmt::Assign(i, KExpr::Local(st) + 1));
                let counted_loop = KStmt::While {
                    cond: counted.more.clone(),
                    body: fast,
                };
                // The usual case, a phase ending at the fiber's last index, needs no test.
                if bounds::provably_le(&counted.last, &hi, &self.at_most) {
                    out.push(counted_loop);
                } else {
                    out.push(KStmt::If {
                        cond: KExpr::bin(Op::Le, counted.last.clone(), hi),
                        then: vec![counted_loop],
                        otherwise: vec![general],
                    });
                }
                return Ok(out);
            }
        }
        out.push(general);
        Ok(out)
    }

    /// One step `lo..=st` of coiterated `steppers` where each segment walk of `taken` (a
    /// stepper's position and its [`crate::looplets::Segments`]) is read as `read` makes
    /// it rather than through its chunk: the body lowered with the other steppers, then
    /// the taken ones advanced where their segment ends.
    pub(super) fn step_with_segments_as(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[Rc<Stepper>],
        taken: &[(usize, crate::looplets::Segments)],
        read: &dyn Fn(&crate::looplets::Segments) -> Repl,
        (lo, st): (KExpr, KExpr),
    ) -> Result<Vec<KStmt>> {
        let taken_at = |n: usize| taken.iter().find(|(m, _)| *m == n).map(|(_, x)| x);
        let body = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::Stepper(x) => match steppers.iter().position(|y| Rc::ptr_eq(x, y)) {
                Some(n) => taken_at(n).map_or(Repl::Keep, read),
                None => Repl::Keep,
            },
            _ => Repl::Keep,
        })?;
        let rest: Vec<Rc<Stepper>> = steppers
            .iter()
            .enumerate()
            .filter(|(n, _)| taken_at(*n).is_none())
            .map(|(_, s)| s.clone())
            .collect();
        let mut code = match rest.is_empty() {
            true => self.lower_step(index, body, lo, st.clone())?,
            false => self.step_code(index, &body, &rest, lo, st.clone())?,
        };
        for (n, _) in taken {
            code.push(advance_where_ended(&steppers[*n], &st));
        }
        Ok(code)
    }

    /// One step `lo..=st` of coiterated `steppers` (a stepper loop's body after the step's
    /// end is found): the body for the combinations of steppers whose child ends there,
    /// or one body branching on each, and the steppers' advances.
    pub(super) fn step_code(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[Rc<Stepper>],
        lo: KExpr,
        st: KExpr,
    ) -> Result<Vec<KStmt>> {
        let mut code = Vec::new();
        let present = self.present_chunks(index, body, steppers)?;
        for (s, p) in steppers.iter().zip(&present) {
            if let Some((ends, _)) = p {
                code.push(KStmt::Assign(
                    *ends,
                    KExpr::bin(Op::Eq, s.stop.clone(), st.clone()),
                ));
            }
        }
        if steppers.len() > MAX_VARIANT_STEPPERS {
            code.extend(self.stepper_switched(index, body, steppers, &present, lo, st)?);
        } else {
            code.extend(self.stepper_variants(
                index,
                body,
                (steppers, &present),
                lo,
                st,
                0,
                &mut Vec::new(),
            )?);
        }
        Ok(code)
    }

    /// The condition under which every reduction of `body` is into a ShortCircuitScalar
    /// that already holds an annihilator of its operator; `None` when the body does
    /// anything else or an operator has no annihilator test.
    pub(super) fn short_circuit_guard(&self, body: &Stmt) -> Option<KExpr> {
        fn targets(s: &Stmt, out: &mut Vec<(usize, Op)>) -> bool {
            match s {
                Stmt::Assign {
                    lhs: (Tensor::Scalar(t), _),
                    op: Some(op),
                    ..
                } => {
                    out.push((*t, *op));
                    true
                }
                Stmt::Sieve {
                    then, otherwise, ..
                } => targets(then, out) && targets(otherwise, out),
                Stmt::Define { body, .. } | Stmt::Loop { body, .. } => targets(body, out),
                Stmt::Block(v) => v.iter().all(|s| targets(s, out)),
                _ => false,
            }
        }
        let mut found = Vec::new();
        if !targets(body, &mut found) || found.is_empty() {
            return None;
        }
        let mut conds = Vec::new();
        for (t, op) in found {
            let info = &self.tensors[t];
            if !matches!(info.format, crate::formats::Format::Scalar(k, _) if k.short_circuits()) {
                return None;
            }
            let local = KExpr::Local(info.scalar?);
            let ty = info.format.element_type();
            conds.push(match op {
                Op::Choose(z) => KExpr::bin(Op::Ne, local, KExpr::Lit(z.convert_exact(ty)?)),
                op => KExpr::bin(
                    Op::Eq,
                    local,
                    KExpr::Lit(op.annihilator(ty, crate::algebra::Side::Left)?),
                ),
            });
        }
        conds
            .into_iter()
            .reduce(|a, b| KExpr::Op(Op::And, vec![a, b]))
    }

    /// The step body for every combination of full/truncated steppers, as nested `if`s on
    /// `stop_k == st`; a stepper with a present chunk (see [`Self::present_chunks`]) is not
    /// branched on.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stepper_variants(
        &mut self,
        index: &str,
        body: &Stmt,
        (steppers, present): (&[std::rc::Rc<Stepper>], &[PresentChunk]),
        lo: KExpr,
        st: KExpr,
        k: usize,
        full: &mut Vec<bool>,
    ) -> Result<Vec<KStmt>> {
        let present_of = |n: usize| present.get(n).and_then(Option::as_ref);
        if k == steppers.len() {
            let choice = full.clone();
            let step_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Stepper(s) => {
                    let n = steppers
                        .iter()
                        .position(|x| std::rc::Rc::ptr_eq(x, s))
                        .unwrap_or(0);
                    Repl::Looplet(match present_of(n) {
                        Some((_, chunk)) => chunk.clone(),
                        None if choice[n] => s.chunk.clone(),
                        None => truncate_before_stop(&s.chunk),
                    })
                }
                _ => Repl::Keep,
            })?;
            let mut code = self.lower_step(index, step_body, lo, st.clone())?;
            for (n, (s, &f)) in steppers.iter().zip(full.iter()).enumerate() {
                if let Some((ends, _)) = present_of(n) {
                    code.push(advance_if(s, KExpr::Local(*ends)));
                } else if f {
                    code.extend(s.next.iter().cloned());
                } else if !truncation_changes(&s.chunk) {
                    // One body served both cases: advance only where the step ended at
                    // this stepper's stop.
                    code.push(advance_where_ended(s, &st));
                }
            }
            return Ok(code);
        }
        let steppers_present = (steppers, present);
        if present_of(k).is_some() || !truncation_changes(&steppers[k].chunk) {
            // A chunk that truncation leaves as it is (runs, sequences, lookups), or one
            // read through its present condition, needs no branch on whether the step ends
            // at its stop: the body is the same.
            full.push(false);
            let code = self.stepper_variants(index, body, steppers_present, lo, st, k + 1, full);
            full.pop();
            return code;
        }
        let cond = KExpr::bin(Op::Eq, steppers[k].stop.clone(), st.clone());
        full.push(true);
        let then = self.stepper_variants(
            index,
            body,
            steppers_present,
            lo.clone(),
            st.clone(),
            k + 1,
            full,
        )?;
        full.pop();
        full.push(false);
        let otherwise =
            self.stepper_variants(index, body, steppers_present, lo, st, k + 1, full)?;
        full.pop();
        Ok(vec![KStmt::If {
            cond,
            then,
            otherwise,
        }])
    }

    /// One step of more steppers than [`stepper_variants`] specializes for (its variants
    /// double with each): one body, in which a stepper's spike at the step's end is its
    /// tail where its stop ends the step and its repeated part where it does not, chosen
    /// by an `if` at the statements that read it; a stepper advances where its stop ends
    /// the step.
    pub(super) fn stepper_switched(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[std::rc::Rc<Stepper>],
        present: &[PresentChunk],
        lo: KExpr,
        st: KExpr,
    ) -> Result<Vec<KStmt>> {
        let mut chunks = Vec::new();
        for (s, p) in steppers.iter().zip(present) {
            if let Some((_, chunk)) = p {
                chunks.push(chunk.clone());
                continue;
            }
            let ends = KExpr::bin(Op::Eq, s.stop.clone(), st.clone());
            let chunk = spike_where(&s.chunk, &ends).ok_or_else(|| {
                Error::Unsupported(format!(
                    "coiterating {} sparse operands in one loop where one is not a list of single entries (at most {MAX_VARIANT_STEPPERS} then)",
                    steppers.len()
                ))
            })?;
            chunks.push(chunk);
        }
        let step_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::Stepper(s) => match steppers.iter().position(|x| std::rc::Rc::ptr_eq(x, s)) {
                Some(n) => Repl::Looplet(chunks[n].clone()),
                None => Repl::Keep,
            },
            _ => Repl::Keep,
        })?;
        let mut code = self.lower_step(index, step_body, lo, st.clone())?;
        for (s, p) in steppers.iter().zip(present) {
            code.push(match p {
                Some((ends, _)) => advance_if(s, KExpr::Local(*ends)),
                None => advance_where_ended(s, &st),
            });
        }
        Ok(code)
    }

    /// For each coiterated stepper, the chunk that reads its entry at a step's end through
    /// a [`Tensor::Present`] condition (`ends`, a local set to `stop == st` at each step),
    /// so that one body serves the steps that end at its entry and those that do not,
    /// where branching would copy that body (`None`: branch as before). That is a stepper
    /// of three or more whose chunk is a spike from fill to a stored subfiber, unless
    /// its fill alone makes the step do nothing (a factor of a product: there the branch
    /// costs no code and skips the work), and whose subfiber is a level (a loop to copy)
    /// or, past [`MAX_VARIANT_STEPPERS`], also a leaf (a value to select).
    pub(super) fn present_chunks(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[std::rc::Rc<Stepper>],
    ) -> Result<Vec<PresentChunk>> {
        let mut out = Vec::new();
        let operands = self.looplets(body, index)?.len();
        for s in steppers {
            out.push(None);
            if !self.shares_one_loop(steppers.len(), operands) {
                continue;
            }
            let Looplet::Spike { body: before, tail } = &s.chunk else {
                continue;
            };
            let (Tensor::FillLeaf(fill), Tensor::Fiber(fiber)) = (&**before, &**tail) else {
                continue;
            };
            if fiber.hollow.is_some() || fiber.end.is_some() {
                continue;
            }
            if self.is_leaf(fiber) && !self.compact && steppers.len() <= MAX_VARIANT_STEPPERS {
                continue;
            }
            let without = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Stepper(x) if std::rc::Rc::ptr_eq(x, s) => {
                    Repl::Consume(Tensor::FillLeaf(*fill))
                }
                _ => Repl::Keep,
            })?;
            if self.fill_decides(without) {
                continue;
            }
            let ends = self.fresh(&format!("{index}_ends"), ScalarType::Bool);
            let chunk = Looplet::Spike {
                body: before.clone(),
                tail: Box::new(Tensor::Present {
                    cond: KExpr::Local(ends),
                    fiber: fiber.clone(),
                    fill: *fill,
                }),
            };
            if let Some(last) = out.last_mut() {
                *last = Some((ends, chunk));
            }
        }
        Ok(out)
    }

    /// One step `lo..=st` of a stepper or jumper loop, over the children chosen for it.
    pub(super) fn lower_step(
        &mut self,
        index: &str,
        body: Stmt,
        lo: KExpr,
        st: KExpr,
    ) -> Result<Vec<KStmt>> {
        // A step is never empty: the loop runs while `lo <= hi` and seeking leaves every
        // stop at or after `lo`.
        self.nonempty.push((lo.clone(), st.clone()));
        let code = self.lower(Stmt::Loop {
            index: index.into(),
            lo,
            hi: st,
            body: Box::new(body),
        });
        self.nonempty.pop();
        code
    }
}

/// Appends `code` to `out`, or, when `guard` (see `short_circuit_guard`) exists and `out`
/// already updates the ShortCircuitScalars, appends it under `if !guard`: once an earlier
/// part of a step left them at an annihilator, a later one must not run. The reference
/// stops at the first annihilator; a run of -4 after a gap of zeros would otherwise turn
/// the product's 0.0 into -0.0.
pub(super) fn unless_short_circuited(
    out: &mut Vec<KStmt>,
    guard: &Option<KExpr>,
    code: Vec<KStmt>,
) {
    match guard {
        Some(g) if !out.is_empty() && !code.is_empty() => out.push(KStmt::If {
            cond: g.clone(),
            then: vec![],
            otherwise: code,
        }),
        _ => out.extend(code),
    }
}
