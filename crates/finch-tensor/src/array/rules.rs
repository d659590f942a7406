//! The result fill and iteration space of an element-wise expression (digest §3, rules
//! R1-R5), the output format chosen from them, and the guard that keeps explicitly
//! stored fills from changing a result.
//!
//! `derive(e)` is `(A, v)`: outside the coordinate set `A`, `e` equals `v` whatever the
//! stored inputs hold. Leaves: an operand `k` gives `(Tensor(k), fill_k)`, a literal `c`
//! gives `(Empty, c)`. A call `f(e1..en)` takes the first rule that applies:
//!
//! * R1, annihilator: the arguments whose fill annihilates `f` at their position
//!   (`Op::is_annihilator`) intersect, and the fill is that annihilator;
//! * R2, idempotent `f` and equal fills: union, that fill;
//! * R3, identities: all fills but at most one (`m`) are identities of `f` at their
//!   position: union, fill `v_m` (or the identity);
//! * R4: union, fill `f(v1..vn)` folded with the language's semantics;
//! * R5 (top level only, `with_declared_fill`): a declared fill `r` that differs from the
//!   derived one makes the space `Universe`, every coordinate computed and stored.
//!
//! R0 (explicit algebras) needs user-defined functions (issue #29 item 3); no built-in
//! operator has one. The compiler decides the iteration itself (looplets and the
//! simplifier fold the fills the program's formats declare); the derived algebra decides
//! the output format ([`output_format`]) and the derived fill the output's fill.

use std::fmt;

use crate::algebra::{Op, ScalarType, Side, Value};
use crate::error::{Error, Result};
use crate::formats::{Format, LevelFormat, LevelKind, ScalarKind};

use super::program::Expr;

/// An iteration space over the operands of an expression (digest §2).
#[derive(Clone, Debug, PartialEq)]
pub enum Algebra {
    /// The coordinates operand `k` stores.
    Tensor(usize),
    /// The coordinates outside a space.
    Not(Box<Algebra>),
    /// The coordinates in every space.
    And(Vec<Algebra>),
    /// The coordinates in any space.
    Or(Vec<Algebra>),
    /// Every coordinate.
    Universe,
    /// No coordinate.
    Empty,
}

impl Algebra {
    /// The union of spaces, flattened: `Empty` terms vanish, a `Universe` term absorbs.
    pub fn union(terms: Vec<Algebra>) -> Algebra {
        let mut out = Vec::new();
        for t in terms {
            match t {
                Algebra::Empty => {}
                Algebra::Universe => return Algebra::Universe,
                Algebra::Or(inner) => push_unique(&mut out, inner),
                t => push_unique(&mut out, vec![t]),
            }
        }
        match out.len() {
            0 => Algebra::Empty,
            1 => out.remove(0),
            _ => Algebra::Or(out),
        }
    }

    /// The intersection of spaces, flattened: `Universe` terms vanish, an `Empty` term
    /// absorbs.
    pub fn intersection(terms: Vec<Algebra>) -> Algebra {
        let mut out = Vec::new();
        for t in terms {
            match t {
                Algebra::Universe => {}
                Algebra::Empty => return Algebra::Empty,
                Algebra::And(inner) => push_unique(&mut out, inner),
                t => push_unique(&mut out, vec![t]),
            }
        }
        match out.len() {
            0 => Algebra::Universe,
            1 => out.remove(0),
            _ => Algebra::And(out),
        }
    }

    /// Evaluates the space as a Boolean formula with `Tensor(k)` given by `leaf(k)`.
    pub fn eval(&self, leaf: &dyn Fn(usize) -> bool) -> bool {
        match self {
            Algebra::Tensor(k) => leaf(*k),
            Algebra::Not(a) => !a.eval(leaf),
            Algebra::And(ts) => ts.iter().all(|t| t.eval(leaf)),
            Algebra::Or(ts) => ts.iter().any(|t| t.eval(leaf)),
            Algebra::Universe => true,
            Algebra::Empty => false,
        }
    }
}

