//! The simplifier: algebraic rewrites on the lowering IR, applied bottom-up to a
//! fixpoint after every structural lowering step (finch-looplets.md §5).
//!
//! Expression rules (by name):
//! * `fill-leaf`: a read of a `FillLeaf(v)` is `v`; a read of a leaf value is the value.
//! * `fold`: an operator on literals is evaluated (unless evaluation fails: the run-time
//!   error is kept).
//! * `missing`: any operator but `coalesce` with a `missing` argument is `missing`;
//!   `coalesce` drops `missing` arguments and stops at the first that cannot be missing;
//!   `ifelse` is `missing` by its condition or both branches, not by the branch not taken,
//!   and `a && missing` is `ifelse(a, missing, false)` (`||` alike).
//! * `annihilate` applies only where no other argument may be `missing`.
//! * `annihilate`: an annihilator argument (`0` of `*`, `false` of `&&`/`&`, `true` of
//!   `||`/`|`, `-Inf`/`+Inf` of `min`/`max`) is the result (converted to the result
//!   type). As in Finch.jl, `0 * NaN` is taken to be `0`.
//! * `identity`: identity arguments of `+ * min max & | && || xor` are dropped (the result
//!   keeps its type: a cast is added when dropping changes it).
//! * `ifelse-const`: `ifelse(true, a, b) = a`, `ifelse(false, a, b) = b`.
//! * `flatten`, `sort`, `dedup`, `fold-partial`: associative operators are flattened,
//!   commutative ones put in a canonical order, idempotent ones deduplicated and their
//!   literal arguments folded, where that is exact (see `canonicalize`).
//!
//! Statement rules: `drop-identity-update` (`x op= e` where `e` is a right identity of
//! `op`, e.g. `+= 0`, is removed), `drop-missing-update`, `lift-missing` (a value that is
//! `missing` under a condition, an `ifelse` branch or a leaf read only where present,
//! makes its assignment a branch on the condition, whose `missing` side vanishes; a `let`
//! of a value that may be `missing` is inlined), `drop-null-update` (a write to `Null` is
//! removed), `sieve-const`, `flatten-block`, `drop-empty-loop`.

use crate::algebra::{promote, Op, ScalarType, Side, Value};
use crate::kernel::KExpr;
use crate::looplets::{Expr, Stmt, Tensor};

/// Gives the type of run-time (kernel) expressions.
pub trait Typer {
    /// The type of `Expr::Code` contents.
    fn code_type(&self, e: &crate::kernel::KExpr) -> ScalarType;
    /// The element type of a tensor in the lowering IR, where it is known (a run of
    /// `missing` has none).
    fn tensor_type(&self, t: &Tensor) -> Option<ScalarType>;
    /// The type of the `let` variable `var` (`let:name`), where it is known.
    fn let_type(&self, _var: &str) -> Option<ScalarType> {
        None
    }
}

/// A typer that also knows one `let` variable's type (the body of its `let`).
struct WithLet<'a> {
    outer: &'a dyn Typer,
    var: &'a str,
    ty: Option<ScalarType>,
}

impl Typer for WithLet<'_> {
    fn code_type(&self, e: &crate::kernel::KExpr) -> ScalarType {
        self.outer.code_type(e)
    }
    fn tensor_type(&self, t: &Tensor) -> Option<ScalarType> {
        self.outer.tensor_type(t)
    }
    fn let_type(&self, var: &str) -> Option<ScalarType> {
        if var == self.var {
            self.ty
        } else {
            self.outer.let_type(var)
        }
    }
}

