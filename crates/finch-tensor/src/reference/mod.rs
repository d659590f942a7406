//! The dense reference interpreter of the denotational semantics (Finch paper Fig. 8b):
//! the test oracle. It runs a program on dense copies of its tensors with plain nested
//! loops; deliberately simple and obviously correct, never used on production paths.
//!
//! What it guarantees:
//! * **Semantics.** A loop runs its body for each value of its extent in order; `if` runs
//!   a branch when its condition is `true` (a non-`bool` or `missing` condition is an
//!   error); `let` binds a value; `A[..] op= e` stores `op(A[..], e)` converted exactly to
//!   `A`'s element type (an inexact conversion or `missing` is an error); `X .= v` sets
//!   every element to `v`. `&&` and `||` short-circuit. Language indices are 1-based.
//! * **Bounds.** A read or write outside a tensor's shape is an error, except through a
//!   permissive index (`A[~i]`, `A[~(i - 1)]`): out of bounds it reads `missing` and a
//!   write is dropped.
//! * **Dimensions** (`dims`): a `for i = _` loop takes the size of every tensor mode
//!   indexed by bare `i` in its body; all must agree (else an error naming both). An
//!   explicit `a:b` must equal those sizes too. A declared output/temp gets its shape from
//!   `RunOptions::shapes`, else from the loops that index its writes, else keeps the shape
//!   it had.
//! * **Early exit.** A loop whose body only reduces into `ShortCircuitScalar`s stops as
//!   soon as every one of them holds an annihilator of its reduction (`*` after 0,
//!   `choose(z)` after a value other than `z`, `||` after `true`). The result is the same
//!   as running on (the annihilator absorbs the rest); `RunStats::iterations` shows it.
//! * **Annihilation** (`RunOptions::annihilate`, off by default). The compiled engines
//!   take an annihilator of `*`, `min`, `max`, `&`, `|`, `&&` or `||` (a zero a sparse
//!   operand holds as its fill, a constant `0`, `-Inf`, `false`, ...) as the result without
//!   the other arguments, so there `0 * NaN` is `0` and an error the other factor would
//!   raise is not raised. Under this option the reference does the same wherever such an
//!   argument occurs (and in reductions `x op= e`), so a differential test can accept a
//!   compiled value equal to the reference's in either mode. `missing` is never
//!   annihilated: an operator with a `missing` argument stays `missing`.

pub(crate) mod dims;

use std::collections::{BTreeMap, HashMap};

use crate::algebra::{Op, ScalarType, Side, Value};
use crate::error::{Error, Result};
use crate::formats::Format;
use crate::notation::{Access, AssignOp, DeclKind, Expr, Extent, Program, Stmt};
use crate::tensor::{fmt_shape, DenseArray, Tensor};

/// Tensors by name: the inputs given to a run, and its outputs afterwards.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bindings {
    map: BTreeMap<String, DenseArray>,
}

impl Bindings {
    /// No tensors.
    pub fn new() -> Bindings {
        Bindings::default()
    }

    /// Binds (or replaces) a tensor.
    pub fn insert(&mut self, name: impl Into<String>, a: DenseArray) {
        self.map.insert(name.into(), a);
    }

    /// A bound tensor.
    pub fn get(&self, name: &str) -> Option<&DenseArray> {
        self.map.get(name)
    }

    /// Removes and returns a tensor.
    pub fn remove(&mut self, name: &str) -> Option<DenseArray> {
        self.map.remove(name)
    }

    /// All bound tensors, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &DenseArray)> {
        self.map.iter()
    }
}

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Shapes of outputs or temporaries whose writes do not determine them (e.g. a
    /// histogram written through `bins[f(x)]`).
    pub shapes: HashMap<String, Vec<usize>>,
    /// Take an annihilator argument of `*`, `min`, `max`, `&`, `|`, `&&`, `||` as the
    /// result, as the compiled engines do (see the module docs); off by default.
    pub annihilate: bool,
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Loop-body executions, over all loops.
    pub iterations: u64,
    /// Loops stopped early by a short-circuit scalar.
    pub early_exits: u64,
}