fn push_unique(out: &mut Vec<Algebra>, terms: Vec<Algebra>) {
    for t in terms {
        if !out.contains(&t) {
            out.push(t);
        }
    }
}

impl fmt::Display for Algebra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, ts: &[Algebra], sep: &str| -> fmt::Result {
            f.write_str("(")?;
            for (n, t) in ts.iter().enumerate() {
                if n > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{t}")?;
            }
            f.write_str(")")
        };
        match self {
            Algebra::Tensor(k) => write!(f, "#{k}"),
            Algebra::Not(a) => write!(f, "¬{a}"),
            Algebra::And(ts) => join(f, ts, " ∩ "),
            Algebra::Or(ts) => join(f, ts, " ∪ "),
            Algebra::Universe => f.write_str("U"),
            Algebra::Empty => f.write_str("∅"),
        }
    }
}

/// What `derive` gives an expression: its iteration space and its fill.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Derived {
    pub(crate) algebra: Algebra,
    pub(crate) fill: Value,
}

/// The argument position of argument `k` for the properties of an operator.
fn side(k: usize) -> Side {
    if k == 0 {
        Side::Left
    } else {
        Side::Right
    }
}

/// Derives the space and fill of `e` (rules R1-R4) given each operand's fill.
pub(crate) fn derive(e: &Expr, fills: &[Value]) -> Result<Derived> {
    match e {
        Expr::Operand(k) => Ok(Derived {
            algebra: Algebra::Tensor(*k),
            fill: fills.get(*k).copied().ok_or_else(|| {
                Error::Program(format!("internal: the expression reads operand {k}"))
            })?,
        }),
        Expr::Literal(v) => Ok(Derived {
            algebra: Algebra::Empty,
            fill: *v,
        }),
        Expr::Call(op, args) => {
            let parts = args
                .iter()
                .map(|a| derive(a, fills))
                .collect::<Result<Vec<_>>>()?;
            derive_call(*op, parts)
        }
    }
}

fn derive_call(op: Op, parts: Vec<Derived>) -> Result<Derived> {
    let fills: Vec<Value> = parts.iter().map(|p| p.fill).collect();
    let binary_properties = parts.len() >= 2;
    // R1: annihilators intersect.
    let annihilating: Vec<usize> = (0..parts.len())
        .filter(|&k| binary_properties && op.is_annihilator(&fills[k], side(k)))
        .collect();
    if let Some(&first) = annihilating.first() {
        let fill = fills[first];
        let algebra = Algebra::intersection(
            annihilating
                .iter()
                .map(|&k| parts[k].algebra.clone())
                .collect(),
        );
        return Ok(Derived { algebra, fill });
    }
    let union = || Algebra::union(parts.iter().map(|p| p.algebra.clone()).collect());
    // R2: an idempotent operator over equal fills.
    if binary_properties && op.is_idempotent() && fills.iter().all(|v| v.same(&fills[0])) {
        return Ok(Derived {
            algebra: union(),
            fill: fills[0],
        });
    }
    // R3: all fills but at most one are identities.
    if binary_properties {
        let others: Vec<usize> = (0..parts.len())
            .filter(|&k| !op.is_identity(&fills[k], side(k)))
            .collect();
        match others.as_slice() {
            [] => {
                return Ok(Derived {
                    algebra: union(),
                    fill: fills[0],
                })
            }
            [m] => {
                return Ok(Derived {
                    algebra: union(),
                    fill: fills[*m],
                })
            }
            _ => {}
        }
    }
    // R4: the operator folded over the fills.
    let fill = op.eval(&fills).map_err(|e| {
        Error::Program(format!(
            "`{op}` of the fill values {} fails ({e}); the implicit entries would fail too",
            fmt_values(&fills)
        ))
    })?;
    Ok(Derived {
        algebra: union(),
        fill,
    })
}

