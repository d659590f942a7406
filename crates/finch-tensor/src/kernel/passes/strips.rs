//! The strips pass: scalar loops whose contiguous loads move on through memory run in
//! strips of a cache line's iterations with a software prefetch per load (for the kernels
//! the C backend runs in trusted mode; a reassociating kernel's AVX-512 copy prefetches in
//! its own vector loops, `backend::c::simd`).
//!
//! A counted loop, `for v = lo; v < hi; v++` or `while (q < bound)` with one `q = q + 1`,
//! whose contiguous loads move on through memory (a level's positions and values) runs
//! a strip of iterations at a time with one [`Hint::Prefetch`] per such load two kilobytes
//! ahead, then the remaining iterations one at a time. The iterations, and so the order of
//! a sum's additions, are exactly those of the plain loop; only the prefetches are new.
//! Measured on strict SpMV on the Intel Xeon (`bench/results/structure_xeon.md`): the
//! hardware prefetcher alone leaves each row's loads waiting on the cache (band of 201 per
//! row 1.20 -> 0.82 ms by hand-written C).
//!
//! A loop qualifies when it holds no nested loop and no `break`, its bound is a local (or
//! literal) the body does not assign, and it has at least one load at `v + c` (`c` the
//! same in every iteration) from a buffer the kernel does not write. In a `for` loop over
//! a coordinate inside another loop only loads offset by a local move on (`x[j - 1]` is
//! read again by every enclosing iteration and stays cached); in a `for` loop no loop
//! encloses, and in a `while` walk over positions, they all do (SpMV over a SparsePoint
//! level prefetches its row's `idx`: 1.01 -> 0.91 ms by hand-written C).
//!
//! A `for` loop:
//!
//! ```text
//! for v = lo .. hi              v = lo; end = hi
//!   body              =>        while (end - v) >= 8
//!                                 prefetch b[v + c] ahead 256
//!                                 for k = 0 .. 8
//!                                   body; v = v + 1
//!                               for v = v .. end
//!                                 hint scalar_rest   (directly in another `for` loop)
//!                                 body
//! ```
//!
//! A walk `while q < bound { ...; q = q + 1; ... }` gets the strip loop (its body as it
//! is, which steps `q`) in front of it. Row loops the C backend runs several rows at a
//! time (`jam`) are left whole: it prefetches their rows itself.

use std::collections::HashSet;

use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::{mentions_any, BufId, Hint, KExpr, KStmt, Kernel, LocalId};

/// How far ahead of a contiguous load of `f64` its cache lines are prefetched, in
/// elements (two kilobytes). Measured on SpMV over blocks and CSR
/// (`bench/block_list_limit.c`): the hardware prefetcher alone leaves the loads of each
/// short loop waiting on the cache.
pub(crate) const PREFETCH_AHEAD: usize = 256;

/// How far ahead a strip prefetches each stream, in bytes, whatever its element type.
pub(crate) const PREFETCH_BYTES: usize = PREFETCH_AHEAD * 8;

/// Iterations per strip: one cache line of `f64`.
pub(crate) const STRIP: usize = 8;

/// Bytes in a cache line.
const LINE: usize = 64;

/// Iterations per strip of a loop prefetching `streams`: one cache line of the widest
/// element among them, so that each stream is prefetched at least once per line it moves
/// through ([`STRIP`] wherever one is `f64` or `i64`). A loop over bytes runs strips of
/// 64, which the C compiler runs a vector at a time, with one prefetch per line rather than
/// eight. Measured on Fig. 26's erosion over `Dense(Dense(Element(false)))`
/// (`finch-bench morphology`, the finch_masks set): strips of 8 prefetching 256 bytes
/// ahead 7.9 ms; strips of 64 2.2 ms; prefetching 2 KB ahead too, 2.0 ms (the masks
/// magnified 4x: 14.6, 3.8 and 2.6 ms).
pub(crate) fn strip_len(k: &Kernel, streams: &[(BufId, KExpr)]) -> usize {
    let widest = streams
        .iter()
        .filter_map(|(b, _)| k.bufs.get(b.0 as usize))
        .map(|p| elem_bytes(p.elem, p.narrow))
        .max()
        .unwrap_or(8);
    LINE / widest
}

/// Bytes per element of a buffer of `elem` at run time (`narrow`: held as `u32`).
pub(crate) fn elem_bytes(elem: ScalarType, narrow: bool) -> usize {
    if narrow {
        4
    } else {
        elem.bits() as usize / 8
    }
}

