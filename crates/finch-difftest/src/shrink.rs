//! The minimiser: shrinks a failing case while the same failure (the same kind in the same
//! configuration, and for errors the same message category) persists. Candidates, tried
//! in order, the first that still fails taken, until none does: drop a statement, take a
//! branch for an `if`, inline a `let`, replace an expression by an operand or a read by a
//! constant, make an assignment a store, drop unused declarations; turn an input's data
//! into its fill (all, halves, single entries); shrink a dimension; make a level Dense or
//! SparseList. Every candidate runs in a worker, like the cases themselves.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use finch::formats::{Format, LevelKind};
use finch::notation::{self, AssignOp, Expr, Stmt};
use finch::tensor::{DenseArray, Tensor};
use finch::Value;

use crate::case::Case;
use crate::formats::with_level;
use crate::run::{fault_key, Config, Kind, Verdict};
use crate::worker::Worker;

/// The failure a minimised case must keep.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// Its kind.
    pub kind: Kind,
    /// The configuration that fails.
    pub config: Config,
    /// For errors, panics and internal errors: the message's category.
    pub key: String,
}

impl Failure {
    /// The worst fault of a verdict, in the first configuration with it (the interpreter
    /// before C, strict before reassociated).
    pub fn of(verdict: &Verdict) -> Option<Failure> {
        let kind = verdict
            .outcomes
            .iter()
            .map(|o| o.kind)
            .filter(|k| k.is_fault())
            .max()?;
        let first = verdict
            .outcomes
            .iter()
            .filter(|o| o.kind == kind)
            .min_by_key(|o| o.config)?;
        Some(Failure {
            kind,
            config: first.config,
            key: key_of(kind, &first.message),
        })
    }

    /// The message of this failure in `verdict`.
    pub fn message_in(&self, verdict: &Verdict) -> Option<String> {
        verdict
            .outcomes
            .iter()
            .find(|o| o.kind == self.kind && o.config == self.config)
            .map(|o| o.message.clone())
    }

    /// Whether `verdict` shows this failure.
    pub fn seen_in(&self, verdict: &Verdict) -> bool {
        verdict.outcomes.iter().any(|o| {
            o.kind == self.kind && o.config == self.config && key_of(o.kind, &o.message) == self.key
        })
    }
}

fn key_of(kind: Kind, message: &str) -> String {
    match kind {
        Kind::Internal | Kind::Error | Kind::Panic => fault_key(message),
        _ => String::new(),
    }
}

/// How long and how many candidates a minimisation may take.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Wall time.
    pub time: Duration,
    /// Candidates run.
    pub runs: usize,
}

/// Shrinks `case` while `failure` persists (run in `worker`); returns the smallest case
/// found and the number of candidates run.
pub fn shrink(worker: &mut Worker, case: Case, failure: &Failure, budget: Budget) -> (Case, usize) {
    shrink_with(case, budget, &mut |c| {
        failure.seen_in(&worker.given(c, &[failure.config]))
    })
}

/// Shrinks `case` while `fails` holds of it.
pub fn shrink_with(
    case: Case,
    budget: Budget,
    fails: &mut dyn FnMut(&Case) -> bool,
) -> (Case, usize) {
    let start = Instant::now();
    let mut runs = 0;
    let mut best = case;
    let mut tried: HashSet<String> = HashSet::new();
    'outer: loop {
        for phase in 0..5 {
            let candidates = match phase {
                0 => program_candidates(&best),
                1 => data_candidates(&best),
                2 => expr_candidates(&best),
                3 => shape_candidates(&best),
                _ => format_candidates(&best),
            };
            for cand in candidates {
                if start.elapsed() > budget.time || runs >= budget.runs {
                    break 'outer;
                }
                if !tried.insert(cand.to_text()) || finch::Program::parse(&cand.program).is_err() {
                    continue;
                }
                runs += 1;
                if fails(&cand) {
                    best = cand;
                    continue 'outer;
                }
            }
        }
        break;
    }
    (best, runs)
}

fn with_program(case: &Case, program: &notation::Program) -> Case {
    drop_unused(Case {
        program: notation::print_program(program),
        inputs: case.inputs.clone(),
        shapes: case.shapes.clone(),
    })
}

