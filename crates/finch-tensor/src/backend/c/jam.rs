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
//! Rows that walk over steps, each step one run of the inner loop (a SparseBlockList row:
//! a step per block), run together stretch by stretch ([`Walk`]): the rows' inner loops
//! along one counter up to the nearest end of one, then each row whose loop ended takes
//! its next step. Each stretch ends in a branch the predictor misses, so this pays only
//! for steps of several entries (strict SpMV on Zen 3, generated, four rows: blocks of 32
//! entries on average 0.66 -> 0.48 ms, qc324's 33 0.017 -> 0.009 ms, bcsstk16's 7.8 0.214
//! -> 0.185 ms; bcsstk38's 6.6 0.42 -> 0.53 ms, so they stay plain). Rows from beyond the
//! cache run two at a time with prefetching strips instead (see `Emitter::walk_rows`).
//!
//! An outer loop over `i` qualifies when its body is assignments (and `if`s of them), then
//! one inner `for` loop or one walk `while c { head; for ...; tail }` (head and tail
//! assignments and `if`s of them), alone or after assignments under an `if` with no
//! `else`, then straight-line assignments and stores; the inner loop's body is assignments only; every
//! store of a buffer is at one position `i + c` (`c` the same for every row) and every load
//! of a written buffer is at that position, so rows never touch each other's outputs; a
//! local the body assigns is assigned before it is read in each row (a walk's condition
//! and head read only what the setup or the head assigned) and read nowhere outside the
//! loop; and nothing in it can fail.

use std::collections::{HashMap, HashSet};

use super::prefetch::consecutive;
use super::simd::{count_reads, mentions_any};
use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::{BufId, KExpr, KStmt, Kernel, LocalId};

/// The parts of a row loop's body.
pub(super) struct Rows<'a> {
    /// The row loop's variable.
    pub var: LocalId,
    /// Before the inner loop (assignments, and `if`s of assignments).
    pub prefix: &'a [KStmt],
    /// The condition the inner loop (or the walk) runs under (`None`: always).
    pub guard: Option<&'a KExpr>,
    /// The walk the inner loop runs in, if any: the inner loop runs once per step.
    pub walk: Option<Walk<'a>>,
    /// The inner loop's variable, bounds and body.
    pub inner: (LocalId, &'a KExpr, &'a KExpr, &'a [KStmt]),
    /// After the inner loop.
    pub suffix: &'a [KStmt],
    /// The locals each row past the first needs its own copy of: the row variable and
    /// every local the body assigns.
    pub own: Vec<LocalId>,
}

/// A walk whose every step runs the rows' inner loop once: `preloop; while cond { head;
/// for ...; tail }` (a SparseBlockList row: a step per block, the inner loop over the
/// block's entries). The rows then run their inner loops together stretch by stretch, up
/// to the nearest end of a row's current one, the rows whose loop ended moving on to their
/// next step in between (see `Emitter::walk_rows`).
pub(super) struct Walk<'a> {
    /// Under the guard, before the walk.
    pub preloop: &'a [KStmt],
    /// The walk's condition.
    pub cond: &'a KExpr,
    /// A step's statements before the inner loop.
    pub head: &'a [KStmt],
    /// A step's statements after it.
    pub tail: &'a [KStmt],
    /// The walk's loop (`while cond { head; for ...; tail }`).
    pub looped: &'a KStmt,
}

/// Assignments, and `if`s of them: what a row's setup, or a walk's step around its inner
/// loop, may hold (nothing in them has an effect past the row's own locals).
fn is_setup(s: &KStmt) -> bool {
    match s {
        KStmt::Assign(..) => true,
        KStmt::If {
            then, otherwise, ..
        } => then.iter().chain(otherwise).all(is_setup),
        _ => false,
    }
}

