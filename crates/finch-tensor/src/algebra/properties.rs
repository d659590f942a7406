//! Algebraic properties of operators, read by the simplifier and by the short-circuit
//! logic: associativity, commutativity, idempotence, and identities and annihilators per
//! argument position.
//!
//! Definitions (for a binary `op`): `e` is a **left identity** when `op(e, x) == x` for
//! all `x`, a **right identity** when `op(x, e) == x`; `a` is a **left annihilator** when
//! `op(a, x) == a` for all `x` (so a reduction `s = op(s, x)` that reaches `a` never
//! changes again: the short-circuit rule), a **right annihilator** when `op(x, a) == a`.
//! Float caveat (as in Finch.jl): `0` is claimed as the annihilator of `*` although
//! `0 * NaN` and `0 * Inf` are `NaN`; programs that rely on NaN propagation through
//! sparse products should store NaN explicitly.

use super::op::Op;
use super::scalar::{ScalarType, Value};

/// An argument position of a binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The first argument (the accumulator of a reduction `s = op(s, x)`).
    Left,
    /// The second argument.
    Right,
}

/// The largest value of a type (`+Inf` for floats, `true` for `bool`).
pub fn type_max(ty: ScalarType) -> Value {
    match ty {
        ScalarType::Bool => Value::Bool(true),
        ScalarType::U8 => Value::U8(u8::MAX),
        ScalarType::U16 => Value::U16(u16::MAX),
        ScalarType::U32 => Value::U32(u32::MAX),
        ScalarType::U64 => Value::U64(u64::MAX),
        ScalarType::I8 => Value::I8(i8::MAX),
        ScalarType::I16 => Value::I16(i16::MAX),
        ScalarType::I32 => Value::I32(i32::MAX),
        ScalarType::I64 => Value::I64(i64::MAX),
        ScalarType::F32 => Value::F32(f32::INFINITY),
        ScalarType::F64 => Value::F64(f64::INFINITY),
    }
}

/// The smallest value of a type (`-Inf` for floats, `false` for `bool`).
pub fn type_min(ty: ScalarType) -> Value {
    match ty {
        ScalarType::Bool => Value::Bool(false),
        ScalarType::U8 => Value::U8(0),
        ScalarType::U16 => Value::U16(0),
        ScalarType::U32 => Value::U32(0),
        ScalarType::U64 => Value::U64(0),
        ScalarType::I8 => Value::I8(i8::MIN),
        ScalarType::I16 => Value::I16(i16::MIN),
        ScalarType::I32 => Value::I32(i32::MIN),
        ScalarType::I64 => Value::I64(i64::MIN),
        ScalarType::F32 => Value::F32(f32::NEG_INFINITY),
        ScalarType::F64 => Value::F64(f64::NEG_INFINITY),
    }
}

/// All bits set (`true` for `bool`); `None` for floats.
fn all_ones(ty: ScalarType) -> Option<Value> {
    if ty.is_float() {
        return None;
    }
    Value::I64(-1).convert_wrapping(ty).map(|v| match v {
        Value::Bool(_) => Value::Bool(true),
        v => v,
    })
}

impl Op {
    /// `op(op(a, b), c) == op(a, op(b, c))` (exactly for integers and bools; up to
    /// rounding for floats, as every tensor compiler assumes).
    pub fn is_associative(&self) -> bool {
        matches!(
            self,
            Op::Add
                | Op::Mul
                | Op::Min
                | Op::Max
                | Op::BitAnd
                | Op::BitOr
                | Op::Xor
                | Op::And
                | Op::Or
                | Op::Coalesce
                | Op::Choose(_)
                | Op::Overwrite
        )
    }

    /// `op(a, b) == op(b, a)`.
    pub fn is_commutative(&self) -> bool {
        matches!(
            self,
            Op::Add
                | Op::Mul
                | Op::Min
                | Op::Max
                | Op::BitAnd
                | Op::BitOr
                | Op::Xor
                | Op::And
                | Op::Or
                | Op::Eq
                | Op::Ne
        )
    }

