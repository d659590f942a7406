//! Four rows at a time, for the scalar loops of kernels that keep their floating-point
//! order (no `reassociate`).
//!
//! A row sum in strict order is one chain of dependent additions; on long rows (a
//! triangle's, of hundreds of entries) the processor cannot reach the next row's chain
//! while one runs, so the row loop waits on the adder's latency (3 cycles on Zen 3). An
//! outer loop whose every iteration sums one row along one inner `for` loop, and whose rows
//! touch different outputs, therefore runs four rows per iteration: the rows' setup, then
//! one inner loop over all four rows' entries while all have entries left, then each row's
//! rest alone, then the rows' stores. Each row still adds its own terms one at a time, in
//! order, so results are bit for bit those of the plain loop; the products of the joint
//! loop, which need no order, the C compiler may compute two at a time. Strict SpMV on
//! Zen 3, generated C, two rows at a time (as before) / four: a band of 61 per row 0.27 /
//! 0.20 ms, a 1024 x 1024 upper triangle 0.25 / 0.15 ms, a dense 1000 x 1000 matrix 0.48 /
//! 0.25 ms (one row at a time, hand-written: 0.36 and 0.46 ms on the first two).
//!
//! The joint loop counts one position `k_` for all four rows, and each row reads what it
//! reads at consecutive positions ([`based_loads`]) through a pointer of its own, set up
//! once per row at its first position: an iteration is then the loads and arithmetic of
//! the terms alone. The pointers' offsets and the rows' counts are written in their
//! simplest form ([`affine`]): through the setup's definitions a band row's values start
//! at its `ofs`, which the C compiler does not find by itself in
//! `(ofs_end - 1 - last) + (last - (ofs_end - ofs) + 1)`. At 5 instructions a cycle (a
//! band of 11 per row on Zen 3), each one a row adds shows: SpMV over that band,
//! generated, 0.052 ms with the rows advancing a column each and their offsets as the
//! level writes them, 0.042 with one counter and simplified pointers, against CSR's
//! 0.063 (`bench/band_limit.c` has the hand-written limit, 0.036 ms).
//!
//! An outer loop over `i` qualifies when its body is straight-line assignments and stores,
//! then one inner `for` loop (alone, or alone under an `if` with no `else`), then
//! straight-line assignments and stores; the inner loop's body is assignments only; every
//! store of a buffer is at one position `i + c` (`c` the same for every row) and every load
//! of a written buffer is at that position, so rows never touch each other's outputs; a
//! local the body assigns is assigned before it is read in each row and read nowhere
//! outside the loop; and nothing in it can fail.

use std::collections::{HashMap, HashSet};

use super::prefetch::consecutive;
use super::simd::{count_reads, mentions_any};
use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::{BufId, KExpr, KStmt, Kernel, LocalId};

/// The parts of a row loop's body.
pub(super) struct Rows<'a> {
    /// The row loop's variable.
    pub var: LocalId,
    /// Before the inner loop.
    pub prefix: &'a [KStmt],
    /// The condition the inner loop runs under (`None`: always).
    pub guard: Option<&'a KExpr>,
    /// The inner loop's variable, bounds and body.
    pub inner: (LocalId, &'a KExpr, &'a KExpr, &'a [KStmt]),
    /// After the inner loop.
    pub suffix: &'a [KStmt],
    /// The locals each row past the first needs its own copy of: the row variable and
    /// every local the body assigns.
    pub own: Vec<LocalId>,
}

