//! The Switch rule (a looplet chosen by conditions), and Switch tensors resolved at the
//! statements that read them.

use super::*;

impl Lowerer {
    /// Switch (Looplets §6.1 example 4): the loop lowered once per case of the first
    /// Switch, under an `if`/`else` chain of the case conditions in order (other Switches
    /// are handled inside each branch, so the branches cover the cartesian product of the
    /// cases and each condition is tested once on a path).
    pub(super) fn rule_switch(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let cases = self
            .looplets(&body, index)?
            .into_iter()
            .find_map(|l| match l {
                Looplet::Switch(c) => Some(c),
                _ => None,
            })
            .ok_or_else(|| Error::Program("internal: no switch".into()))?;
        // Every switch on the same conditions takes the same case (reads that share one
        // segment walk, each where present): one branch for them all, not one nested in
        // another for each.
        let conds: Vec<KExpr> = cases.iter().map(|(c, _)| c.clone()).collect();
        let same = |other: &[(KExpr, Looplet)]| {
            other.len() == conds.len() && other.iter().zip(&conds).all(|((c, _), d)| c == d)
        };
        let mut chain: Vec<KStmt> = Vec::new();
        for (pos, (cond, _)) in cases.iter().enumerate().rev() {
            let case_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Switch(other) if same(other) => Repl::Looplet(other[pos].1.clone()),
                _ => Repl::Keep,
            })?;
            let cond = cond.clone();
            let code = self.lower(Stmt::Loop {
                index: index.into(),
                lo: lo.clone(),
                hi: hi.clone(),
                body: Box::new(case_body),
            })?;
            chain = match cond {
                KExpr::Lit(Value::Bool(true)) => code,
                KExpr::Lit(Value::Bool(false)) => chain,
                cond => vec![KStmt::If {
                    cond,
                    then: code,
                    otherwise: chain,
                }],
            };
        }
        Ok(chain)
    }

    /// Resolves the first `Switch` tensor read or written by a statement: its `pre` code,
    /// then an `if` with the statement lowered for each choice.
    pub(super) fn resolve_switch(&mut self, s: &Stmt) -> Result<Option<Vec<KStmt>>> {
        match self.select_missing_leaves(s)? {
            Some(Selected::Code(code)) => return Ok(Some(code)),
            Some(Selected::Wait) => return Ok(None),
            None => {}
        }
        // A SparseScalar's switch on its written flag moves out of any statement that does
        // not write the scalar (so a whole loop specializes); one that does is resolved
        // inside, where the flag is current.
        let leaf = !matches!(
            s,
            Stmt::Loop { .. } | Stmt::Block(_) | Stmt::Sieve { .. } | Stmt::Define { .. }
        );
        let movable = |t: &Tensor| match t {
            Tensor::Switch { then, .. } => match **then {
                Tensor::Scalar(k) if self.tensors[k].dirty.is_some() => {
                    leaf || !writes_scalar(s, k)
                }
                _ => true,
            },
            _ => false,
        };
        let mut found: Option<(Vec<KStmt>, KExpr)> = None;
        let _ = map_exprs(s.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                if let (None, Tensor::Switch { pre, cond, .. }) = (&found, &t) {
                    if movable(&t) {
                        found = Some((pre.clone(), cond.clone()));
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        })?;
        let Some((pre, cond)) = found else {
            return Ok(None);
        };
        // The first switch, and any other on the same condition with nothing to run
        // first (reads of one level where one shifted read is present), take one branch.
        let pick = |take_then: bool| -> Result<Stmt> {
            let mut done = false;
            map_exprs(s.clone(), &mut |e| {
                map_accesses(e, &mut |t, idx| {
                    let same = |t: &Tensor| matches!(t, Tensor::Switch { pre: p, cond: c, .. } if p.is_empty() && *c == cond);
                    if (!done || same(&t)) && movable(&t) {
                        if let Tensor::Switch {
                            then, otherwise, ..
                        } = t
                        {
                            done = true;
                            return Ok(Expr::Access(if take_then { then } else { otherwise }, idx));
                        }
                    }
                    Ok(Expr::Access(Box::new(t), idx))
                })
            })
        };
        let then = pick(true)?;
        let otherwise = pick(false)?;
        let mut code = pre;
        code.push(KStmt::If {
            cond,
            then: self.lower(then)?,
            otherwise: self.lower(otherwise)?,
        });
        Ok(Some(code))
    }
}
