//! A small prover for extent comparisons (issue #3's bounds prover): index expressions
//! are read as `base + c` (a local plus a constant, or a constant); `min`/`max` keep only
//! the terms that can decide (same base, or bases a fact orders); a phase `start..=end` is
//! provably empty when some term `start` is at least is greater than some term `end` is
//! at most. Facts `a <= b` come from level invariants (a fiber's last index is within the
//! level's size).
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

/// Facts the lowerer knows about run-time values: `(a, b)` means `a <= b` (e.g. a
/// SparseList fiber's last stored index + 1 is at most the level's size, invariant I5);
/// [`ZERO`] in a fact stands for the constant 0.
pub type Facts = [(LocalId, LocalId)];

/// The constant 0 in a fact: `(ZERO, x)` says `x >= 0` (no kernel has this many locals).
pub const ZERO: LocalId = LocalId(u32::MAX);

/// Is `x <= y` whatever the run-time values? Terms with one base compare their constants;
/// terms over `a` and `b` with a fact `a <= b` compare them too (a constant's base is
/// [`ZERO`]).
pub fn provably_le(x: &KExpr, y: &KExpr, facts: &Facts) -> bool {
    let (Some((bx, cx)), Some((by, cy))) = (linear(x), linear(y)) else {
        return false;
    };
    let (a, b) = (bx.unwrap_or(ZERO), by.unwrap_or(ZERO));
    cx <= cy && (a == b || ordered(a, b, facts))
}

/// `a <= b` by a fact, or by two (`a <= m`, `m <= b`).
fn ordered(a: LocalId, b: LocalId, facts: &Facts) -> bool {
    facts.contains(&(a, b))
        || facts
            .iter()
            .any(|&(x, m)| x == a && facts.contains(&(m, b)))
}

/// Folds `min`/`max` to the terms that can decide, flattening nested applications:
/// `min(n, n + 1)` is `n`, and `min(size, last)` is `last` given the fact `last <= size`.
/// Other expressions are kept.
pub fn fold_min_max(e: KExpr, facts: &Facts) -> KExpr {
    let op = match &e {
        KExpr::Op(op @ (Op::Min | Op::Max), _) => *op,
        _ => return e,
    };
    let all: Vec<KExpr> = terms(&e, op)
        .into_iter()
        .map(|t| fold_min_max(t.clone(), facts))
        .collect();
    // `x` decides over `y` when it is never worse: smaller for `min`, larger for `max`.
    let decides = |x: &KExpr, y: &KExpr| match op {
        Op::Min => provably_le(x, y, facts),
        _ => provably_le(y, x, facts),
    };
    let mut kept: Vec<KExpr> = Vec::new();
    for (i, x) in all.iter().enumerate() {
        // Dropped if another term decides over it (of two equivalent terms, the first stays).
        let dropped = all
            .iter()
            .enumerate()
            .any(|(j, y)| j != i && decides(y, x) && (j < i || !decides(x, y)));
        if !dropped {
            kept.push(x.clone());
        }
    }
    if kept.len() == 1 {
        kept.pop().unwrap_or(e)
    } else {
        KExpr::Op(op, kept)
    }
}

/// Is `start..=end` empty whatever the run-time values? True when a term that `start` is
/// at least (a `max` operand) provably exceeds a term that `end` is at most (a `min`
/// operand).
pub fn provably_empty(start: &KExpr, end: &KExpr, facts: &Facts) -> bool {
    let lows = terms(start, Op::Max);
    let highs = terms(end, Op::Min);
    let one = KExpr::int(1);
    lows.iter().any(|lo| {
        highs
            .iter()
            .any(|hi| provably_le(&((*hi).clone() + one.clone()), lo, facts))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n() -> KExpr {
        KExpr::Local(LocalId(3))
    }

    #[test]
    fn same_base_min_max_fold() {
        let e = KExpr::Op(Op::Min, vec![n(), n() - (-1)]);
        assert_eq!(fold_min_max(e, &[]), n());
        let e = KExpr::Op(Op::Max, vec![KExpr::int(1), KExpr::int(3), n()]);
        assert_eq!(
            fold_min_max(e, &[]),
            KExpr::Op(Op::Max, vec![KExpr::int(3), n()])
        );
        // With the fact last <= n: min(n, last) is last, max(n, last) is n.
        let last = KExpr::Local(LocalId(4));
        let facts = [(LocalId(4), LocalId(3))];
        let e = KExpr::Op(Op::Min, vec![n(), last.clone()]);
        assert_eq!(fold_min_max(e.clone(), &facts), last);
        assert_eq!(
            fold_min_max(e, &[]),
            KExpr::Op(Op::Min, vec![n(), last.clone()])
        );
        let e = KExpr::Op(Op::Max, vec![n(), last]);
        assert_eq!(fold_min_max(e, &facts), n());
    }

    #[test]
    fn empty_phases_are_recognised_and_others_are_not() {
        // 1 ..= min(n, -1) is empty; 1 ..= min(n, 1) is not (n may be 1 or more).
        let lo = KExpr::int(1);
        assert!(provably_empty(
            &lo,
            &KExpr::Op(Op::Min, vec![n(), KExpr::int(-1)]),
            &[]
        ));
        assert!(!provably_empty(
            &lo,
            &KExpr::Op(Op::Min, vec![n(), KExpr::int(1)]),
            &[]
        ));
        // max(1, n + 1) ..= n is empty; max(1, n) ..= n is not.
        let after = KExpr::Op(Op::Max, vec![lo.clone(), n() + 1]);
        assert!(provably_empty(&after, &n(), &[]));
        assert!(!provably_empty(
            &KExpr::Op(Op::Max, vec![lo, n()]),
            &n(),
            &[]
        ));
        // last + 1 ..= n is not empty even knowing last <= n; n + 1 ..= last is.
        let last = KExpr::Local(LocalId(4));
        let facts = [(LocalId(4), LocalId(3))];
        let plus1 = |e: KExpr| e + 1;
        assert!(!provably_empty(&plus1(last.clone()), &n(), &facts));
        assert!(provably_empty(&plus1(n()), &last, &facts));
        assert!(!provably_empty(&plus1(n()), &last, &[]));
    }

    #[test]
    fn zero_orders_constants_below_non_negative_locals() {
        // With 0 <= before <= last: max(1, before + 1) is before + 1, max(1, last + 1) is
        // last + 1 (two facts), and min(0, before) is 0; without them nothing folds.
        let (before, last) = (LocalId(5), LocalId(4));
        let facts = [(ZERO, before), (before, last)];
        let plus1 = |l: LocalId| KExpr::Local(l) + 1;
        let start = |l| KExpr::Op(Op::Max, vec![KExpr::int(1), plus1(l)]);
        assert_eq!(fold_min_max(start(before), &facts), plus1(before));
        assert_eq!(fold_min_max(start(last), &facts), plus1(last));
        assert_eq!(fold_min_max(start(before), &[]), start(before));
        let low = KExpr::Op(Op::Min, vec![KExpr::int(0), KExpr::Local(before)]);
        assert_eq!(fold_min_max(low.clone(), &facts), KExpr::int(0));
        assert_eq!(fold_min_max(low.clone(), &[]), low);
    }
}
