//! Loop fission: a loop nest whose innermost body holds statements that share no written
//! tensor becomes one nest per group of dependent statements, each lowered on its own.
//!
//! Lowering coiterates every operand of a loop's body at once, so two statements over
//! different sparse operands (or the same ones read through different protocols) multiply
//! each other's code: `s[] += x[gallop(i)] * z[gallop(i)]` beside `w[i] = x[gallop(i)] -
//! z[gallop(i)]` lowers to 13 767 statements together and to about 1 500 apart. The
//! lowerer falls back to this form only where the fused kernel is too large (see
//! `lower_program_any_order`): apart, the nests read their inputs once each.
//!
//! Statements are independent when none reads or writes a tensor another writes: their
//! order across iterations then cannot matter. A short-circuiting scalar may stop its own
//! nest early afterwards; it stops only where its value can no longer change, so the
//! results are the same. Nests holding kernel-local bookkeeping (`SetLocal`, `Check`),
//! run-time choices (`Switch`, `Present`) or raw kernel code are left fused: their
//! dependences are not visible as tensors.

use std::collections::BTreeSet;

use crate::looplets::{Expr, Stmt, Tensor};

/// `body` with each top-level loop nest whose innermost statements fall into two or more
/// independent groups split into one nest per group (in the order of each group's first
/// statement). `None` when nothing splits.
pub(super) fn split_independent(body: &Stmt) -> Option<Stmt> {
    match body {
        Stmt::Block(v) => {
            let mut changed = false;
            let out = v
                .iter()
                .map(|s| match split_nest(s) {
                    Some(split) => {
                        changed = true;
                        split
                    }
                    None => s.clone(),
                })
                .collect();
            changed.then_some(Stmt::Block(out))
        }
        s => split_nest(s),
    }
}

/// One loop nest split by its innermost statements' groups.
fn split_nest(s: &Stmt) -> Option<Stmt> {
    // The headers of a perfect nest (each body one loop), outermost first.
    let mut headers = Vec::new();
    let mut at = s;
    loop {
        match at {
            Stmt::Loop {
                index,
                lo,
                hi,
                body,
            } => {
                headers.push((index, lo, hi));
                at = body;
            }
            Stmt::Block(v) if v.len() == 1 => at = &v[0],
            _ => break,
        }
    }
    let Stmt::Block(stmts) = at else {
        return None;
    };
    if headers.is_empty() || stmts.len() < 2 {
        return None;
    }
    let mut effects = Vec::with_capacity(stmts.len());
    for st in stmts {
        let mut e = Effects::default();
        if !e.stmt(st) {
            return None;
        }
        effects.push(e);
    }
    // Groups of statements tied by a written tensor (union-find over statement indices).
    let mut parent: Vec<usize> = (0..stmts.len()).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    for a in 0..stmts.len() {
        for b in a + 1..stmts.len() {
            if effects[a].conflicts(&effects[b]) {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[rb.max(ra)] = ra.min(rb);
            }
        }
    }
    let mut groups: Vec<(usize, Vec<Stmt>)> = Vec::new();
    for (k, st) in stmts.iter().enumerate() {
        let r = root(&mut parent, k);
        match groups.iter_mut().find(|(g, _)| *g == r) {
            Some((_, v)) => v.push(st.clone()),
            None => groups.push((r, vec![st.clone()])),
        }
    }
    if groups.len() < 2 {
        return None;
    }
    let nests = groups
        .into_iter()
        .map(|(_, group)| {
            let inner = if group.len() == 1 {
                group.into_iter().next().unwrap_or(Stmt::Block(Vec::new()))
            } else {
                Stmt::Block(group)
            };
            headers
                .iter()
                .rev()
                .fold(inner, |body, (index, lo, hi)| Stmt::Loop {
                    index: (*index).clone(),
                    lo: (*lo).clone(),
                    hi: (*hi).clone(),
                    body: Box::new(body),
                })
        })
        .collect();
    Some(Stmt::Block(nests))
}

/// The tensors a statement reads and writes (by the lowerer's tensor ids).
#[derive(Default)]
struct Effects {
    reads: BTreeSet<usize>,
    writes: BTreeSet<usize>,
}

impl Effects {
    /// Whether `self` and `other` cannot run in separate nests: one writes what the other
    /// reads or writes.
    fn conflicts(&self, other: &Effects) -> bool {
        self.writes
            .iter()
            .any(|t| other.writes.contains(t) || other.reads.contains(t))
            || other.writes.iter().any(|t| self.reads.contains(t))
    }

