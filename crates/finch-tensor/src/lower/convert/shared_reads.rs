//! Reads that several statements of a scope repeat, read once around them (bound to
//! a `let`), for tensors that scope does not write.

use super::*;

/// Reads of `e` that [`common_scope_reads`] may bind to a `let`: of a
/// tensor not in `written`, at plain loop indices (not at computed, shifted or permissive
/// ones, which may be out of range where a branch would not evaluate them), keyed by their
/// text.
pub(super) fn plain_reads(
    e: &Expr,
    written: &HashSet<usize>,
    inner: &[String],
    out: &mut Vec<(String, Expr)>,
) {
    match e {
        Expr::Access(t, idx) => {
            if let Tensor::Fiber(f) = &**t {
                let plain = idx.iter().all(
                    |x| matches!(x, Expr::Index(n) if !n.starts_with("let:") && !inner.contains(n)),
                );
                if plain && !written.contains(&f.tensor) && !idx.is_empty() {
                    out.push((format!("{e:?}"), e.clone()));
                }
            }
        }
        Expr::Call(_, args) => args
            .iter()
            .for_each(|a| plain_reads(a, written, inner, out)),
        _ => {}
    }
}

/// `e` with the read keyed `key` (see [`plain_reads`]) replaced by the variable `var`.
pub(super) fn replace_read(e: Expr, key: &str, var: &str) -> Expr {
    match e {
        Expr::Access(..) if format!("{e:?}") == key => Expr::Index(var.to_string()),
        Expr::Call(op, args) => Expr::Call(
            op,
            args.into_iter()
                .map(|a| replace_read(a, key, var))
                .collect(),
        ),
        other => other,
    }
}

/// `body` inside one `let` per read, each bound to a fresh variable `let:read#{n}` (`#`
/// cannot be in a program's names, so a user's `let read0 = ...` inside is not confused
/// with it).
pub(super) fn bind_reads(body: Stmt, reads: Vec<(String, Expr)>, count: &mut usize) -> Stmt {
    let mut body = body;
    let mut lets = Vec::new();
    for (key, e) in reads {
        let var = format!("let:read#{count}");
        *count += 1;
        body = replace_in_stmt(body, &key, &var);
        lets.push((var, e));
    }
    for (var, value) in lets.into_iter().rev() {
        body = Stmt::Define {
            var,
            value,
            body: Box::new(body),
        };
    }
    body
}

/// The reads [`common_scope_reads`] may bind in `s`: in assignments, `let`s, branches and
/// blocks, and in loops inside them where the read does not use a loop's index (`inner`:
/// the indices of the loops entered so far).
pub(super) fn each_read(
    s: &Stmt,
    written: &HashSet<usize>,
    inner: &mut Vec<String>,
    out: &mut Vec<(String, Expr)>,
) {
    match s {
        Stmt::Assign { rhs, .. } => plain_reads(rhs, written, inner, out),
        Stmt::Define { value, body, .. } => {
            plain_reads(value, written, inner, out);
            each_read(body, written, inner, out);
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            plain_reads(cond, written, inner, out);
            each_read(then, written, inner, out);
            each_read(otherwise, written, inner, out);
        }
        Stmt::Loop { index, body, .. } => {
            inner.push(index.clone());
            each_read(body, written, inner, out);
            inner.pop();
        }
        Stmt::Block(v) => v.iter().for_each(|s| each_read(s, written, inner, out)),
        _ => {}
    }
}

/// `s` with the read keyed `key` replaced by `var` exactly where [`each_read`] finds reads
/// (loops included: no loop inside rebinds one of the read's indices, which the parser
/// refuses).
pub(super) fn replace_in_stmt(s: Stmt, key: &str, var: &str) -> Stmt {
    let sub = |s: Box<Stmt>| Box::new(replace_in_stmt(*s, key, var));
    match s {
        Stmt::Assign { lhs, op, rhs } => Stmt::Assign {
            lhs,
            op,
            rhs: replace_read(rhs, key, var),
        },
        Stmt::Define {
            var: v,
            value,
            body,
        } => Stmt::Define {
            var: v,
            value: replace_read(value, key, var),
            body: sub(body),
        },
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => Stmt::Sieve {
            cond: replace_read(cond, key, var),
            then: sub(then),
            otherwise: sub(otherwise),
        },
        Stmt::Loop {
            index,
            lo,
            hi,
            body,
        } => Stmt::Loop {
            index,
            lo,
            hi,
            body: sub(body),
        },
        Stmt::Block(v) => Stmt::Block(
            v.into_iter()
                .map(|s| replace_in_stmt(s, key, var))
                .collect(),
        ),
        other => other,
    }
}

/// Repeated identical reads (Finch's common subexpressions): a read made twice or more in
/// a statement's value, or across a block's statements or a branch's or `let`'s parts
/// inside a loop, at plain loop indices, of a tensor that scope does not write, is read
/// once into a `let` around it (`y[i] = A[i] * A[i]` walks `A` once, not twice in
/// lockstep). Reads at computed, shifted or permissive indices (which may be out of range
/// where a branch would not evaluate them) are left alone. `s[] += x[i] * z[i]; w[i] =
/// x[i] - z[i] + s[]` then walks `x` and `z` once, as two operands rather than four (whose
/// combinations multiply the code: a tenth of the size with two galloped operands), `if
/// x[i] > 0.5; w[i] = x[i]; end` walks `x` once, and so does `if x[j] != 0; for i = _;
/// y[i] += A[i, j] * x[j]; end; end` (a loop under the scope counts where the read does
/// not use its index).
pub(super) fn common_scope_reads(s: Stmt, count: &mut usize) -> Stmt {
    let mut written = HashSet::new();
    written_tensors(&s, &mut written);
    let mut found = Vec::new();
    each_read(&s, &written, &mut Vec::new(), &mut found);
    let mut shared: Vec<(String, Expr)> = Vec::new();
    for (k, (key, e)) in found.iter().enumerate() {
        let again = found[k + 1..].iter().any(|(other, _)| other == key);
        if again && !shared.iter().any(|(r, _)| r == key) {
            shared.push((key.clone(), e.clone()));
        }
    }
    bind_reads(s, shared, count)
}

/// Every tensor `s` writes, declares or resets, anywhere inside it.
pub(super) fn written_tensors(s: &Stmt, out: &mut HashSet<usize>) {
    match s {
        Stmt::Assign { lhs, .. } => {
            if let Tensor::Fiber(f) = &lhs.0 {
                out.insert(f.tensor);
            }
        }
        Stmt::SetScalar(t, _) | Stmt::Reset(t, _) | Stmt::Freeze(t) => {
            out.insert(*t);
        }
        Stmt::Loop { body, .. } | Stmt::Define { body, .. } => written_tensors(body, out),
        Stmt::Sieve {
            then, otherwise, ..
        } => {
            written_tensors(then, out);
            written_tensors(otherwise, out);
        }
        Stmt::Block(v) => v.iter().for_each(|s| written_tensors(s, out)),
        Stmt::SetLocal(..) | Stmt::Check(..) => {}
    }
}
