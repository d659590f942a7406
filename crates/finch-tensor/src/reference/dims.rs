//! Dimensions for the reference interpreter (Finch paper §4, §5.3).
//!
//! * A loop's extent: an explicit `a:b` is evaluated; `_` is the range over which the
//!   tensor modes indexed by the loop index in its body are in bounds: `1:n` for `A[i]`
//!   or `A[walk(i)]`, `2:n+1` for `A[i - 1]` (an offset, as Finch's OffsetTensor); a
//!   permissive `A[~i]` imposes nothing. Every such range must equal the extent, else an
//!   error names both.
//! * A declared tensor's shape: `RunOptions::shapes`, else the shape it already has, else
//!   inferred from its writes anywhere in the program: mode `m` takes the extent of the
//!   loop whose index writes that mode (`y[i]`, or `y[i - 1]` over `i = 2:n+1`: the
//!   extent shifted, which must start at 1), which in turn may come from other tensors
//!   (transitively, e.g. a workspace sized by the matrix that fills it).

use std::collections::HashSet;

use super::{err, Interp};
use crate::algebra::Op;
use crate::error::{Error, Result};
use crate::notation::{Access, Expr, Extent, Stmt};

/// A loop around an access: index, extent, body.
type LoopRef<'p> = (&'p str, &'p Extent, &'p Stmt);

/// The bare loop index of an access index expression, if it is one.
fn bare_index(e: &Expr) -> Option<&str> {
    match e {
        Expr::Index(i) => Some(i),
        Expr::Protocol(_, x) => bare_index(x),
        _ => None,
    }
}

/// `i`, `i + c`, `c + i` or `i - c` with an integer literal `c`: the index and the offset
/// `c` (Finch's OffsetTensor: `A[i + c]` is in bounds for `i` in `1-c : n-c`).
pub(crate) fn offset_index(e: &Expr) -> Option<(&str, i64)> {
    fn lit(e: &Expr) -> Option<i64> {
        match e {
            Expr::Literal(v) if v.scalar_type().is_some_and(|t| t.is_integer()) => {
                v.as_i128().and_then(|n| i64::try_from(n).ok())
            }
            _ => None,
        }
    }
    if let Some(i) = bare_index(e) {
        return Some((i, 0));
    }
    match e {
        Expr::Call { op: Op::Add, args } if args.len() == 2 => {
            match (bare_index(&args[0]), bare_index(&args[1])) {
                (Some(i), None) => lit(&args[1]).map(|c| (i, c)),
                (None, Some(i)) => lit(&args[0]).map(|c| (i, c)),
                _ => None,
            }
        }
        Expr::Call { op: Op::Sub, args } if args.len() == 2 => {
            let i = bare_index(&args[0])?;
            lit(&args[1]).and_then(|c| c.checked_neg()).map(|c| (i, c))
        }
        _ => None,
    }
}

/// Calls `f(access, is_write, enclosing loops)` for every access in `s`.
fn each_access<'p>(
    s: &'p Stmt,
    loops: &mut Vec<LoopRef<'p>>,
    f: &mut dyn FnMut(&'p Access, bool, &[LoopRef<'p>]),
) {
    fn in_expr<'p>(
        e: &'p Expr,
        loops: &[LoopRef<'p>],
        f: &mut dyn FnMut(&'p Access, bool, &[LoopRef<'p>]),
    ) {
        match e {
            Expr::Access(a) => {
                f(a, false, loops);
                a.indices.iter().for_each(|x| in_expr(x, loops, f));
            }
            Expr::Call { args, .. } => args.iter().for_each(|x| in_expr(x, loops, f)),
            Expr::Permissive(x) | Expr::Protocol(_, x) => in_expr(x, loops, f),
            Expr::Window { lo, hi, index } => [lo, hi, index]
                .into_iter()
                .for_each(|x| in_expr(x, loops, f)),
            Expr::Literal(_) | Expr::Index(_) | Expr::Variable(_) => {}
        }
    }
    match s {
        Stmt::Assign { lhs, rhs, .. } => {
            f(lhs, true, loops);
            lhs.indices.iter().for_each(|x| in_expr(x, loops, f));
            in_expr(rhs, loops, f);
        }
        Stmt::Declare { init, .. } => in_expr(init, loops, f),
        Stmt::Loop {
            index,
            extent,
            body,
        } => {
            loops.push((index, extent, body));
            each_access(body, loops, f);
            loops.pop();
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            in_expr(cond, loops, f);
            each_access(then, loops, f);
            if let Some(o) = otherwise {
                each_access(o, loops, f);
            }
        }
        Stmt::Define { value, body, .. } => {
            in_expr(value, loops, f);
            each_access(body, loops, f);
        }
        Stmt::Block(v) => v.iter().for_each(|s| each_access(s, loops, f)),
        Stmt::Freeze(_) | Stmt::Thaw(_) | Stmt::Return(_) => {}
    }
}