/// One tensor during a run.
pub(crate) struct Slot {
    pub(crate) array: Option<DenseArray>,
    pub(crate) format: Format,
}

impl Slot {
    fn ty(&self) -> ScalarType {
        self.format.element_type()
    }
}

enum Flow {
    Next,
    Return,
}

pub(crate) struct Interp<'o> {
    /// The program body (for dimension inference).
    pub(crate) body: &'o Stmt,
    pub(crate) tensors: HashMap<String, Slot>,
    /// Bound indices and variables, innermost last.
    pub(crate) env: Vec<(String, Value)>,
    /// Extents of the loops being run: index -> (lo, hi).
    pub(crate) loops: Vec<(String, i64, i64)>,
    opts: &'o RunOptions,
    stats: RunStats,
}

/// Runs a program on the tensors in `bindings`: inputs must be there (with the declared
/// element type and number of modes); outputs are left there; temporaries are dropped.
pub fn run(program: &Program, bindings: &mut Bindings, opts: &RunOptions) -> Result<RunStats> {
    let mut tensors = HashMap::new();
    for d in &program.decls {
        let format = Format::parse(&d.format)?;
        let given = bindings.remove(&d.name);
        if let Some(a) = &given {
            check_binding(&d.name, &format, a)?;
            if d.kind == DeclKind::Input {
                check_fits(&d.name, &format, a)?;
            }
        } else if d.kind == DeclKind::Input {
            let missing: Vec<&str> = program
                .decls
                .iter()
                .filter(|e| {
                    e.kind == DeclKind::Input
                        && bindings.get(&e.name).is_none()
                        && !tensors.contains_key(&e.name)
                })
                .map(|e| e.name.as_str())
                .collect();
            return Err(Error::Program(format!(
                "missing input: {}",
                missing.join(", ")
            )));
        }
        tensors.insert(
            d.name.clone(),
            Slot {
                array: given,
                format,
            },
        );
    }
    let mut interp = Interp {
        body: &program.body,
        tensors,
        env: Vec::new(),
        loops: Vec::new(),
        opts,
        stats: RunStats::default(),
    };
    interp.stmt(&program.body)?;
    for d in &program.decls {
        if let Some(slot) = interp.tensors.remove(&d.name) {
            match (d.kind, slot.array) {
                (DeclKind::Temp, _) => {}
                (_, Some(a)) => bindings.insert(d.name.clone(), a),
                (DeclKind::Output, None) => {
                    return Err(Error::Program(format!(
                        "the output `{}` was never declared (`{} .= ...`) or written",
                        d.name, d.name
                    )))
                }
                (_, None) => {}
            }
        }
    }
    Ok(interp.stats)
}

fn check_binding(name: &str, format: &Format, a: &DenseArray) -> Result<()> {
    if a.ty != format.element_type() {
        return Err(Error::Program(format!(
            "`{name}` is declared {format} (element type {}) but was given {} data",
            format.element_type(),
            a.ty
        )));
    }
    if a.shape.len() != format.ndims() {
        return Err(Error::Program(format!(
            "`{name}` is declared {format} ({} modes) but was given a {} tensor",
            format.ndims(),
            fmt_shape(&a.shape)
        )));
    }
    Ok(())
}

/// An input is a tensor of its declared format: data its levels cannot hold (two stored
/// indices in one SparsePoint fiber, ...) is refused here as the compiled engines refuse
/// it when they store the input, so the oracle never runs what they cannot.
fn check_fits(name: &str, format: &Format, a: &DenseArray) -> Result<()> {
    if let Format::Levels(_) = format {
        Tensor::from_dense(format, a).map_err(|e| {
            Error::Program(format!(
                "the input `{name}` does not fit its format {format}: {e}"
            ))
        })?;
    }
    Ok(())
}

fn err<T>(msg: String) -> Result<T> {
    Err(Error::Eval(msg))
}