fn fmt_values(vs: &[Value]) -> String {
    vs.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// R5: a declared result fill `r` that differs from the derived fill makes every
/// coordinate computed and stored; one equal to it changes nothing.
pub(crate) fn with_declared_fill(d: Derived, declared: Option<Value>) -> Derived {
    match declared {
        Some(r) if !r.same(&d.fill) => Derived {
            algebra: Algebra::Universe,
            fill: r,
        },
        _ => d,
    }
}

/// The fill and iteration space the rules give `op` applied to arguments with `fills`
/// (each argument an operand of its own, numbered from 0): rules R1-R4.
pub fn derive_fill(op: Op, fills: &[Value]) -> Result<(Algebra, Value)> {
    let e = Expr::Call(op, (0..fills.len()).map(Expr::Operand).collect());
    let d = derive(&e, fills)?;
    Ok((d.algebra, d.fill))
}

/// The operator and value of a guard that makes an explicitly stored fill act as an
/// implicit one: where the argument equals its fill and that fill annihilates `op` in
/// floating point (`0` of `*`, `-Inf` of `min`, `+Inf` of `max`), the compiler's
/// simplifier gives the annihilator for an implicit entry, whatever the other arguments
/// hold (`0 * NaN` is `0`), while the kernel computes `0 * NaN = NaN` for a stored one.
/// The guard `ifelse(x == a, a, f(x, y))` gives the annihilator in both cases (and folds
/// away where `x` is implicit). Integer and `bool` annihilators are exact: no guard.
pub(crate) fn fill_guard(op: Op, k: usize, arg_fill: &Value) -> Option<Value> {
    let float = arg_fill.scalar_type().is_some_and(ScalarType::is_float);
    let guarded = matches!(op, Op::Mul | Op::Min | Op::Max);
    (float && guarded && op.is_annihilator(arg_fill, side(k))).then_some(*arg_fill)
}

/// What the output format rule needs of an operand.
pub(crate) struct OperandLayout<'a> {
    /// The operand's shape.
    pub(crate) shape: &'a [usize],
    /// The operand's format.
    pub(crate) format: &'a Format,
}

/// The level kind that stores each mode of a format (mode 0 first).
fn mode_kinds(format: &Format) -> Vec<LevelKind> {
    let mut kinds = Vec::new();
    if let Format::Levels(root) = format {
        let mut level = root;
        while let LevelFormat::Inner { kind, child, .. } = level {
            for _ in 0..kind.modes() {
                kinds.push(*kind);
            }
            level = child.as_ref();
        }
    }
    kinds.reverse();
    kinds
}

/// Is result mode `m` sparse in operand `k`: stored by a level other than Dense, and
/// not broadcast (a mode the operand lacks, or of size 1 against a larger result, holds
/// a value at every coordinate)?
fn sparse_in(op: &OperandLayout<'_>, result_shape: &[usize], m: usize) -> bool {
    let offset = result_shape.len() - op.shape.len();
    if m < offset {
        return false;
    }
    let j = m - offset;
    if op.shape[j] != result_shape[m] {
        return false;
    }
    mode_kinds(op.format)
        .get(j)
        .is_some_and(|&kind| !kind.is_dense())
}