    /// `op(x, x) == x`: a repeated reduction of the same value equals one.
    pub fn is_idempotent(&self) -> bool {
        matches!(
            self,
            Op::Min
                | Op::Max
                | Op::BitAnd
                | Op::BitOr
                | Op::And
                | Op::Or
                | Op::Coalesce
                | Op::Choose(_)
                | Op::Overwrite
        )
    }

    /// The identity of `op` at `side` for values of type `ty`, when there is a single one.
    pub fn identity(&self, ty: ScalarType, side: Side) -> Option<Value> {
        let zero = Value::zero_of(ty);
        let one = Value::one_of(ty);
        match (self, side) {
            (Op::Add | Op::BitOr | Op::Xor, _) => Some(zero),
            (Op::Sub | Op::Shl | Op::Shr, Side::Right) => Some(zero),
            (Op::Mul, _) => Some(one),
            (Op::Div | Op::Pow, Side::Right) => Some(one),
            (Op::Min, _) => Some(type_max(ty)),
            (Op::Max, _) => Some(type_min(ty)),
            (Op::BitAnd, _) => all_ones(ty),
            (Op::And, _) if ty == ScalarType::Bool => Some(Value::Bool(true)),
            (Op::Or, _) if ty == ScalarType::Bool => Some(Value::Bool(false)),
            (Op::Coalesce, _) => Some(Value::Missing),
            (Op::Choose(z), _) => z.convert_exact(ty),
            _ => None,
        }
    }

    /// Is `v` an identity of `op` at `side`? (`overwrite` ignores its left argument, so
    /// every value is a left identity.)
    pub fn is_identity(&self, v: &Value, side: Side) -> bool {
        match (self, side) {
            (Op::Overwrite, Side::Left) => true,
            (Op::Choose(z), _) => v.num_eq(z),
            (Op::Coalesce, _) => v.is_missing(),
            _ => match v.scalar_type() {
                Some(ty) => self
                    .identity(ty, side)
                    .is_some_and(|e| e.same(v) || (v.is_zero() && e.is_zero())),
                None => false,
            },
        }
    }

    /// The annihilator of `op` at `side` for type `ty`, when there is a single one.
    pub fn annihilator(&self, ty: ScalarType, side: Side) -> Option<Value> {
        match (self, side) {
            (Op::Mul, _) => Some(Value::zero_of(ty)),
            (Op::Min, _) => Some(type_min(ty)),
            (Op::Max, _) => Some(type_max(ty)),
            (Op::BitAnd, _) if !ty.is_float() => Some(Value::zero_of(ty)),
            (Op::BitOr, _) => all_ones(ty),
            (Op::And, _) if ty == ScalarType::Bool => Some(Value::Bool(false)),
            (Op::Or, _) if ty == ScalarType::Bool => Some(Value::Bool(true)),
            _ => None,
        }
    }