/// Every local `stmts` assign, in any branch or loop, with loop variables.
fn assigned_locals(stmts: &[KStmt], out: &mut HashSet<LocalId>) {
    for s in stmts {
        match s {
            KStmt::Assign(l, _) => {
                out.insert(*l);
            }
            KStmt::For { var, body, .. } => {
                out.insert(*var);
                assigned_locals(body, out);
            }
            KStmt::While { body, .. } => assigned_locals(body, out),
            KStmt::If {
                then, otherwise, ..
            } => {
                assigned_locals(then, out);
                assigned_locals(otherwise, out);
            }
            _ => {}
        }
    }
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
    // The first, middle and last rows' setups run once more to decide whether to run rows
    // together: assignments only, so running them again changes nothing.
    let at = body.iter().position(|s| !is_setup(s))?;
    let (prefix, suffix) = (&body[..at], &body[at + 1..]);
    if !straight(suffix) {
        return None;
    }
    let (guard, guarded): (Option<&KExpr>, &[KStmt]) = match &body[at] {
        KStmt::If {
            cond,
            then,
            otherwise,
        } if otherwise.is_empty() => (Some(cond), then.as_slice()),
        s => (None, std::slice::from_ref(s)),
    };
    let (looped, preloop) = guarded.split_last()?;
    let (walk, inner) = match looped {
        inner @ KStmt::For { .. } if preloop.is_empty() => (None, inner),
        KStmt::While { cond, body: step } if preloop.iter().all(is_setup) => {
            let at = step.iter().position(|s| !is_setup(s))?;
            let (head, tail) = (&step[..at], &step[at + 1..]);
            if !tail.iter().all(is_setup) {
                return None;
            }
            let walk = Walk {
                preloop,
                cond,
                head,
                tail,
                looped,
            };
            (Some(walk), &step[at])
        }
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
    let mut own: HashSet<LocalId> = HashSet::from([var]);
    assigned_locals(body, &mut own);
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
    // Assigned before read in each row: a row reads nothing another row left behind. What
    // a branch assigns counts after it where both branches assign it; what a loop assigns
    // (its body may not run) counts only inside it, and a walk's condition and the head of
    // a step read only what was assigned before the walk or earlier in the step.
    let ready = |e: &KExpr, defined: &HashSet<LocalId>| {
        let pending: HashSet<LocalId> = own.difference(defined).copied().collect();
        !mentions_any(e, &pending)
    };
    let mut defined: HashSet<LocalId> = HashSet::from([var]);
    if !assigned_first(prefix, &mut defined, &ready) || !guard.is_none_or(|g| ready(g, &defined)) {
        return None;
    }
    let mut in_step = defined.clone();
    if let Some(w) = &walk {
        if !assigned_first(w.preloop, &mut in_step, &ready)
            || !ready(w.cond, &in_step)
            || !assigned_first(w.head, &mut in_step, &ready)
        {
            return None;
        }
    }
    if !ready(lo, &in_step) || !ready(hi, &in_step) {
        return None;
    }
    let mut in_loop = in_step.clone();
    in_loop.insert(*j);
    // What the inner loop assigns may not happen (no entries, or the guard false).
    if !assigned_first(inner_body, &mut in_loop, &ready)
        || !walk
            .as_ref()
            .is_none_or(|w| assigned_first(w.tail, &mut in_step, &ready))
        || !assigned_first(suffix, &mut defined, &ready)
    {
        return None;
    }
    // Each written buffer at one position `var + c`; written buffers read only there.
    let mut written: HashMap<BufId, &KExpr> = HashMap::new();
    let others: HashSet<LocalId> = own.iter().copied().filter(|l| *l != var).collect();
    for s in suffix {
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
            walk,
            inner: (*j, lo, hi, inner_body),
            suffix,
            own,
        }
    })
}