/// The type an expression evaluates to (Julia promotion, as `Op::eval`).
pub fn type_of(e: &Expr, ty: &dyn Typer) -> Option<ScalarType> {
    match e {
        Expr::Lit(v) => v.scalar_type(),
        Expr::Code(k) => Some(ty.code_type(k)),
        // A `let` variable has its value's type (unknown outside its `let`); a loop index
        // is an `i64`.
        Expr::Index(n) if n.starts_with("let:") => ty.let_type(n),
        Expr::Index(_) | Expr::Wrapped { .. } => Some(ScalarType::I64),
        Expr::Permissive(x, _) => type_of(x, ty),
        Expr::Access(t, _) => ty.tensor_type(t),
        Expr::Call(op, args) => {
            let tys: Option<Vec<ScalarType>> = args.iter().map(|a| type_of(a, ty)).collect();
            let tys = tys?;
            let samples: Vec<Value> = tys.iter().map(|&t| Value::one_of(t)).collect();
            // Evaluate on ones of the argument types: the result type of the operator.
            match op.eval(&samples) {
                Ok(v) => v.scalar_type(),
                Err(_) => match op {
                    // `ifelse(c, a, b)` with a non-bool sample condition, or `&&` on ones:
                    // fall back to the promoted type of the value arguments.
                    Op::IfElse => tys.get(1..).and_then(|r| r.iter().copied().reduce(promote)),
                    Op::And | Op::Or => Some(ScalarType::Bool),
                    _ => tys.iter().copied().reduce(promote),
                },
            }
        }
    }
}

fn is_lit(e: &Expr, v: impl Fn(&Value) -> bool) -> bool {
    matches!(e, Expr::Lit(x) if v(x))
}

/// The rule `missing` for `op(args)` where an argument is the literal `missing`: the
/// call is `missing`, but for the operators that do not evaluate every argument. An
/// `ifelse` is `missing` only by its condition or where both branches are (a branch not
/// taken does not count); `a && missing && b` is `missing` where `a` holds and `false`
/// elsewhere (`||` likewise with `true`), an `ifelse` on the arguments before it, which
/// the statement rule `lift-missing` makes a branch.
fn missing_argument(op: Op, args: &[Expr]) -> Option<Expr> {
    let missing = |a: &Expr| is_lit(a, Value::is_missing);
    let k = args.iter().position(missing)?;
    let gone = Some(Expr::Lit(Value::Missing));
    match op {
        Op::IfElse if k == 0 || args.iter().skip(1).all(missing) => gone,
        Op::IfElse => None,
        Op::And | Op::Or if k > 0 => {
            let before = match &args[..k] {
                [one] => one.clone(),
                many => Expr::Call(op, many.to_vec()),
            };
            let decided = Expr::Lit(Value::Bool(op == Op::Or));
            let (then, otherwise) = if op == Op::And {
                (Expr::Lit(Value::Missing), decided)
            } else {
                (decided, Expr::Lit(Value::Missing))
            };
            Some(Expr::Call(Op::IfElse, vec![before, then, otherwise]))
        }
        _ => gone,
    }
}

/// The rule `lift-missing`: a value that is `missing` under a condition, an `ifelse`
/// with a `missing` branch where the value is always evaluated (not inside a branch of
/// another `ifelse` or past the first argument of `&&`/`||`, whose conditions may guard
/// it), is `(cond, value with the `then` branch, value with the other)`, so an assignment
/// of it becomes a branch on `cond` and the side that reads `missing` does nothing,
/// as assigning `missing` does. (Compiled code has no `missing` value.) So is a leaf
/// read where present and `missing` elsewhere ([`split_on_absent_leaf`]).
fn split_on_missing_branch(e: &Expr) -> Option<(Expr, Expr, Expr)> {
    split_on_missing_ifelse(e).or_else(|| split_on_absent_leaf(e))
}

/// [`split_on_missing_branch`] for an `ifelse` with a `missing` branch.
fn split_on_missing_ifelse(e: &Expr) -> Option<(Expr, Expr, Expr)> {
    split_on_first_choice(e, &|op, args| match (op, args) {
        (Op::IfElse, [c, then, otherwise]) if !may_be_missing(c) => {
            let reads_missing =
                |b: &Expr| is_lit(b, Value::is_missing) || split_on_missing_branch(b).is_some();
            (reads_missing(then) || reads_missing(otherwise))
                .then(|| (c.clone(), then.clone(), otherwise.clone()))
        }
        _ => None,
    })
}