/// Drops the declarations, inputs and shapes of tensors the program no longer mentions.
fn drop_unused(mut case: Case) -> Case {
    let Ok(mut ast) = notation::parse_program(&case.program) else {
        return case;
    };
    let body = notation::print_stmt(&ast.body);
    let mentioned = |name: &str| {
        body.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == name)
    };
    ast.decls.retain(|d| mentioned(&d.name));
    case.inputs.retain(|(n, _)| mentioned(n));
    case.shapes.retain(|n, _| mentioned(n));
    case.program = notation::print_program(&ast);
    case
}

fn program_candidates(case: &Case) -> Vec<Case> {
    let Ok(ast) = notation::parse_program(&case.program) else {
        return vec![];
    };
    // Whole outputs and workspaces first: every statement that declares or writes one.
    let dropped = ast
        .decls
        .iter()
        .filter(|d| d.kind != notation::DeclKind::Input)
        .map(|d| {
            let mut p = ast.clone();
            p.body = without_writes(&ast.body, &d.name).unwrap_or(Stmt::Block(vec![]));
            p
        });
    let smaller = stmt_variants(&ast.body).into_iter().map(|body| {
        let mut p = ast.clone();
        p.body = body;
        p
    });
    dropped
        .chain(smaller)
        .map(|p| with_program(case, &p))
        .collect()
}

/// `s` without the statements that declare or write `name` (`None` when nothing is left).
fn without_writes(s: &Stmt, name: &str) -> Option<Stmt> {
    let keep = |b: &Stmt| without_writes(b, name).map(Box::new);
    match s {
        Stmt::Assign { lhs, .. } if lhs.tensor == name => None,
        Stmt::Declare { tensor, .. } if tensor == name => None,
        Stmt::Block(v) => {
            let w: Vec<Stmt> = v.iter().filter_map(|x| without_writes(x, name)).collect();
            (!w.is_empty()).then_some(Stmt::Block(w))
        }
        Stmt::Loop {
            index,
            extent,
            body,
        } => Some(Stmt::Loop {
            index: index.clone(),
            extent: extent.clone(),
            body: keep(body)?,
        }),
        Stmt::Define { var, value, body } => Some(Stmt::Define {
            var: var.clone(),
            value: value.clone(),
            body: keep(body)?,
        }),
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            let then = keep(then);
            let otherwise = otherwise
                .as_deref()
                .and_then(|o| without_writes(o, name))
                .map(Box::new);
            match (then, otherwise) {
                (None, None) => None,
                (Some(t), o) => Some(Stmt::Sieve {
                    cond: cond.clone(),
                    then: t,
                    otherwise: o,
                }),
                (None, Some(o)) => Some(Stmt::Sieve {
                    cond: cond.clone(),
                    then: Box::new(Stmt::Block(vec![])),
                    otherwise: Some(o),
                }),
            }
        }
        s => Some(s.clone()),
    }
}

fn expr_candidates(case: &Case) -> Vec<Case> {
    let Ok(ast) = notation::parse_program(&case.program) else {
        return vec![];
    };
    stmt_expr_variants(&ast.body)
        .into_iter()
        .map(|body| {
            let mut p = ast.clone();
            p.body = body;
            with_program(case, &p)
        })
        .collect()
}