    /// Is `v` an annihilator of `op` at `side`? Besides [`Op::annihilator`]: for
    /// `choose(z)` every value other than `z` is a left annihilator, for `coalesce` every
    /// non-missing value is, and for `overwrite` every value is a right annihilator.
    pub fn is_annihilator(&self, v: &Value, side: Side) -> bool {
        if v.is_missing() {
            return false;
        }
        match (self, side) {
            (Op::Choose(z), Side::Left) => !v.num_eq(z),
            (Op::Coalesce, Side::Left) => true,
            (Op::Overwrite, Side::Right) => true,
            _ => match v.scalar_type() {
                Some(ty) => self
                    .annihilator(ty, side)
                    .is_some_and(|a| a.same(v) || (v.is_zero() && a.is_zero())),
                None => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BINARY: [Op; 17] = [
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
        Op::Pow,
        Op::Min,
        Op::Max,
        Op::BitAnd,
        Op::BitOr,
        Op::Xor,
        Op::Shl,
        Op::Shr,
        Op::And,
        Op::Or,
        Op::Coalesce,
        Op::Overwrite,
        Op::Choose(Value::I64(0)),
    ];

    fn value_of(ty: ScalarType, n: i64, f: f64) -> Value {
        if ty.is_float() {
            Value::F64(f).convert_wrapping(ty).unwrap()
        } else {
            Value::I64(n).convert_wrapping(ty).unwrap()
        }
    }

    fn types() -> impl Strategy<Value = ScalarType> {
        prop::sample::select(ScalarType::ALL.to_vec())
    }

    fn apply(op: Op, a: Value, b: Value) -> Option<Value> {
        op.eval(&[a, b]).ok()
    }

    proptest! {
        #[test]
        fn claimed_identities_hold(ty in types(), n in any::<i64>(), f in -1e6f64..1e6) {
            let x = value_of(ty, n, f);
            for op in BINARY {
                for side in [Side::Left, Side::Right] {
                    if let Some(e) = op.identity(ty, side) {
                        let r = match side {
                            Side::Left => apply(op, e, x),
                            Side::Right => apply(op, x, e),
                        };
                        if let Some(r) = r {
                            // Identity means the result equals x (numerically: bool
                            // arithmetic promotes to i64).
                            prop_assert!(r.num_eq(&x) || r.same(&x), "{op} {side:?} identity {e} on {x} gave {r}");
                        }
                    }
                }
            }
        }

        #[test]
        fn claimed_annihilators_hold(ty in types(), n in any::<i64>(), f in -1e6f64..1e6) {
            let x = value_of(ty, n, f);
            for op in BINARY {
                for side in [Side::Left, Side::Right] {
                    if let Some(a) = op.annihilator(ty, side) {
                        prop_assert!(op.is_annihilator(&a, side));
                        let r = match side {
                            Side::Left => apply(op, a, x),
                            Side::Right => apply(op, x, a),
                        };
                        if let Some(r) = r {
                            prop_assert!(r.num_eq(&a) || r.same(&a), "{op} {side:?} annihilator {a} on {x} gave {r}");
                        }
                    }
                }
            }
        }

        #[test]
        fn laws_hold_on_integers(a in any::<i32>(), b in any::<i32>(), c in any::<i32>()) {
            let (a, b, c) = (Value::I64(a as i64), Value::I64(b as i64), Value::I64(c as i64));
            for op in BINARY {
                let ab = apply(op, a, b);
                if op.is_commutative() {
                    prop_assert_eq!(ab, apply(op, b, a), "{} commutes", op);
                }
                if op.is_idempotent() {
                    if let Some(r) = apply(op, a, a) {
                        prop_assert!(r.same(&a), "{} idempotent", op);
                    }
                }
                if op.is_associative() {
                    let left = ab.and_then(|ab| apply(op, ab, c));
                    let right = apply(op, b, c).and_then(|bc| apply(op, a, bc));
                    prop_assert_eq!(left, right, "{} associative", op);
                }
            }
        }

        #[test]
        fn laws_hold_on_bools(a in any::<bool>(), b in any::<bool>()) {
            let (a, b) = (Value::Bool(a), Value::Bool(b));
            for op in [Op::And, Op::Or, Op::BitAnd, Op::BitOr, Op::Xor, Op::Min, Op::Max] {
                prop_assert_eq!(apply(op, a, b), apply(op, b, a));
                if op.is_idempotent() {
                    prop_assert_eq!(apply(op, a, a), Some(a));
                }
            }
        }
    }

    #[test]
    fn choose_and_coalesce_annihilate_on_the_left() {
        let c = Op::Choose(Value::I64(0));
        assert!(c.is_annihilator(&Value::I64(3), Side::Left));
        assert!(!c.is_annihilator(&Value::I64(0), Side::Left));
        assert!(c.is_identity(&Value::I64(0), Side::Right));
        assert!(Op::Mul.is_annihilator(&Value::F64(-0.0), Side::Left));
        assert!(Op::Or.is_annihilator(&Value::Bool(true), Side::Left));
        assert!(!Op::Add.is_annihilator(&Value::I64(0), Side::Left));
        assert!(Op::Add.is_identity(&Value::F64(0.0), Side::Right));
        assert!(Op::Overwrite.is_identity(&Value::I64(7), Side::Left));
    }
}