/// A choice split apart: its condition, the value where it holds, the value where not.
pub(crate) type Split = (Expr, Expr, Expr);

/// The first choice `pick` takes (as its condition and the values it gives when that
/// holds and when it does not) where `e` is always evaluated: not inside a branch of an
/// `ifelse` or past the first argument of `&&`/`||`, whose conditions may guard it. The
/// result is the condition and `e` with the choice replaced by each value, so that a
/// statement of `e` becomes a branch on the condition.
pub(crate) fn split_on_first_choice(
    e: &Expr,
    pick: &dyn Fn(Op, &[Expr]) -> Option<Split>,
) -> Option<Split> {
    let Expr::Call(op, args) = e else {
        return None;
    };
    if let Some(choice) = pick(*op, args) {
        return Some(choice);
    }
    let always_evaluated = match op {
        Op::IfElse | Op::And | Op::Or => 1,
        _ => args.len(),
    };
    args.iter()
        .enumerate()
        .take(always_evaluated)
        .find_map(|(k, a)| {
            let (cond, then, otherwise) = split_on_first_choice(a, pick)?;
            let with = |x: Expr| {
                let mut v = args.clone();
                v[k] = x;
                Expr::Call(*op, v)
            };
            Some((cond, with(then), with(otherwise)))
        })
}

/// A leaf read where a condition holds and `missing` elsewhere (a [`Tensor::Present`]
/// padded with `missing`: a shifted Dense read walked to the end) is `ifelse(cond, leaf,
/// missing)`, its condition a kernel value that is safe to evaluate anywhere: `e` is
/// split on the condition of its first such leaf that a `coalesce` does not read as a
/// select (see [`first_absent_leaf`]), every leaf on that condition read in one branch
/// and `missing` in the other. Without it, such a leaf outside a `coalesce` (an
/// assignment beside another statement, whose fill does not decide their loop, or a
/// branch of an `ifelse`) reached compiled code, which has no `missing`.
fn split_on_absent_leaf(e: &Expr) -> Option<(Expr, Expr, Expr)> {
    let cond = first_absent_leaf(e)?;
    let then = resolve_absent_leaves(e, &cond, true);
    let otherwise = resolve_absent_leaves(e, &cond, false);
    Some((Expr::Code(cond), then, otherwise))
}

/// The condition of a leaf read where it holds and `missing` elsewhere.
fn absent_leaf(e: &Expr) -> Option<&KExpr> {
    match e {
        Expr::Access(t, idx) if idx.is_empty() => match &**t {
            Tensor::Present { cond, fill, .. } if fill.is_missing() => Some(cond),
            _ => None,
        },
        _ => None,
    }
}

/// The condition of the first leaf of `e` read where it holds and `missing` elsewhere
/// that only a branch resolves: not in an index, nor an argument of a `coalesce` that
/// the lowering reads as a select (`Lowerer::coalesce_selects`: every argument but the
/// last, where [`read_where_present`] takes it).
fn first_absent_leaf(e: &Expr) -> Option<KExpr> {
    if let Some(cond) = absent_leaf(e) {
        return Some(cond.clone());
    }
    let Expr::Call(op, args) = e else {
        return None;
    };
    args.iter().enumerate().find_map(|(k, a)| {
        let selected = *op == Op::Coalesce
            && k + 1 < args.len()
            && read_where_present(a, &mut Vec::new()).is_some();
        if selected {
            None
        } else {
            first_absent_leaf(a)
        }
    })
}

/// `e` with each leaf read where `cond` holds and `missing` elsewhere read as its fiber
/// (`present`) or as `missing`.
fn resolve_absent_leaves(e: &Expr, cond: &KExpr, present: bool) -> Expr {
    match e {
        Expr::Access(t, idx) if absent_leaf(e) == Some(cond) => match (&**t, present) {
            (Tensor::Present { fiber, .. }, true) => {
                Expr::Access(Box::new(Tensor::Fiber(fiber.clone())), idx.clone())
            }
            _ => Expr::Lit(Value::Missing),
        },
        Expr::Call(op, args) => Expr::Call(
            *op,
            args.iter()
                .map(|a| resolve_absent_leaves(a, cond, present))
                .collect(),
        ),
        e => e.clone(),
    }
}

