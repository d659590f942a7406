//! The Thunk rule: a looplet's preamble and epilogue around its body.

use super::*;

impl Lowerer {
    /// Thunk: hoist every preamble before the loop, then lower the loop over the bodies.
    pub(super) fn rule_thunk(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let mut pre = Vec::new();
        let mut post = Vec::new();
        let body = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Thunk {
                preamble,
                body,
                epilogue,
            } => {
                pre.extend(preamble.iter().cloned());
                post.extend(epilogue.iter().cloned());
                Repl::Looplet((**body).clone())
            }
            _ => Repl::Keep,
        })?;
        pre.extend(self.lower(Stmt::Loop {
            index: index.into(),
            lo,
            hi,
            body: Box::new(body),
        })?);
        pre.extend(post);
        Ok(pre)
    }
}