/// The output format rule. Per result mode, from the derived space: the mode is sparse
/// when the space, with each operand read as "sparse in this mode", holds (a union is
/// sparse only if every term is, an intersection if any term is; a complement or the
/// universe is dense, the empty space sparse). Sparse modes are `SparseList` levels, the
/// others `Dense`, over an `Element` leaf holding the result's fill; a 0-d result is a
/// `Scalar`. So a union of sparse operands stays sparse, an intersection with a sparse
/// operand is sparse, and `Universe` (rule R5) is dense.
pub(crate) fn output_format(
    algebra: &Algebra,
    operands: &[OperandLayout<'_>],
    result_shape: &[usize],
    fill: Value,
) -> Format {
    if result_shape.is_empty() {
        return Format::Scalar(ScalarKind::Scalar, fill);
    }
    let sparse: Vec<bool> = (0..result_shape.len())
        .map(|m| {
            sparse_mode(algebra, &|k| {
                operands
                    .get(k)
                    .is_some_and(|op| sparse_in(op, result_shape, m))
            })
        })
        .collect();
    crate::formats::named::lists_or_dense(&sparse, fill)
}

fn sparse_mode(algebra: &Algebra, leaf: &dyn Fn(usize) -> bool) -> bool {
    match algebra {
        Algebra::Tensor(k) => leaf(*k),
        Algebra::Not(_) | Algebra::Universe => false,
        Algebra::Empty => true,
        Algebra::And(ts) => ts.iter().any(|t| sparse_mode(t, leaf)),
        Algebra::Or(ts) => ts.iter().all(|t| sparse_mode(t, leaf)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> Value {
        Value::F64(x)
    }

    #[test]
    fn annihilators_intersect_t3() {
        // max(A, B, C), A and B fill +Inf, C fill 0: A ∩ B, fill +Inf.
        let (a, v) = derive_fill(Op::Max, &[f(f64::INFINITY), f(f64::INFINITY), f(0.0)]).unwrap();
        assert_eq!(
            a,
            Algebra::And(vec![Algebra::Tensor(0), Algebra::Tensor(1)])
        );
        assert!(v.same(&f(f64::INFINITY)));
    }

    #[test]
    fn idempotent_and_identity_rules_t4_t5() {
        let (a, v) = derive_fill(Op::Min, &[f(5.0), f(5.0)]).unwrap();
        assert_eq!(a.to_string(), "(#0 ∪ #1)");
        assert!(v.same(&f(5.0)));
        let (_, v) = derive_fill(Op::Max, &[f(f64::NEG_INFINITY), f(42.0)]).unwrap();
        assert!(v.same(&f(42.0)));
    }

    #[test]
    fn product_with_a_zero_fill_is_that_operand_t6a() {
        let (a, v) = derive_fill(Op::Mul, &[f(1.0), f(0.0)]).unwrap();
        assert_eq!(a, Algebra::Tensor(1));
        assert!(v.same(&f(0.0)));
    }

    #[test]
    fn sum_folds_the_fills_t6b_and_r5_makes_it_universal_t6c() {
        let d = derive(
            &Expr::Call(Op::Add, vec![Expr::Operand(0), Expr::Operand(1)]),
            &[f(1.0), f(2.0)],
        )
        .unwrap();
        assert!(d.fill.same(&f(3.0)));
        let d = with_declared_fill(d, Some(f(0.0)));
        assert_eq!(d.algebra, Algebra::Universe);
    }

    #[test]
    fn division_keeps_the_dividend_space_t7() {
        let (a, v) = derive_fill(Op::Div, &[f(0.0), f(2.0)]).unwrap();
        // `/` has no annihilator in the language's properties: R4, a union, fill 0/2.
        assert_eq!(a.to_string(), "(#0 ∪ #1)");
        assert!(v.same(&f(0.0)));
    }

    #[test]
    fn failing_fill_arithmetic_is_an_error() {
        let e = derive_fill(Op::Fld, &[Value::I64(1), Value::I64(0)]).unwrap_err();
        assert!(e.to_string().contains("fill values 1, 0"), "{e}");
    }

    #[test]
    fn output_format_follows_the_space() {
        let csc = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
        let dense = Format::parse("Dense(Dense(Element(0.0)))").unwrap();
        let ops = [
            OperandLayout {
                shape: &[3, 4],
                format: &csc,
            },
            OperandLayout {
                shape: &[3, 4],
                format: &dense,
            },
        ];
        let both = Algebra::union(vec![Algebra::Tensor(0), Algebra::Tensor(1)]);
        let meet = Algebra::intersection(vec![Algebra::Tensor(0), Algebra::Tensor(1)]);
        assert_eq!(
            output_format(&both, &ops, &[3, 4], f(0.0)).to_string(),
            "Dense(Dense(Element(0.0)))"
        );
        assert_eq!(
            output_format(&meet, &ops, &[3, 4], f(0.0)).to_string(),
            "Dense(SparseList(Element(0.0)))"
        );
        assert_eq!(
            output_format(&Algebra::Tensor(0), &ops[..1], &[3, 4], f(1.0)).to_string(),
            "Dense(SparseList(Element(1.0)))"
        );
    }
}