/// The parts of the body of `for var` when several rows can run at once (see the module
/// docs); `reads` counts every read of each local in the kernel.
pub(super) fn rows<'a>(
    k: &Kernel,
    reads: &HashMap<LocalId, usize>,
    var: LocalId,
    body: &'a [KStmt],
) -> Option<Rows<'a>> {
    let straight = |s: &[KStmt]| {
        s.iter()
            .all(|x| matches!(x, KStmt::Assign(..) | KStmt::Store { .. }))
    };
    let at = body
        .iter()
        .position(|s| !straight(std::slice::from_ref(s)))?;
    let (prefix, suffix) = (&body[..at], &body[at + 1..]);
    // The first, middle and last rows' setups run once more to decide whether to run rows
    // together: assignments only, so running them again changes nothing.
    if !straight(suffix) || !prefix.iter().all(|s| matches!(s, KStmt::Assign(..))) {
        return None;
    }
    let (guard, inner) = match &body[at] {
        KStmt::If {
            cond,
            then,
            otherwise,
        } if otherwise.is_empty() => match then.as_slice() {
            [inner @ KStmt::For { .. }] => (Some(cond), inner),
            _ => return None,
        },
        inner @ KStmt::For { .. } => (None, inner),
        _ => return None,
    };
    let KStmt::For {
        var: j,
        lo,
        hi,
        body: inner_body,
    } = inner
    else {
        return None;
    };
    if !inner_body.iter().all(|s| matches!(s, KStmt::Assign(..))) {
        return None;
    }
    // The locals a row assigns (the inner variable included) and the row variable.
    let mut own: HashSet<LocalId> = HashSet::from([var, *j]);
    for s in body.iter().chain(inner_body) {
        if let KStmt::Assign(l, _) = s {
            own.insert(*l);
        }
    }
    if own.iter().any(|l| k.outputs.contains(l)) {
        return None;
    }
    // Read only inside the loop (its bounds are evaluated before it).
    let mut inside = HashMap::new();
    count_reads(body, &mut inside);
    if own
        .iter()
        .any(|l| reads.get(l).copied().unwrap_or(0) > inside.get(l).copied().unwrap_or(0))
    {
        return None;
    }
    // Assigned before read in each row: a row reads nothing another row left behind.
    let mut defined: HashSet<LocalId> = HashSet::from([var]);
    let ready = |e: &KExpr, defined: &HashSet<LocalId>| {
        let pending: HashSet<LocalId> = own.difference(defined).copied().collect();
        !mentions_any(e, &pending)
    };
    let assigns = |s: &[KStmt], defined: &mut HashSet<LocalId>| {
        s.iter().all(|x| match x {
            KStmt::Assign(l, e) => {
                let ok = ready(e, defined);
                defined.insert(*l);
                ok
            }
            KStmt::Store { index, value, .. } => ready(index, defined) && ready(value, defined),
            _ => false,
        })
    };
    if !assigns(prefix, &mut defined)
        || !guard.is_none_or(|g| ready(g, &defined))
        || !ready(lo, &defined)
        || !ready(hi, &defined)
    {
        return None;
    }
    let mut in_loop = defined.clone();
    in_loop.insert(*j);
    // What the inner loop assigns may not happen (no entries, or the guard false).
    if !assigns(inner_body, &mut in_loop) || !assigns(suffix, &mut defined) {
        return None;
    }
    // Each written buffer at one position `var + c`; written buffers read only there.
    let mut written: HashMap<BufId, &KExpr> = HashMap::new();
    let others: HashSet<LocalId> = own.iter().copied().filter(|l| *l != var).collect();
    for s in prefix.iter().chain(suffix) {
        if let KStmt::Store { buf, index, .. } = s {
            let p = k.bufs.get(buf.0 as usize)?;
            if p.growable || !consecutive(index, var, &others) {
                return None;
            }
            if *written.entry(*buf).or_insert(index) != index {
                return None;
            }
        }
    }
    let mut apart = true;
    crate::kernel::visit_exprs(body, &mut |e| apart &= reads_apart(e, &written));
    apart.then(|| {
        let mut own: Vec<LocalId> = own.into_iter().collect();
        own.sort();
        Rows {
            var,
            prefix,
            guard,
            inner: (*j, lo, hi, inner_body),
            suffix,
            own,
        }
    })
}

/// Every load of a written buffer in `e` is at that buffer's row position, and `e` asks
/// no written buffer for its length or searches it.
fn reads_apart(e: &KExpr, written: &HashMap<BufId, &KExpr>) -> bool {
    match e {
        KExpr::Lit(_) | KExpr::Local(_) => true,
        KExpr::Len(b) => !written.contains_key(b),
        KExpr::Load(b, i) => {
            written.get(b).is_none_or(|at| *at == i.as_ref()) && reads_apart(i, written)
        }
        KExpr::Op(_, a) => a.iter().all(|x| reads_apart(x, written)),
        KExpr::Search { buf, value, lo, hi } => {
            !written.contains_key(buf)
                && reads_apart(value, written)
                && reads_apart(lo, written)
                && reads_apart(hi, written)
        }
    }
}

