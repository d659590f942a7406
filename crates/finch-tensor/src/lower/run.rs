//! The Run rule, and run integration: a value constant over a run of `n` iterations
//! is added once as `n * v` (or multiplied in as `v ^ n`), and a run written as a whole
//! (`rule_accept_run`).

use super::*;

impl Lowerer {
    /// Run: every element is the run's body, so the index is consumed.
    pub(super) fn rule_run(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let body = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Run(t) => Repl::Consume((**t).clone()),
            _ => Repl::Keep,
        })?;
        self.lower(Stmt::Loop {
            index: index.into(),
            lo,
            hi,
            body: Box::new(body),
        })
    }

    /// AcceptRun (Finch's run-accepting writes), once every read is constant over the
    /// extent: when the body only writes AcceptRun targets and does not use the index, the
    /// whole extent is one run, written once; otherwise each index is its own run.
    pub(super) fn rule_accept_run(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        fn only_run_writes(s: &Stmt) -> bool {
            match s {
                Stmt::Assign { lhs, .. } => {
                    matches!(lhs.0, Tensor::Looplet(Looplet::AcceptRun { .. }))
                }
                Stmt::Sieve {
                    then, otherwise, ..
                } => only_run_writes(then) && only_run_writes(otherwise),
                Stmt::Define { body, .. } => only_run_writes(body),
                Stmt::Block(v) => v.iter().all(only_run_writes),
                _ => false,
            }
        }
        if !only_run_writes(&body) {
            return self.rule_lookup(index, lo, hi, body);
        }
        let mut epilogues: Vec<RunEpilogue> = Vec::new();
        let whole = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::AcceptRun { body, epilogue } => {
                epilogues.push(epilogue.clone());
                Repl::Consume(body(lo.clone(), hi.clone()))
            }
            _ => Repl::Keep,
        })?;
        if mentions(&whole, index) {
            return self.rule_lookup(index, lo, hi, body);
        }
        let mut code = self.lower_claiming(whole)?;
        if code.is_empty() {
            return Ok(code);
        }
        for e in &epilogues {
            code.extend(e(lo.clone(), hi.clone()));
        }
        Ok(self.guarded(&lo, &hi, code))
    }

    /// Run integration (finch-looplets.md §5.4) of a loop whose body does not use its
    /// index: `+=`/`-=` multiply by the extent, idempotent reductions happen once.
    pub(super) fn integrate(
        &mut self,
        lo: &KExpr,
        hi: &KExpr,
        body: &Stmt,
    ) -> Result<Option<Vec<KStmt>>> {
        if let Stmt::Assign {
            lhs,
            op: None,
            rhs: rhs @ Expr::Lit(_),
        } = body
        {
            // Storing a constant n times is storing it once.
            let code = self.emit_assign(lhs.clone(), None, rhs.clone())?;
            return Ok(Some(self.guarded(lo, hi, code)));
        }
        let Stmt::Assign {
            lhs,
            op: Some(op),
            rhs,
        } = body
        else {
            return Ok(None);
        };
        let n = (hi.clone() - lo.clone()) + 1;
        match op {
            Op::Add | Op::Sub => {
                let rt = type_of(rhs, self).unwrap_or(ScalarType::F64);
                let rhs = Expr::Call(
                    Op::Mul,
                    vec![
                        Expr::Call(
                            Op::Cast(if rt == ScalarType::Bool {
                                ScalarType::I64
                            } else {
                                rt
                            }),
                            vec![Expr::Code(n.clone())],
                        ),
                        rhs.clone(),
                    ],
                );
                let code = self.emit_assign(lhs.clone(), Some(*op), rhs)?;
                Ok(Some(self.guarded(lo, hi, code)))
            }
            Op::Mul => {
                // `x *= r` repeated n times is `x *= r ^ n`.
                let pow = Expr::Call(
                    Op::Pow,
                    vec![
                        rhs.clone(),
                        Expr::Call(Op::Cast(ScalarType::I64), vec![Expr::Code(n.clone())]),
                    ],
                );
                let code = self.emit_assign(lhs.clone(), Some(Op::Mul), pow)?;
                Ok(Some(self.guarded(lo, hi, code)))
            }
            op if op.is_idempotent() => {
                let code = self.emit_assign(lhs.clone(), Some(*op), rhs.clone())?;
                Ok(Some(self.guarded(lo, hi, code)))
            }
            _ => Ok(None),
        }
    }
}
