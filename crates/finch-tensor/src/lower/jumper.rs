//! The Jumper rule: galloping, each operand's jump considered in turn.

use super::*;

impl Lowerer {
    /// Jumper (Looplets §4.7): each step ends at the largest stop among the jumpers (the
    /// leader, clipped to the extent); a jumper whose stop ends the step contributes its
    /// full chunk and advances, the others are walked as Steppers within the step. Every
    /// jumper seeks to the step's start first (another leader may have jumped past it).
    pub(super) fn rule_jumper(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let jumpers: Vec<Rc<Stepper>> = self
            .looplets(&body, index)?
            .into_iter()
            .filter_map(|l| match l {
                Looplet::Jumper(s) => Some(s),
                _ => None,
            })
            .collect();
        let i = self.fresh(&format!("{index}_jump_start"), ScalarType::I64);
        let st = self.fresh(&format!("{index}_jump_stop"), ScalarType::I64);
        let mut step = Vec::new();
        if let Some(guard) = self.short_circuit_guard(&body) {
            step.push(KStmt::If {
                cond: guard,
                then: vec![KStmt::Break],
                otherwise: vec![],
            });
        }
        for j in &jumpers {
            step.extend((j.seek)(KExpr::Local(i)));
            step.extend(j.preamble.iter().cloned());
        }
        let leader = KExpr::Op(Op::Max, jumpers.iter().map(|j| j.stop.clone()).collect());
        step.push(KStmt::Assign(
            st,
            KExpr::Op(Op::Min, vec![hi.clone(), leader]),
        ));
        step.extend(self.jumper_variants(
            index,
            &body,
            &jumpers,
            KExpr::Local(i),
            KExpr::Local(st),
            0,
            &mut Vec::new(),
        )?);
        step.push(KStmt::Assign(i, KExpr::Local(st) + 1));
        Ok(vec![
            KStmt::Assign(i, lo),
            KStmt::While {
                cond: KExpr::bin(Op::Le, KExpr::Local(i), hi),
                body: step,
            },
        ])
    }

    /// The step body for every combination of leading (full chunk) and demoted (walked)
    /// jumpers, as nested `if`s on `stop_k == st`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn jumper_variants(
        &mut self,
        index: &str,
        body: &Stmt,
        jumpers: &[Rc<Stepper>],
        lo: KExpr,
        st: KExpr,
        k: usize,
        leads: &mut Vec<bool>,
    ) -> Result<Vec<KStmt>> {
        if k == jumpers.len() {
            let choice = leads.clone();
            let step_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Jumper(s) => {
                    let n = jumpers.iter().position(|x| Rc::ptr_eq(x, s)).unwrap_or(0);
                    Repl::Looplet(if choice[n] {
                        s.chunk.clone()
                    } else {
                        Looplet::Stepper(s.clone())
                    })
                }
                _ => Repl::Keep,
            })?;
            let mut code = self.lower_step(index, step_body, lo, st)?;
            for (j, &lead) in jumpers.iter().zip(leads.iter()) {
                if lead {
                    code.extend(j.next.iter().cloned());
                }
            }
            return Ok(code);
        }
        let cond = KExpr::bin(Op::Eq, jumpers[k].stop.clone(), st.clone());
        leads.push(true);
        let then =
            self.jumper_variants(index, body, jumpers, lo.clone(), st.clone(), k + 1, leads)?;
        leads.pop();
        leads.push(false);
        let otherwise = self.jumper_variants(index, body, jumpers, lo, st, k + 1, leads)?;
        leads.pop();
        Ok(vec![KStmt::If {
            cond,
            then,
            otherwise,
        }])
    }
}
