//! Peephole rewrites on `i64` index arithmetic in kernel IR: constant folding (wrapping, as
//! the kernel computes), `0 * x = 0`, `1 * x = x`,
//! `x + 0 = x`, `x - 0 = x`, `(x - a) + b = x + (b - a)` and `(x + a) - b = x + (a - b)` for
//! literals `a`, `b`; comparisons of two `i64` literals, and an `if` on a constant becomes
//! its branch. Besides `i64` arithmetic (exact integer identities) only two exact float
//! rewrites: a cast of a literal that converts exactly is the converted literal, and
//! `1.0 * x = x` (exact in IEEE arithmetic: a Pattern leaf's `true` times `x`, which then
//! vectorizes). Other float arithmetic is left alone, so semantics are unchanged.

use super::ir::{Hint, KExpr, KStmt};
use crate::algebra::{Op, Value};

fn int(e: &KExpr) -> Option<i64> {
    match e {
        KExpr::Lit(Value::I64(n)) => Some(*n),
        _ => None,
    }
}

fn is_int_expr(e: &KExpr) -> bool {
    match e {
        KExpr::Lit(v) => matches!(v, Value::I64(_)),
        KExpr::Op(Op::Add | Op::Sub | Op::Mul, args) => args.iter().all(is_int_expr),
        KExpr::Len(_) | KExpr::Search { .. } => true,
        // Locals and loads may be i64 or not; only rewrite when a literal operand is i64,
        // which strict typing extends to the whole operation.
        _ => false,
    }
}

/// Rewrites an expression bottom-up.
pub fn tidy_expr(e: KExpr) -> KExpr {
    match e {
        KExpr::Op(op, args) => {
            let args: Vec<KExpr> = args.into_iter().map(tidy_expr).collect();
            if let (Op::Cast(ty), [KExpr::Lit(v)]) = (op, args.as_slice()) {
                if let Some(c) = v.convert_exact(ty) {
                    return KExpr::Lit(c);
                }
            }
            if op == Op::Mul && args.len() == 2 {
                let one = |e: &KExpr| matches!(e, KExpr::Lit(Value::F64(x)) if *x == 1.0);
                if one(&args[0]) {
                    return args[1].clone();
                }
                if one(&args[1]) {
                    return args[0].clone();
                }
            }
            let typed_i64 = args.iter().any(|a| int(a).is_some()) || args.iter().all(is_int_expr);
            if !typed_i64 || args.len() != 2 {
                return KExpr::Op(op, args);
            }
            let (a, b) = (&args[0], &args[1]);
            match (op, int(a), int(b)) {
                (Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne, Some(x), Some(y)) => {
                    let holds = match op {
                        Op::Lt => x < y,
                        Op::Le => x <= y,
                        Op::Gt => x > y,
                        Op::Ge => x >= y,
                        Op::Eq => x == y,
                        _ => x != y,
                    };
                    KExpr::Lit(Value::Bool(holds))
                }
                (Op::Add, Some(x), Some(y)) => KExpr::int(x.wrapping_add(y)),
                (Op::Sub, Some(x), Some(y)) => KExpr::int(x.wrapping_sub(y)),
                (Op::Mul, Some(x), Some(y)) => KExpr::int(x.wrapping_mul(y)),
                (Op::Mul, Some(0), _) | (Op::Mul, _, Some(0)) => KExpr::int(0),
                (Op::Mul, Some(1), _) => b.clone(),
                (Op::Mul, _, Some(1)) | (Op::Add, _, Some(0)) | (Op::Sub, _, Some(0)) => a.clone(),
                (Op::Add, Some(0), _) => b.clone(),
                (Op::Add, None, Some(c)) => match a {
                    KExpr::Op(Op::Sub, inner) if inner.len() == 2 && int(&inner[1]).is_some() => {
                        let d = c.wrapping_sub(int(&inner[1]).unwrap_or(0));
                        tidy_expr(inner[0].clone() + d)
                    }
                    _ => KExpr::Op(op, args),
                },
                (Op::Sub, None, Some(c)) => match a {
                    KExpr::Op(Op::Add, inner) if inner.len() == 2 && int(&inner[1]).is_some() => {
                        let d = int(&inner[1]).unwrap_or(0).wrapping_sub(c);
                        tidy_expr(inner[0].clone() + d)
                    }
                    // `x - (-c)` reads better as `x + c` (same wrapping result).
                    _ if c < 0 && c != i64::MIN => a.clone() + (-c),
                    _ => KExpr::Op(op, args),
                },
                _ => KExpr::Op(op, args),
            }
        }
        KExpr::Load(b, i) => KExpr::Load(b, Box::new(tidy_expr(*i))),
        KExpr::Search { buf, value, lo, hi } => KExpr::Search {
            buf,
            value: Box::new(tidy_expr(*value)),
            lo: Box::new(tidy_expr(*lo)),
            hi: Box::new(tidy_expr(*hi)),
        },
        other => other,
    }
}

/// Rewrites every expression of a statement list; an `if` on a constant is its branch.
pub fn tidy(body: Vec<KStmt>) -> Vec<KStmt> {
    body.into_iter()
        .flat_map(|s| match tidy_stmt(s) {
            KStmt::If {
                cond: KExpr::Lit(Value::Bool(c)),
                then,
                otherwise,
            } => {
                if c {
                    then
                } else {
                    otherwise
                }
            }
            s => vec![s],
        })
        .collect()
}

fn tidy_stmt(s: KStmt) -> KStmt {
    match s {
        KStmt::Assign(l, e) => KStmt::Assign(l, tidy_expr(e)),
        KStmt::Store { buf, index, value } => KStmt::Store {
            buf,
            index: tidy_expr(index),
            value: tidy_expr(value),
        },
        KStmt::Resize { buf, len, fill } => KStmt::Resize {
            buf,
            len: tidy_expr(len),
            fill,
        },
        KStmt::Sort { buf, lo, hi } => KStmt::Sort {
            buf,
            lo: tidy_expr(lo),
            hi: tidy_expr(hi),
        },
        KStmt::For { var, lo, hi, body } => KStmt::For {
            var,
            lo: tidy_expr(lo),
            hi: tidy_expr(hi),
            body: tidy(body),
        },
        KStmt::While { cond, body } => KStmt::While {
            cond: tidy_expr(cond),
            body: tidy(body),
        },
        KStmt::If {
            cond,
            then,
            otherwise,
        } => KStmt::If {
            cond: tidy_expr(cond),
            then: tidy(then),
            otherwise: tidy(otherwise),
        },
        KStmt::Break => KStmt::Break,
        KStmt::Fail(c) => KStmt::Fail(c),
        KStmt::Hint(Hint::Prefetch { buf, index, ahead }) => KStmt::Hint(Hint::Prefetch {
            buf,
            index: tidy_expr(index),
            ahead,
        }),
        KStmt::Hint(h) => KStmt::Hint(h),
    }
}
