//! Which loops and tensors have sizes the engines can infer: a `for i = _` loop needs a
//! tensor of known size read or written at `i` (plainly, at an offset, or through a
//! window with literal bounds); an output takes its shape from plain writes inside such
//! loops. The generator gives the other loops ranges and the other outputs shapes.

use std::collections::HashSet;

use finch::notation::{Access, Expr, Extent, Stmt};
use finch::{Op, Value};

use super::Tensor;

/// `i`, `i + c`, `i - c`, under a protocol: the index and its offset.
pub(super) fn plain_index(e: &Expr) -> Option<(&str, i64)> {
    match e {
        Expr::Index(i) => Some((i, 0)),
        Expr::Protocol(_, x) => plain_index(x),
        Expr::Call { op, args } if args.len() == 2 => match (op, &args[0], &args[1]) {
            (Op::Add, Expr::Index(i), Expr::Literal(Value::I64(c))) => Some((i, *c)),
            (Op::Sub, Expr::Index(i), Expr::Literal(Value::I64(c))) => Some((i, -*c)),
            _ => None,
        },
        _ => None,
    }
}

/// Calls `f` on every access in `s` (reads and writes).
pub(super) fn each_access(s: &Stmt, f: &mut dyn FnMut(&Access)) {
    fn in_expr(e: &Expr, f: &mut dyn FnMut(&Access)) {
        match e {
            Expr::Access(a) => {
                f(a);
                a.indices.iter().for_each(|x| in_expr(x, f));
            }
            Expr::Call { args, .. } => args.iter().for_each(|x| in_expr(x, f)),
            Expr::Permissive(x) | Expr::Protocol(_, x) => in_expr(x, f),
            Expr::Window { lo, hi, index } => {
                [lo, hi, index].into_iter().for_each(|x| in_expr(x, f))
            }
            _ => {}
        }
    }
    match s {
        Stmt::Assign { lhs, rhs, .. } => {
            f(lhs);
            lhs.indices.iter().for_each(|x| in_expr(x, f));
            in_expr(rhs, f);
        }
        Stmt::Declare { init, .. } => in_expr(init, f),
        Stmt::Loop { body, extent, .. } => {
            if let Extent::Range(a, b) = extent {
                in_expr(a, f);
                in_expr(b, f);
            }
            each_access(body, f)
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            in_expr(cond, f);
            each_access(then, f);
            if let Some(o) = otherwise {
                each_access(o, f);
            }
        }
        Stmt::Define { value, body, .. } => {
            in_expr(value, f);
            each_access(body, f);
        }
        Stmt::Block(v) => v.iter().for_each(|s| each_access(s, f)),
        _ => {}
    }
}

/// Whether a tensor of known size is accessed at index `index` plainly (or through a
/// window with literal bounds) in `body`, which then sizes a `for index = _` loop.
pub(super) fn sizes_loop(index: &str, body: &Stmt, known: &HashSet<String>) -> bool {
    let mut found = false;
    each_access(body, &mut |a| {
        for e in &a.indices {
            let inner = match e {
                Expr::Permissive(x) => x,
                e => e,
            };
            if let Expr::Window { lo, hi, index: i } = inner {
                if matches!((&**lo, &**hi, &**i), (Expr::Literal(_), Expr::Literal(_), Expr::Index(n)) if n == index)
                {
                    found = true;
                }
            }
            if known.contains(&a.tensor) && plain_index(e).is_some_and(|(i, _)| i == index) {
                found = true;
            }
        }
    });
    found
}

/// The size of the dimension a loop runs over, and its shift, from any plain access.
pub(super) fn loop_dim_size(
    index: &str,
    body: &Stmt,
    tensors: &[Tensor],
    sizes: &[usize],
) -> Option<(usize, i64)> {
    let mut found = None;
    each_access(body, &mut |a| {
        let Some(t) = tensors.iter().find(|t| t.name == a.tensor) else {
            return;
        };
        for (m, e) in a.indices.iter().enumerate() {
            if let (Some((i, c)), Some(&d)) = (plain_index(e), t.dims.get(m)) {
                if i == index && found.is_none() {
                    found = Some((sizes[d], c));
                }
            }
        }
    });
    found
}

/// Adds to `out` the tensors `s` writes at plain indices only, inside loops that a tensor
/// in `known` sizes (so the reference infers their shapes).
pub(super) fn written_plainly(
    s: &Stmt,
    known: &HashSet<String>,
    loops: &mut Vec<(String, bool)>,
    out: &mut Vec<String>,
) {
    match s {
        Stmt::Assign { lhs, .. } => {
            let ok = lhs.indices.iter().all(|e| match e {
                Expr::Index(i) => loops.iter().any(|(n, sized)| n == i && *sized),
                _ => false,
            });
            if ok {
                out.push(lhs.tensor.clone());
            }
        }
        Stmt::Loop {
            index,
            extent,
            body,
        } => {
            let sized = match extent {
                Extent::Range(Expr::Literal(Value::I64(1)), _) => true,
                Extent::Range(..) => false,
                Extent::Auto => sizes_loop(index, body, known),
            };
            loops.push((index.clone(), sized));
            written_plainly(body, known, loops, out);
            loops.pop();
        }
        Stmt::Block(v) => v.iter().for_each(|s| written_plainly(s, known, loops, out)),
        Stmt::Sieve {
            then, otherwise, ..
        } => {
            written_plainly(then, known, loops, out);
            if let Some(o) = otherwise {
                written_plainly(o, known, loops, out);
            }
        }
        Stmt::Define { body, .. } => written_plainly(body, known, loops, out),
        _ => {}
    }
}