/// The strips of the `for` loop `for var = lo .. hi { body }` (see the module docs), or
/// `None` when it does not qualify; `outermost`: no loop encloses it; `in_for`: it sits
/// directly in a `for` loop's body (its rest then starts with [`Hint::ScalarRest`]).
pub(crate) fn strip_for(
    fresh: &mut super::Fresh,
    (var, lo, hi): (LocalId, &KExpr, &KExpr),
    body: &[KStmt],
    (outermost, in_for): (bool, bool),
) -> Option<Vec<KStmt>> {
    // `hi` is evaluated once, after `lo` and before the loop sets `var`.
    if mentions_any(hi, &HashSet::from([var])) {
        return None;
    }
    let streams = streams(fresh.kernel(), var, None, body, outermost)?;
    let end = fresh.local(format!("{}_end", fresh.name(var)), ScalarType::I64);
    let step = KStmt::Assign(var, KExpr::Local(var) + 1);
    let strip: Vec<KStmt> = body.iter().cloned().chain([step]).collect();
    let mut rest = Vec::with_capacity(body.len() + 1);
    if in_for {
        rest.push(KStmt::Hint(Hint::ScalarRest));
    }
    rest.extend(body.iter().cloned());
    let mut out = vec![
        KStmt::Assign(var, lo.clone()),
        KStmt::Assign(end, hi.clone()),
    ];
    out.push(strip_loop(fresh, var, &KExpr::Local(end), &streams, strip));
    out.push(KStmt::For {
        var,
        lo: KExpr::Local(var),
        hi: KExpr::Local(end),
        body: rest,
    });
    Some(out)
}

/// The strips in front of the walk `while var < bound { body }` (`body` steps `var` once),
/// or `None` when it does not qualify; the walk itself follows them unchanged.
pub(crate) fn strip_walk(
    fresh: &mut super::Fresh,
    var: LocalId,
    bound: &KExpr,
    body: &[KStmt],
) -> Option<KStmt> {
    let streams = streams(fresh.kernel(), var, Some(bound), body, false)?;
    Some(strip_loop(fresh, var, bound, &streams, body.to_vec()))
}

/// `while (end - var) >= strip { prefetches; for k = 0 .. strip { strip_body } }`, the
/// strip length from the widest of `streams` ([`strip_len`]).
fn strip_loop(
    fresh: &mut super::Fresh,
    var: LocalId,
    end: &KExpr,
    streams: &[(BufId, KExpr)],
    strip_body: Vec<KStmt>,
) -> KStmt {
    let strip = strip_len(fresh.kernel(), streams);
    let k = fresh.local(format!("{}_strip", fresh.name(var)), ScalarType::I64);
    let mut body: Vec<KStmt> = streams
        .iter()
        .map(|(buf, index)| {
            let ahead = fresh
                .kernel()
                .bufs
                .get(buf.0 as usize)
                .map_or(PREFETCH_AHEAD, |b| {
                    PREFETCH_BYTES / elem_bytes(b.elem, b.narrow)
                });
            KStmt::Hint(Hint::Prefetch {
                buf: *buf,
                index: index.clone(),
                ahead,
            })
        })
        .collect();
    body.push(KStmt::For {
        var: k,
        lo: KExpr::int(0),
        hi: KExpr::int(strip as i64),
        body: strip_body,
    });
    KStmt::While {
        cond: KExpr::bin(
            Op::Ge,
            end.clone() - KExpr::Local(var),
            KExpr::int(strip as i64),
        ),
        body,
    }
}

/// The loads to prefetch in a loop over `var` with body `body`, as (buffer, index at the
/// strip's first iteration); `None` when the loop does not qualify or has none. `walk` is
/// the bound of a `while (var < bound)` loop that steps `var` (`None`: a `for` loop, whose
/// bounds are evaluated once).
/// `outermost`: no loop encloses this one.
pub(crate) fn streams(
    k: &Kernel,
    var: LocalId,
    walk: Option<&KExpr>,
    body: &[KStmt],
    outermost: bool,
) -> Option<Vec<(BufId, KExpr)>> {
    let mut assigned = HashSet::new();
    let mut steps = 0;
    if !plain(body, var, &mut assigned, &mut steps) {
        return None;
    }
    // A walk steps its variable once, at the top level of the body; a `for` loop never.
    let top_steps = body.iter().filter(|s| is_step(s, var)).count();
    match walk {
        Some(_) if steps != 1 || top_steps != 1 => return None,
        None if steps != 0 => return None,
        Some(KExpr::Local(b)) if *b == var || assigned.contains(b) => return None,
        Some(KExpr::Local(_) | KExpr::Lit(Value::I64(_))) | None => {}
        Some(_) => return None,
    }
    let walk = walk.is_some();
    let found: Vec<(BufId, KExpr)> = contiguous_loads(k, var, body, &assigned)
        .into_iter()
        .filter(|(_, i)| walk || outermost || mentions_other(i, var))
        .collect();
    (!found.is_empty()).then_some(found)
}

