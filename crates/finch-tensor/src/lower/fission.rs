//! Loop fission: a loop nest whose innermost body holds statements that share no written
//! tensor becomes one nest per group of dependent statements, each lowered on its own.
//!
//! Lowering coiterates every operand of a loop's body at once, so two statements over
//! different sparse operands multiply each other's code: `s[] += x[gallop(i)] *
//! z[gallop(i)]` beside `w[i] = u[gallop(i)] - v[gallop(i)]` lowers to 17 267 lines of
//! kernel IR together and to about 1 500 apart. (Reads the statements share are bound once
//! around them when converted, so they add no operands; a nest split off keeps the `let`s
//! its statements use.) The lowerer falls back to this form only where the fused kernel is
//! too large (see `lower_program_any_order`).
//!
//! Statements are independent when none reads or writes a tensor another writes: their
//! order across iterations then cannot matter. A short-circuiting scalar may stop its own
//! nest early afterwards; it stops only where its value can no longer change, so the
//! results are the same. Nests holding kernel-local bookkeeping (`SetLocal`, `Check`),
//! run-time choices (`Switch`, `Present`) or raw kernel code are left fused: their
//! dependences are not visible as tensors.

use std::collections::BTreeSet;

use super::{expr_mentions, mentions};
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
    // The headers of a perfect nest (each body one loop), outermost first, then the
    // `let`s around its innermost statements (reads several of them share, bound once).
    let mut headers = Vec::new();
    let mut lets: Vec<(&String, &Expr)> = Vec::new();
    let mut at = s;
    loop {
        match at {
            Stmt::Loop {
                index,
                lo,
                hi,
                body,
            } if lets.is_empty() => {
                headers.push((index, lo, hi));
                at = body;
            }
            Stmt::Define { var, value, body } => {
                lets.push((var, value));
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
    // Each statement's effects include those of the `let`s it uses (its group evaluates
    // them in its own nest).
    let mut uses = Vec::with_capacity(stmts.len());
    let mut effects = Vec::with_capacity(stmts.len());
    for st in stmts {
        let mut used = vec![false; lets.len()];
        for k in (0..lets.len()).rev() {
            let var = lets[k].0;
            used[k] = mentions(st, var)
                || (k + 1..lets.len()).any(|l| used[l] && expr_mentions(lets[l].1, var));
        }
        let mut e = Effects::default();
        if !e.stmt(st) || !(0..lets.len()).all(|k| !used[k] || e.expr(lets[k].1)) {
            return None;
        }
        uses.push(used);
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
    // Each group: its statements and the `let`s they use.
    let mut groups: Vec<(usize, Vec<Stmt>, Vec<bool>)> = Vec::new();
    for (k, st) in stmts.iter().enumerate() {
        let r = root(&mut parent, k);
        match groups.iter_mut().find(|(g, ..)| *g == r) {
            Some((_, v, used)) => {
                v.push(st.clone());
                used.iter_mut().zip(&uses[k]).for_each(|(u, n)| *u |= n);
            }
            None => groups.push((r, vec![st.clone()], uses[k].clone())),
        }
    }
    if groups.len() < 2 {
        return None;
    }
    let nests = groups
        .into_iter()
        .map(|(_, group, used)| {
            let inner = if group.len() == 1 {
                group.into_iter().next().unwrap_or(Stmt::Block(Vec::new()))
            } else {
                Stmt::Block(group)
            };
            let inner = lets.iter().zip(&used).rev().filter(|(_, u)| **u).fold(
                inner,
                |body, ((var, value), _)| Stmt::Define {
                    var: (*var).clone(),
                    value: (*value).clone(),
                    body: Box::new(body),
                },
            );
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

    /// Each loop nest reachable through blocks: its depth, the `let` variables around its
    /// innermost statements (reads they share), and the number of those statements.
    fn peeled(s: &Stmt) -> Vec<(usize, Vec<String>, usize)> {
        match s {
            Stmt::Block(v) => v.iter().flat_map(peeled).collect(),
            Stmt::Loop { .. } => {
                let (mut depth, mut vars, mut at) = (0, Vec::new(), s);
                loop {
                    match at {
                        Stmt::Loop { body, .. } => {
                            depth += 1;
                            at = body;
                        }
                        Stmt::Block(v) if v.len() == 1 => at = &v[0],
                        Stmt::Define { var, body, .. } => {
                            vars.push(var.clone());
                            at = body;
                        }
                        _ => break,
                    }
                }
                let count = match at {
                    Stmt::Block(v) => v.len(),
                    _ => 1,
                };
                vec![(depth, vars, count)]
            }
            _ => vec![],
        }
    }

    /// For each loop nest: its depth and its number of innermost statements.
    fn nests(s: &Stmt) -> Vec<(usize, usize)> {
        peeled(s).into_iter().map(|(d, _, n)| (d, n)).collect()
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

    /// For each loop nest: the `let` variables around its innermost statements.
    fn lets(s: &Stmt) -> Vec<Vec<String>> {
        peeled(s).into_iter().map(|(_, v, _)| v).collect()
    }

    #[test]
    fn each_nest_keeps_the_shared_reads_it_uses() {
        let three = "output s :: Scalar(0.0)\noutput t :: Scalar(0.0)\noutput w :: Dense(Element(0.0))\ns .= 0\nt .= 0\nw .= 0\n";
        // `x[i]` is shared by the first two statements, `z[i]` by the first and third:
        // both are read once, around all three.
        let b = body(
            three,
            "for i = _",
            "  s[] += x[i] * z[i]\n  w[i] = x[i] + 1.0\n  t[] += z[i]",
        );
        assert_eq!(nests(&b), vec![(1, 3)]);
        let split = split_independent(&b).expect("splits");
        assert_eq!(nests(&split), vec![(1, 1), (1, 1), (1, 1)]);
        let vars = lets(&split);
        assert_eq!(vars[0].len(), 2, "{vars:?}");
        assert_eq!(vars[1].len(), 1, "{vars:?}");
        assert_eq!(vars[2].len(), 1, "{vars:?}");
        assert_ne!(vars[1], vars[2], "{vars:?}");
        // A `let` that reads what one statement writes ties the statements that use it
        // to that one (`a` is `s` before this iteration's update).
        let b = body(
            TWO,
            "for i = _",
            "  let a = s[]\n    s[] += x[i]\n    w[i] = a * z[i]\n  end",
        );
        assert!(split_independent(&b).is_none());
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
