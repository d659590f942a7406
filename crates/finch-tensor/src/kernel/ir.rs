//! The kernel IR: a small, strictly typed imperative language that lowering produces and
//! backends run. A kernel has buffer parameters (typed arrays, some growable), scalar
//! locals, and a body of statements (`for`, `while`, `if`, `break`, assignments, loads,
//! stores, buffer resizes).
//!
//! Typing is strict: an operator's arguments have equal types (except the shift amount and
//! the `ifelse` condition) and the result type is the one `Op::eval` gives for those
//! types, so the interpreter can evaluate with `Op::eval` and the C backend must match it.
//! Indices and positions are `i64`; index buffers hold `i64` (the run-time `usize`
//! storage, whose values are below 2^63, is passed as such; a `narrow` buffer is `u32` at
//! run time and its loads widen).

use std::fmt;

use crate::algebra::{Op, ScalarType, Value};
use crate::formats::IndexWidth;

/// A local variable, `v{n}` in text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

/// A buffer parameter, `b{n}` in text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

impl fmt::Display for LocalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Display for BufId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}", self.0)
    }
}

/// A buffer parameter of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct BufParam {
    /// A readable name (`A_lvl2_idx`), for printing and generated code.
    pub name: String,
    /// Element type.
    pub elem: ScalarType,
    /// The kernel stores into it.
    pub writable: bool,
    /// The kernel may resize it (output levels grow by doubling).
    pub growable: bool,
    /// An `i64` buffer held as `u32` at run time (a `SparseList{UInt32}` level's `ptr` or
    /// `idx`): loads widen; read-only.
    pub narrow: bool,
}

