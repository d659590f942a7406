//! Concordization (finch-concordize): reads out of loop order or at computed indices
//! bound to one-index loops with range checks, reads at bound indices hoisted into
//! locals, and searches (`follow`) at a single index.

use super::*;

impl Lowerer {
    /// Concordization at the leaf (Finch paper §5.4): an access whose next index was
    /// already bound — an outer loop's index read in the wrong order (`A[i, j]` under
    /// `for i, for j` over a column-major `A`) or a computed index (`x[I[i]]`) — is read
    /// through a loop of one iteration over that value, after a check that it lies in
    /// the tensor: `for k = v:v` unfurls the level at `v` with its own protocol.
    pub(super) fn concordize(&mut self, s: &Stmt) -> Result<Option<Vec<KStmt>>> {
        let Some(exprs) = concordized_exprs(s) else {
            return Ok(None);
        };
        let Some((fiber, value)) = exprs.iter().find_map(first_bound_read) else {
            return Ok(None);
        };
        // A permissive computed index reads `missing` outside the tensor; its guard, if
        // any, is checked first.
        let (value, permissive, guard) = match value {
            Expr::Permissive(x, guard) => (*x, true, guard),
            v => (v, false, None),
        };
        let v = self.index_value(&value, fiber.tensor)?;
        let k = self.fresh("concordant", ScalarType::I64);
        let name = format!("concordant:{}", k.0);
        // The statement with that access's last index renamed to the new loop's index.
        let target = fiber.clone();
        let mut replaced = false;
        let mut rename = |t: Tensor, mut idx: Vec<Expr>| -> Result<Expr> {
            if !replaced && bound_access(&t, &idx) == Some(&target) {
                if let Some(last) = idx.last_mut() {
                    *last = Expr::Index(name.clone());
                }
                replaced = true;
            }
            Ok(Expr::Access(Box::new(t), idx))
        };
        let body = map_exprs(s.clone(), &mut |e| map_accesses(e, &mut rename))?;
        let size = self.level_size(&fiber)?;
        let outside = KExpr::Op(
            Op::Or,
            vec![
                KExpr::bin(Op::Lt, KExpr::Local(k), KExpr::int(1)),
                KExpr::bin(Op::Gt, KExpr::Local(k), size),
            ],
        );
        let inside = self.lower(Stmt::Loop {
            index: name,
            lo: KExpr::Local(k),
            hi: KExpr::Local(k),
            body: Box::new(body),
        })?;
        let mut code = Vec::new();
        if let Some(g) = guard {
            let (ok, _) = self.kexpr(&g)?;
            code.push(KStmt::If {
                cond: ok,
                then: vec![],
                otherwise: vec![KStmt::Fail(
                    crate::backend::c::OUTSIDE_WINDOW_BASE + fiber.tensor as i32,
                )],
            });
        }
        code.push(KStmt::Assign(k, v));
        let written = match s {
            Stmt::Assign { lhs, .. } => bound_access(&lhs.0, &lhs.1) == Some(&fiber),
            _ => false,
        };
        if permissive && written {
            // Outside the tensor, the statement writes to `Null`, which the simplifier
            // removes: only the check remains.
            let nowhere = match s.clone() {
                Stmt::Assign { lhs, op, rhs } => Stmt::Assign {
                    lhs: (Tensor::Null, lhs.1),
                    op,
                    rhs,
                },
                other => other,
            };
            code.push(KStmt::If {
                cond: outside,
                then: self.lower(nowhere)?,
                otherwise: inside,
            });
        } else if permissive {
            // Outside: the same statement with that read `missing` (a `coalesce` around it
            // gives the padding value).
            let mut gone = false;
            let mut miss = |t: Tensor, idx: Vec<Expr>| -> Result<Expr> {
                if !gone {
                    if let Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } = &t {
                        if *f == fiber && matches!(idx.last(), Some(Expr::Permissive(..))) {
                            gone = true;
                            return Ok(Expr::Lit(crate::algebra::Value::Missing));
                        }
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            };
            let padded = map_exprs(s.clone(), &mut |e| map_accesses(e, &mut miss))?;
            code.push(KStmt::If {
                cond: outside,
                then: self.lower(padded)?,
                otherwise: inside,
            });
        } else {
            code.push(KStmt::If {
                cond: outside,
                then: vec![KStmt::Fail(
                    crate::backend::c::INDEX_OUT_OF_RANGE_BASE + fiber.tensor as i32,
                )],
                otherwise: vec![],
            });
            code.extend(inside);
        }
        Ok(Some(code))
    }

    /// Reads at bound indices (random accesses, concordized one at a time) each read into
    /// a local of their own first, where concordizing them in the statement would copy it
    /// for every case of every read (the product of their phases, found or not, walked or
    /// searched, at each level): then the code is their sum. That is where a statement
    /// reads two or more, but the last (which stays, so that a factor's fill still skips
    /// the statement), and every one in the condition of an `if` or the value of a `let`,
    /// whose branches or body would be copied. Reads that may be `missing` (permissive)
    /// stay, as no local holds `missing`, unless a `coalesce` takes them (which moves
    /// with them); so does every read of a statement whose write is itself concordized
    /// (its range check comes first). The reads keep the order in which concordizing would
    /// take them, so the first out of range still stops the kernel. `None` when nothing
    /// moves.
    pub(super) fn hoist_bound_reads(&mut self, s: &Stmt) -> Result<Option<Vec<KStmt>>> {
        if let Some(split) = split_lazy_branch(s) {
            return self.lower(split).map(Some);
        }
        let (keep, rebuild): (usize, &dyn Fn(Stmt, Expr) -> Stmt) = match s {
            Stmt::Assign { lhs, .. } if bound_access(&lhs.0, &lhs.1).is_some() => return Ok(None),
            Stmt::Assign { lhs, .. } if lhs.1.iter().any(|x| bound_reads(x) > 0) => {
                return Ok(None)
            }
            Stmt::Assign { .. } => (1, &|s, e| match s {
                Stmt::Assign { lhs, op, .. } => Stmt::Assign { lhs, op, rhs: e },
                s => s,
            }),
            Stmt::Sieve { .. } => (0, &|s, e| match s {
                Stmt::Sieve {
                    then, otherwise, ..
                } => Stmt::Sieve {
                    cond: e,
                    then,
                    otherwise,
                },
                s => s,
            }),
            Stmt::Define { .. } => (0, &|s, e| match s {
                Stmt::Define { var, body, .. } => Stmt::Define {
                    var,
                    value: e,
                    body,
                },
                s => s,
            }),
            _ => return Ok(None),
        };
        let e = match s {
            Stmt::Assign { rhs: e, .. }
            | Stmt::Sieve { cond: e, .. }
            | Stmt::Define { value: e, .. } => e,
            _ => return Ok(None),
        };
        let mut found = 0;
        count_hoistable(e, &mut found);
        if found <= keep {
            return Ok(None);
        }
        let mut reads = Vec::new();
        let mut take = found - keep;
        let e = self.hoisted(e.clone(), &mut take, &mut reads)?;
        let mut code = Vec::new();
        for (l, read) in reads {
            code.extend(self.lower(Stmt::Assign {
                lhs: (Tensor::Local(l), vec![]),
                op: None,
                rhs: read,
            })?);
        }
        code.extend(self.lower(rebuild(s.clone(), e))?);
        Ok(Some(code))
    }

    /// `e` with its first `take` hoistable reads (see [`hoistable_expr`]) replaced by
    /// fresh locals, pushed to `reads` with the read each takes.
    pub(super) fn hoisted(
        &mut self,
        e: Expr,
        take: &mut usize,
        reads: &mut Vec<(LocalId, Expr)>,
    ) -> Result<Expr> {
        if hoistable_expr(&e) {
            if *take == 0 {
                return Ok(e);
            }
            *take -= 1;
            let Some(ty) = type_of(&e, self) else {
                return Ok(e);
            };
            let l = self.fresh("read", ty);
            reads.push((l, e));
            return Ok(Expr::Access(Box::new(Tensor::Local(l)), vec![]));
        }
        Ok(match e {
            Expr::Access(t, idx) => {
                let mut out = Vec::new();
                for x in idx {
                    out.push(self.hoisted(x, take, reads)?);
                }
                Expr::Access(t, out)
            }
            Expr::Call(op, args) => {
                let mut out = Vec::new();
                for x in args {
                    out.push(self.hoisted(x, take, reads)?);
                }
                Expr::Call(op, out)
            }
            e => e,
        })
    }

    /// The reads of a loop over one index (a concordized read, a spike's tail, a point of
    /// a phase) searched rather than walked: a walk over one index is its seek and its
    /// stepper's two loops, each with a copy of the rest of the statement for every phase
    /// (five to eight copies per read, multiplied across the reads of a level read at one
    /// index twice, `A[i, ~i]`), where a search is one branch on the hit, at the same cost
    /// (the walk's seek is the same binary search). Only reads at the index itself, and
    /// none with a permissive index: those keep their walks, whose padding phases read
    /// `missing` where a `coalesce` takes it (searched, a read of a level below a missing
    /// fiber read its fill where the reference reads `missing`).
    pub(super) fn searched_at_one_index(&self, body: Stmt, index: &str) -> Result<Stmt> {
        map_exprs(body, &mut |e| {
            map_accesses(e, &mut |mut t, idx| {
                if last_is(&idx, index) && !idx.iter().any(is_permissive) {
                    if let Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } = &mut t {
                        if self.searchable(f) {
                            f.protocols.set_follow(f.depth);
                        }
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        })
    }

    /// Can fiber `f`'s level, read, be searched (`follow`) where it would be walked?
    /// Sorted lists (a SparseList, a SparseCOO mode, a written list or hash table read
    /// back) and structured levels are; Dense levels are looked up anyway.
    pub(super) fn searchable(&self, f: &crate::looplets::Fiber) -> bool {
        if f.protocols.is_written() || f.depth >= crate::looplets::Protocols::MAX_DEPTH {
            return false;
        }
        self.tensors[f.tensor]
            .levels
            .get(f.depth)
            .is_some_and(LevelParams::searchable)
    }
}

/// Does the statement read a level at an already-bound index (to be concordized at the
/// leaf, so not integrable as a whole)?
pub(super) fn needs_concordizing(s: &Stmt) -> bool {
    let mut found = false;
    let _ = map_exprs(s.clone(), &mut |e| {
        found |= bound_reads(&e) > 0;
        Ok(e)
    });
    found
}

/// The first access in `e` (innermost first) whose last index is a value, with the fiber
/// it reads and that value: the read [`Lowerer::concordize`] takes next.
pub(super) fn first_bound_read(e: &Expr) -> Option<(crate::looplets::Fiber, Expr)> {
    match e {
        Expr::Access(t, idx) => idx
            .iter()
            .find_map(first_bound_read)
            .or_else(|| bound_access(t, idx).map(|f| (f.clone(), idx[idx.len() - 1].clone()))),
        Expr::Call(_, a) => a.iter().find_map(first_bound_read),
        _ => None,
    }
}

/// The expressions of a statement whose reads [`Lowerer::concordize`] looks at, in the
/// order `map_exprs` visits them (the written access first); `None` for a statement it
/// leaves to the others.
pub(super) fn concordized_exprs(s: &Stmt) -> Option<Vec<Expr>> {
    Some(match s {
        Stmt::Assign { lhs, rhs, .. } => vec![
            Expr::Access(Box::new(lhs.0.clone()), lhs.1.clone()),
            rhs.clone(),
        ],
        Stmt::Sieve { cond, .. } => vec![cond.clone()],
        Stmt::Define { value, .. } => vec![value.clone()],
        Stmt::SetScalar(_, e) | Stmt::SetLocal(_, e) => vec![e.clone()],
        _ => return None,
    })
}

/// Can the statement's next read at a bound index be concordized now: is its index free
/// of Switches? (`x[p[k]]`, `p` sparse: `p[k]` is a Switch between stored and fill until
/// it is resolved, and only then is `x`'s index a value.)
pub(super) fn concordizable_now(s: &Stmt) -> bool {
    concordized_exprs(s)
        .and_then(|exprs| exprs.iter().find_map(first_bound_read))
        .is_some_and(|(_, value)| !has_switch(&value))
}

/// Does `e` read a Switch anywhere?
pub(super) fn has_switch(e: &Expr) -> bool {
    match e {
        Expr::Access(t, idx) => matches!(**t, Tensor::Switch { .. }) || idx.iter().any(has_switch),
        Expr::Call(_, a) => a.iter().any(has_switch),
        Expr::Permissive(x, guard) => has_switch(x) || guard.as_deref().is_some_and(has_switch),
        _ => false,
    }
}

/// The accesses in `e` that read a level at an already-bound index.
/// `s` as an `if` on the condition of the first lazy branch its expression (a right-hand
/// side, an `if` condition or a `let` value) holds that reads at a bound index, with the
/// branch taken in place of the choice in each arm: `y[i] = ifelse(c, x[I[i]], 0.0)`
/// becomes `if c; y[i] = x[I[i]]; else; y[i] = 0.0; end`. A read at a bound index is
/// range-checked where it is concordized, before the statement runs, so in place its check
/// would stop the kernel for an index the branch not taken computes (`ifelse` runs only
/// the branch taken, `&&` and `||` only what decides them, as the reference does).
/// `None` when there is no such branch, or its condition may be `missing` (which an
/// `if` cannot take).
fn split_lazy_branch(s: &Stmt) -> Option<Stmt> {
    let sieve = |cond: Expr, then: Stmt, otherwise: Stmt| Stmt::Sieve {
        cond,
        then: Box::new(then),
        otherwise: Box::new(otherwise),
    };
    match s {
        Stmt::Assign { lhs, op, rhs } => {
            let (c, a, b) = lazy_branch(rhs)?;
            let arm = |rhs: Expr| Stmt::Assign {
                lhs: lhs.clone(),
                op: *op,
                rhs,
            };
            Some(sieve(c, arm(a), arm(b)))
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            let (c, a, b) = lazy_branch(cond)?;
            let arm = |cond: Expr| Stmt::Sieve {
                cond,
                then: then.clone(),
                otherwise: otherwise.clone(),
            };
            Some(sieve(c, arm(a), arm(b)))
        }
        Stmt::Define { var, value, body } => {
            let (c, a, b) = lazy_branch(value)?;
            let arm = |value: Expr| Stmt::Define {
                var: var.clone(),
                value,
                body: body.clone(),
            };
            Some(sieve(c, arm(a), arm(b)))
        }
        _ => None,
    }
}

/// The first lazy choice in `e` where it is always evaluated whose branch not always taken
/// reads at a bound index: its condition, and `e` with the choice replaced by what it
/// gives when the condition holds and when it does not (see [`split_lazy_branch`]). A
/// choice inside another's branch is left to that branch's own split, so that its
/// condition runs only where that branch is taken.
fn lazy_branch(e: &Expr) -> Option<(Expr, Expr, Expr)> {
    crate::simplify::split_on_first_choice(e, &|op, args| {
        let (c, a, b) = match (op, args) {
            (Op::IfElse, [c, a, b]) => (c, a.clone(), b.clone()),
            (Op::And, [c, b]) => (c, b.clone(), Expr::Lit(Value::Bool(false))),
            (Op::Or, [c, b]) => (c, Expr::Lit(Value::Bool(true)), b.clone()),
            _ => return None,
        };
        (bound_reads(&a) + bound_reads(&b) > 0 && !crate::simplify::may_be_missing(c))
            .then(|| (c.clone(), a, b))
    })
}

pub(super) fn bound_reads(e: &Expr) -> usize {
    match e {
        Expr::Access(t, idx) => {
            idx.iter().map(bound_reads).sum::<usize>() + usize::from(bound_access(t, idx).is_some())
        }
        Expr::Call(_, a) => a.iter().map(bound_reads).sum(),
        _ => 0,
    }
}

/// Is the access a read at a bound index (see [`bound_access`]) that never reads
/// `missing`, whose value a local can hold?
pub(super) fn hoistable(t: &Tensor, idx: &[Expr]) -> bool {
    bound_access(t, idx).is_some()
        && !crate::simplify::may_be_missing(&Expr::Access(Box::new(t.clone()), idx.to_vec()))
}

/// Is `e` a read [`Lowerer::hoist_bound_reads`] moves into a local: a [`hoistable`]
/// access, or a `coalesce` of a read at a bound index that may be `missing` (a
/// permissive one) with defaults that read nothing so, which is never `missing`?
pub(super) fn hoistable_expr(e: &Expr) -> bool {
    match e {
        Expr::Access(t, idx) => hoistable(t, idx),
        Expr::Call(Op::Coalesce, args) => {
            matches!(args.first(), Some(Expr::Access(t, idx)) if bound_access(t, idx).is_some())
                && args[1..].iter().all(|a| bound_reads(a) == 0)
                && !crate::simplify::may_be_missing(e)
        }
        _ => false,
    }
}

/// Counts the outermost hoistable reads in `e` (see [`hoistable_expr`]).
pub(super) fn count_hoistable(e: &Expr, n: &mut usize) {
    match e {
        e if hoistable_expr(e) => *n += 1,
        Expr::Access(_, idx) => idx.iter().for_each(|x| count_hoistable(x, n)),
        Expr::Call(_, args) => args.iter().for_each(|x| count_hoistable(x, n)),
        _ => {}
    }
}

/// The fiber an access reads at an already-bound index (a value, not a loop index still to
/// be lowered), itself or where present: such a read is concordized at the leaf.
pub(super) fn bound_access<'a>(t: &'a Tensor, idx: &[Expr]) -> Option<&'a crate::looplets::Fiber> {
    match (t, idx.last()) {
        (Tensor::Fiber(f) | Tensor::Present { fiber: f, .. }, Some(last))
            if !matches!(last, Expr::Index(_) | Expr::Wrapped { .. }) =>
        {
            Some(f)
        }
        _ => None,
    }
}