/// The loads of `inner` (the body of the rows' inner loop over `j`) that a row can read
/// through a pointer of its own: from a buffer the kernel neither writes nor grows, at
/// `j + c` with `c` fixed for the row. The joint loop reads them as `base[k_]` along one
/// counter shared by the rows, which keeps each iteration to the loads and arithmetic of
/// the terms (see [`Rows`]).
pub(super) fn based_loads(k: &Kernel, j: LocalId, inner: &[KStmt]) -> Vec<(BufId, KExpr)> {
    let assigned: HashSet<LocalId> = inner
        .iter()
        .filter_map(|s| match s {
            KStmt::Assign(l, _) => Some(*l),
            _ => None,
        })
        .collect();
    super::prefetch::contiguous_loads(k, j, inner, &assigned)
}

/// The locals a row's setup assigns exactly once, with their `i64` definitions: what
/// [`affine`] may replace by its definition (a definition reads only locals the setup has
/// already assigned, see [`rows`], so its value is the local's).
pub(super) fn setup_definitions<'a>(
    k: &Kernel,
    prefix: &'a [KStmt],
) -> HashMap<LocalId, &'a KExpr> {
    let mut count: HashMap<LocalId, usize> = HashMap::new();
    for s in prefix {
        if let KStmt::Assign(l, _) = s {
            *count.entry(*l).or_default() += 1;
        }
    }
    let many: HashSet<LocalId> = count
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(l, _)| *l)
        .collect();
    prefix
        .iter()
        .filter_map(|s| match s {
            KStmt::Assign(l, e)
                if count.get(l) == Some(&1)
                    && k.locals.get(l.0 as usize).map(|x| x.ty) == Some(ScalarType::I64)
                    && !mentions_any(e, &many) =>
            {
                Some((*l, e))
            }
            _ => None,
        })
        .collect()
}

/// An `i64` expression as `constant + Σ coefficient × atom` (wrapping, as the kernels'
/// integer arithmetic is): the atoms are the parts that are not sums, differences,
/// negations, products by a constant or locals with a definition.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Affine {
    constant: i64,
    terms: Vec<(KExpr, i64)>,
}

/// How many nodes [`affine`] visits before it gives up (definitions that refer to each
/// other many times over would otherwise grow without bound).
const AFFINE_BUDGET: usize = 256;

impl Affine {
    fn add(mut self, other: Affine, sign: i64) -> Affine {
        self.constant = self
            .constant
            .wrapping_add(other.constant.wrapping_mul(sign));
        for (atom, c) in other.terms {
            let c = c.wrapping_mul(sign);
            match self.terms.iter_mut().find(|(a, _)| *a == atom) {
                Some((_, x)) => *x = x.wrapping_add(c),
                None => self.terms.push((atom, c)),
            }
        }
        self.terms.retain(|(_, c)| *c != 0);
        self
    }

    fn scale(mut self, by: i64) -> Affine {
        self.constant = self.constant.wrapping_mul(by);
        for (_, c) in &mut self.terms {
            *c = c.wrapping_mul(by);
        }
        self.terms.retain(|(_, c)| *c != 0);
        self
    }

    /// The form as an expression: the terms with positive coefficients first, then the
    /// rest subtracted, then the constant.
    pub(super) fn to_expr(&self) -> KExpr {
        let lit = |c: i64| KExpr::Lit(Value::I64(c));
        let mut terms: Vec<&(KExpr, i64)> = self.terms.iter().collect();
        terms.sort_by_key(|(_, c)| *c < 0);
        let mut acc: Option<KExpr> = None;
        for (atom, c) in terms {
            let (negative, magnitude) = (*c < 0 && *c != i64::MIN, c.wrapping_abs());
            let term = if magnitude == 1 {
                atom.clone()
            } else {
                KExpr::Op(Op::Mul, vec![lit(magnitude), atom.clone()])
            };
            acc = Some(match acc {
                None if negative => KExpr::Op(Op::Neg, vec![term]),
                None => term,
                Some(a) if negative => KExpr::Op(Op::Sub, vec![a, term]),
                Some(a) => KExpr::Op(Op::Add, vec![a, term]),
            });
        }
        match (acc, self.constant) {
            (None, c) => lit(c),
            (Some(a), 0) => a,
            (Some(a), c) if c < 0 && c != i64::MIN => KExpr::Op(Op::Sub, vec![a, lit(-c)]),
            (Some(a), c) => KExpr::Op(Op::Add, vec![a, lit(c)]),
        }
    }
}