/// A local variable of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalDecl {
    /// A readable name (`A_lvl2_q`).
    pub name: String,
    /// Its type.
    pub ty: ScalarType,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub enum KExpr {
    /// A constant.
    Lit(Value),
    /// A local's value.
    Local(LocalId),
    /// `buf[index]` (`index` is an `i64` 0-based position).
    Load(BufId, Box<KExpr>),
    /// The current length of a buffer, as `i64`.
    Len(BufId),
    /// An operator on arguments (strictly typed, see the module docs).
    Op(Op, Vec<KExpr>),
    /// `scansearch(buf, value, lo, hi)`: the first position `q` in `lo..hi` with
    /// `buf[q] >= value`, or `hi` if none (`buf` sorted on `lo..hi`); `i64`.
    Search {
        /// The sorted buffer.
        buf: BufId,
        /// The value sought.
        value: Box<KExpr>,
        /// Start of the range.
        lo: Box<KExpr>,
        /// End of the range (exclusive).
        hi: Box<KExpr>,
    },
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub enum KStmt {
    /// `local = expr`.
    Assign(LocalId, KExpr),
    /// `buf[index] = value`.
    Store {
        /// The buffer.
        buf: BufId,
        /// Position (`i64`).
        index: KExpr,
        /// Value (the buffer's element type).
        value: KExpr,
    },
    /// Sets a growable buffer's length to `len` (new elements are `fill`).
    Resize {
        /// The buffer.
        buf: BufId,
        /// New length (`i64`, non-negative).
        len: KExpr,
        /// Value of new elements.
        fill: Value,
    },
    /// `for var = lo; var < hi; var += 1` (`i64`; `hi` evaluated once).
    For {
        /// The loop variable (an `i64` local).
        var: LocalId,
        /// First value.
        lo: KExpr,
        /// End (exclusive).
        hi: KExpr,
        /// Body.
        body: Vec<KStmt>,
    },
    /// `while cond { body }`.
    While {
        /// Condition (`bool`).
        cond: KExpr,
        /// Body.
        body: Vec<KStmt>,
    },
    /// `if cond { then } else { otherwise }`.
    If {
        /// Condition (`bool`).
        cond: KExpr,
        /// Taken when true.
        then: Vec<KStmt>,
        /// Taken when false.
        otherwise: Vec<KStmt>,
    },
    /// Sorts `buf[lo .. hi)` ascending (an `i64` buffer the kernel writes): a sparse
    /// workspace's list of set positions, before it is read in order.
    Sort {
        /// The buffer.
        buf: BufId,
        /// First position (`i64`).
        lo: KExpr,
        /// End (exclusive, `i64`).
        hi: KExpr,
    },
    /// Leaves the innermost `for`/`while`.
    Break,
    /// Stops the kernel with an error code (`backend::c::ErrorCode`): a computed index
    /// outside its tensor.
    Fail(i32),
    /// Advice to the backend that changes no value: the interpreter skips it, the C backend
    /// prints it (see [`Hint`]).
    Hint(Hint),
}

/// What a [`KStmt::Hint`] advises. The kernel passes (`kernel::passes`) leave hints where
/// a loop they reshaped wants help from the C compiler or the processor; nothing a hint
/// says can change a result, so a backend may ignore any of them.
#[derive(Clone, Debug, PartialEq)]
pub enum Hint {
    /// Fetch the cache line of `buf[index + ahead]` ahead of its load (`index` an `i64`
    /// expression that cannot fail; the position may lie past the buffer's end).
    Prefetch {
        /// The buffer.
        buf: BufId,
        /// The position loaded now.
        index: KExpr,
        /// How many elements ahead of `index` to fetch.
        ahead: usize,
    },
    /// The loop whose body this starts runs the few iterations a strip loop left: the C
    /// compiler should keep it scalar (see `backend::c::emit::SCALAR_REST`).
    ScalarRest,
    /// The C compiler should not unroll the `for` loop that comes next in the same block
    /// (a strip of several rows, whose full unrolling is slower).
    NoUnroll,
    /// `local` holds a position in `buf` (an offset a row's loads add a counter to): the C
    /// printer may keep the pointer `buf + local` beside it, updated wherever `local` is
    /// assigned, and load `buf[local + e]` as `pointer[e]`, one address register per row
    /// in place of an addition per load. It holds for the whole kernel, wherever it
    /// stands.
    RowPointer {
        /// The offset, an `i64` local.
        local: LocalId,
        /// The buffer it points into.
        buf: BufId,
    },
}

/// A kernel: parameters, locals and a body.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// The kernel's name (a C identifier).
    pub name: String,
    /// Buffer parameters, indexed by `BufId`.
    pub bufs: Vec<BufParam>,
    /// Locals, indexed by `LocalId`. Locals marked as outputs are returned to the caller.
    pub locals: Vec<LocalDecl>,
    /// Locals whose initial values the caller passes in (scalars read by the kernel).
    pub inputs: Vec<LocalId>,
    /// Locals whose final values the caller receives (scalar results).
    pub outputs: Vec<LocalId>,
    /// The statements.
    pub body: Vec<KStmt>,
    /// Floating-point arithmetic may be reassociated by the backend (C: the compiler's
    /// associative math, which vectorizes reductions with several partial sums). Results
    /// may then differ from the interpreter's in rounding and in the sign of a zero. Off
    /// unless asked for.
    pub reassociate: bool,
}

/// The number of expressions the statements hold directly (see [`visit_exprs`]).
pub fn expr_count(stmts: &[KStmt]) -> usize {
    let mut n = 0;
    visit_exprs(stmts, &mut |_| n += 1);
    n
}

/// The number of expression nodes in the statements, subexpressions included: a measure
/// of a kernel's size in C.
pub fn expr_nodes(stmts: &[KStmt]) -> usize {
    fn nodes(e: &KExpr) -> usize {
        1 + match e {
            KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => 0,
            KExpr::Load(_, i) => nodes(i),
            KExpr::Op(_, args) => args.iter().map(nodes).sum(),
            KExpr::Search { value, lo, hi, .. } => nodes(value) + nodes(lo) + nodes(hi),
        }
    }
    let mut n = 0;
    visit_exprs(stmts, &mut |e| n += nodes(e));
    n
}