/// Smaller statements: one statement of a block dropped, a branch taken, a `let` inlined.
fn stmt_variants(s: &Stmt) -> Vec<Stmt> {
    let mut out = Vec::new();
    match s {
        Stmt::Block(v) => {
            for k in 0..v.len() {
                let mut w = v.clone();
                w.remove(k);
                out.push(if w.len() == 1 {
                    w.remove(0)
                } else {
                    Stmt::Block(w)
                });
            }
            for k in 0..v.len() {
                for var in stmt_variants(&v[k]) {
                    let mut w = v.clone();
                    w[k] = var;
                    out.push(Stmt::Block(w));
                }
            }
        }
        Stmt::Loop {
            index,
            extent,
            body,
        } => {
            for b in stmt_variants(body) {
                out.push(Stmt::Loop {
                    index: index.clone(),
                    extent: extent.clone(),
                    body: Box::new(b),
                });
            }
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            out.push((**then).clone());
            if let Some(o) = otherwise {
                out.push((**o).clone());
                out.push(Stmt::Sieve {
                    cond: cond.clone(),
                    then: then.clone(),
                    otherwise: None,
                });
            }
            for t in stmt_variants(then) {
                out.push(Stmt::Sieve {
                    cond: cond.clone(),
                    then: Box::new(t),
                    otherwise: otherwise.clone(),
                });
            }
        }
        Stmt::Define { var, value, body } => {
            out.push(substitute_stmt(body, var, value));
            for b in stmt_variants(body) {
                out.push(Stmt::Define {
                    var: var.clone(),
                    value: value.clone(),
                    body: Box::new(b),
                });
            }
        }
        Stmt::Assign { lhs, op, rhs } if *op != AssignOp::Store => out.push(Stmt::Assign {
            lhs: lhs.clone(),
            op: AssignOp::Store,
            rhs: rhs.clone(),
        }),
        _ => {}
    }
    out
}

/// Statements with one expression simplified.
fn stmt_expr_variants(s: &Stmt) -> Vec<Stmt> {
    let mut out = Vec::new();
    match s {
        Stmt::Block(v) => {
            for k in 0..v.len() {
                for var in stmt_expr_variants(&v[k]) {
                    let mut w = v.clone();
                    w[k] = var;
                    out.push(Stmt::Block(w));
                }
            }
        }
        Stmt::Loop {
            index,
            extent,
            body,
        } => {
            for b in stmt_expr_variants(body) {
                out.push(Stmt::Loop {
                    index: index.clone(),
                    extent: extent.clone(),
                    body: Box::new(b),
                });
            }
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            for c in expr_variants(cond) {
                out.push(Stmt::Sieve {
                    cond: c,
                    then: then.clone(),
                    otherwise: otherwise.clone(),
                });
            }
            for t in stmt_expr_variants(then) {
                out.push(Stmt::Sieve {
                    cond: cond.clone(),
                    then: Box::new(t),
                    otherwise: otherwise.clone(),
                });
            }
            if let Some(o) = otherwise {
                for e in stmt_expr_variants(o) {
                    out.push(Stmt::Sieve {
                        cond: cond.clone(),
                        then: then.clone(),
                        otherwise: Some(Box::new(e)),
                    });
                }
            }
        }
        Stmt::Define { var, value, body } => {
            for v in expr_variants(value) {
                out.push(Stmt::Define {
                    var: var.clone(),
                    value: v,
                    body: body.clone(),
                });
            }
            for b in stmt_expr_variants(body) {
                out.push(Stmt::Define {
                    var: var.clone(),
                    value: value.clone(),
                    body: Box::new(b),
                });
            }
        }
        Stmt::Assign { lhs, op, rhs } => {
            for r in expr_variants(rhs) {
                out.push(Stmt::Assign {
                    lhs: lhs.clone(),
                    op: op.clone(),
                    rhs: r,
                });
            }
        }
        _ => {}
    }
    out
}

/// Simpler expressions: an operand for a call, a constant for a read.
fn expr_variants(e: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    match e {
        Expr::Call { op, args } => {
            out.extend(args.iter().cloned());
            if args.len() > 2 {
                for k in 0..args.len() {
                    let mut a = args.clone();
                    a.remove(k);
                    out.push(Expr::Call { op: *op, args: a });
                }
            }
            for k in 0..args.len() {
                for v in expr_variants(&args[k]) {
                    let mut a = args.clone();
                    a[k] = v;
                    out.push(Expr::Call { op: *op, args: a });
                }
            }
        }
        Expr::Access(_) | Expr::Variable(_) | Expr::Index(_) => {
            for v in [
                Value::F64(1.0),
                Value::F64(0.0),
                Value::I64(1),
                Value::Bool(true),
            ] {
                out.push(Expr::Literal(v));
            }
        }
        _ => {}
    }
    out
}

