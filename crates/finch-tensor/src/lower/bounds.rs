//! A small prover for extent comparisons (issue #3's bounds prover): index expressions
//! are read as `base + c` (a local plus a constant, or a constant); `min`/`max` of terms
//! with the same base keep the one term that decides; a phase `start..=end` is provably
//! empty when some term `start` is at least is greater than some term `end` is at most.
//!
//! Index arithmetic is assumed not to overflow: extents are tensor sizes, far below
//! `i64::MAX`.

use crate::algebra::Op;
use crate::kernel::{KExpr, LocalId};

/// `e` as `base + c`: `(None, c)` for a constant, `(Some(local), c)` for a local plus a
/// constant; `None` for anything else.
fn linear(e: &KExpr) -> Option<(Option<LocalId>, i64)> {
    match e {
        KExpr::Lit(crate::algebra::Value::I64(n)) => Some((None, *n)),
        KExpr::Local(l) => Some((Some(*l), 0)),
        KExpr::Op(Op::Add, a) if a.len() == 2 => {
            let (x, y) = (linear(&a[0])?, linear(&a[1])?);
            match (x.0, y.0) {
                (b, None) | (None, b) => Some((b, x.1.checked_add(y.1)?)),
                _ => None,
            }
        }
        KExpr::Op(Op::Sub, a) if a.len() == 2 => {
            let (x, y) = (linear(&a[0])?, linear(&a[1])?);
            match y.0 {
                None => Some((x.0, x.1.checked_sub(y.1)?)),
                Some(_) => None,
            }
        }
        _ => None,
    }
}

/// The operands of nested `op` applications (`min(a, min(b, c))` → `a, b, c`).
fn terms(e: &KExpr, op: Op) -> Vec<&KExpr> {
    match e {
        KExpr::Op(o, args) if *o == op => args.iter().flat_map(|a| terms(a, op)).collect(),
        other => vec![other],
    }
}

/// Folds `min`/`max` of terms with the same base to the deciding term
/// (`min(n, n + 1)` → `n`), flattening nested applications; other expressions are kept.
pub fn fold_min_max(e: KExpr) -> KExpr {
    let op = match &e {
        KExpr::Op(op @ (Op::Min | Op::Max), _) => *op,
        _ => return e,
    };
    let mut kept: Vec<KExpr> = Vec::new();
    for t in terms(&e, op) {
        let t = fold_min_max(t.clone());
        let Some((base, c)) = linear(&t) else {
            kept.push(t);
            continue;
        };
        let same = kept
            .iter()
            .position(|k| linear(k).is_some_and(|(b, _)| b == base));
        match same {
            Some(p) => {
                let (_, d) = linear(&kept[p]).unwrap_or((base, c));
                let better = if op == Op::Min { c < d } else { c > d };
                if better {
                    kept[p] = t;
                }
            }
            None => kept.push(t),
        }
    }
    if kept.len() == 1 {
        kept.pop().unwrap_or(e)
    } else {
        KExpr::Op(op, kept)
    }
}

/// Is `start..=end` empty whatever the run-time values? True when a term that `start` is
/// at least (a `max` operand) exceeds a term that `end` is at most (a `min` operand),
/// both with the same base.
pub fn provably_empty(start: &KExpr, end: &KExpr) -> bool {
    let lows: Vec<_> = terms(start, Op::Max)
        .into_iter()
        .filter_map(linear)
        .collect();
    let highs: Vec<_> = terms(end, Op::Min).into_iter().filter_map(linear).collect();
    lows.iter()
        .any(|(b, c)| highs.iter().any(|(b2, c2)| b == b2 && c > c2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n() -> KExpr {
        KExpr::Local(LocalId(3))
    }

    #[test]
    fn same_base_min_max_fold() {
        let e = KExpr::Op(Op::Min, vec![n(), KExpr::bin(Op::Sub, n(), KExpr::int(-1))]);
        assert_eq!(fold_min_max(e), n());
        let e = KExpr::Op(Op::Max, vec![KExpr::int(1), KExpr::int(3), n()]);
        assert_eq!(
            fold_min_max(e),
            KExpr::Op(Op::Max, vec![KExpr::int(3), n()])
        );
    }

    #[test]
    fn empty_phases_are_recognised_and_others_are_not() {
        // 1 ..= min(n, -1) is empty; 1 ..= min(n, 1) is not (n may be 1 or more).
        let lo = KExpr::int(1);
        assert!(provably_empty(
            &lo,
            &KExpr::Op(Op::Min, vec![n(), KExpr::int(-1)])
        ));
        assert!(!provably_empty(
            &lo,
            &KExpr::Op(Op::Min, vec![n(), KExpr::int(1)])
        ));
        // max(1, n + 1) ..= n is empty; max(1, n) ..= n is not.
        let after = KExpr::Op(
            Op::Max,
            vec![lo.clone(), KExpr::bin(Op::Add, n(), KExpr::int(1))],
        );
        assert!(provably_empty(&after, &n()));
        assert!(!provably_empty(&KExpr::Op(Op::Max, vec![lo, n()]), &n()));
    }
}