/// `e` with each leaf read where a condition holds and `missing` elsewhere (a
/// [`Tensor::Present`] padded with `missing`: a shifted Dense read walked to the end) read
/// directly, its condition pushed to `present`: where all of them hold, `e` is that value,
/// and elsewhere `missing`, since `missing` propagates through every operator but the
/// lazy ones. `None` where `e` may be `missing` otherwise.
pub(crate) fn read_where_present(e: &Expr, present: &mut Vec<KExpr>) -> Option<Expr> {
    if !may_be_missing(e) {
        return Some(e.clone());
    }
    match e {
        Expr::Access(t, idx) if idx.is_empty() => match &**t {
            Tensor::Present { cond, fiber, fill } if fill.is_missing() => {
                present.push(cond.clone());
                Some(Expr::Access(Box::new(Tensor::Fiber(fiber.clone())), vec![]))
            }
            _ => None,
        },
        Expr::Call(Op::Coalesce | Op::IfElse | Op::And | Op::Or, _) => None,
        Expr::Call(op, args) => args
            .iter()
            .map(|a| read_where_present(a, present))
            .collect::<Option<Vec<_>>>()
            .map(|args| Expr::Call(*op, args)),
        _ => None,
    }
}

/// Can the expression evaluate to `missing`? Only `missing` literals and reads that are
/// permissive (a wrapped index, or a looplet padded with `missing` runs) can.
pub fn may_be_missing(e: &Expr) -> bool {
    fn tensor(t: &Tensor) -> bool {
        match t {
            Tensor::FillLeaf(v) => v.is_missing(),
            Tensor::Value(e) => may_be_missing(e),
            Tensor::Looplet(l) => looplet(l),
            Tensor::Switch {
                then, otherwise, ..
            } => tensor(then) || tensor(otherwise),
            Tensor::Present { fill, .. } => fill.is_missing(),
            Tensor::Fiber(_)
            | Tensor::Scalar(_)
            | Tensor::Local(_)
            | Tensor::Null
            | Tensor::OutOfRange(_) => false,
        }
    }
    fn looplet(l: &crate::looplets::Looplet) -> bool {
        use crate::looplets::Looplet as L;
        match l {
            L::Run(t) => tensor(t),
            L::Spike { body, tail } => tensor(body) || tensor(tail),
            L::Sequence(p) => p.iter().any(|(_, l)| looplet(l)),
            L::Stepper(s) | L::Jumper(s) => looplet(&s.chunk),
            L::Thunk { body, .. } => looplet(body),
            L::Switch(cases) => cases.iter().any(|(_, l)| looplet(l)),
            // A lookup's children share one form (a Dense level's read where present
            // may be `missing`): one of them tells.
            L::Lookup(child) => tensor(&child(crate::kernel::KExpr::int(1))),
            L::LookupWrite { .. } | L::AcceptRun { .. } => false,
        }
    }
    match e {
        Expr::Lit(v) => v.is_missing(),
        Expr::Code(_) | Expr::Index(_) | Expr::Wrapped { .. } | Expr::Permissive(..) => false,
        // `coalesce` is `missing` only where every argument is.
        Expr::Call(Op::Coalesce, args) => args.iter().all(may_be_missing),
        Expr::Call(_, args) => args.iter().any(may_be_missing),
        Expr::Access(t, idx) => {
            idx.iter().any(|x| {
                matches!(
                    x,
                    Expr::Wrapped {
                        permissive: true,
                        ..
                    } | Expr::Permissive(..)
                )
            }) || tensor(t)
        }
    }
}