/// The loads in `body` that read consecutive positions as `var` counts: from a buffer the
/// kernel neither writes nor grows, at `var + c` with `c` not mentioning `changing` (see
/// [`consecutive`]); each once, in the order of first mention.
pub(crate) fn contiguous_loads(
    k: &Kernel,
    var: LocalId,
    body: &[KStmt],
    changing: &HashSet<LocalId>,
) -> Vec<(BufId, KExpr)> {
    let mut found: Vec<(BufId, KExpr)> = Vec::new();
    crate::kernel::visit_exprs(body, &mut |e| {
        loads(e, &mut |b, i| {
            let stable = k
                .bufs
                .get(b.0 as usize)
                .is_some_and(|p| !p.writable && !p.growable);
            if stable
                && consecutive(i, var, changing)
                && !found.iter().any(|(fb, fi)| *fb == b && fi == i)
            {
                found.push((b, i.clone()));
            }
        })
    });
    found
}

/// No nested loop, `break` or sort; collects the assigned locals and counts the steps of
/// `var` (any other assignment to `var` disqualifies).
fn plain(body: &[KStmt], var: LocalId, assigned: &mut HashSet<LocalId>, steps: &mut usize) -> bool {
    body.iter().all(|s| match s {
        KStmt::Assign(l, _) => {
            if *l == var {
                if !is_step(s, var) {
                    return false;
                }
                *steps += 1;
            } else {
                assigned.insert(*l);
            }
            true
        }
        KStmt::Store { .. } | KStmt::Resize { .. } | KStmt::Fail(_) => true,
        KStmt::If {
            then, otherwise, ..
        } => plain(then, var, assigned, steps) && plain(otherwise, var, assigned, steps),
        KStmt::Hint(_) => true,
        KStmt::For { .. } | KStmt::While { .. } | KStmt::Sort { .. } | KStmt::Break => false,
    })
}

/// `var = var + 1`.
fn is_step(s: &KStmt, var: LocalId) -> bool {
    matches!(s, KStmt::Assign(l, KExpr::Op(Op::Add, a))
        if *l == var && matches!(a.as_slice(), [KExpr::Local(x), KExpr::Lit(Value::I64(1))] if *x == var))
}

/// Calls `f` on every load in `e` (outermost first).
fn loads(e: &KExpr, f: &mut dyn FnMut(BufId, &KExpr)) {
    match e {
        KExpr::Load(b, i) => {
            f(*b, i);
            loads(i, f);
        }
        KExpr::Op(_, a) => a.iter().for_each(|x| loads(x, f)),
        KExpr::Search { value, lo, hi, .. } => {
            loads(value, f);
            loads(lo, f);
            loads(hi, f);
        }
        KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => {}
    }
}

/// `e` is `var + c` with `c` arithmetic on literals and locals other than `var` that are
/// not in `changing`: consecutive values of `var` give consecutive positions, from a base
/// computed once (a stream to prefetch, or a row's own output position).
pub(crate) fn consecutive(e: &KExpr, var: LocalId, changing: &HashSet<LocalId>) -> bool {
    arithmetic(e) && offset_of(e, var) && !mentions_any(e, changing)
}

/// `e` is locals and literals under `+ - *` (its value at a strip's start is free to
/// compute and cannot fail).
fn arithmetic(e: &KExpr) -> bool {
    match e {
        KExpr::Local(_) | KExpr::Lit(Value::I64(_)) => true,
        KExpr::Op(Op::Add | Op::Sub | Op::Mul, a) => a.iter().all(arithmetic),
        _ => false,
    }
}

/// `e` is `var + c` (sums and differences with `var` once, added): consecutive iterations
/// read consecutive elements.
fn offset_of(e: &KExpr, var: LocalId) -> bool {
    match e {
        KExpr::Local(l) => *l == var,
        KExpr::Op(Op::Add, a) if a.len() == 2 => {
            (offset_of(&a[0], var) && !mentions_var(&a[1], var))
                || (offset_of(&a[1], var) && !mentions_var(&a[0], var))
        }
        KExpr::Op(Op::Sub, a) if a.len() == 2 => offset_of(&a[0], var) && !mentions_var(&a[1], var),
        _ => false,
    }
}

