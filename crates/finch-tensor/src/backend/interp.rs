//! The kernel-IR interpreter: always available, used when no C compiler exists or on
//! request, with results identical to the C backend (both follow `Op::eval`).
//!
//! It checks what compiled code does not: every load and store is bounds-checked, so a
//! lowering bug shows up as an error here rather than as memory corruption. It also counts
//! loads, stores and loop iterations, which structural tests read (e.g. "the
//! upper-triangle sum loads only stored entries of the triangle").

use super::BufArg;
use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::kernel::{verify, BufId, KExpr, KStmt, Kernel};

/// Counts of what a kernel did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterpStats {
    /// Buffer loads (and one per probe of `scansearch`).
    pub loads: u64,
    /// Loads per buffer, indexed by `BufId`.
    pub buf_loads: Vec<u64>,
    /// Buffer stores.
    pub stores: u64,
    /// Iterations of `for` and `while` bodies.
    pub iterations: u64,
}

enum Flow {
    Next,
    Break,
}

struct Machine<'a, 'b> {
    k: &'a Kernel,
    bufs: &'a mut [BufArg<'b>],
    locals: Vec<Value>,
    stats: InterpStats,
}

/// Runs a kernel on buffers (one per `BufId`, in order) and input scalars (one per
/// `kernel.inputs`); returns the output scalars (one per `kernel.outputs`) and counts.
pub fn run(
    k: &Kernel,
    bufs: &mut [BufArg<'_>],
    inputs: &[Value],
) -> Result<(Vec<Value>, InterpStats)> {
    verify(k)?;
    super::check_args(k, bufs, inputs)?;
    let mut locals: Vec<Value> = k.locals.iter().map(|l| Value::zero_of(l.ty)).collect();
    for (&l, &v) in k.inputs.iter().zip(inputs) {
        locals[l.0 as usize] = v;
    }
    let mut m = Machine {
        k,
        bufs,
        locals,
        stats: InterpStats {
            buf_loads: vec![0; k.bufs.len()],
            ..InterpStats::default()
        },
    };
    m.block(&k.body)?;
    let outs = k.outputs.iter().map(|l| m.locals[l.0 as usize]).collect();
    Ok((outs, m.stats))
}

fn int(v: Value) -> i64 {
    match v {
        Value::I64(n) => n,
        other => other
            .as_i128()
            .and_then(|n| i64::try_from(n).ok())
            .unwrap_or(0),
    }
}

impl Machine<'_, '_> {
    fn oob(&self, b: BufId, i: i64) -> Error {
        let p = &self.k.bufs[b.0 as usize];
        Error::Eval(format!(
            "kernel `{}`: position {i} is outside buffer {b} ({}) of length {}",
            self.k.name,
            p.name,
            self.bufs[b.0 as usize].len()
        ))
    }

    fn load(&mut self, b: BufId, i: i64) -> Result<Value> {
        self.stats.loads += 1;
        self.stats.buf_loads[b.0 as usize] += 1;
        let buf = &self.bufs[b.0 as usize];
        usize::try_from(i)
            .ok()
            .and_then(|i| buf.get(i))
            .ok_or_else(|| self.oob(b, i))
    }

    /// `op` on `vals`, its error naming the kernel.
    fn eval_op(&self, op: crate::algebra::Op, vals: &[Value]) -> Result<Value> {
        op.eval(vals).map_err(|e| match e {
            Error::Eval(m) => Error::Eval(format!("kernel `{}`: {m}", self.k.name)),
            e => e,
        })
    }

    fn expr(&mut self, e: &KExpr) -> Result<Value> {
        Ok(match e {
            KExpr::Lit(v) => *v,
            KExpr::Local(l) => self.locals[l.0 as usize],
            KExpr::Load(b, i) => {
                let i = int(self.expr(i)?);
                self.load(*b, i)?
            }
            KExpr::Len(b) => Value::I64(self.bufs[b.0 as usize].len() as i64),
            // Only the chosen value is read, as in C's `?:` (the other may not exist).
            KExpr::Op(crate::algebra::Op::IfElse, args) if args.len() == 3 => {
                match self.expr(&args[0])? {
                    Value::Bool(true) => self.expr(&args[1])?,
                    Value::Bool(false) => self.expr(&args[2])?,
                    v => {
                        return Err(Error::Eval(format!(
                            "kernel `{}`: `ifelse` needs a bool condition, got {v}",
                            self.k.name
                        )))
                    }
                }
            }
            // `&&` and `||` short-circuit: an earlier argument may guard a later one
            // (`x != 0 && rem(n, x) == 1`), as in the reference engine and the C.
            KExpr::Op(op @ (crate::algebra::Op::And | crate::algebra::Op::Or), args)
                if args.len() >= 2 =>
            {
                let stop = *op == crate::algebra::Op::Or;
                let mut acc = Value::Bool(!stop);
                for a in args {
                    let v = self.expr(a)?;
                    acc = self.eval_op(*op, &[acc, v])?;
                    if acc.as_bool() == Some(stop) {
                        break;
                    }
                }
                acc
            }
            KExpr::Op(op, args) => {
                let vals = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>>>()?;
                self.eval_op(*op, &vals)?
            }
            KExpr::Search { buf, value, lo, hi } => {
                let v = self.expr(value)?;
                let (mut lo, mut hi) = (int(self.expr(lo)?), int(self.expr(hi)?));
                // Binary search for the first position with buf[q] >= v.
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    let x = self.load(*buf, mid)?;
                    if crate::algebra::Op::Lt.eval(&[x, v])?.as_bool() == Some(true) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                Value::I64(lo)
            }
        })
    }

    fn block(&mut self, body: &[KStmt]) -> Result<Flow> {
        for s in body {
            if let Flow::Break = self.stmt(s)? {
                return Ok(Flow::Break);
            }
        }
        Ok(Flow::Next)
    }

    fn stmt(&mut self, s: &KStmt) -> Result<Flow> {
        match s {
            KStmt::Assign(l, e) => {
                let v = self.expr(e)?;
                self.locals[l.0 as usize] = v;
            }
            KStmt::Store { buf, index, value } => {
                let i = int(self.expr(index)?);
                let v = self.expr(value)?;
                self.stats.stores += 1;
                let ok = usize::try_from(i).is_ok_and(|i| self.bufs[buf.0 as usize].set(i, v));
                if !ok {
                    return Err(self.oob(*buf, i));
                }
            }
            KStmt::Resize { buf, len, fill } => {
                let n = int(self.expr(len)?);
                let n = usize::try_from(n).map_err(|_| {
                    Error::Eval(format!(
                        "kernel `{}`: negative length {n} for {buf}",
                        self.k.name
                    ))
                })?;
                self.bufs[buf.0 as usize].resize(n, *fill)?;
            }
            KStmt::Sort { buf, lo, hi } => {
                let (lo, hi) = (int(self.expr(lo)?), int(self.expr(hi)?));
                let name = &self.k.bufs[buf.0 as usize].name;
                let bad = || {
                    Error::Eval(format!(
                        "kernel `{}`: sort of {buf} ({name}) over {lo}..{hi} is out of bounds",
                        self.k.name
                    ))
                };
                let (Ok(a), Ok(b)) = (usize::try_from(lo), usize::try_from(hi)) else {
                    return Err(bad());
                };
                match &mut self.bufs[buf.0 as usize] {
                    BufArg::Indices(v) if a <= b && b <= v.len() => v[a..b].sort_unstable(),
                    _ => return Err(bad()),
                }
            }
            KStmt::For { var, lo, hi, body } => {
                let lo = self.expr(lo)?;
                let hi = int(self.expr(hi)?);
                self.locals[var.0 as usize] = lo;
                // The same steps as C's `for (v = lo; v < hi; v++)`.
                while int(self.locals[var.0 as usize]) < hi {
                    self.stats.iterations += 1;
                    if let Flow::Break = self.block(body)? {
                        break;
                    }
                    let v = int(self.locals[var.0 as usize]);
                    self.locals[var.0 as usize] = Value::I64(v.wrapping_add(1));
                }
            }
            KStmt::While { cond, body } => {
                while self.expr(cond)?.as_bool() == Some(true) {
                    self.stats.iterations += 1;
                    if let Flow::Break = self.block(body)? {
                        break;
                    }
                }
            }
            KStmt::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(cond)?.as_bool() == Some(true);
                return self.block(if c { then } else { otherwise });
            }
            KStmt::Break => return Ok(Flow::Break),
            // Advice to compiled code only.
            KStmt::Hint(_) => {}
            KStmt::Fail(code) => return Err(super::c::ErrorCode::to_error(*code, &self.k.name)),
        }
        Ok(Flow::Next)
    }
}