/// Simplifies an expression bottom-up.
pub fn simplify_expr(e: Expr, ty: &dyn Typer) -> Expr {
    match e {
        Expr::Access(t, idx) => {
            let idx: Vec<Expr> = idx.into_iter().map(|x| simplify_expr(x, ty)).collect();
            match *t {
                Tensor::FillLeaf(v) => Expr::Lit(v),
                // A leaf that is never present is its fill.
                Tensor::Present {
                    cond: crate::kernel::KExpr::Lit(Value::Bool(false)),
                    fill,
                    ..
                } if idx.is_empty() => Expr::Lit(fill),
                Tensor::Value(v) if idx.is_empty() => simplify_expr(v, ty),
                t => Expr::Access(Box::new(t), idx),
            }
        }
        Expr::Call(op, args) => {
            let args: Vec<Expr> = args.into_iter().map(|x| simplify_expr(x, ty)).collect();
            simplify_call(op, args, ty)
        }
        other => other,
    }
}

fn simplify_call(op: Op, mut args: Vec<Expr>, ty: &dyn Typer) -> Expr {
    let result_type = type_of(&Expr::Call(op, args.clone()), ty);
    if op == Op::Coalesce {
        // `coalesce` is associative: a nested one (a `let` of a `coalesce`, inlined where
        // it may be `missing`) takes its place among the arguments.
        args = args
            .into_iter()
            .flat_map(|a| match a {
                Expr::Call(Op::Coalesce, inner) => inner,
                a => vec![a],
            })
            .collect();
        args.retain(|a| !is_lit(a, Value::is_missing));
        // The arguments up to the first that cannot be `missing` matter (only permissive
        // reads, padded with `missing` runs, can be); once the lowering has resolved those
        // to values, the first argument is the result.
        if let Some(k) = args.iter().position(|a| !may_be_missing(a)) {
            args.truncate(k + 1);
        }
        return match args.len() {
            0 => Expr::Lit(Value::Missing),
            1 => args.into_iter().next().unwrap_or(Expr::Lit(Value::Missing)),
            _ => Expr::Call(Op::Coalesce, args),
        };
    }
    if let Some(e) = missing_argument(op, &args) {
        return e;
    }
    if args.iter().all(|a| matches!(a, Expr::Lit(_))) {
        let vals: Vec<Value> = args
            .iter()
            .map(|a| match a {
                Expr::Lit(v) => *v,
                _ => Value::Missing,
            })
            .collect();
        if let Ok(v) = op.eval(&vals) {
            return Expr::Lit(v);
        }
        return Expr::Call(op, args);
    }
    let mut args = canonicalize(op, args, ty);
    if args.len() == 1 && matches!(op, Op::Min | Op::Max | Op::BitAnd | Op::BitOr) {
        // `max(x, x)` deduplicated: the one argument is the value (its type is the result's).
        return args.remove(0);
    }
    if let [Expr::Lit(v)] = args.as_slice() {
        // Every argument was a literal, folded into one: `op(v)` evaluates to `v`'s result.
        if let Ok(r) = op.eval(&[*v]) {
            return Expr::Lit(r);
        }
    }
    let as_result = |v: Value| match result_type.and_then(|t| v.convert_wrapping(t)) {
        Some(w) => Expr::Lit(w),
        None => Expr::Lit(v),
    };
    let commutative_binary = matches!(
        op,
        Op::Mul | Op::Add | Op::Min | Op::Max | Op::BitAnd | Op::BitOr | Op::And | Op::Or | Op::Xor
    );
    if commutative_binary {
        // An annihilator decides the value without the other arguments, unless one of them
        // may be `missing`, which propagates (`0.0 * x[~(i - 1)]` is `missing` outside `x`,
        // as in the reference); once the read is resolved inside, the rule applies.
        let annihilator = args.iter().find_map(|a| match a {
            Expr::Lit(v) if op.is_annihilator(v, Side::Left) => Some(*v),
            _ => None,
        });
        if let Some(z) = annihilator.filter(|_| !args.iter().any(may_be_missing)) {
            return as_result(z);
        }
        let before = args.len();
        args.retain(|a| !matches!(a, Expr::Lit(v) if op.is_identity(v, Side::Left)));
        if args.len() < before {
            return match args.len() {
                0 => match result_type {
                    Some(t) => op
                        .identity(t, Side::Left)
                        .map_or(Expr::Lit(Value::zero_of(t)), Expr::Lit),
                    None => Expr::Call(op, args),
                },
                1 => {
                    let a = args.remove(0);
                    match (type_of(&a, ty), result_type) {
                        (Some(at), Some(rt)) if at != rt => Expr::Call(Op::Cast(rt), vec![a]),
                        _ => a,
                    }
                }
                _ => Expr::Call(op, args),
            };
        }
    }
    if op == Op::IfElse {
        if let [Expr::Lit(Value::Bool(c)), a, b] = args.as_slice() {
            return if *c { a.clone() } else { b.clone() };
        }
    }
    Expr::Call(op, args)
}