/// Whether every local `stmts` (assignments, stores and `if`s of them) read is in
/// `defined` or assigned before it in `stmts` (`ready` decides); `defined` grows by what
/// they assign (by a branch's assignments where both branches make them).
fn assigned_first(
    stmts: &[KStmt],
    defined: &mut HashSet<LocalId>,
    ready: &dyn Fn(&KExpr, &HashSet<LocalId>) -> bool,
) -> bool {
    stmts.iter().all(|x| match x {
        KStmt::Assign(l, e) => {
            let ok = ready(e, defined);
            defined.insert(*l);
            ok
        }
        KStmt::Store { index, value, .. } => ready(index, defined) && ready(value, defined),
        KStmt::If {
            cond,
            then,
            otherwise,
        } => {
            let (mut a, mut b) = (defined.clone(), defined.clone());
            let ok = ready(cond, defined)
                && assigned_first(then, &mut a, ready)
                && assigned_first(otherwise, &mut b, ready);
            *defined = a.intersection(&b).copied().collect();
            ok
        }
        _ => false,
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
    let mut assigned = HashSet::new();
    assigned_locals(inner, &mut assigned);
    super::prefetch::contiguous_loads(k, j, inner, &assigned)
}

/// The locals `setup` (a row's setup, or a walk step's head) assigns exactly once, at its
/// top level, with their `i64` definitions: what [`affine`] may replace by its definition
/// at the end of `setup`. A definition qualifies when no local it reads is assigned after
/// it in `setup` (nor more than once), so its value there is the local's.
pub(super) fn setup_definitions<'a>(k: &Kernel, setup: &'a [KStmt]) -> HashMap<LocalId, &'a KExpr> {
    let mut count: HashMap<LocalId, usize> = HashMap::new();
    fn tally(stmts: &[KStmt], count: &mut HashMap<LocalId, usize>) {
        for s in stmts {
            match s {
                KStmt::Assign(l, _) => *count.entry(*l).or_default() += 1,
                KStmt::If {
                    then, otherwise, ..
                } => {
                    tally(then, count);
                    tally(otherwise, count);
                }
                _ => {}
            }
        }
    }
    tally(setup, &mut count);
    let many: HashSet<LocalId> = count
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(l, _)| *l)
        .collect();
    let mut defs = HashMap::new();
    for (at, s) in setup.iter().enumerate() {
        let KStmt::Assign(l, e) = s else { continue };
        let mut later = HashSet::new();
        assigned_locals(&setup[at + 1..], &mut later);
        if count.get(l) == Some(&1)
            && k.locals.get(l.0 as usize).map(|x| x.ty) == Some(ScalarType::I64)
            && !mentions_any(e, &many)
            && !mentions_any(e, &later)
        {
            defs.insert(*l, e);
        }
    }
    defs
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

    /// A kernel of `locals` `i64` locals, `f64` local 9 and buffers: 0 `i64[]` (read), 1
    /// `f64[]` (read), 2 `f64[]` (written), with `body`.
    fn kernel(body: Vec<KStmt>) -> Kernel {
        let buf = |elem, writable| crate::kernel::BufParam {
            name: "b".into(),
            elem,
            writable,
            growable: false,
            narrow: false,
        };
        Kernel {
            name: "k".into(),
            bufs: vec![
                buf(ScalarType::I64, false),
                buf(ScalarType::F64, false),
                buf(ScalarType::F64, true),
            ],
            locals: (0..12)
                .map(|n| crate::kernel::LocalDecl {
                    name: format!("v{n}"),
                    ty: if n == 9 {
                        ScalarType::F64
                    } else {
                        ScalarType::I64
                    },
                })
                .collect(),
            inputs: vec![],
            outputs: vec![],
            body,
            reassociate: false,
        }
    }

    fn assign(l: u32, e: KExpr) -> KStmt {
        KStmt::Assign(LocalId(l), e)
    }

    /// `for v0 = 0 .. 8`: a row's sum `v9` over a walk `while v1 < v2 { head; for v3 = v4
    /// .. v5 { v9 += b1[v3] }; tail }`, stored at `b2[v0]`.
    fn walk_rows(head: Vec<KStmt>, tail: Vec<KStmt>) -> Kernel {
        let inner = KStmt::For {
            var: LocalId(3),
            lo: local(4),
            hi: local(5),
            body: vec![assign(9, op(Op::Add, vec![local(9), load(1, local(3))]))],
        };
        let mut step = head;
        step.push(inner);
        step.extend(tail);
        let row = vec![
            assign(9, KExpr::Lit(Value::F64(0.0))),
            assign(1, load(0, local(0))),
            assign(2, load(0, op(Op::Add, vec![local(0), lit(1)]))),
            KStmt::While {
                cond: op(Op::Lt, vec![local(1), local(2)]),
                body: step,
            },
            KStmt::Store {
                buf: BufId(2),
                index: local(0),
                value: local(9),
            },
        ];
        kernel(vec![KStmt::For {
            var: LocalId(0),
            lo: lit(0),
            hi: lit(8),
            body: row,
        }])
    }

    fn rows_of(k: &Kernel) -> Option<Rows<'_>> {
        let KStmt::For { var, body, .. } = &k.body[0] else {
            unreachable!()
        };
        let mut reads = HashMap::new();
        count_reads(&k.body, &mut reads);
        rows(k, &reads, *var, body)
    }

    #[test]
    fn rows_walk_along_steps_that_read_only_what_they_or_the_setup_assigned() {
        let step = |l: u32| op(Op::Add, vec![local(l), lit(1)]);
        // A block's bounds from the walk's position, then the position moves on.
        let head = vec![assign(4, load(0, local(1))), assign(5, step(4))];
        let k = walk_rows(head.clone(), vec![assign(1, step(1))]);
        let r = rows_of(&k).expect("a walk of rows");
        let w = r.walk.as_ref().expect("the walk");
        assert_eq!((w.head.len(), w.tail.len(), r.inner.0), (2, 1, LocalId(3)));
        // A head that reads what only the tail assigns would read, in its first step, what
        // the row before left behind.
        let mut late = head.clone();
        late.push(assign(6, local(7)));
        let k = walk_rows(late, vec![assign(1, step(1)), assign(7, lit(3))]);
        assert!(rows_of(&k).is_none());
        // A tail that reads the inner loop's variable (its value after the loop).
        let k = walk_rows(head, vec![assign(1, local(3))]);
        assert!(rows_of(&k).is_none());
    }

    #[test]
    fn definitions_are_kept_only_while_what_they_read_stays() {
        let k = kernel(vec![]);
        // v4 = b0[v1]; v5 = v4 + v6; v6 = 2: v5's definition read the v6 before.
        let setup = vec![
            assign(4, load(0, local(1))),
            assign(5, op(Op::Add, vec![local(4), local(6)])),
            assign(6, lit(2)),
        ];
        let defs = setup_definitions(&k, &setup);
        assert!(defs.contains_key(&LocalId(4)) && defs.contains_key(&LocalId(6)));
        assert!(!defs.contains_key(&LocalId(5)));
        // Assigned in a branch as well: no definition.
        let setup = vec![
            assign(4, lit(1)),
            KStmt::If {
                cond: op(Op::Lt, vec![local(1), local(2)]),
                then: vec![assign(4, lit(2))],
                otherwise: vec![],
            },
        ];
        assert!(setup_definitions(&k, &setup).is_empty());
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