fn mentions_var(e: &KExpr, var: LocalId) -> bool {
    mentions_any(e, &HashSet::from([var]))
}

/// `e` mentions a local other than `var`.
fn mentions_other(e: &KExpr, var: LocalId) -> bool {
    match e {
        KExpr::Local(l) => *l != var,
        KExpr::Lit(_) | KExpr::Len(_) => false,
        KExpr::Load(_, i) => mentions_other(i, var),
        KExpr::Op(_, a) => a.iter().any(|x| mentions_other(x, var)),
        KExpr::Search { value, lo, hi, .. } => {
            mentions_other(value, var) || mentions_other(lo, var) || mentions_other(hi, var)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{interp, BufArg};
    use crate::tensor::Buffer;

    /// `s = Σ x[i - 1] * w` for `i` in `lo .. hi` (a `for` loop no loop encloses), and
    /// the same sum over a walk `while q < hi { s += x[q]; q = q + 1 }` from `lo`.
    fn sums(walk: bool) -> Kernel {
        let mut k = Kernel::new("k");
        let x = k.buf("x", ScalarType::F64, false, false);
        let (lo, hi) = (
            k.local("lo", ScalarType::I64),
            k.local("hi", ScalarType::I64),
        );
        let (i, s) = (k.local("i", ScalarType::I64), k.local("s", ScalarType::F64));
        k.inputs = vec![lo, hi];
        k.outputs = vec![s];
        let add = |at: KExpr| {
            KStmt::Assign(
                s,
                KExpr::bin(
                    Op::Add,
                    KExpr::Local(s),
                    KExpr::bin(Op::Mul, KExpr::load(x, at), KExpr::Lit(Value::F64(1.5))),
                ),
            )
        };
        k.body = if walk {
            vec![
                KStmt::Assign(i, KExpr::Local(lo)),
                KStmt::While {
                    cond: KExpr::bin(Op::Lt, KExpr::Local(i), KExpr::Local(hi)),
                    body: vec![add(KExpr::Local(i)), KStmt::Assign(i, KExpr::Local(i) + 1)],
                },
            ]
        } else {
            vec![KStmt::For {
                var: i,
                lo: KExpr::Local(lo),
                hi: KExpr::Local(hi),
                body: vec![add(KExpr::Local(i) - 1)],
            }]
        };
        k
    }

    fn run(k: &Kernel, lo: i64, hi: i64, x: &Buffer) -> Vec<Value> {
        let mut bufs = [BufArg::ReadValues(x)];
        let inputs = [Value::I64(lo), Value::I64(hi)];
        interp::run(k, &mut bufs, &inputs).expect("runs").0
    }

    /// Every count of iterations around the strip length (none, fewer than a strip, one
    /// strip exactly, a strip and a rest, several) gives the plain loop's sum, added in
    /// the same order (bit for bit).
    #[test]
    fn strips_keep_every_iteration_in_order() {
        let x = Buffer::F64((0..40).map(|n| 1.0 / (n as f64 + 3.0)).collect());
        for walk in [false, true] {
            let plain = sums(walk);
            let stripped = crate::kernel::passes::strips(&plain);
            crate::kernel::verify(&stripped).expect("verifies");
            let text = stripped.to_string();
            assert!(
                text.contains("prefetch b0[") && text.contains("ahead 256"),
                "{text}"
            );
            let first = usize::from(!walk) as i64;
            for (lo, hi) in [(1, 1), (1, 4), (1, 9), (1, 10), (3, 19), (2, 40), (5, 3)] {
                let (lo, hi) = (lo - 1 + first, hi - 1 + first);
                assert_eq!(
                    run(&plain, lo, hi, &x),
                    run(&stripped, lo, hi, &x),
                    "walk {walk}, {lo} .. {hi}\n{text}"
                );
            }
        }
    }

    /// A loop whose bound the body assigns is not a counted walk; one with a nested loop
    /// or no load that moves on is left as it is.
    #[test]
    fn loops_that_do_not_qualify_stay() {
        let mut k = sums(true);
        if let KStmt::While { body, .. } = &mut k.body[1] {
            body.push(KStmt::Assign(LocalId(1), KExpr::Local(LocalId(1))));
        }
        assert_eq!(crate::kernel::passes::strips(&k).body, k.body);
        let mut k = sums(false);
        if let KStmt::For { body, .. } = &mut k.body[0] {
            *body = vec![KStmt::Assign(LocalId(3), KExpr::Lit(Value::F64(1.0)))];
        }
        assert_eq!(crate::kernel::passes::strips(&k).body, k.body);
    }
}
