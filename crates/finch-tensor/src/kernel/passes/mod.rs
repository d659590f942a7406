//! Kernel passes: rewrites of the kernel IR between lowering and the engines that change
//! the shape of loops for speed and never a value. The C engine's trusted code and the
//! kernel interpreter both run what [`run`] makes of a lowered kernel, so the interpreter,
//! and the oracle tests that compare it with the C, run the transformed loops too; each
//! pass has golden files of its own (`tests/filetests/<pass>/`).
//!
//! * [`jam`]: a loop over rows that each sum along one inner loop runs four rows at a time
//!   (`jam.rs`; rows that walk over steps, a SparseBlockList row's blocks, in `walks.rs`).
//! * [`strips`]: loops whose loads move on through memory run in strips with prefetches
//!   (`strips.rs`), in the rows `jam` left as they were too.
//!
//! One walk over the statements runs both, deciding at each loop as the passes are
//! ordered: a row loop `jam` takes is rewritten whole (with prefetching strips of its own
//! in its joint loops), and only the copies of its plain rows go on to `strips`.

pub(crate) mod jam;
pub(crate) mod strips;
pub(crate) mod walks;

use std::collections::HashMap;

use super::{count_reads, KExpr, KStmt, Kernel, LocalDecl, LocalId};
use crate::algebra::{Op, ScalarType};

/// Every pass, in order: what the C engine's trusted code and the interpreter run.
pub fn run(k: &Kernel) -> Kernel {
    walk(
        k,
        Passes {
            jam: true,
            strips: true,
        },
    )
}

/// The jam pass alone (see [`jam`]).
pub fn jam(k: &Kernel) -> Kernel {
    walk(
        k,
        Passes {
            jam: true,
            strips: false,
        },
    )
}

/// The strips pass alone (see [`strips`]).
pub fn strips(k: &Kernel) -> Kernel {
    walk(
        k,
        Passes {
            jam: false,
            strips: true,
        },
    )
}

/// Which passes a walk runs.
#[derive(Clone, Copy)]
struct Passes {
    jam: bool,
    strips: bool,
}

fn walk(k: &Kernel, passes: Passes) -> Kernel {
    let mut reads = HashMap::new();
    count_reads(&k.body, &mut reads);
    // The caller reads every output after the body.
    for o in &k.outputs {
        *reads.entry(*o).or_default() += 1;
    }
    let mut fresh = Fresh::new(k);
    let mut walker = Walker {
        fresh: &mut fresh,
        reads,
        loops: Vec::new(),
        passes,
    };
    let body = walker.block(&k.body);
    let mut out = fresh.into_kernel();
    out.body = body;
    out
}

/// New locals for a pass, numbered after the kernel's own.
pub(crate) struct Fresh<'k> {
    k: &'k Kernel,
    added: Vec<LocalDecl>,
}

impl<'k> Fresh<'k> {
    fn new(k: &'k Kernel) -> Self {
        Fresh {
            k,
            added: Vec::new(),
        }
    }

    /// The kernel being rewritten (as it was before the passes).
    pub(crate) fn kernel(&self) -> &'k Kernel {
        self.k
    }

    /// A local's readable name.
    pub(crate) fn name(&self, l: LocalId) -> String {
        let at = l.0 as usize;
        self.k
            .locals
            .get(at)
            .or_else(|| self.added.get(at.wrapping_sub(self.k.locals.len())))
            .map_or_else(|| l.to_string(), |d| d.name.clone())
    }

    /// A new local.
    pub(crate) fn local(&mut self, name: String, ty: ScalarType) -> LocalId {
        self.added.push(LocalDecl { name, ty });
        LocalId((self.k.locals.len() + self.added.len() - 1) as u32)
    }

    /// The kernel with the new locals (and its old body).
    fn into_kernel(self) -> Kernel {
        let mut k = self.k.clone();
        k.locals.extend(self.added);
        k
    }
}

/// The passes' walk over the statements.
struct Walker<'f, 'k> {
    fresh: &'f mut Fresh<'k>,
    passes: Passes,
    /// Reads of each local in the whole kernel (for `jam`).
    reads: HashMap<LocalId, usize>,
    /// The loops around the statement being rewritten, outermost first (`true`: a `for`
    /// loop): whether a loop has none around it, and whether it sits directly in a `for`.
    loops: Vec<bool>,
}