/// The operators whose annihilators the compiled engines take as the result.
fn annihilates(op: Op) -> bool {
    matches!(
        op,
        Op::Mul | Op::Min | Op::Max | Op::BitAnd | Op::BitOr | Op::And | Op::Or
    )
}

/// `op(args)` when an argument is an annihilator of `op` and none is `missing`: the
/// annihilator in the type `op` would give (each other argument replaced by an identity
/// of its type, or by the annihilator where its type has none). `None` otherwise.
fn annihilated(op: Op, args: &[Value]) -> Option<Value> {
    if !annihilates(op) || args.iter().any(Value::is_missing) {
        return None;
    }
    let a = *args.iter().find(|v| op.is_annihilator(v, Side::Left))?;
    let replaced: Vec<Value> = args
        .iter()
        .map(|v| match v.scalar_type() {
            Some(t) if !op.is_annihilator(v, Side::Left) => op.identity(t, Side::Left).unwrap_or(a),
            _ => *v,
        })
        .collect();
    op.eval(&replaced).ok()
}

/// Is `s` a statement list whose only effects are reductions into the given
/// short-circuit scalars? Collects (scalar, operator) pairs.
fn short_circuit_targets(
    s: &Stmt,
    tensors: &HashMap<String, Slot>,
    out: &mut Vec<(String, Op)>,
) -> bool {
    match s {
        Stmt::Assign {
            lhs,
            op: AssignOp::Reduce(op),
            ..
        } => {
            let is_sc = tensors
                .get(&lhs.tensor)
                .is_some_and(|t| matches!(t.format, Format::Scalar(k, _) if k.short_circuits()));
            if is_sc {
                out.push((lhs.tensor.clone(), *op));
            }
            is_sc
        }
        Stmt::Sieve {
            then, otherwise, ..
        } => {
            short_circuit_targets(then, tensors, out)
                && otherwise
                    .as_deref()
                    .is_none_or(|o| short_circuit_targets(o, tensors, out))
        }
        Stmt::Define { body, .. } => short_circuit_targets(body, tensors, out),
        Stmt::Loop { body, .. } => short_circuit_targets(body, tensors, out),
        Stmt::Block(v) => v.iter().all(|s| short_circuit_targets(s, tensors, out)),
        _ => false,
    }
}

