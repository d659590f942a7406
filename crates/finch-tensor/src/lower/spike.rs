//! The Spike rule: a run of one value followed by a single last element.

use super::*;

impl Lowerer {
    /// Spike: the body over `lo:hi-1`, the tail at `hi` (all spikes end at `hi`).
    pub(super) fn rule_spike(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let guard = self.short_circuit_guard(&body);
        let run_part = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::Spike { body, .. } => Repl::Looplet(Looplet::Run(body.clone())),
            _ => Repl::Keep,
        })?;
        let tail_part = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Spike { tail, .. } => Repl::Looplet(Looplet::Run(tail.clone())),
            _ => Repl::Keep,
        })?;
        let before = hi.clone() - 1;
        let mut out = Vec::new();
        let first = self.lower(Stmt::Loop {
            index: index.into(),
            lo: lo.clone(),
            hi: before.clone(),
            body: Box::new(run_part),
        })?;
        out.extend(self.guarded(&lo, &before, first));
        let tail = self.lower(Stmt::Loop {
            index: index.into(),
            lo: hi.clone(),
            hi: hi.clone(),
            body: Box::new(tail_part),
        })?;
        let tail = self.guarded(&lo, &hi, tail);
        unless_short_circuited(&mut out, &guard, tail);
        Ok(out)
    }
}
