//! The jam pass: four rows at a time, for the scalar loops of trusted kernels (a
//! reassociating kernel's vector copies run their rows as vectors instead): which row
//! loops qualify, the arithmetic on their offsets, and the rewrite of rows along one inner
//! loop each (rows that walk over steps: `walks.rs`).
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

use super::strips::{consecutive, STRIP};
use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::{count_reads, mentions_any};
use crate::kernel::{BufId, KExpr, KStmt, Kernel, LocalId};

/// The parts of a row loop's body.
pub(crate) struct Rows<'a> {
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
pub(crate) struct Walk<'a> {
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
pub(crate) fn rows<'a>(
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
pub(crate) fn based_loads(k: &Kernel, j: LocalId, inner: &[KStmt]) -> Vec<(BufId, KExpr)> {
    let mut assigned = HashSet::new();
    assigned_locals(inner, &mut assigned);
    super::strips::contiguous_loads(k, j, inner, &assigned)
}

/// The locals `setup` (a row's setup, or a walk step's head) assigns exactly once, at its
/// top level, with their `i64` definitions: what [`affine`] may replace by its definition
/// at the end of `setup`. A definition qualifies when no local it reads is assigned after
/// it in `setup` (nor more than once), so its value there is the local's.
pub(crate) fn setup_definitions<'a>(k: &Kernel, setup: &'a [KStmt]) -> HashMap<LocalId, &'a KExpr> {
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
pub(crate) struct Affine {
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
    pub(crate) fn to_expr(&self) -> KExpr {
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
pub(crate) fn affine(
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
pub(crate) fn substitute(e: &KExpr, var: LocalId, by: &KExpr) -> KExpr {
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

/// The rows a row loop runs at a time: four chains of additions in order cover the
/// adder's latency where two do not (strict SpMV on Zen 3, hand-written, against two at a
/// time: a band of 61 per row 0.25 -> 0.19 ms, a 1024 x 1024 triangle 0.25 -> 0.15 ms).
pub(crate) const ROWS: usize = 4;

/// The fewest iterations the first, middle or last row's inner loop must have for a row
/// loop to run [`ROWS`] rows at a time: shorter rows overlap with each other anyway. Zen 3,
/// strict, generated, against the plain loop in one process: SpMV over a band of 11 per
/// row 0.052 -> 0.042 ms; a 1-D convolution of 1M outputs, 9 taps 3.8 -> 2.9 ms, 13 taps
/// 5.6 -> 4.0 ms (5 taps stay plain).
const JAM_MIN: i64 = 8;

/// The fewest iterations a probed row's inner loop must have for the joint loop to run in
/// strips with prefetch: shorter rows never fill two strips, and the strip loop in front
/// of the joint loop slows them (generated, strict SpMV over a band of 11 per row on Zen
/// 3: 0.042 ms without, 0.052 with).
const STRIPS_MIN: i64 = 16;

/// The row loop `row_loop` (`for var = lo .. hi { body }`, whose parts are `rows`, with no
/// walk) [`ROWS`] rows at a time where its first, middle or last row's inner loop has at
/// least [`JAM_MIN`] iterations, else as it is, `plain` of it (rows of a band or triangle
/// are about as long as their neighbours; a loop of very short rows gains nothing from
/// the shared setup). The joint loop sets up [`ROWS`] rows, runs their inner loops
/// together while all have iterations left (where a probed row has [`STRIPS_MIN`], in
/// strips of eight with prefetches while all have two strips left), then each row its
/// rest, then the rows' stores; the last rows (fewer than [`ROWS`] left) run alone after
/// it, `plain` of the row loop from there.
pub(crate) fn rows_together<'k>(
    fresh: &mut super::Fresh<'k>,
    row_loop: &KStmt,
    rows: &Rows,
    plain: &mut dyn FnMut(&mut super::Fresh<'k>, KStmt) -> Vec<KStmt>,
) -> Vec<KStmt> {
    let KStmt::For { var, lo, hi, body } = row_loop else {
        return vec![row_loop.clone()];
    };
    let name = fresh.name(*var);
    let local = |fresh: &mut super::Fresh, what: &str| {
        fresh.local(format!("{name}_{what}"), ScalarType::I64)
    };
    let (rlo, rhi, most) = (local(fresh, "lo"), local(fresh, "hi"), local(fresh, "most"));
    let mut out = vec![
        KStmt::Assign(rlo, lo.clone()),
        KStmt::Assign(rhi, hi.clone()),
        KStmt::Assign(most, KExpr::int(0)),
    ];
    // The first, the middle and the last row's setups (assignments only, so running them
    // again changes nothing) decide: a band's first and last rows hold half a row.
    let (j, jlo, jhi, _) = rows.inner;
    let end = local(fresh, "probe");
    let (l, h) = (KExpr::Local(rlo), KExpr::Local(rhi));
    let middle = l.clone() + KExpr::bin(Op::IntDiv, h.clone() - l.clone(), KExpr::int(2));
    for row in [l.clone(), middle, h.clone() - 1] {
        let mut probe = vec![KStmt::Assign(*var, row)];
        probe.extend(rows.prefix.iter().cloned());
        probe.extend(bounds(rows, j, (jlo, jhi), end));
        let width = KExpr::Local(end) - KExpr::Local(j);
        probe.push(if_then(
            lt(KExpr::Local(most), width.clone()),
            vec![KStmt::Assign(most, width)],
        ));
        out.push(if_then(
            KExpr::bin(
                Op::And,
                lt(KExpr::Local(most), KExpr::int(STRIPS_MIN)),
                lt(l.clone(), h.clone()),
            ),
            probe,
        ));
    }
    let copy = KStmt::For {
        var: *var,
        lo: l.clone(),
        hi: h.clone(),
        body: body.clone(),
    };
    let k = fresh.kernel();
    let locals = Joint::new(fresh, rows, based_loads(k, j, rows.inner.3).len());
    let joint = |fresh: &mut super::Fresh<'k>,
                 plain: &mut dyn FnMut(&mut super::Fresh<'k>, KStmt) -> Vec<KStmt>,
                 strips: bool| {
        let mut code = joint_loop(k, rows, (rlo, rhi), strips, &locals);
        // The last rows, one at a time.
        code.extend(plain(
            fresh,
            KStmt::For {
                var: *var,
                lo: KExpr::Local(*var),
                hi: KExpr::Local(rhi),
                body: body.clone(),
            },
        ));
        code
    };
    let few = joint(fresh, plain, false);
    let many = joint(fresh, plain, true);
    out.push(KStmt::If {
        cond: lt(KExpr::Local(most), KExpr::int(JAM_MIN)),
        then: plain(fresh, copy),
        otherwise: vec![KStmt::If {
            cond: lt(KExpr::Local(most), KExpr::int(STRIPS_MIN)),
            then: few,
            otherwise: many,
        }],
    });
    out
}

/// `a < b`.
pub(super) fn lt(a: KExpr, b: KExpr) -> KExpr {
    KExpr::bin(Op::Lt, a, b)
}

/// `if cond { then }`.
pub(super) fn if_then(cond: KExpr, then: Vec<KStmt>) -> KStmt {
    KStmt::If {
        cond,
        then,
        otherwise: vec![],
    }
}

/// After a row's setup: its inner variable `j` at its first value `first` and `end` at
/// `last` (the inner loop's end, or its count of iterations), both 0 where the guard fails.
fn bounds(rows: &Rows, j: LocalId, (first, last): (&KExpr, &KExpr), end: LocalId) -> Vec<KStmt> {
    let set = vec![
        KStmt::Assign(j, first.clone()),
        KStmt::Assign(end, last.clone()),
    ];
    match rows.guard {
        Some(g) => vec![
            KStmt::Assign(end, KExpr::int(0)),
            KStmt::Assign(j, KExpr::int(0)),
            if_then(g.clone(), set),
        ],
        None => set,
    }
}

/// One row of the joint loop: its own copies of the row's locals, its count of
/// iterations, and the offsets of the loads it reads along the shared counter.
pub(super) struct Row {
    /// The row's locals (the first row's are the loop's own).
    own: HashMap<LocalId, LocalId>,
    /// Its count of inner iterations.
    pub(super) count: LocalId,
    /// Per load read at consecutive positions, the position of its first iteration.
    pub(super) offsets: Vec<LocalId>,
    /// Rows along their walks: whether the row is in a step of its walk.
    pub(super) active: Option<LocalId>,
}

impl Row {
    /// One [`crate::kernel::Hint::RowPointer`] per offset (into the buffer of its load in
    /// `based`): C then loads a row's values as `pointer[counter]`, as a hand-written
    /// kernel would, where `buffer[offset + counter]` cost an addition per load and a
    /// register per buffer (strict SpMV over a band of half-bandwidth 5, `finch-bench
    /// structure`: speed-up over SparseList 1.71-1.72 with pointers, 1.37-1.45 without;
    /// bench/results/kernel_passes.md).
    pub(super) fn pointer_hints(&self, based: &Loads) -> Vec<KStmt> {
        self.offsets
            .iter()
            .zip(based)
            .map(|(o, (b, _))| KStmt::Hint(crate::kernel::Hint::RowPointer { local: *o, buf: *b }))
            .collect()
    }

    /// The row's offsets at its first iteration, `offsets` as the row reads them, or 0
    /// where it has no iteration (a row without iterations reads nothing: its offsets may
    /// lie anywhere).
    pub(super) fn first_offsets(&self, offsets: &[KExpr]) -> Vec<KStmt> {
        let mut code = Vec::with_capacity(2 * offsets.len());
        for (o, off) in self.offsets.iter().zip(offsets) {
            code.push(KStmt::Assign(*o, KExpr::int(0)));
            code.push(if_then(
                lt(KExpr::int(0), KExpr::Local(self.count)),
                vec![KStmt::Assign(*o, self.expr(off))],
            ));
        }
        code
    }

    pub(super) fn local(&self, l: LocalId) -> LocalId {
        self.own.get(&l).copied().unwrap_or(l)
    }

    /// `stmts` as this row runs them (its own locals).
    pub(super) fn stmts(&self, stmts: &[KStmt]) -> Vec<KStmt> {
        super::map_stmts(stmts, &|l| self.local(l), &|e| self.expr(e))
    }

    pub(super) fn expr(&self, e: &KExpr) -> KExpr {
        super::map_expr(e, &|x| match x {
            KExpr::Local(l) => Some(KExpr::Local(self.local(*l))),
            _ => None,
        })
    }

    /// The inner loop's body as this row runs it at `counter` iterations past its first:
    /// the loads of `based` at its offsets plus `counter`, the inner variable `j` as its
    /// first value plus `counter`.
    pub(super) fn inner(
        &self,
        inner: &[KStmt],
        j: LocalId,
        based: &[(BufId, KExpr)],
        counter: &KExpr,
    ) -> Vec<KStmt> {
        let at_offsets = super::map_stmts(inner, &|l| l, &|e| {
            super::map_expr(e, &|x| match x {
                KExpr::Load(b, i) => based
                    .iter()
                    .position(|(bb, ii)| bb == b && ii == i.as_ref())
                    .map(|x| KExpr::load(*b, KExpr::Local(self.offsets[x]) + counter.clone())),
                _ => None,
            })
        });
        let own = self.stmts(&at_offsets);
        let j = self.local(j);
        super::map_stmts(&own, &|l| l, &|e| {
            substitute(e, j, &(KExpr::Local(j) + counter.clone()))
        })
    }
}

/// Loads by buffer and position.
type Loads = [(BufId, KExpr)];

/// A row's prefetches in a strip of a joint loop at counter `c`: one per stream, `group`
/// times [`super::strips::PREFETCH_BYTES`] ahead (the rows move through storage
/// together), through the row's offset where the stream is one of its `based` loads.
pub(super) fn row_prefetches(
    k: &Kernel,
    row: &Row,
    (based, streams): (&Loads, &Loads),
    (j, c): (LocalId, LocalId),
    group: usize,
) -> Vec<KStmt> {
    use super::strips::{elem_bytes, PREFETCH_BYTES};
    streams
        .iter()
        .map(|(b, index)| {
            let at = based
                .iter()
                .position(|(bb, ii)| bb == b && ii == index)
                .map_or_else(
                    || {
                        let jr = row.local(j);
                        substitute(&row.expr(index), jr, &(KExpr::Local(jr) + KExpr::Local(c)))
                    },
                    |x| KExpr::Local(row.offsets[x]) + KExpr::Local(c),
                );
            let bytes = k
                .bufs
                .get(b.0 as usize)
                .map_or(8, |p| elem_bytes(p.elem, p.narrow));
            KStmt::Hint(crate::kernel::Hint::Prefetch {
                buf: *b,
                index: at,
                ahead: group * (PREFETCH_BYTES / bytes),
            })
        })
        .collect()
}

/// While at least `strip_min` iterations are left before `m` from the counter `c`: a
/// prefetch per row of `group` and stream, then a strip of [`STRIP`] iterations of the
/// rows' inner loops in turn (`(inner, j, based)`, see [`Row::inner`]) along `s`, kept a
/// loop (cc's full unrolling slows it: hand-written, SpMV over a band of 61 per row on
/// Zen 3, 0.19 ms as a loop, 0.22 unrolled).
pub(super) fn strips_of_rows(
    k: &Kernel,
    group: &[Row],
    (inner, j, based): (&[KStmt], LocalId, &Loads),
    streams: &Loads,
    (m, c, s): (LocalId, LocalId, LocalId),
    strip_min: usize,
) -> KStmt {
    let mut strip = Vec::new();
    for row in group {
        strip.extend(row_prefetches(
            k,
            row,
            (based, streams),
            (j, c),
            group.len(),
        ));
    }
    strip.push(KStmt::Hint(crate::kernel::Hint::NoUnroll));
    let at = KExpr::Local(c) + KExpr::Local(s);
    strip.push(KStmt::For {
        var: s,
        lo: KExpr::int(0),
        hi: KExpr::int(STRIP as i64),
        body: group
            .iter()
            .flat_map(|row| row.inner(inner, j, based, &at))
            .collect(),
    });
    strip.push(KStmt::Assign(c, KExpr::Local(c) + STRIP as i64));
    KStmt::While {
        cond: KExpr::bin(
            Op::Ge,
            KExpr::Local(m) - KExpr::Local(c),
            KExpr::int(strip_min as i64),
        ),
        body: strip,
    }
}

/// A row's count of inner iterations and the offsets of its loads at consecutive
/// positions (`based`) at its inner loop's first iteration, simplified through the
/// definitions of `setup` (what runs right before the inner loop), so that the C compiler
/// sees each row's base as the few loads it is (a band row's values start at its `ofs`,
/// not at `last - 1 - ofs_end + (last - len + 1)`).
pub(super) fn count_and_offsets(
    k: &Kernel,
    rows: &Rows,
    based: &Loads,
    setup: &[KStmt],
) -> (KExpr, Vec<KExpr>) {
    let (j, jlo, jhi, _) = rows.inner;
    let defs = setup_definitions(k, setup);
    let is_i64 = |e: &KExpr| k.expr_type(e) == ScalarType::I64;
    let simplified =
        |e: &KExpr| affine(e, &defs, &is_i64).map_or_else(|| e.clone(), |f| f.to_expr());
    let count = simplified(&(jhi.clone() - jlo.clone()));
    let offsets = based
        .iter()
        .map(|(_, i)| simplified(&substitute(i, j, jlo)))
        .collect();
    (count, offsets)
}

/// The locals of the joint loops: each row's, the least count `m`, the shared counter `c`
/// and the strip's counter `s`.
pub(super) struct Joint {
    pub(super) all: Vec<Row>,
    pub(super) m: LocalId,
    pub(super) c: LocalId,
    pub(super) s: LocalId,
}

impl Joint {
    pub(super) fn new(fresh: &mut super::Fresh, rows: &Rows, based: usize) -> Joint {
        let k = fresh.kernel();
        let j = rows.inner.0;
        let all = (0..ROWS)
            .map(|r| {
                let own: HashMap<LocalId, LocalId> = if r == 0 {
                    HashMap::new()
                } else {
                    rows.own
                        .iter()
                        .map(|l| {
                            let ty = k.locals.get(l.0 as usize).map_or(ScalarType::I64, |d| d.ty);
                            (*l, fresh.local(format!("{}_row{r}", fresh.name(*l)), ty))
                        })
                        .collect()
                };
                Row {
                    own,
                    count: fresh.local(format!("{}_count{r}", fresh.name(j)), ScalarType::I64),
                    offsets: (0..based)
                        .map(|x| {
                            fresh.local(format!("{}_base{r}_{x}", fresh.name(j)), ScalarType::I64)
                        })
                        .collect(),
                    active: rows.walk.as_ref().map(|_| {
                        fresh.local(format!("{}_active{r}", fresh.name(j)), ScalarType::Bool)
                    }),
                }
            })
            .collect();
        let mut counter =
            |what: &str| fresh.local(format!("{}_{what}", fresh.name(j)), ScalarType::I64);
        let (m, c, s) = (counter("least"), counter("at"), counter("strip"));
        Joint { all, m, c, s }
    }
}

/// The joint loop over rows `rlo .. rhi` (locals), [`ROWS`] at a time, with prefetching
/// strips where `strips` (see [`rows_together`]); it leaves the row variable at the first
/// row it did not run.
fn joint_loop(
    k: &Kernel,
    rows: &Rows,
    (rlo, rhi): (LocalId, LocalId),
    strips: bool,
    locals: &Joint,
) -> Vec<KStmt> {
    let (j, jlo, _, inner) = rows.inner;
    let based = based_loads(k, j, inner);
    let streams = if strips {
        super::strips::streams(k, j, None, inner, false).unwrap_or_default()
    } else {
        Vec::new()
    };
    // Each row's count of iterations and the offsets of its loads at consecutive positions
    // at its first iteration, simplified through the definitions of its setup, so that
    // the C compiler sees each row's base as the few loads it is (a band row's values
    // start at its `ofs`, not at `last - 1 - ofs_end + (last - len + 1)`).
    let (count, offsets) = count_and_offsets(k, rows, &based, rows.prefix);
    let var = rows.var;
    let Joint { all, m, c, s } = locals;
    let (m, c, s) = (*m, *c, *s);
    let mut body: Vec<KStmt> = all
        .iter()
        .flat_map(|row| row.pointer_hints(&based))
        .collect();
    for (r, row) in all.iter().enumerate() {
        let n = row.count;
        if r > 0 {
            body.push(KStmt::Assign(row.local(var), KExpr::Local(var) + r as i64));
        }
        body.extend(row.stmts(rows.prefix));
        body.extend(row.stmts(&bounds(rows, j, (jlo, &count), n)));
        body.extend(row.first_offsets(&offsets));
    }
    // `m`, the least of the counts (at least 0), and the shared counter `c`.
    body.push(KStmt::Assign(m, KExpr::Local(all[0].count)));
    for row in &all[1..] {
        body.push(if_then(
            lt(KExpr::Local(row.count), KExpr::Local(m)),
            vec![KStmt::Assign(m, KExpr::Local(row.count))],
        ));
    }
    body.push(if_then(
        lt(KExpr::Local(m), KExpr::int(0)),
        vec![KStmt::Assign(m, KExpr::int(0))],
    ));
    body.push(KStmt::Assign(c, KExpr::int(0)));
    let in_turn = |at: &KExpr| -> Vec<KStmt> {
        all.iter()
            .flat_map(|row| row.inner(inner, j, &based, at))
            .collect()
    };
    if !streams.is_empty() {
        // While all rows have two strips left: a prefetch per row and stream, then a strip
        // kept a loop (cc's full unrolling slows it: hand-written, SpMV over a band of 61
        // per row on Zen 3, 0.19 ms as a loop, 0.22 unrolled). The rows move through
        // storage together, a band's or a dense matrix's one after another, so each
        // prefetches [`ROWS`] times as far ahead as one row would.
        let turn = (inner, j, based.as_slice());
        body.push(strips_of_rows(k, all, turn, &streams, (m, c, s), 2 * STRIP));
    }
    body.push(KStmt::For {
        var: c,
        lo: KExpr::Local(c),
        hi: KExpr::Local(m),
        body: in_turn(&KExpr::Local(c)),
    });
    // Each row's own rest (a few iterations in a band or triangle) behind one test that
    // some row has any (rows of equal length have none): four empty loops, each tested,
    // cost the band of 11 per row 8% (strict SpMV on Zen 3: 0.042 -> 0.039 ms with it).
    let differ = all
        .iter()
        .map(|row| KExpr::Local(row.count) - KExpr::Local(m))
        .reduce(|a, b| KExpr::bin(Op::BitOr, a, b))
        .unwrap_or(KExpr::int(0));
    let rests = all
        .iter()
        .map(|row| KStmt::For {
            var: c,
            lo: KExpr::Local(m),
            hi: KExpr::Local(row.count),
            body: row.inner(inner, j, &based, &KExpr::Local(c)),
        })
        .collect();
    body.push(if_then(KExpr::bin(Op::Ne, differ, KExpr::int(0)), rests));
    group_loop(rows, (rlo, rhi), all, body)
}

/// The loop over the rows `rlo .. rhi` (locals) `group.len()` at a time, whose iteration
/// is `body` and then each row's stores; it leaves the row variable at the first row it
/// did not run.
pub(super) fn group_loop(
    rows: &Rows,
    (rlo, rhi): (LocalId, LocalId),
    group: &[Row],
    mut body: Vec<KStmt>,
) -> Vec<KStmt> {
    let var = rows.var;
    for row in group {
        body.extend(row.stmts(rows.suffix));
    }
    body.push(KStmt::Assign(var, KExpr::Local(var) + group.len() as i64));
    vec![
        KStmt::Assign(var, KExpr::Local(rlo)),
        KStmt::While {
            cond: KExpr::bin(
                Op::Ge,
                KExpr::Local(rhi) - KExpr::Local(var),
                KExpr::int(group.len() as i64),
            ),
            body,
        },
    ]
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