impl Interp<'_> {
    pub(super) fn lookup(&self, name: &str) -> Result<Value> {
        self.env
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
            .ok_or_else(|| Error::Eval(format!("`{name}` is not bound")))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<Flow> {
        match s {
            Stmt::Block(v) => {
                for s in v {
                    if let Flow::Return = self.stmt(s)? {
                        return Ok(Flow::Return);
                    }
                }
                Ok(Flow::Next)
            }
            Stmt::Declare { tensor, init } => {
                let v = self.expr(init)?;
                self.declare(tensor, v)?;
                Ok(Flow::Next)
            }
            Stmt::Assign { lhs, op, rhs } => {
                self.assign(lhs, op, rhs)?;
                Ok(Flow::Next)
            }
            Stmt::Loop {
                index,
                extent,
                body,
            } => self.run_loop(index, extent, body),
            Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(cond)?;
                match c {
                    Value::Bool(true) => self.stmt(then),
                    Value::Bool(false) => match otherwise {
                        Some(o) => self.stmt(o),
                        None => Ok(Flow::Next),
                    },
                    v => err(format!(
                        "the condition `{}` is {v}, not a bool",
                        crate::notation::print_expr(cond)
                    )),
                }
            }
            Stmt::Define { var, value, body } => {
                let v = self.expr(value)?;
                self.env.push((var.clone(), v));
                let r = self.stmt(body);
                self.env.pop();
                r
            }
            Stmt::Freeze(_) | Stmt::Thaw(_) => Ok(Flow::Next),
            Stmt::Return(_) => Ok(Flow::Return),
        }
    }

    fn run_loop(&mut self, index: &str, extent: &Extent, body: &Stmt) -> Result<Flow> {
        let (lo, hi) = self.loop_extent(index, extent, body)?;
        let mut targets = Vec::new();
        let short = short_circuit_targets(body, &self.tensors, &mut targets) && !targets.is_empty();
        self.loops.push((index.to_string(), lo, hi));
        let mut flow = Ok(Flow::Next);
        let mut i = lo;
        while i <= hi {
            self.env.push((index.to_string(), Value::I64(i)));
            self.stats.iterations += 1;
            let r = self.stmt(body);
            self.env.pop();
            match r {
                Ok(Flow::Next) => {}
                other => {
                    flow = other;
                    break;
                }
            }
            if short && i < hi && self.all_annihilated(&targets) {
                self.stats.early_exits += 1;
                break;
            }
            i += 1;
        }
        self.loops.pop();
        flow
    }

    fn all_annihilated(&self, targets: &[(String, Op)]) -> bool {
        targets.iter().all(|(t, op)| {
            self.tensors
                .get(t)
                .and_then(|s| s.array.as_ref())
                .and_then(|a| a.data.first())
                .is_some_and(|v| op.is_annihilator(v, Side::Left))
        })
    }

    fn declare(&mut self, tensor: &str, v: Value) -> Result<()> {
        let shape = self.declared_shape(tensor)?;
        let slot = self
            .tensors
            .get_mut(tensor)
            .ok_or_else(|| Error::Eval(format!("`{tensor}` is not declared")))?;
        let ty = slot.ty();
        let init = v
            .convert_exact(ty)
            .ok_or_else(|| Error::Eval(format!("cannot initialize `{tensor}` ({ty}) with {v}")))?;
        // A SparseScalar not yet written reads as its fill, so it can only be declared
        // with it (the compiler refuses the program with the same words).
        if let Format::Scalar(kind, fill) = &slot.format {
            if kind.tracks_writes() && !init.same(fill) {
                return Err(Error::Program(format!(
                    "`{tensor} .= {v}`: a {} is declared with its fill value ({fill}); until it is written it reads as the fill",
                    kind.name()
                )));
            }
        }
        let mut a = DenseArray::filled(ty, &shape, slot.format.fill_value())?;
        a.data.iter_mut().for_each(|x| *x = init);
        slot.array = Some(a);
        Ok(())
    }

    /// Evaluates the indices of an access to 1-based integers (`None` for an index that is
    /// permissive and out of range or `missing`).
    fn position(&mut self, a: &Access) -> Result<Option<usize>> {
        let mut idx = Vec::with_capacity(a.indices.len());
        let mut permissive = Vec::with_capacity(a.indices.len());
        let mut windows = Vec::with_capacity(a.indices.len());
        for e in &a.indices {
            let (inner, perm) = match e {
                Expr::Permissive(x) => (&**x, true),
                other => (other, false),
            };
            let inner = match inner {
                Expr::Protocol(_, x) => &**x,
                x => x,
            };
            let v = match inner {
                // Index `i` of the window `lo:hi` is `lo + i - 1`, for `i` in `1:hi-lo+1`.
                Expr::Window { lo, hi, index } => {
                    let (lo, hi) = (self.integer(lo, a)?, self.integer(hi, a)?);
                    let i = self.integer(index, a)?;
                    if i < 1 || i > hi.saturating_sub(lo).saturating_add(1) {
                        return err(format!(
                            "`{}`: index {i} is outside the window ({lo}:{hi}), whose indices are 1:{}",
                            crate::notation::print_expr(&Expr::Access(a.clone())),
                            hi.saturating_sub(lo).saturating_add(1).max(0)
                        ));
                    }
                    windows.push(Some((lo, hi)));
                    Value::I64(lo.saturating_add(i - 1))
                }
                x => {
                    windows.push(None);
                    self.expr(x)?
                }
            };
            idx.push(v);
            permissive.push(perm);
        }
        let slot = self
            .tensors
            .get(&a.tensor)
            .ok_or_else(|| Error::Eval(format!("`{}` is not declared", a.tensor)))?;
        let Some(arr) = &slot.array else {
            return err(format!(
                "`{}` is used before it is declared (`{} .= ...`)",
                a.tensor, a.tensor
            ));
        };
        if idx.len() != arr.shape.len() {
            return err(format!(
                "`{}` has {} modes but is accessed with {} indices",
                a.tensor,
                arr.shape.len(),
                idx.len()
            ));
        }
        let mut pos = 0usize;
        let mut stride = 1usize;
        for (m, v) in idx.iter().enumerate() {
            let n = arr.shape[m];
            // A window lies inside its mode (an empty one may start right after it).
            if let (Some((lo, hi)), false) = (windows[m], permissive[m]) {
                let size = i64::try_from(n).unwrap_or(i64::MAX);
                if lo < 1 || hi > size || hi < lo - 1 {
                    return err(format!(
                        "the window ({lo}:{hi}) of `{}` (mode {}) is outside its size {n}",
                        a.tensor,
                        m + 1
                    ));
                }
            }
            let i = match v {
                Value::Missing if permissive[m] => return Ok(None),
                Value::F32(_) | Value::F64(_) | Value::Bool(_) | Value::Missing => {
                    return err(format!(
                        "index {} of `{}` is {v}, not an integer",
                        m + 1,
                        a.tensor
                    ))
                }
                v => v.as_i128().unwrap_or(0),
            };
            if i < 1 || i > n as i128 {
                if permissive[m] {
                    return Ok(None);
                }
                return err(format!(
                    "`{}[{}]` is out of bounds: index {} is {i} but the size is {n}",
                    a.tensor,
                    idx.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    m + 1
                ));
            }
            pos += (i as usize - 1) * stride;
            stride *= n;
        }
        Ok(Some(pos))
    }

    /// An integer-valued index expression of access `a`.
    fn integer(&mut self, e: &Expr, a: &Access) -> Result<i64> {
        let v = self.expr(e)?;
        match v {
            Value::F32(_) | Value::F64(_) | Value::Bool(_) | Value::Missing => err(format!(
                "`{}` in `{}` is {v}, not an integer",
                crate::notation::print_expr(e),
                crate::notation::print_expr(&Expr::Access(a.clone()))
            )),
            v => v
                .as_i128()
                .and_then(|n| i64::try_from(n).ok())
                .ok_or_else(|| Error::Eval(format!("index {v} out of range"))),
        }
    }

    fn assign(&mut self, lhs: &Access, op: &AssignOp, rhs: &Expr) -> Result<()> {
        let r = self.expr(rhs)?;
        if r.is_missing() {
            // Assigning `missing` does nothing (Finch.jl; looplets digest §5.3): a value
            // computed from a permissive read outside its tensor, say, is not written.
            return Ok(());
        }
        let Some(pos) = self.position(lhs)? else {
            return Ok(()); // a permissive write out of bounds is dropped
        };
        let slot = self
            .tensors
            .get_mut(&lhs.tensor)
            .ok_or_else(|| Error::Eval(format!("`{}` is not declared", lhs.tensor)))?;
        let ty = slot.ty();
        let Some(arr) = slot.array.as_mut() else {
            return err(format!("`{}` is used before it is declared", lhs.tensor));
        };
        let new = match op {
            AssignOp::Store => r,
            AssignOp::Reduce(op) => {
                let args = [arr.data[pos], r];
                match self.opts.annihilate.then(|| annihilated(*op, &args)) {
                    Some(Some(v)) => v,
                    _ => op.eval(&args)?,
                }
            }
        };
        let stored = new.convert_exact(ty).ok_or_else(|| {
            Error::Eval(format!(
                "cannot store {new} into `{}` (element type {ty})",
                lhs.tensor
            ))
        })?;
        arr.data[pos] = stored;
        Ok(())
    }

    pub(crate) fn expr(&mut self, e: &Expr) -> Result<Value> {
        if let Expr::Call { op, args } = e {
            if self.opts.annihilate && annihilates(*op) {
                // Every argument is evaluated; an annihilator among them is the result even
                // where another argument fails, as in compiled code, unless one is `missing`.
                let vals: Vec<Value> = args.iter().filter_map(|a| self.expr(a).ok()).collect();
                if let Some(v) = annihilated(*op, &vals) {
                    return Ok(v);
                }
            }
        }
        self.expr_at_root(e)
    }

    /// [`Self::expr`] without annihilation at the root of `e`.
    fn expr_at_root(&mut self, e: &Expr) -> Result<Value> {
        match e {
            Expr::Literal(v) => Ok(*v),
            Expr::Index(n) | Expr::Variable(n) => self.lookup(n),
            Expr::Access(a) => match self.position(a)? {
                None => Ok(Value::Missing),
                Some(pos) => {
                    let slot = self.tensors.get(&a.tensor);
                    Ok(slot
                        .and_then(|s| s.array.as_ref())
                        .map_or(Value::Missing, |arr| arr.data[pos]))
                }
            },
            Expr::Call {
                op: op @ (Op::And | Op::Or),
                args,
            } => {
                // Short-circuit like Julia's `&&`/`||`.
                let mut acc = Value::Bool(*op == Op::And);
                for a in args {
                    let v = self.expr(a)?;
                    acc = op.eval(&[acc, v])?;
                    if acc.as_bool() == Some(*op == Op::Or) {
                        break;
                    }
                }
                Ok(acc)
            }
            Expr::Call {
                op: Op::IfElse,
                args,
            } if args.len() == 3 => {
                // Only the branch taken runs: the errors of the other (the division by zero
                // an `ifelse(d != 0, div(n, d), 0)` guards against) and a `missing` it would
                // read do not count, as in Finch.jl and the compiled engines.
                let c = self.expr(&args[0])?;
                let Some(cond) = c.as_bool() else {
                    // `missing`, or an error naming the condition's type.
                    return Op::IfElse.eval(&[c, Value::Missing, Value::Missing]);
                };
                self.expr(&args[if cond { 1 } else { 2 }])
            }
            Expr::Call { op, args } => {
                let vals = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>>>()?;
                op.eval(&vals)
            }
            Expr::Permissive(_) | Expr::Protocol(..) | Expr::Window { .. } => err(format!(
                "`{}` is only meaningful as a tensor index",
                crate::notation::print_expr(e)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Program;

    fn run(text: &str, x: &[f64], annihilate: bool) -> Vec<Value> {
        let p = Program::parse(text).unwrap();
        let mut b = Bindings::new();
        b.insert("x", DenseArray::from_f64(&[x.len()], x).unwrap());
        let opts = RunOptions {
            annihilate,
            ..Default::default()
        };
        p.run_reference(&mut b, &opts).unwrap();
        b.get("y").unwrap().data.clone()
    }

    #[test]
    fn annihilators_absorb_nan_and_errors_only_when_asked() {
        let text = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = 0.0 * x[i] + min(-Inf, x[i])\nend\n";
        let plain = run(text, &[f64::NAN, 2.0], false);
        assert!(plain[0].as_f64().unwrap().is_nan());
        assert_eq!(
            run(text, &[f64::NAN, 2.0], true),
            vec![Value::F64(f64::NEG_INFINITY); 2]
        );
        // An integer division by zero beside a zero factor is not raised.
        let div = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = 0 * div(1, 0) + x[i]\nend\n";
        assert_eq!(run(div, &[1.0], true), vec![Value::F64(1.0)]);
        // `missing` is never annihilated: the write is dropped.
        let missing = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 7\nfor i = _\n  y[i] = x[i] + 0.0 * x[~(i + 1)]\nend\n";
        assert_eq!(
            run(missing, &[1.0, 1.0], true),
            vec![Value::F64(1.0), Value::F64(7.0)]
        );
    }

    #[test]
    fn reductions_annihilate_too() {
        let text = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(NaN))\ny .= NaN\nfor i = _\n  y[i] *= x[i]\nend\n";
        assert!(run(text, &[0.0], false)[0].as_f64().unwrap().is_nan());
        assert_eq!(run(text, &[0.0], true), vec![Value::F64(0.0)]);
    }
}