/// The rules `flatten`, `sort`, `dedup` and `fold-partial` for an associative operator
/// whose arguments share one type:
/// * `flatten`: `op(op(a, b), c)` is `op(a, b, c)` (the same left-to-right evaluation);
///   a nested call in any other place is spliced only where reassociation is exact;
/// * `sort` (commutative operators but the short-circuiting `&&`, `||`): arguments in a
///   canonical order, literals last, so equal terms meet and read the same;
/// * `dedup` (idempotent operators): `max(a, a, b)` is `max(a, b)`;
/// * `fold-partial`: the literal arguments are folded into one.
///
/// Reassociation and reordering are exact on integers and booleans (wrapping arithmetic)
/// and are not done on floating point, where they would change rounding, `NaN` payloads or
/// the sign of a zero.
fn canonicalize(op: Op, args: Vec<Expr>, ty: &dyn Typer) -> Vec<Expr> {
    let flattens = matches!(
        op,
        Op::Add | Op::Mul | Op::Min | Op::Max | Op::BitAnd | Op::BitOr | Op::Xor | Op::And | Op::Or
    );
    if !flattens || args.len() < 2 {
        return args;
    }
    let t = match type_of(&args[0], ty) {
        Some(t) if args.iter().all(|a| type_of(a, ty) == Some(t)) => t,
        _ => return args,
    };
    let exact = !t.is_float();
    let mut flat = Vec::with_capacity(args.len());
    for (k, a) in args.into_iter().enumerate() {
        match a {
            Expr::Call(inner, nested)
                if inner == op
                    && (k == 0 || exact)
                    && nested.iter().all(|x| type_of(x, ty) == Some(t)) =>
            {
                flat.extend(nested)
            }
            a => flat.push(a),
        }
    }
    // `&&` and `||` short-circuit: an earlier argument may guard a later one.
    if !exact || matches!(op, Op::And | Op::Or) {
        return flat;
    }
    let (lits, mut terms): (Vec<Expr>, Vec<Expr>) =
        flat.into_iter().partition(|a| matches!(a, Expr::Lit(_)));
    let mut keyed: Vec<(String, Expr)> = terms.drain(..).map(|e| (format!("{e:?}"), e)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    if op.is_idempotent() {
        // Only terms whose printed form is their identity: a tensor read prints its
        // looplets only in part, so two different reads may print alike.
        keyed.dedup_by(|a, b| a.0 == b.0 && is_plain(&a.1));
    }
    let mut out: Vec<Expr> = keyed.into_iter().map(|(_, e)| e).collect();
    let vals: Vec<Value> = lits
        .iter()
        .filter_map(|l| match l {
            Expr::Lit(v) => Some(*v),
            _ => None,
        })
        .collect();
    match vals.len() {
        0 => {}
        1 => out.push(Expr::Lit(vals[0])),
        _ => match op.eval(&vals) {
            Ok(v) => out.push(Expr::Lit(v)),
            Err(_) => out.extend(lits),
        },
    }
    out
}

/// True for an expression of literals, indices, kernel code and operators only.
fn is_plain(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Index(_) | Expr::Code(_) => true,
        Expr::Call(_, args) => args.iter().all(is_plain),
        _ => false,
    }
}