fn substitute_expr(e: &Expr, var: &str, value: &Expr) -> Expr {
    match e {
        Expr::Variable(v) if v == var => value.clone(),
        Expr::Call { op, args } => Expr::Call {
            op: *op,
            args: args
                .iter()
                .map(|a| substitute_expr(a, var, value))
                .collect(),
        },
        Expr::Access(a) => {
            let mut a = a.clone();
            a.indices = a
                .indices
                .iter()
                .map(|x| substitute_expr(x, var, value))
                .collect();
            Expr::Access(a)
        }
        Expr::Permissive(x) => Expr::Permissive(Box::new(substitute_expr(x, var, value))),
        Expr::Protocol(p, x) => Expr::Protocol(*p, Box::new(substitute_expr(x, var, value))),
        e => e.clone(),
    }
}

fn substitute_stmt(s: &Stmt, var: &str, value: &Expr) -> Stmt {
    let sub = |e: &Expr| substitute_expr(e, var, value);
    match s {
        Stmt::Assign { lhs, op, rhs } => {
            let mut l = lhs.clone();
            l.indices = l.indices.iter().map(sub).collect();
            Stmt::Assign {
                lhs: l,
                op: op.clone(),
                rhs: sub(rhs),
            }
        }
        Stmt::Loop {
            index,
            extent,
            body,
        } => Stmt::Loop {
            index: index.clone(),
            extent: extent.clone(),
            body: Box::new(substitute_stmt(body, var, value)),
        },
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => Stmt::Sieve {
            cond: sub(cond),
            then: Box::new(substitute_stmt(then, var, value)),
            otherwise: otherwise
                .as_ref()
                .map(|o| Box::new(substitute_stmt(o, var, value))),
        },
        Stmt::Define {
            var: v,
            value: x,
            body,
        } if v != var => Stmt::Define {
            var: v.clone(),
            value: sub(x),
            body: Box::new(substitute_stmt(body, var, value)),
        },
        Stmt::Block(v) => Stmt::Block(v.iter().map(|s| substitute_stmt(s, var, value)).collect()),
        s => s.clone(),
    }
}

fn format_of(case: &Case, name: &str) -> Option<Format> {
    let ast = notation::parse_program(&case.program).ok()?;
    Format::parse(&ast.decl(name)?.format).ok()
}

/// Inputs with some data turned into the fill (where the format still holds it).
fn data_candidates(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    for (k, (name, a)) in case.inputs.iter().enumerate() {
        let Some(format) = format_of(case, name) else {
            continue;
        };
        let nonfill: Vec<usize> = (0..a.data.len())
            .filter(|&p| !a.data[p].same(&a.fill))
            .collect();
        if nonfill.is_empty() {
            continue;
        }
        let mut sets: Vec<Vec<usize>> = vec![nonfill.clone()];
        if nonfill.len() > 2 {
            let half = nonfill.len() / 2;
            sets.push(nonfill[..half].to_vec());
            sets.push(nonfill[half..].to_vec());
        }
        sets.extend(nonfill.iter().map(|&p| vec![p]));
        for set in sets {
            let mut b = a.clone();
            for &p in &set {
                b.data[p] = a.fill;
            }
            if Tensor::from_dense(&format, &b).is_ok() {
                let mut c = case.clone();
                c.inputs[k].1 = b;
                out.push(c);
            }
        }
        // Values made small: 1 for numbers.
        if a.ty == finch::ScalarType::F64 {
            let mut b = a.clone();
            for &p in &nonfill {
                if b.data[p]
                    .as_f64()
                    .is_some_and(|x| x.is_finite() && x != 1.0)
                {
                    b.data[p] = Value::F64(1.0);
                }
            }
            if b != *a && Tensor::from_dense(&format, &b).is_ok() {
                let mut c = case.clone();
                c.inputs[k].1 = b;
                out.push(c);
            }
        }
    }
    out
}

/// The array without index `size - 1` (or `0`) of mode `mode`.
fn cut(a: &DenseArray, mode: usize, first: bool) -> DenseArray {
    let mut shape = a.shape.clone();
    let n = shape[mode];
    shape[mode] = n - 1;
    let drop = if first { 0 } else { n - 1 };
    let stride: usize = a.shape[..mode].iter().product();
    let data = a
        .data
        .iter()
        .enumerate()
        .filter(|(p, _)| (p / stride.max(1)) % n != drop)
        .map(|(_, v)| *v)
        .collect();
    DenseArray {
        ty: a.ty,
        shape,
        data,
        fill: a.fill,
    }
}

