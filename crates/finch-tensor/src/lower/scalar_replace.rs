//! Scalar replacement: an output element invariant in a loop is kept in a local across
//! it and stored once.

use super::*;

impl Lowerer {
    /// Scalar replacement: when the body writes an output element whose position does not
    /// depend on the loop (its indices are all consumed) and does not otherwise read that
    /// tensor, the element lives in a local for the loop: loaded before, stored after.
    /// (A reduction `y[i] += ...` inside a loop over `j` then stays in a register.)
    pub(super) fn scalar_replace(
        &mut self,
        index: &str,
        lo: &KExpr,
        hi: &KExpr,
        body: &Stmt,
    ) -> Result<Option<Vec<KStmt>>> {
        fn leaf_writes(s: &Stmt, out: &mut Vec<crate::looplets::Fiber>) {
            match s {
                // A position a sparse level hands out must be claimed by its own writes,
                // so it is never replaced (marked with an impossible tensor id).
                Stmt::Assign {
                    lhs: (Tensor::Fiber(f), idx),
                    ..
                } if idx.is_empty() => out.push(match f.hollow {
                    None => f.clone(),
                    Some(_) => crate::looplets::Fiber {
                        tensor: usize::MAX,
                        ..f.clone()
                    },
                }),
                Stmt::Loop { body, .. } | Stmt::Define { body, .. } => leaf_writes(body, out),
                Stmt::Sieve {
                    then, otherwise, ..
                } => {
                    leaf_writes(then, out);
                    leaf_writes(otherwise, out);
                }
                Stmt::Block(v) => v.iter().for_each(|s| leaf_writes(s, out)),
                _ => {}
            }
        }
        let mut writes = Vec::new();
        leaf_writes(body, &mut writes);
        let Some(target) = writes.first().cloned() else {
            return Ok(None);
        };
        if target.tensor == usize::MAX || writes.iter().any(|w| w != &target) {
            return Ok(None);
        }
        // The tensor must not be read, nor written through any other access, in the body.
        let mut other_use = false;
        let _ = map_exprs(body.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                match &t {
                    Tensor::Fiber(f)
                        if f.tensor == target.tensor && !(f == &target && idx.is_empty()) =>
                    {
                        other_use = true
                    }
                    // An access at the loop's index (`w[i]` beside `w[j]` in a loop over
                    // `i`) may reach the element, which the local would then overwrite.
                    Tensor::Looplet(l) if l.tensor_id() == Some(target.tensor) => other_use = true,
                    _ => {}
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        });
        let reads_target = {
            let mut n = 0;
            let _ = map_exprs(body.clone(), &mut |e| {
                map_accesses(e, &mut |t, idx| {
                    if matches!(&t, Tensor::Fiber(f) if f == &target) {
                        n += 1;
                    }
                    Ok(Expr::Access(Box::new(t), idx))
                })
            });
            n
        };
        // Each write counts once as an access in `map_exprs`; any extra is a read.
        if other_use || reads_target != writes.len() {
            return Ok(None);
        }
        let Some(LevelParams::Element { val, .. }) = self.tensors[target.tensor]
            .levels
            .get(target.depth)
            .cloned()
        else {
            return Ok(None);
        };
        let ty = self.kernel.bufs[val.0 as usize].elem;
        let acc = self.fresh(&format!("{}_acc", self.tensors[target.tensor].name), ty);
        let replaced = map_exprs(body.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| match t {
                Tensor::Fiber(f) if f == target => {
                    Ok(Expr::Access(Box::new(Tensor::Local(acc)), idx))
                }
                other => Ok(Expr::Access(Box::new(other), idx)),
            })
        })?;
        let mut code = vec![KStmt::Assign(acc, KExpr::load(val, target.pos.clone()))];
        code.extend(self.dispatch(index, lo.clone(), hi.clone(), replaced)?);
        code.push(KStmt::Store {
            buf: val,
            index: target.pos,
            value: KExpr::Local(acc),
        });
        Ok(Some(code))
    }
}