impl Interp<'_> {
    /// The extent `(lo, hi)` of a loop about to run, checked against the tensors it
    /// indexes.
    pub(super) fn loop_extent(
        &mut self,
        index: &str,
        extent: &Extent,
        body: &Stmt,
    ) -> Result<(i64, i64)> {
        let sizes = self.index_sizes(index, body, &mut HashSet::new())?;
        let (lo, hi) = match extent {
            Extent::Range(a, b) => {
                let lo = self.int(a, index)?;
                let hi = self.int(b, index)?;
                (lo, hi)
            }
            Extent::Auto => match sizes.first() {
                Some((lo, hi, _)) => (*lo, *hi),
                None => {
                    return err(format!(
                        "cannot determine the extent of `for {index} = _`: no tensor of known \
                         size is indexed by `{index}` in its body (give it as `for {index} = 1:n`)"
                    ))
                }
            },
        };
        for (a, b, source) in &sizes {
            if (lo, hi) != (*a, *b) {
                return Err(Error::Program(format!(
                    "the loop index `{index}` has extent {lo}:{hi} but {source} needs {a}:{b}; \
                     loop bounds must equal tensor dimensions"
                )));
            }
        }
        Ok((lo, hi))
    }

    fn int(&mut self, e: &Expr, index: &str) -> Result<i64> {
        let v = self.expr(e)?;
        match v {
            crate::algebra::Value::F32(_)
            | crate::algebra::Value::F64(_)
            | crate::algebra::Value::Bool(_)
            | crate::algebra::Value::Missing => err(format!(
                "the bound {v} of the loop over `{index}` is not an integer"
            )),
            v => v
                .as_i128()
                .and_then(|n| i64::try_from(n).ok())
                .ok_or_else(|| Error::Eval(format!("loop bound {v} out of range"))),
        }
    }

    /// The ranges of `index` over which the tensor modes it indexes in `body` are in
    /// bounds, with a description of each source (`` `A` (mode 2) ``), for tensors whose
    /// shape is known or inferable. Errors when two sources disagree.
    fn index_sizes(
        &self,
        index: &str,
        body: &Stmt,
        visiting: &mut HashSet<String>,
    ) -> Result<Vec<(i64, i64, String)>> {
        let mut found: Vec<(String, usize, i64)> = Vec::new();
        each_access(body, &mut Vec::new(), &mut |a, _, _| {
            for (m, e) in a.indices.iter().enumerate() {
                if let Some((i, c)) = offset_index(e) {
                    if i == index && !visiting.contains(&a.tensor) {
                        found.push((a.tensor.clone(), m, c));
                    }
                }
            }
        });
        let mut ranges = Vec::new();
        // `A[(lo:hi)(i)]`: `i` runs over `1:hi-lo+1` (bounds known before the loop: literals,
        // scalars, enclosing indices).
        let mut windows: Vec<(String, usize, &Expr, &Expr)> = Vec::new();
        each_access(body, &mut Vec::new(), &mut |a, _, _| {
            for (m, e) in a.indices.iter().enumerate() {
                let e = match e {
                    Expr::Permissive(x) => &**x,
                    e => e,
                };
                if let Expr::Window { lo, hi, index: i } = e {
                    if bare_index(i) == Some(index) {
                        windows.push((a.tensor.clone(), m, lo, hi));
                    }
                }
            }
        });
        for (t, m, lo, hi) in windows {
            if let (Some(lo), Some(hi)) = (self.known_int(lo), self.known_int(hi)) {
                ranges.push((
                    1,
                    hi.saturating_sub(lo).saturating_add(1),
                    format!("the window ({lo}:{hi}) of `{t}` (mode {})", m + 1),
                ));
            }
        }
        for (t, m, c) in found {
            if let Some(shape) = self.tensor_shape(&t, visiting)? {
                if let Some(Some(n)) = shape.get(m) {
                    let n = i64::try_from(*n).unwrap_or(i64::MAX);
                    let shift = if c == 0 {
                        String::new()
                    } else {
                        format!(", shifted by {}", -c)
                    };
                    ranges.push((
                        1i64.saturating_sub(c),
                        n.saturating_sub(c),
                        format!("`{t}` (mode {}, size {n}{shift})", m + 1),
                    ));
                }
            }
        }
        if let Some((lo0, hi0, s0)) = ranges.first() {
            if let Some((lo, hi, s)) = ranges.iter().find(|(lo, hi, _)| (lo, hi) != (lo0, hi0)) {
                return Err(Error::Program(format!(
                    "the loop index `{index}` would range over {lo0}:{hi0} for {s0} but over \
                     {lo}:{hi} for {s}; the extents must be equal"
                )));
            }
        }
        Ok(ranges)
    }

    /// The value of an integer expression known before a loop runs: literals, arithmetic,
    /// bound indices and variables, scalar tensors.
    fn known_int(&self, e: &Expr) -> Option<i64> {
        match e {
            Expr::Literal(v) if v.scalar_type().is_some_and(|t| t.is_integer()) => {
                v.as_i128().and_then(|n| i64::try_from(n).ok())
            }
            Expr::Index(n) | Expr::Variable(n) => self
                .lookup(n)
                .ok()
                .filter(|v| v.scalar_type().is_some_and(|t| t.is_integer()))
                .and_then(|v| v.as_i128())
                .and_then(|n| i64::try_from(n).ok()),
            Expr::Access(a) if a.indices.is_empty() => self
                .tensors
                .get(&a.tensor)
                .and_then(|s| s.array.as_ref())
                .and_then(|arr| arr.data.first().copied())
                .filter(|v| v.scalar_type().is_some_and(|t| t.is_integer()))
                .and_then(|v| v.as_i128())
                .and_then(|n| i64::try_from(n).ok()),
            Expr::Call { op, args } => {
                let v: Vec<i64> = args
                    .iter()
                    .map(|a| self.known_int(a))
                    .collect::<Option<_>>()?;
                match (op, v.as_slice()) {
                    (Op::Add, [a, b]) => a.checked_add(*b),
                    (Op::Sub, [a, b]) => a.checked_sub(*b),
                    (Op::Mul, [a, b]) => a.checked_mul(*b),
                    (Op::Neg | Op::Sub, [a]) => a.checked_neg(),
                    (Op::Add, [a]) => Some(*a),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The shape of a tensor, known or inferred from its writes (`None` per mode that
    /// cannot be inferred).
    fn tensor_shape(
        &self,
        t: &str,
        visiting: &mut HashSet<String>,
    ) -> Result<Option<Vec<Option<usize>>>> {
        if let Some(s) = self.opts.shapes.get(t) {
            return Ok(Some(s.iter().map(|&n| Some(n)).collect()));
        }
        let Some(slot) = self.tensors.get(t) else {
            return Ok(None);
        };
        if let Some(a) = &slot.array {
            return Ok(Some(a.shape.iter().map(|&n| Some(n)).collect()));
        }
        if !visiting.insert(t.to_string()) {
            return Ok(None);
        }
        let ndims = slot.format.ndims();
        let mut shape = vec![None; ndims];
        let mut writes: Vec<(&Access, Vec<LoopRef>)> = Vec::new();
        each_access(self.body, &mut Vec::new(), &mut |a, is_write, loops| {
            if is_write && a.tensor == t {
                writes.push((a, loops.to_vec()));
            }
        });
        for (a, loops) in writes {
            for (m, e) in a.indices.iter().enumerate().take(ndims) {
                if shape[m].is_some() {
                    continue;
                }
                // `y[i]` or `y[i + c]`: the mode runs over the loop's extent shifted by
                // `c`, which must start at 1 (as the compiled engines size it).
                let Some((i, c)) = offset_index(e) else {
                    continue;
                };
                let size = |lo: i64, hi: i64| {
                    let (lo, hi) = (lo.checked_add(c)?, hi.checked_add(c)?);
                    if lo == 1 {
                        usize::try_from(hi).ok()
                    } else {
                        None
                    }
                };
                if let Some((_, lo, hi)) = self.loops.iter().rev().find(|(n, _, _)| n == i) {
                    shape[m] = size(*lo, *hi);
                    continue;
                }
                let Some(&(_, extent, body)) = loops.iter().rev().find(|(n, _, _)| *n == i) else {
                    continue;
                };
                shape[m] = match extent {
                    // Bounds known before the loop runs (literals, scalars, enclosing
                    // indices).
                    Extent::Range(lo, hi) => match (self.known_int(lo), self.known_int(hi)) {
                        (Some(lo), Some(hi)) => size(lo, hi),
                        _ => None,
                    },
                    Extent::Auto => self
                        .index_sizes(i, body, visiting)?
                        .first()
                        .and_then(|&(lo, hi, _)| size(lo, hi)),
                };
            }
        }
        visiting.remove(t);
        Ok(Some(shape))
    }

    /// The shape a tensor gets at its declaration `t .= v`.
    pub(super) fn declared_shape(&self, t: &str) -> Result<Vec<usize>> {
        let shape = self
            .tensor_shape(t, &mut HashSet::new())?
            .unwrap_or_default();
        let ndims = self.tensors.get(t).map_or(0, |s| s.format.ndims());
        let mut out = Vec::with_capacity(ndims);
        for m in 0..ndims {
            match shape.get(m).copied().flatten() {
                Some(n) => out.push(n),
                None => {
                    return Err(Error::Program(format!(
                        "cannot determine the size of mode {} of `{t}`: no write indexes it with \
                         a loop index of known extent; give its shape (CLI: --shape {t}=...; \
                         API: RunOptions::shapes)",
                        m + 1
                    )))
                }
            }
        }
        Ok(out)
    }
}