/// `e`, an `i64` expression whose operators `is_i64` confirms, as an affine form over
/// atoms, with the locals of `defs` replaced by their definitions (see [`Affine`]); `None`
/// past [`AFFINE_BUDGET`] nodes. The form's value equals `e`'s (modulo 2^64).
pub(super) fn affine(
    e: &KExpr,
    defs: &HashMap<LocalId, &KExpr>,
    is_i64: &dyn Fn(&KExpr) -> bool,
) -> Option<Affine> {
    fn go(
        e: &KExpr,
        defs: &HashMap<LocalId, &KExpr>,
        is_i64: &dyn Fn(&KExpr) -> bool,
        budget: &mut usize,
    ) -> Option<Affine> {
        *budget = budget.checked_sub(1)?;
        let atom = || Affine {
            constant: 0,
            terms: vec![(e.clone(), 1)],
        };
        Some(match e {
            KExpr::Lit(Value::I64(c)) => Affine {
                constant: *c,
                terms: vec![],
            },
            KExpr::Local(l) => match defs.get(l) {
                Some(d) => go(d, defs, is_i64, budget)?,
                None => atom(),
            },
            KExpr::Op(op, a) if is_i64(e) => match (op, a.as_slice()) {
                (Op::Add, _) => {
                    let mut sum = Affine::default();
                    for x in a {
                        sum = sum.add(go(x, defs, is_i64, budget)?, 1);
                    }
                    sum
                }
                (Op::Sub, [x, y]) => {
                    go(x, defs, is_i64, budget)?.add(go(y, defs, is_i64, budget)?, -1)
                }
                (Op::Neg, [x]) => go(x, defs, is_i64, budget)?.scale(-1),
                (Op::Mul, [x, y]) => {
                    let (fx, fy) = (go(x, defs, is_i64, budget)?, go(y, defs, is_i64, budget)?);
                    if fx.terms.is_empty() {
                        fy.scale(fx.constant)
                    } else if fy.terms.is_empty() {
                        fx.scale(fy.constant)
                    } else {
                        atom()
                    }
                }
                _ => atom(),
            },
            _ => atom(),
        })
    }
    let mut budget = AFFINE_BUDGET;
    go(e, defs, is_i64, &mut budget)
}