/// Calls `f` on every expression of `stmts` that a statement holds directly (conditions,
/// bounds, right-hand sides, store positions), nested statements included; `f` recurses
/// into subexpressions itself if it needs to.
pub fn visit_exprs(stmts: &[KStmt], f: &mut dyn FnMut(&KExpr)) {
    for s in stmts {
        match s {
            KStmt::Assign(_, e) => f(e),
            KStmt::Store { index, value, .. } => {
                f(index);
                f(value);
            }
            KStmt::Resize { len, .. } => f(len),
            KStmt::Sort { lo, hi, .. } => {
                f(lo);
                f(hi);
            }
            KStmt::For { lo, hi, body, .. } => {
                f(lo);
                f(hi);
                visit_exprs(body, f);
            }
            KStmt::While { cond, body } => {
                f(cond);
                visit_exprs(body, f);
            }
            KStmt::If {
                cond,
                then,
                otherwise,
            } => {
                f(cond);
                visit_exprs(then, f);
                visit_exprs(otherwise, f);
            }
            KStmt::Hint(Hint::Prefetch { index, .. }) => f(index),
            KStmt::Break
            | KStmt::Fail(_)
            | KStmt::Hint(Hint::ScalarRest | Hint::NoUnroll | Hint::RowPointer { .. }) => {}
        }
    }
}

/// Whether `e` reads any of the locals `ls`.
pub fn mentions_any(e: &KExpr, ls: &std::collections::HashSet<LocalId>) -> bool {
    match e {
        KExpr::Local(x) => ls.contains(x),
        KExpr::Lit(_) | KExpr::Len(_) => false,
        KExpr::Load(_, i) => mentions_any(i, ls),
        KExpr::Op(_, a) => a.iter().any(|x| mentions_any(x, ls)),
        KExpr::Search { value, lo, hi, .. } => {
            mentions_any(value, ls) || mentions_any(lo, ls) || mentions_any(hi, ls)
        }
    }
}

/// Adds to `counts` how many times `stmts` read each local (in every expression they hold,
/// nested statements included).
pub fn count_reads(stmts: &[KStmt], counts: &mut std::collections::HashMap<LocalId, usize>) {
    fn expr(e: &KExpr, counts: &mut std::collections::HashMap<LocalId, usize>) {
        match e {
            KExpr::Local(l) => *counts.entry(*l).or_default() += 1,
            KExpr::Lit(_) | KExpr::Len(_) => {}
            KExpr::Load(_, i) => expr(i, counts),
            KExpr::Op(_, args) => args.iter().for_each(|a| expr(a, counts)),
            KExpr::Search { value, lo, hi, .. } => {
                expr(value, counts);
                expr(lo, counts);
                expr(hi, counts);
            }
        }
    }
    visit_exprs(stmts, &mut |e| expr(e, counts));
}

impl Kernel {
    /// An empty kernel.
    pub fn new(name: impl Into<String>) -> Kernel {
        Kernel {
            name: name.into(),
            bufs: Vec::new(),
            locals: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            body: Vec::new(),
            reassociate: false,
        }
    }

    /// Adds a buffer parameter.
    pub fn buf(
        &mut self,
        name: impl Into<String>,
        elem: ScalarType,
        writable: bool,
        growable: bool,
    ) -> BufId {
        self.bufs.push(BufParam {
            name: name.into(),
            elem,
            writable,
            growable,
            narrow: false,
        });
        BufId(self.bufs.len() as u32 - 1)
    }

    /// Adds a read-only `i64` buffer of stored indices or positions at `width`.
    pub fn index_buf(&mut self, name: impl Into<String>, width: IndexWidth) -> BufId {
        let b = self.buf(name, ScalarType::I64, false, false);
        self.bufs[b.0 as usize].narrow = width == IndexWidth::U32;
        b
    }

    /// The type of `e` in this kernel (`i64` where a verified kernel could not have it).
    pub fn expr_type(&self, e: &KExpr) -> ScalarType {
        match e {
            KExpr::Lit(v) => v.scalar_type().unwrap_or(ScalarType::I64),
            KExpr::Local(l) => self
                .locals
                .get(l.0 as usize)
                .map_or(ScalarType::I64, |d| d.ty),
            KExpr::Load(b, _) => self
                .bufs
                .get(b.0 as usize)
                .map_or(ScalarType::I64, |p| p.elem),
            KExpr::Len(_) | KExpr::Search { .. } => ScalarType::I64,
            KExpr::Op(op, args) => {
                let tys: Vec<ScalarType> = args.iter().map(|a| self.expr_type(a)).collect();
                op_type(*op, &tys).unwrap_or(ScalarType::I64)
            }
        }
    }