/// Every mode of size `s` (inputs and given shapes) made one smaller.
fn shape_candidates(case: &Case) -> Vec<Case> {
    let mut sizes: Vec<usize> = case
        .inputs
        .iter()
        .flat_map(|(_, a)| a.shape.clone())
        .filter(|&n| n > 0)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut out = Vec::new();
    for &s in sizes.iter().rev() {
        for first in [false, true] {
            let mut c = case.clone();
            for (_, a) in c.inputs.iter_mut() {
                for m in 0..a.shape.len() {
                    if a.shape[m] == s {
                        *a = cut(a, m, first);
                    }
                }
            }
            for dims in c.shapes.values_mut() {
                for d in dims.iter_mut().filter(|d| **d == s) {
                    *d = s - 1;
                }
            }
            let fits = c
                .inputs
                .iter()
                .all(|(n, a)| format_of(&c, n).is_some_and(|f| Tensor::from_dense(&f, a).is_ok()));
            if fits {
                out.push(c);
            }
        }
    }
    out
}

/// A level of a declaration made Dense or SparseList.
fn format_candidates(case: &Case) -> Vec<Case> {
    let Ok(ast) = notation::parse_program(&case.program) else {
        return vec![];
    };
    let mut out = Vec::new();
    for (k, d) in ast.decls.iter().enumerate() {
        let Ok(format) = Format::parse(&d.format) else {
            continue;
        };
        for depth in 0..format.ndims() {
            for kind in [LevelKind::Dense, LevelKind::SparseList] {
                let Some(f) = with_level(&format, depth, kind) else {
                    continue;
                };
                let mut p = ast.clone();
                p.decls[k].format = f.to_string();
                let c = with_program(case, &p);
                let fits = c.inputs.iter().all(|(n, a)| {
                    format_of(&c, n).is_some_and(|f| Tensor::from_dense(&f, a).is_ok())
                });
                if fits {
                    out.push(c);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::generate;

    #[test]
    fn a_planted_fault_survives_minimisation() {
        // The planted fault: a product of a SparseList input's read (a stand-in for a
        // compiler bug about such products), which the minimiser must keep.
        let planted = |c: &Case| {
            let Ok(p) = finch::Program::parse(&c.program) else {
                return false;
            };
            let sparse: Vec<&str> = p
                .decls()
                .iter()
                .filter(|d| {
                    d.format.to_string().contains("SparseList")
                        && d.kind == finch::notation::DeclKind::Input
                })
                .map(|d| d.name.as_str())
                .collect();
            let text = notation::print_stmt(&p.ast().body);
            text.contains(" * ")
                && sparse.iter().any(|n| text.contains(&format!("{n}[")))
                && crate::run::run_reference(&p, c).is_ok()
        };
        let mut shrunk = 0;
        for index in 0..200 {
            let case = generate(4, index, 0);
            if !planted(&case) || case.program.lines().count() < 12 {
                continue;
            }
            let budget = Budget {
                time: Duration::from_secs(20),
                runs: 400,
            };
            let (small, _) = shrink_with(case.clone(), budget, &mut |c| planted(c));
            assert!(planted(&small), "{}", small.program);
            assert!(
                small.program.len() < case.program.len(),
                "{}",
                small.program
            );
            shrunk += 1;
            if shrunk == 3 {
                break;
            }
        }
        assert_eq!(shrunk, 3, "too few generated cases carry the planted fault");
    }

    #[test]
    fn cutting_a_mode_keeps_the_rest() {
        let a = DenseArray::from_f64(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = cut(&a, 1, false);
        assert_eq!(b.shape, vec![2, 2]);
        assert_eq!(
            b,
            DenseArray::from_f64(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap()
        );
        let c = cut(&a, 0, true);
        assert_eq!(c, DenseArray::from_f64(&[1, 3], &[2.0, 4.0, 6.0]).unwrap());
    }
}