impl BufArg<'_> {
    /// Current length.
    pub fn len(&self) -> usize {
        match self {
            BufArg::Values(b) => b.len(),
            BufArg::Indices(v) => v.len(),
            BufArg::ReadValues(b) => b.len(),
            BufArg::ReadIndices(v) => v.len(),
            BufArg::ReadNarrowIndices(v) => v.len(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kernel-IR element type (`i64` for index buffers).
    pub fn elem(&self) -> ScalarType {
        match self {
            BufArg::Values(b) => b.scalar_type(),
            BufArg::ReadValues(b) => b.scalar_type(),
            BufArg::Indices(_) | BufArg::ReadIndices(_) | BufArg::ReadNarrowIndices(_) => {
                ScalarType::I64
            }
        }
    }

    fn get(&self, i: usize) -> Option<Value> {
        match self {
            BufArg::Values(b) => b.get(i),
            BufArg::ReadValues(b) => b.get(i),
            BufArg::Indices(v) => v.get(i).map(|&x| Value::I64(x as i64)),
            BufArg::ReadIndices(v) => v.get(i).map(|&x| Value::I64(x as i64)),
            BufArg::ReadNarrowIndices(v) => v.get(i).map(|&x| Value::I64(i64::from(x))),
        }
    }

    /// Stores `v`; false when out of bounds, read-only, or (for indices) negative.
    fn set(&mut self, i: usize, v: Value) -> bool {
        match self {
            BufArg::Values(b) => i < b.len() && b.set(i, v).is_ok(),
            BufArg::Indices(x) => match (x.get_mut(i), v) {
                (Some(slot), Value::I64(n)) if n >= 0 => {
                    *slot = n as usize;
                    true
                }
                _ => false,
            },
            BufArg::ReadValues(_) | BufArg::ReadIndices(_) | BufArg::ReadNarrowIndices(_) => false,
        }
    }

    /// Resizes a writable buffer, filling new elements with `fill`.
    pub fn resize(&mut self, n: usize, fill: Value) -> Result<()> {
        match self {
            BufArg::Values(b) => {
                b.truncate(n);
                let grow = n - b.len();
                b.try_reserve(grow)?;
                for _ in 0..grow {
                    b.push(fill)?;
                }
                Ok(())
            }
            BufArg::Indices(v) => {
                let f = fill
                    .as_i128()
                    .and_then(|x| usize::try_from(x).ok())
                    .unwrap_or(0);
                crate::tensor::resize_fallibly(v, n, f)
            }
            _ => Err(Error::Eval("resize of a read-only buffer".into())),
        }
    }
}