    /// Whether evaluating `e` may stop the kernel with an error in compiled code: a search
    /// (its range checked), integer division and its kin (by zero), `sqrt` and `log` (of a
    /// negative), and with `checked_loads` every load (its position checked).
    pub fn may_fail(&self, e: &KExpr, checked_loads: bool) -> bool {
        match e {
            KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => false,
            KExpr::Load(_, i) => checked_loads || self.may_fail(i, checked_loads),
            KExpr::Search { .. } => true,
            KExpr::Op(op, args) => {
                let int_args = args.first().is_some_and(|a| !self.expr_type(a).is_float());
                let risky = match op {
                    Op::IntDiv | Op::RemFn | Op::Rem | Op::Mod | Op::Fld | Op::Pow => int_args,
                    Op::Sqrt | Op::Log => true,
                    _ => false,
                };
                risky || args.iter().any(|a| self.may_fail(a, checked_loads))
            }
        }
    }

    /// Adds a local.
    pub fn local(&mut self, name: impl Into<String>, ty: ScalarType) -> LocalId {
        self.locals.push(LocalDecl {
            name: name.into(),
            ty,
        });
        LocalId(self.locals.len() as u32 - 1)
    }
}

/// Shorthands for building expressions.
impl KExpr {
    /// An `i64` constant.
    pub fn int(n: i64) -> KExpr {
        KExpr::Lit(Value::I64(n))
    }

    /// A binary operation.
    pub fn bin(op: Op, a: KExpr, b: KExpr) -> KExpr {
        KExpr::Op(op, vec![a, b])
    }

    /// `buf[index]`.
    pub fn load(buf: BufId, index: KExpr) -> KExpr {
        KExpr::Load(buf, Box::new(index))
    }
}

/// Arithmetic on kernel expressions reads like the formula it builds: `pos + 1`,
/// `hi - lo + 1`, `n * width` (each an `Op` node; the simplifier folds what it can).
macro_rules! kexpr_arithmetic {
    ($($trait:ident, $method:ident, $op:ident);*) => {$(
        impl std::ops::$trait<KExpr> for KExpr {
            type Output = KExpr;
            fn $method(self, rhs: KExpr) -> KExpr {
                KExpr::bin(Op::$op, self, rhs)
            }
        }

        impl std::ops::$trait<i64> for KExpr {
            type Output = KExpr;
            fn $method(self, rhs: i64) -> KExpr {
                KExpr::bin(Op::$op, self, KExpr::int(rhs))
            }
        }
    )*};
}

kexpr_arithmetic!(Add, add, Add; Sub, sub, Sub; Mul, mul, Mul);

/// The result type of `op` on arguments of the given types, or `None` when the kernel IR
/// does not accept that combination (mixed types, `missing`-only operators).
pub fn op_type(op: Op, args: &[ScalarType]) -> Option<ScalarType> {
    match op {
        Op::Coalesce => return None, // `missing` never reaches a kernel
        Op::IfElse => {
            return match args {
                [ScalarType::Bool, a, b] if a == b => Some(*a),
                _ => None,
            }
        }
        Op::Shl | Op::Shr => {
            return match args {
                [a, b] if !a.is_float() && b.is_integer() => Some(if *a == ScalarType::Bool {
                    ScalarType::I64
                } else {
                    *a
                }),
                _ => None,
            }
        }
        Op::Cast(t) => return (args.len() == 1).then_some(t),
        _ => {}
    }
    let first = *args.first()?;
    if args.iter().any(|&t| t != first) {
        return None;
    }
    let samples: Vec<Value> = args.iter().map(|&t| Value::one_of(t)).collect();
    op.eval(&samples).ok()?.scalar_type()
}
