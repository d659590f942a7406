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
use crate::kernel::{BufId, KExpr, KStmt, Kernel, LocalId};

/// The parts of a row loop's body.
pub(super) struct Rows<'a> {
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