/// Simplifies a statement; returns `Stmt::Block(vec![])` for statements that vanish.
pub fn simplify_stmt(s: Stmt, ty: &dyn Typer) -> Stmt {
    match s {
        Stmt::Assign { lhs, op, rhs } => {
            if matches!(lhs.0, Tensor::Null) {
                return Stmt::Block(vec![]);
            }
            let rhs = simplify_expr(rhs, ty);
            let idx: Vec<Expr> = lhs.1.into_iter().map(|x| simplify_expr(x, ty)).collect();
            if is_lit(&rhs, Value::is_missing) {
                return Stmt::Block(vec![]);
            }
            if let Some((cond, then, otherwise)) = split_on_missing_branch(&rhs) {
                let assign = |rhs| Stmt::Assign {
                    lhs: (lhs.0.clone(), idx.clone()),
                    op,
                    rhs,
                };
                let branch = Stmt::Sieve {
                    cond,
                    then: Box::new(assign(then)),
                    otherwise: Box::new(assign(otherwise)),
                };
                return simplify_stmt(branch, ty);
            }
            if let (Some(op), Expr::Lit(v)) = (op, &rhs) {
                if op.is_identity(v, Side::Right) && op != Op::Overwrite {
                    return Stmt::Block(vec![]);
                }
            }
            Stmt::Assign {
                lhs: (lhs.0, idx),
                op,
                rhs,
            }
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            let cond = simplify_expr(cond, ty);
            match cond {
                Expr::Lit(Value::Bool(true)) => simplify_stmt(*then, ty),
                Expr::Lit(Value::Bool(false)) => simplify_stmt(*otherwise, ty),
                cond => {
                    let then = simplify_stmt(*then, ty);
                    let otherwise = simplify_stmt(*otherwise, ty);
                    if is_empty(&then) && is_empty(&otherwise) {
                        return Stmt::Block(vec![]);
                    }
                    Stmt::Sieve {
                        cond,
                        then: Box::new(then),
                        otherwise: Box::new(otherwise),
                    }
                }
            }
        }
        Stmt::Define { var, value, body } => {
            let value = simplify_expr(value, ty);
            // A `let` of a constant (a read in a region of fill values) is the constant. A
            // `let` of a value that may be `missing` (a permissive read) is its value where
            // used: a kernel local cannot hold `missing`, and a `coalesce` of the variable,
            // which reads as never `missing`, would be dropped.
            if matches!(value, Expr::Lit(_)) || may_be_missing(&value) {
                return simplify_stmt(crate::looplets::substitute(*body, &var, &value), ty);
            }
            let scoped = WithLet {
                outer: ty,
                var: &var,
                ty: type_of(&value, ty),
            };
            let body = simplify_stmt(*body, &scoped);
            if is_empty(&body) {
                return body;
            }
            Stmt::Define {
                var,
                value,
                body: Box::new(body),
            }
        }
        Stmt::Block(v) => {
            let mut out = Vec::new();
            for s in v {
                match simplify_stmt(s, ty) {
                    Stmt::Block(inner) => out.extend(inner),
                    s => out.push(s),
                }
            }
            if out.len() == 1 {
                out.pop().unwrap_or(Stmt::Block(vec![]))
            } else {
                Stmt::Block(out)
            }
        }
        Stmt::Loop {
            index,
            lo,
            hi,
            body,
        } => {
            let body = simplify_stmt(*body, ty);
            if is_empty(&body) {
                return body;
            }
            Stmt::Loop {
                index,
                lo,
                hi,
                body: Box::new(body),
            }
        }
        Stmt::SetScalar(s, e) => Stmt::SetScalar(s, simplify_expr(e, ty)),
        Stmt::SetLocal(l, e) => Stmt::SetLocal(l, simplify_expr(e, ty)),
        Stmt::Check(e, code) => match simplify_expr(e, ty) {
            Expr::Lit(Value::Bool(true)) => Stmt::Block(vec![]),
            e => Stmt::Check(e, code),
        },
        Stmt::Reset(t, v) => Stmt::Reset(t, v),
        Stmt::Freeze(t) => Stmt::Freeze(t),
    }
}