    /// Records the statement's effects; false where they cannot all be seen as tensors.
    fn stmt(&mut self, s: &Stmt) -> bool {
        match s {
            Stmt::Assign { lhs, rhs, .. } => {
                let written = match &lhs.0 {
                    Tensor::Fiber(f) => f.tensor,
                    Tensor::Scalar(t) => *t,
                    // A write that discards what it is given (a permissive write outside
                    // the tensor) has no effect.
                    Tensor::Null => return lhs.1.iter().all(|e| self.expr(e)) && self.expr(rhs),
                    _ => return false,
                };
                self.writes.insert(written);
                lhs.1.iter().all(|e| self.expr(e)) && self.expr(rhs)
            }
            Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => self.expr(cond) && self.stmt(then) && self.stmt(otherwise),
            Stmt::Define { value, body, .. } => self.expr(value) && self.stmt(body),
            Stmt::Loop { body, .. } => self.stmt(body),
            Stmt::Block(v) => v.iter().all(|s| self.stmt(s)),
            Stmt::SetScalar(t, e) => {
                self.writes.insert(*t);
                self.expr(e)
            }
            Stmt::Reset(t, _) | Stmt::Freeze(t) => {
                self.writes.insert(*t);
                true
            }
            Stmt::SetLocal(..) | Stmt::Check(..) => false,
        }
    }

    fn expr(&mut self, e: &Expr) -> bool {
        match e {
            Expr::Lit(_) | Expr::Index(_) => true,
            Expr::Code(_) => false,
            Expr::Permissive(x, guard) => {
                self.expr(x) && guard.as_deref().is_none_or(|g| self.expr(g))
            }
            Expr::Wrapped { by, .. } => by.as_deref().is_none_or(|b| self.expr(b)),
            Expr::Call(_, args) => args.iter().all(|a| self.expr(a)),
            Expr::Access(t, idx) => {
                let read = match &**t {
                    Tensor::Fiber(f) => Some(f.tensor),
                    Tensor::Scalar(t) => Some(*t),
                    Tensor::Value(v) => return self.expr(v) && idx.iter().all(|i| self.expr(i)),
                    Tensor::FillLeaf(_) => None,
                    _ => return false,
                };
                self.reads.extend(read);
                idx.iter().all(|i| self.expr(i))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::split_independent;
    use crate::looplets::Stmt;

    /// The converted body of a program with inputs `x`, `z` (vectors) and `A` (a matrix).
    fn body(outputs: &str, loops: &str, statements: &str) -> Stmt {
        let text = format!(
            "input x :: SparseList(Element(0.0))\ninput z :: SparseList(Element(0.0))\ninput A :: Dense(SparseList(Element(0.0)))\n{outputs}{loops}\n{statements}\nend\n"
        );
        let program = crate::Program::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        super::super::convert(&program, &HashSet::new())
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
            .body
    }

    /// For each loop nest reachable through blocks: its depth and its innermost statements.
    fn nests(s: &Stmt) -> Vec<(usize, usize)> {
        match s {
            Stmt::Block(v) => v.iter().flat_map(nests).collect(),
            Stmt::Loop { .. } => {
                let (mut depth, mut at) = (0, s);
                loop {
                    match at {
                        Stmt::Loop { body, .. } => {
                            depth += 1;
                            at = body;
                        }
                        Stmt::Block(v) if v.len() == 1 => at = &v[0],
                        _ => break,
                    }
                }
                let count = match at {
                    Stmt::Block(v) => v.len(),
                    _ => 1,
                };
                vec![(depth, count)]
            }
            _ => vec![],
        }
    }

    const TWO: &str = "output s :: Scalar(0.0)\noutput w :: Dense(Element(0.0))\ns .= 0\nw .= 0\n";

    #[test]
    fn statements_sharing_no_written_tensor_get_nests_of_their_own() {
        let b = body(
            TWO,
            "for i = _",
            "  s[] += x[i] * z[i]\n  w[i] = x[i] - z[i]",
        );
        assert_eq!(nests(&b), vec![(1, 2)]);
        let split = split_independent(&b).expect("splits");
        assert_eq!(nests(&split), vec![(1, 1), (1, 1)]);
        // A nest of two loops splits whole; its statements keep their order in a group.
        let b = body(
            TWO,
            "for j = _, i = _",
            "  s[] += A[i, j]\n  w[j] += A[i, j] * x[i]\n  s[] += z[i]",
        );
        let split = split_independent(&b).expect("splits");
        assert_eq!(nests(&split), vec![(2, 2), (2, 1)]);
    }

    #[test]
    fn statements_tied_by_a_written_tensor_stay_in_one_loop() {
        // `w` reads what `s` holds at each iteration (a running sum).
        let b = body(TWO, "for i = _", "  s[] += x[i]\n  w[i] = s[] * z[i]");
        assert!(split_independent(&b).is_none());
        // Both write `w`.
        let b = body(TWO, "for i = _", "  w[i] += x[i]\n  w[i] += z[i]");
        assert!(split_independent(&b).is_none());
        // One statement reads what another writes through a condition.
        let b = body(
            TWO,
            "for i = _",
            "  s[] += x[i]\n  if s[] > 1.0\n    w[i] = z[i]\n  end",
        );
        assert!(split_independent(&b).is_none());
    }
}