/// `e` with every read of `var` replaced by `by`.
pub(super) fn substitute(e: &KExpr, var: LocalId, by: &KExpr) -> KExpr {
    match e {
        KExpr::Local(l) if *l == var => by.clone(),
        KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => e.clone(),
        KExpr::Load(b, i) => KExpr::Load(*b, Box::new(substitute(i, var, by))),
        KExpr::Op(op, a) => KExpr::Op(*op, a.iter().map(|x| substitute(x, var, by)).collect()),
        KExpr::Search { buf, value, lo, hi } => KExpr::Search {
            buf: *buf,
            value: Box::new(substitute(value, var, by)),
            lo: Box::new(substitute(lo, var, by)),
            hi: Box::new(substitute(hi, var, by)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(n: u32) -> KExpr {
        KExpr::Local(LocalId(n))
    }
    fn lit(c: i64) -> KExpr {
        KExpr::Lit(Value::I64(c))
    }
    fn op(o: Op, a: Vec<KExpr>) -> KExpr {
        KExpr::Op(o, a)
    }
    fn load(b: u32, i: KExpr) -> KExpr {
        KExpr::Load(BufId(b), Box::new(i))
    }

    /// A band row's value offset at its first column, from the definitions of its setup:
    /// `(end - 1 - last) + first` with `first = last - (end - start) + 1` is `start`.
    #[test]
    fn affine_forms_cancel_through_definitions() {
        let (end, last, first) = (local(5), local(6), local(11));
        let start = load(1, op(Op::Sub, vec![local(4), lit(1)]));
        let first_def = op(
            Op::Add,
            vec![
                op(
                    Op::Sub,
                    vec![last.clone(), op(Op::Sub, vec![end.clone(), start.clone()])],
                ),
                lit(1),
            ],
        );
        let defs = HashMap::from([(LocalId(11), &first_def)]);
        let offset = op(
            Op::Add,
            vec![
                op(Op::Sub, vec![op(Op::Sub, vec![end, lit(1)]), last]),
                first,
            ],
        );
        let form = affine(&offset, &defs, &|_| true).unwrap();
        assert_eq!(form.to_expr(), start);
    }

    #[test]
    fn affine_forms_scale_and_keep_other_products_whole() {
        let (a, b) = (local(1), local(2));
        // 3 * (a - 2) - (a * b) + a * 1 + -(b) => 4a - ab - b - 6
        let e = op(
            Op::Add,
            vec![
                op(Op::Mul, vec![lit(3), op(Op::Sub, vec![a.clone(), lit(2)])]),
                op(Op::Neg, vec![op(Op::Mul, vec![a.clone(), b.clone()])]),
                op(Op::Mul, vec![a.clone(), lit(1)]),
                op(Op::Neg, vec![b.clone()]),
            ],
        );
        let form = affine(&e, &HashMap::new(), &|_| true).unwrap();
        let ab = op(Op::Mul, vec![a.clone(), b.clone()]);
        assert_eq!(
            form.to_expr(),
            op(
                Op::Sub,
                vec![
                    op(
                        Op::Sub,
                        vec![op(Op::Sub, vec![op(Op::Mul, vec![lit(4), a]), ab]), b]
                    ),
                    lit(6)
                ]
            )
        );
        // Everything cancels: a constant.
        let zero = op(Op::Sub, vec![e.clone(), e]);
        assert_eq!(
            affine(&zero, &HashMap::new(), &|_| true).unwrap().to_expr(),
            lit(0)
        );
    }

    /// Wrapping as the kernels' arithmetic: `i64::MIN` has no negation, and a sum that
    /// overflows folds modulo 2^64.
    #[test]
    fn affine_forms_wrap() {
        let a = local(1);
        let e = op(
            Op::Sub,
            vec![
                op(Op::Add, vec![a.clone(), lit(i64::MAX)]),
                op(Op::Neg, vec![lit(1)]),
            ],
        );
        let form = affine(&e, &HashMap::new(), &|_| true).unwrap();
        assert_eq!(form.to_expr(), op(Op::Add, vec![a.clone(), lit(i64::MIN)]));
        let m = op(Op::Mul, vec![lit(i64::MIN), a.clone()]);
        let form = affine(&m, &HashMap::new(), &|_| true).unwrap();
        assert_eq!(form.to_expr(), op(Op::Mul, vec![lit(i64::MIN), a]));
    }

    /// Operators that are not `i64` stay whole, and definitions that refer to each other
    /// many times over give up rather than grow.
    #[test]
    fn affine_forms_stop_at_other_types_and_at_their_budget() {
        let f = op(Op::Add, vec![local(1), local(1)]);
        let form = affine(&f, &HashMap::new(), &|_| false).unwrap();
        assert_eq!(form.to_expr(), f);
        // l_k = l_{k-1} + l_{k-1}: 2^20 leaves.
        let defs_owned: Vec<(LocalId, KExpr)> = (1..=20)
            .map(|k| (LocalId(k), op(Op::Add, vec![local(k - 1), local(k - 1)])))
            .collect();
        let defs: HashMap<LocalId, &KExpr> = defs_owned.iter().map(|(l, e)| (*l, e)).collect();
        assert!(affine(&local(20), &defs, &|_| true).is_none());
        assert_eq!(
            affine(&local(3), &defs, &|_| true).unwrap().to_expr(),
            op(Op::Mul, vec![lit(8), local(0)])
        );
    }
}
