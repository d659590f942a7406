//! The Lookup rule: a plain loop over the index, every access read at it.

use super::*;

impl Lowerer {
    /// Lookup (or no looplet): a plain loop binding the index; a loop of one iteration
    /// binds it without looping; a body that does not use the index is integrated.
    pub(super) fn rule_lookup(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        // Per-index epilogues of written lookups run after the index's statements, and only
        // where those statements did something.
        let mut epilogues: Vec<Rc<dyn Fn(KExpr) -> Vec<KStmt>>> = Vec::new();
        if lo == hi {
            let body = self.rewrite(body, index, &mut |_, l| match l {
                Looplet::Lookup(f) => Repl::Consume(f(hi.clone())),
                Looplet::LookupWrite { body, epilogue } => {
                    epilogues.push(epilogue.clone());
                    Repl::Consume(body(hi.clone()))
                }
                Looplet::AcceptRun { body, epilogue } => {
                    let e = epilogue.clone();
                    epilogues.push(Rc::new(move |i: KExpr| e(i.clone(), i)));
                    Repl::Consume(body(hi.clone(), hi.clone()))
                }
                _ => Repl::Keep,
            })?;
            let mut code = self.lower_claiming(bind(body, index, &hi))?;
            if !code.is_empty() {
                for e in &epilogues {
                    code.extend(e(hi.clone()));
                }
            }
            return Ok(code);
        }
        if self.styles(&body, index).is_empty()
            && !mentions(&body, index)
            && !needs_concordizing(&body)
        {
            if let Some(code) = self.integrate(&lo, &hi, &body)? {
                return Ok(code);
            }
        }
        let var = self.fresh(index, ScalarType::I64);
        // Short-circuit (Finch paper §3.3.3), as in steppers: leave once every target holds
        // an annihilator.
        let guard = self.short_circuit_guard(&body);
        let original = body.clone();
        let body = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Lookup(f) => Repl::Consume(f(KExpr::Local(var))),
            Looplet::LookupWrite { body, epilogue } => {
                epilogues.push(epilogue.clone());
                Repl::Consume(body(KExpr::Local(var)))
            }
            Looplet::AcceptRun { body, epilogue } => {
                let e = epilogue.clone();
                epilogues.push(Rc::new(move |i: KExpr| e(i.clone(), i)));
                Repl::Consume(body(KExpr::Local(var), KExpr::Local(var)))
            }
            _ => Repl::Keep,
        })?;
        let mut inner = self.lower_claiming(bind(body, index, &KExpr::Local(var)))?;
        if inner.is_empty() {
            return Ok(vec![]);
        }
        // Writes that lower to nothing at every index of the range (the fill written where
        // nothing was claimed) leave epilogues that never fire; without those writes the
        // body may not use the index at all and be integrated (a sum over a run of fill
        // beside a sparse output's write of the fill: one addition of n terms, not a loop).
        if !epilogues.is_empty()
            && epilogues
                .iter()
                .all(|e| never_fires(&e(KExpr::Local(var)), &inner))
        {
            let quiet = self.rewrite(original, index, &mut |_, l| match l {
                Looplet::LookupWrite { .. } | Looplet::AcceptRun { .. } => {
                    Repl::Consume(Tensor::Null)
                }
                _ => Repl::Keep,
            })?;
            let quiet = simplify_stmt(quiet, self);
            return self.rule_lookup(index, lo, hi, quiet);
        }
        for e in &epilogues {
            inner.extend(e(KExpr::Local(var)));
        }
        let Some(guard) = guard else {
            return Ok(vec![KStmt::For {
                var,
                lo,
                hi: hi + 1,
                body: inner,
            }]);
        };
        // Checked before the loop and after each index, so no index runs once it is
        // decided.
        inner.push(KStmt::If {
            cond: guard.clone(),
            then: vec![KStmt::Break],
            otherwise: vec![],
        });
        Ok(vec![KStmt::If {
            cond: guard,
            then: vec![],
            otherwise: vec![KStmt::For {
                var,
                lo,
                hi: hi + 1,
                body: inner,
            }],
        }])
    }
}
