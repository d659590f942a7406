//! Strips of eight iterations with software prefetch, for the scalar loops of trusted
//! kernels (the loops a reassociating kernel's AVX-512 copy runs eight lanes at a time
//! prefetch in `simd`).
//!
//! A counted loop, `for v = lo; v < hi; v++` or `while (q < bound)` with one `q = q + 1`,
//! whose contiguous loads move on through memory (a level's positions and values) runs
//! eight iterations at a time with one prefetch per such load two kilobytes ahead, then
//! the remaining iterations one at a time. The iterations, and so the order of a sum's
//! additions, are exactly those of the plain loop; only the prefetches are new. Measured on
//! strict SpMV on the Intel Xeon (`bench/results/structure_xeon.md`): the hardware
//! prefetcher alone leaves each row's loads waiting on the cache (band of 201 per row
//! 1.20 -> 0.82 ms by hand-written C).
//!
//! A loop qualifies when it holds no nested loop and no `break`, its bound is a local (or
//! literal) the body does not assign, and it has at least one load at `v + c` (`c` the
//! same in every iteration) from a buffer the kernel does not write. In a `for` loop over
//! a coordinate inside another loop only loads offset by a local move on (`x[j - 1]` is
//! read again by every enclosing iteration and stays cached); in a `for` loop no loop
//! encloses, and in a `while` walk over positions, they all do (SpMV over a SparsePoint
//! level prefetches its row's `idx`: 1.01 -> 0.91 ms by hand-written C).

use std::collections::HashSet;

use super::simd::mentions_any;
use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::{BufId, KExpr, KStmt, Kernel, LocalId};

/// How far ahead of a contiguous load of `f64` its cache lines are prefetched, in
/// elements (two kilobytes). Measured on SpMV over blocks and CSR
/// (`bench/block_list_limit.c`): the hardware prefetcher alone leaves the loads of each
/// short loop waiting on the cache.
pub(super) const PREFETCH_AHEAD: usize = 256;

/// How far ahead a strip prefetches each stream, in bytes, whatever its element type.
pub(super) const PREFETCH_BYTES: usize = PREFETCH_AHEAD * 8;

/// Iterations per strip: one cache line of `f64`.
pub(super) const STRIP: usize = 8;

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
pub(super) fn strip_len(k: &Kernel, streams: &[(BufId, KExpr)]) -> usize {
    let widest = streams
        .iter()
        .filter_map(|(b, _)| k.bufs.get(b.0 as usize))
        .map(|p| elem_bytes(p.elem, p.narrow))
        .max()
        .unwrap_or(8);
    LINE / widest
}

/// Bytes per element of a buffer of `elem` at run time (`narrow`: held as `u32`).
pub(super) fn elem_bytes(elem: ScalarType, narrow: bool) -> usize {
    if narrow {
        4
    } else {
        elem.bits() as usize / 8
    }
}

/// The first statement of the loop that runs a `for` loop's last iterations after its
/// strips (fewer than a strip), when that loop is a row's, directly in another `for`
/// loop's body. An empty `asm` keeps the C compiler from vectorizing it: GCC otherwise
/// multiplies pairs of a sum's terms in vectors (the additions stay in order) behind a
/// dozen instructions of set-up and tail, which spill the row loop's registers. Measured
/// on strict SpMV (`finch-bench structure`, the kernels built with and without it): a band
/// of 11 per row 0.040 -> 0.036 ms (with `cc -O3 -fno-tree-vectorize` on the whole kernel,
/// 0.037 ms). A loop over a block in a walk over blocks keeps GCC's pairs, which take fewer
/// exits over blocks of varying length (generated strict kernel, standalone: bcsstk16's
/// blocks of 7.8 entries 0.154 ms with the `asm`, 0.145 without; mbeacxc's of 3.5, 0.107
/// and 0.082 ms). The scalar loop an AVX2 copy runs instead of vectors over fewer than four
/// positions (`simd.rs`) starts with it too.
pub(super) const SCALAR_REST: &str = "__asm__(\"\"); /* the rest: scalar */";

/// The loads to prefetch in a loop over `var` with body `body`, as (buffer, index at the
/// strip's first iteration); `None` when the loop does not qualify or has none. `walk` is
/// the bound of a `while (var < bound)` loop that steps `var` (`None`: a `for` loop, whose
/// bounds are evaluated once).
/// `outermost`: no loop encloses this one.
pub(super) fn streams(
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
pub(super) fn contiguous_loads(
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
pub(super) fn consecutive(e: &KExpr, var: LocalId, changing: &HashSet<LocalId>) -> bool {
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