impl<'k> Walker<'_, 'k> {
    fn block(&mut self, stmts: &[KStmt]) -> Vec<KStmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            self.stmt(s, &mut out);
        }
        out
    }

    fn stmt(&mut self, s: &KStmt, out: &mut Vec<KStmt>) {
        match s {
            KStmt::For { var, lo, hi, body } => {
                let Some(rows) = self.jammed(*var, lo, hi, body) else {
                    self.plain_for(s, out);
                    return;
                };
                if !self.passes.jam {
                    out.push(s.clone());
                    return;
                }
                // The plain copies of the rows go on to the passes after `jam`.
                let (strips, loops) = (self.passes.strips, self.loops.clone());
                let mut plain = |fresh: &mut Fresh<'k>, s: KStmt| {
                    let mut rest = Walker {
                        fresh,
                        passes: Passes { jam: false, strips },
                        reads: HashMap::new(),
                        loops: loops.clone(),
                    };
                    let mut out = Vec::new();
                    rest.plain_for(&s, &mut out);
                    out
                };
                out.extend(match &rows.walk {
                    Some(walk) => walks::walks_together(self.fresh, s, (&rows, walk), &mut plain),
                    None => jam::rows_together(self.fresh, s, &rows, &mut plain),
                });
            }
            KStmt::While { cond, body } => {
                if let (true, KExpr::Op(Op::Lt, a)) = (self.passes.strips, cond) {
                    if let [KExpr::Local(q), bound] = a.as_slice() {
                        if let Some(strips) = strips::strip_walk(self.fresh, *q, bound, body) {
                            out.push(strips);
                            out.push(s.clone());
                            return;
                        }
                    }
                }
                self.loops.push(false);
                let body = self.block(body);
                self.loops.pop();
                out.push(KStmt::While {
                    cond: cond.clone(),
                    body,
                });
            }
            KStmt::If {
                cond,
                then,
                otherwise,
            } => {
                let (then, otherwise) = (self.block(then), self.block(otherwise));
                out.push(KStmt::If {
                    cond: cond.clone(),
                    then,
                    otherwise,
                });
            }
            _ => out.push(s.clone()),
        }
    }

    /// The `for` loop `s`, not run as rows together: in strips, or its body walked.
    fn plain_for(&mut self, s: &KStmt, out: &mut Vec<KStmt>) {
        let KStmt::For { var, lo, hi, body } = s else {
            return self.stmt(s, out);
        };
        let place = (self.loops.is_empty(), self.loops.last() == Some(&true));
        if self.passes.strips {
            if let Some(strips) = strips::strip_for(self.fresh, (*var, lo, hi), body, place) {
                out.extend(strips);
                return;
            }
        }
        self.loops.push(true);
        let body = self.block(body);
        self.loops.pop();
        out.push(KStmt::For {
            var: *var,
            lo: lo.clone(),
            hi: hi.clone(),
            body,
        });
    }

    /// The parts of the row loop `for var = lo .. hi { body }` when several of its rows
    /// can run at once (`jam::rows`) and nothing in it can fail.
    fn jammed<'b>(
        &self,
        var: LocalId,
        lo: &KExpr,
        hi: &KExpr,
        body: &'b [KStmt],
    ) -> Option<jam::Rows<'b>> {
        let k = self.fresh.kernel();
        let mut fallible = k.may_fail(lo, false) || k.may_fail(hi, false);
        super::visit_exprs(body, &mut |e| fallible |= k.may_fail(e, false));
        if fallible {
            return None;
        }
        jam::rows(k, &self.reads, var, body)
    }
}

/// `e` with each node `f` rewrites replaced (outermost first; `None`: kept, its parts
/// visited).
pub(crate) fn map_expr(e: &KExpr, f: &dyn Fn(&KExpr) -> Option<KExpr>) -> KExpr {
    if let Some(x) = f(e) {
        return x;
    }
    match e {
        KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => e.clone(),
        KExpr::Load(b, i) => KExpr::Load(*b, Box::new(map_expr(i, f))),
        KExpr::Op(op, a) => KExpr::Op(*op, a.iter().map(|x| map_expr(x, f)).collect()),
        KExpr::Search { buf, value, lo, hi } => KExpr::Search {
            buf: *buf,
            value: Box::new(map_expr(value, f)),
            lo: Box::new(map_expr(lo, f)),
            hi: Box::new(map_expr(hi, f)),
        },
    }
}

/// `stmts` with each assigned local (and loop variable) renamed by `local` and each
/// expression they hold rewritten by `expr`.
pub(crate) fn map_stmts(
    stmts: &[KStmt],
    local: &dyn Fn(LocalId) -> LocalId,
    expr: &dyn Fn(&KExpr) -> KExpr,
) -> Vec<KStmt> {
    stmts
        .iter()
        .map(|s| match s {
            KStmt::Assign(l, e) => KStmt::Assign(local(*l), expr(e)),
            KStmt::Store { buf, index, value } => KStmt::Store {
                buf: *buf,
                index: expr(index),
                value: expr(value),
            },
            KStmt::Resize { buf, len, fill } => KStmt::Resize {
                buf: *buf,
                len: expr(len),
                fill: *fill,
            },
            KStmt::Sort { buf, lo, hi } => KStmt::Sort {
                buf: *buf,
                lo: expr(lo),
                hi: expr(hi),
            },
            KStmt::For { var, lo, hi, body } => KStmt::For {
                var: local(*var),
                lo: expr(lo),
                hi: expr(hi),
                body: map_stmts(body, local, expr),
            },
            KStmt::While { cond, body } => KStmt::While {
                cond: expr(cond),
                body: map_stmts(body, local, expr),
            },
            KStmt::If {
                cond,
                then,
                otherwise,
            } => KStmt::If {
                cond: expr(cond),
                then: map_stmts(then, local, expr),
                otherwise: map_stmts(otherwise, local, expr),
            },
            KStmt::Hint(super::Hint::Prefetch { buf, index, ahead }) => {
                KStmt::Hint(super::Hint::Prefetch {
                    buf: *buf,
                    index: expr(index),
                    ahead: *ahead,
                })
            }
            KStmt::Hint(super::Hint::RowPointer { local: l, buf }) => {
                KStmt::Hint(super::Hint::RowPointer {
                    local: local(*l),
                    buf: *buf,
                })
            }
            KStmt::Break | KStmt::Fail(_) | KStmt::Hint(_) => s.clone(),
        })
        .collect()
}