/// True for a statement that does nothing.
pub fn is_empty(s: &Stmt) -> bool {
    matches!(s, Stmt::Block(v) if v.iter().all(is_empty))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{KExpr, LocalId};

    /// Kernel code is `i64`; tensors hold `f64`.
    struct Ints;

    impl Typer for Ints {
        fn code_type(&self, _: &KExpr) -> ScalarType {
            ScalarType::I64
        }
        fn tensor_type(&self, _: &Tensor) -> Option<ScalarType> {
            Some(ScalarType::F64)
        }
    }

    fn call(op: Op, args: Vec<Expr>) -> Expr {
        Expr::Call(op, args)
    }

    fn var(n: u32) -> Expr {
        Expr::Code(KExpr::Local(LocalId(n)))
    }

    fn int(n: i64) -> Expr {
        Expr::Lit(Value::I64(n))
    }

    fn show(e: &Expr) -> String {
        format!("{e:?}")
    }

    #[test]
    fn integer_sums_flatten_sort_and_fold_their_literals() {
        // (1 + (v1 + 2)) + v0  ->  v0 + v1 + 3
        let e = call(
            Op::Add,
            vec![
                call(Op::Add, vec![int(1), call(Op::Add, vec![var(1), int(2)])]),
                var(0),
            ],
        );
        let want = call(Op::Add, vec![var(0), var(1), int(3)]);
        assert_eq!(show(&simplify_expr(e, &Ints)), show(&want));
        // Literals that fold to the identity vanish: v0 + 2 + (-2) -> v0.
        let e = call(Op::Add, vec![call(Op::Add, vec![var(0), int(2)]), int(-2)]);
        assert_eq!(show(&simplify_expr(e, &Ints)), show(&var(0)));
    }

    #[test]
    fn idempotent_operators_drop_repeated_terms() {
        let e = call(Op::Max, vec![var(0), call(Op::Max, vec![var(1), var(0)])]);
        let want = call(Op::Max, vec![var(0), var(1)]);
        assert_eq!(show(&simplify_expr(e, &Ints)), show(&want));
        assert_eq!(
            show(&simplify_expr(call(Op::Min, vec![var(3), var(3)]), &Ints)),
            show(&var(3))
        );
        // `xor` is not idempotent: v0 xor v0 stays (it is 0, but not by this rule).
        let e = call(Op::Xor, vec![var(0), var(0)]);
        assert_eq!(show(&simplify_expr(e.clone(), &Ints)), show(&e));
    }

    #[test]
    fn floating_point_and_short_circuits_keep_their_order() {
        let f = |x: f64| Expr::Lit(Value::F64(x));
        let typed = |e: Expr| simplify_expr(e, &Floats);
        // 1.0 + (v0 + 2.0) on f64 is neither reassociated nor reordered nor folded.
        let right = call(Op::Add, vec![f(1.0), call(Op::Add, vec![var(0), f(2.0)])]);
        let before = show(&right);
        assert_eq!(show(&typed(right)), before);
        // (v0 + v1) + v2 flattens: the same left-to-right evaluation.
        let left = call(Op::Add, vec![call(Op::Add, vec![var(0), var(1)]), var(2)]);
        assert_eq!(
            show(&typed(left)),
            show(&call(Op::Add, vec![var(0), var(1), var(2)]))
        );
        // `&&` keeps its order: the first argument may guard the second.
        let b = |n: u32| call(Op::Lt, vec![var(n), int(3)]);
        let guard = call(Op::And, vec![b(1), b(0)]);
        assert_eq!(show(&simplify_expr(guard.clone(), &Ints)), show(&guard));
    }

    /// Kernel code is `f64`.
    struct Floats;

    impl Typer for Floats {
        fn code_type(&self, _: &KExpr) -> ScalarType {
            ScalarType::F64
        }
        fn tensor_type(&self, _: &Tensor) -> Option<ScalarType> {
            Some(ScalarType::F64)
        }
    }
}
