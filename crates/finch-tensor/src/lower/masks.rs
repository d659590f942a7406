//! Comparison masks: loops over `i < j` and the like become extents, not branches.

use super::*;

impl Lowerer {
    /// Masks (Finch paper Table 5): a comparison of the loop index with a value that does
    /// not depend on it becomes a Sequence of `true`/`false` runs over the index, so the
    /// loop splits at the boundary and the branch that is false there vanishes. `i <= e`
    /// is UpTri, `i >= e` LoTri, `i == e` Diag; strict and negated forms likewise.
    pub(super) fn masks(&mut self, body: Stmt, index: &str) -> Result<Stmt> {
        fn rewrite(l: &mut Lowerer, e: Expr, index: &str) -> Result<Expr> {
            let e = match e {
                Expr::Call(op, args) => Expr::Call(
                    op,
                    args.into_iter()
                        .map(|a| rewrite(l, a, index))
                        .collect::<Result<_>>()?,
                ),
                other => return Ok(other),
            };
            let Expr::Call(op, args) = &e else {
                return Ok(e);
            };
            let [a, b] = args.as_slice() else {
                return Ok(e);
            };
            let is_i = |x: &Expr| matches!(x, Expr::Index(n) if n == index);
            // Normalize to `i OP other`.
            let (op, other) = match (is_i(a), is_i(b)) {
                (true, false) => (*op, b),
                (false, true) => match op {
                    Op::Le => (Op::Ge, a),
                    Op::Lt => (Op::Gt, a),
                    Op::Ge => (Op::Le, a),
                    Op::Gt => (Op::Lt, a),
                    Op::Eq | Op::Ne => (*op, a),
                    _ => return Ok(e),
                },
                _ => return Ok(e),
            };
            if !matches!(op, Op::Le | Op::Lt | Op::Ge | Op::Gt | Op::Eq | Op::Ne) || !bound(other) {
                return Ok(e);
            }
            let (k, t) = l.kexpr(other)?;
            if !t.is_integer() {
                return Ok(e);
            }
            let k = if t == ScalarType::I64 {
                k
            } else {
                KExpr::Op(Op::Cast(ScalarType::I64), vec![k])
            };
            let minus1 = k.clone() - 1;
            let run = |v: bool| Looplet::Run(Box::new(Tensor::Value(Expr::Lit(Value::Bool(v)))));
            let phases = match op {
                Op::Le => vec![(Some(k), run(true)), (None, run(false))],
                Op::Lt => vec![(Some(minus1), run(true)), (None, run(false))],
                Op::Ge => vec![(Some(minus1), run(false)), (None, run(true))],
                Op::Gt => vec![(Some(k), run(false)), (None, run(true))],
                Op::Eq => vec![
                    (Some(minus1), run(false)),
                    (Some(k), run(true)),
                    (None, run(false)),
                ],
                _ => vec![
                    (Some(minus1), run(true)),
                    (Some(k), run(false)),
                    (None, run(true)),
                ],
            };
            Ok(Expr::Access(
                Box::new(Tensor::Looplet(Looplet::Sequence(phases))),
                vec![Expr::Index(index.to_string())],
            ))
        }
        /// No unbound index or unlowered access inside.
        fn bound(e: &Expr) -> bool {
            match e {
                Expr::Lit(_) | Expr::Code(_) => true,
                Expr::Call(_, a) => a.iter().all(bound),
                Expr::Index(_) | Expr::Wrapped { .. } | Expr::Permissive(..) | Expr::Access(..) => {
                    false
                }
            }
        }
        map_exprs(body, &mut |e| rewrite(self, e, index))
    }
}
