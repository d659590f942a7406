//! Operator semantics: `Op::eval` on dynamically typed values, following Julia (Finch.jl
//! is Julia): type promotion, wrapping integer arithmetic, true division `/`, floored and
//! truncated integer division, `missing` propagation (every operator but `coalesce`
//! returns `missing` when an argument is `missing`).
//!
//! Errors (`Error::Eval`) are raised where Julia throws: integer division by zero, a
//! negative integer power, `sqrt`/`log` of a negative number, a non-`bool` operand of
//! `&&`/`||`/`ifelse`, bitwise operators on floats, and a wrong number of arguments.

use super::op::Op;
use super::scalar::{ScalarType, Value};
use crate::error::{Error, Result};

/// The type two operands are converted to before a binary operation (Julia's
/// `promote_type`): a float wins (the widest float present); two integers of the same
/// signedness take the wider; mixed signedness takes the unsigned type if it is at least
/// as wide, else the signed one; `bool` yields to any other type.
pub fn promote(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    if a == b {
        return a;
    }
    if a == Bool {
        return b;
    }
    if b == Bool {
        return a;
    }
    match (a.is_float(), b.is_float()) {
        (true, true) => {
            if a.bits() >= b.bits() {
                a
            } else {
                b
            }
        }
        (true, false) => a,
        (false, true) => b,
        (false, false) => {
            let (sa, sb) = (a.is_signed_integer(), b.is_signed_integer());
            if sa == sb {
                if a.bits() >= b.bits() {
                    a
                } else {
                    b
                }
            } else {
                let (signed, unsigned) = if sa { (a, b) } else { (b, a) };
                if unsigned.bits() >= signed.bits() {
                    unsigned
                } else {
                    signed
                }
            }
        }
    }
}

/// The type arithmetic (`+ - * ^ abs`, unary `-`) computes in: `promote`, with `bool`
/// arithmetic done in `i64` (Julia's `true + true == 2`).
fn arith_type(a: ScalarType, b: ScalarType) -> ScalarType {
    match promote(a, b) {
        ScalarType::Bool => ScalarType::I64,
        t => t,
    }
}

fn err<T>(msg: String) -> Result<T> {
    Err(Error::Eval(msg))
}

fn ty_of(v: &Value) -> ScalarType {
    v.scalar_type().unwrap_or(ScalarType::F64)
}

/// Converts a non-missing value to `ty` (wrapping where needed; only used after promotion,
/// where it is exact except for large integers into floats).
fn to(v: &Value, ty: ScalarType) -> Value {
    v.convert_wrapping(ty).unwrap_or(Value::Missing)
}

/// An `i128` result wrapped into `ty` (operands of bitwise `bool` operations are 0 or 1,
/// so `n != 0` is the right `bool`).
fn wrap(n: i128, ty: ScalarType) -> Value {
    Value::from_i128_wrapping(n, ty)
}

fn float(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn int(v: &Value) -> i128 {
    match *v {
        Value::F32(x) => x as i128,
        Value::F64(x) => x as i128,
        _ => v.as_i128().unwrap_or(0),
    }
}

fn make_float(x: f64, ty: ScalarType) -> Value {
    if ty == ScalarType::F32 {
        Value::F32(x as f32)
    } else {
        Value::F64(x)
    }
}

/// Floating-point type a unary math function returns for an argument type.
fn math_type(t: ScalarType) -> ScalarType {
    if t == ScalarType::F32 {
        ScalarType::F32
    } else {
        ScalarType::F64
    }
}

impl Op {
    /// Evaluates the operator on argument values.
    pub fn eval(&self, args: &[Value]) -> Result<Value> {
        self.check_arity(args.len())?;
        // `missing` propagates through every operator but `coalesce`, which skips it, and
        // `ifelse`, whose value is the branch its condition chooses (as Julia's): a
        // `missing` in the other branch does not count.
        let propagates = match self {
            Op::Coalesce => false,
            Op::IfElse => args[0].is_missing(),
            _ => args.iter().any(Value::is_missing),
        };
        if propagates {
            return Ok(Value::Missing);
        }
        match self {
            Op::Add | Op::Mul | Op::Min | Op::Max | Op::BitAnd | Op::BitOr | Op::Xor => {
                if args.len() == 1 {
                    return match self {
                        Op::Add | Op::Mul => {
                            let t = arith_type(ty_of(&args[0]), ty_of(&args[0]));
                            Ok(to(&args[0], t))
                        }
                        Op::BitAnd | Op::BitOr | Op::Xor => {
                            self.binary(&args[0], &args[0]).map(|_| args[0])
                        }
                        _ => Ok(args[0]),
                    };
                }
                let mut acc = args[0];
                for a in &args[1..] {
                    acc = self.binary(&acc, a)?;
                }
                Ok(acc)
            }
            Op::And | Op::Or => {
                let mut acc = None;
                for a in args {
                    let b = a.as_bool().ok_or_else(|| {
                        Error::Eval(format!("`{}` needs bool operands, got {a}", self.symbol()))
                    })?;
                    acc = Some(match (acc, self) {
                        (None, _) => b,
                        (Some(x), Op::And) => x && b,
                        (Some(x), _) => x || b,
                    });
                }
                Ok(Value::Bool(acc.unwrap_or(*self == Op::And)))
            }
            Op::Sub if args.len() == 1 => Op::Neg.eval(args),
            Op::Neg => {
                let t = arith_type(ty_of(&args[0]), ty_of(&args[0]));
                let x = to(&args[0], t);
                Ok(if t.is_float() {
                    make_float(-float(&x), t)
                } else {
                    wrap(-int(&x), t)
                })
            }
            Op::Not => match args[0] {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                Value::F32(_) | Value::F64(_) => {
                    err(format!("`!` needs a bool or integer, got {}", args[0]))
                }
                v => Ok(wrap(!int(&v), ty_of(&v))),
            },
            Op::Abs => {
                let t = arith_type(ty_of(&args[0]), ty_of(&args[0]));
                let x = to(&args[0], t);
                Ok(if t.is_float() {
                    make_float(float(&x).abs(), t)
                } else {
                    wrap(int(&x).abs(), t)
                })
            }
            Op::Sqrt | Op::Exp | Op::Log | Op::Sin | Op::Cos => {
                let t = math_type(ty_of(&args[0]));
                let x = float(&args[0]);
                let y = match self {
                    Op::Sqrt if x < 0.0 => {
                        return err(format!("sqrt of negative number {}", args[0]))
                    }
                    Op::Log if x < 0.0 => {
                        return err(format!("log of negative number {}", args[0]))
                    }
                    Op::Sqrt => x.sqrt(),
                    Op::Exp => x.exp(),
                    Op::Log => x.ln(),
                    Op::Sin => x.sin(),
                    _ => x.cos(),
                };
                Ok(make_float(y, t))
            }
            Op::IfElse => match args[0] {
                Value::Bool(c) => Ok(if c { args[1] } else { args[2] }),
                v => err(format!("`ifelse` needs a bool condition, got {v}")),
            },
            Op::Coalesce => Ok(args
                .iter()
                .copied()
                .find(|v| !v.is_missing())
                .unwrap_or(Value::Missing)),
            Op::Choose(z) => Ok(if args[0].num_eq(z) { args[1] } else { args[0] }),
            Op::Overwrite => Ok(args[1]),
            Op::Cast(t) => Ok(args[0].convert_wrapping(*t).unwrap_or(Value::Missing)),
            _ => self.binary(&args[0], &args[1]),
        }
    }

    fn check_arity(&self, n: usize) -> Result<()> {
        let ok = match self.arity() {
            None => n >= 1,
            Some(k) => n == k || (*self == Op::Sub && n == 1),
        };
        if ok {
            Ok(())
        } else {
            let expected = match self.arity() {
                None => "at least 1".to_string(),
                Some(k) => k.to_string(),
            };
            err(format!(
                "`{self}` takes {expected} argument{}, got {n}",
                if expected == "1" { "" } else { "s" }
            ))
        }
    }

    /// A binary operation on two non-missing values.
    fn binary(&self, a: &Value, b: &Value) -> Result<Value> {
        let (ta, tb) = (ty_of(a), ty_of(b));
        match self {
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => Ok(self.compare(a, b)),
            Op::Min | Op::Max => Ok(self.min_max(a, b)),
            Op::BitAnd | Op::BitOr | Op::Xor | Op::Shl | Op::Shr => self.bitwise(a, b),
            Op::Div => {
                let t = match promote(ta, tb) {
                    ScalarType::F32 => ScalarType::F32,
                    _ => ScalarType::F64,
                };
                Ok(make_float(float(a) / float(b), t))
            }
            Op::Pow => power(a, b),
            Op::Add | Op::Sub | Op::Mul => Ok(self.add_sub_mul(a, b)),
            Op::Rem | Op::RemFn | Op::Mod | Op::IntDiv | Op::Fld => {
                self.quotient_or_remainder(a, b)
            }
            _ => err(format!("`{self}` is not a binary operator")),
        }
    }

    /// `==`, `!=`, `<`, `<=`, `>`, `>=` in the promoted type (a NaN compares unequal to
    /// everything, itself included).
    fn compare(&self, a: &Value, b: &Value) -> Value {
        let t = promote(ty_of(a), ty_of(b));
        let (x, y) = (to(a, t), to(b, t));
        let ord = if t.is_float() {
            float(&x).partial_cmp(&float(&y))
        } else {
            Some(int(&x).cmp(&int(&y)))
        };
        use std::cmp::Ordering::*;
        let r = match (self, ord) {
            (Op::Ne, None) => true,
            (_, None) => false,
            (Op::Eq, Some(o)) => o == Equal,
            (Op::Ne, Some(o)) => o != Equal,
            (Op::Lt, Some(o)) => o == Less,
            (Op::Le, Some(o)) => o != Greater,
            (Op::Gt, Some(o)) => o == Greater,
            (_, Some(o)) => o != Less,
        };
        Value::Bool(r)
    }

    /// `min` or `max` in the promoted type; a NaN operand is the result.
    fn min_max(&self, a: &Value, b: &Value) -> Value {
        let t = promote(ty_of(a), ty_of(b));
        let (x, y) = (to(a, t), to(b, t));
        if t.is_float() {
            let (fx, fy) = (float(&x), float(&y));
            if fx.is_nan() {
                return x;
            }
            if fy.is_nan() {
                return y;
            }
            let pick_x = if *self == Op::Min { fx <= fy } else { fx >= fy };
            if pick_x {
                x
            } else {
                y
            }
        } else {
            let pick_x = if *self == Op::Min {
                int(&x) <= int(&y)
            } else {
                int(&x) >= int(&y)
            };
            if pick_x {
                x
            } else {
                y
            }
        }
    }

    /// `&`, `|`, `xor`, `<<`, `>>`: integer or `bool` operands only.
    fn bitwise(&self, a: &Value, b: &Value) -> Result<Value> {
        let (ta, tb) = (ty_of(a), ty_of(b));
        if ta.is_float() || tb.is_float() {
            return err(format!(
                "`{}` needs integer or bool operands, got {a} and {b}",
                self.symbol()
            ));
        }
        if matches!(self, Op::Shl | Op::Shr) {
            return Ok(self.shift(a, b));
        }
        let t = promote(ta, tb);
        let (x, y) = (int(&to(a, t)), int(&to(b, t)));
        let r = match self {
            Op::BitAnd => x & y,
            Op::BitOr => x | y,
            _ => x ^ y,
        };
        Ok(wrap(r, t))
    }

    /// `a << b` or `a >> b` in `a`'s type (`i64` for `bool`): a negative shift goes the
    /// other way, and shifting past the width gives 0 (or -1, right, for a negative `a`).
    fn shift(&self, a: &Value, b: &Value) -> Value {
        let ta = ty_of(a);
        let t = if ta == ScalarType::Bool {
            ScalarType::I64
        } else {
            ta
        };
        let x = int(&to(a, t));
        let s = int(b);
        let bits = t.bits() as i128;
        let (left, s) = match (self, s < 0) {
            (Op::Shl, false) => (true, s),
            (Op::Shl, true) => (false, -s),
            (_, false) => (false, s),
            (_, true) => (true, -s),
        };
        let r = if left {
            if s >= bits {
                0
            } else {
                x << s
            }
        } else if s >= bits {
            if x < 0 {
                -1
            } else {
                0
            }
        } else {
            x >> s
        };
        wrap(r, t)
    }

    /// `+`, `-`, `*`: wrapping for integers, in `f32` rounding for `f32`.
    fn add_sub_mul(&self, a: &Value, b: &Value) -> Value {
        let t = arith_type(ty_of(a), ty_of(b));
        let (x, y) = (to(a, t), to(b, t));
        if t.is_float() {
            let (fx, fy) = (float(&x), float(&y));
            let r = match self {
                Op::Add => fx + fy,
                Op::Sub => fx - fy,
                _ => fx * fy,
            };
            if t == ScalarType::F32 {
                // Compute in f32 to match f32 rounding exactly.
                let (gx, gy) = (fx as f32, fy as f32);
                Value::F32(match self {
                    Op::Add => gx + gy,
                    Op::Sub => gx - gy,
                    _ => gx * gy,
                })
            } else {
                Value::F64(r)
            }
        } else {
            let (ix, iy) = (int(&x), int(&y));
            wrap(
                match self {
                    Op::Add => ix.wrapping_add(iy),
                    Op::Sub => ix.wrapping_sub(iy),
                    _ => ix.wrapping_mul(iy),
                },
                t,
            )
        }
    }

    /// `rem`, `%`, `mod`, `div` (truncated) and `fld` (floored); an integer division by
    /// zero is an error.
    fn quotient_or_remainder(&self, a: &Value, b: &Value) -> Result<Value> {
        let t = arith_type(ty_of(a), ty_of(b));
        let (x, y) = (to(a, t), to(b, t));
        if t.is_float() {
            let (fx, fy) = (float(&x), float(&y));
            let r = match self {
                Op::Rem | Op::RemFn => fx % fy,
                Op::Mod => {
                    let r = fx % fy;
                    if r != 0.0 && (r < 0.0) != (fy < 0.0) {
                        r + fy
                    } else {
                        r
                    }
                }
                Op::IntDiv => (fx / fy).trunc(),
                _ => (fx / fy).floor(),
            };
            return Ok(make_float(r, t));
        }
        let (ix, iy) = (int(&x), int(&y));
        if iy == 0 {
            return err(format!(
                "integer division by zero in `{}` ({a}, {b})",
                self.symbol()
            ));
        }
        let q = ix / iy; // i128: no overflow for 64-bit operands
        let r = ix % iy;
        let v = match self {
            Op::Rem | Op::RemFn => r,
            Op::Mod => {
                if r != 0 && (r < 0) != (iy < 0) {
                    r + iy
                } else {
                    r
                }
            }
            Op::IntDiv => q,
            _ => {
                if r != 0 && (r < 0) != (iy < 0) {
                    q - 1
                } else {
                    q
                }
            }
        };
        Ok(wrap(v, t))
    }
}

/// `a ^ b`: a float power where either is a float (in `a`'s float type if `a` is one),
/// else by squaring with wrapping in `a`'s integer type; a negative exponent is an error
/// except for a base of 1 or -1.
fn power(a: &Value, b: &Value) -> Result<Value> {
    let (ta, tb) = (ty_of(a), ty_of(b));
    let t = arith_type(ta, tb);
    if t.is_float() {
        let rt = if ta.is_float() { arith_type(ta, ta) } else { t };
        return Ok(make_float(float(a).powf(float(b)), rt));
    }
    let t = arith_type(ta, ta);
    let base = int(&to(a, t));
    let e = int(b);
    if e < 0 {
        return match base {
            1 => Ok(wrap(1, t)),
            -1 => Ok(wrap(if e % 2 == 0 { 1 } else { -1 }, t)),
            _ => err(format!(
                "integer power {a} ^ {b} with a negative exponent (use a float base)"
            )),
        };
    }
    // Power by squaring with wrapping in the target width.
    let mut result = wrap(1, t);
    let mut sq = wrap(base, t);
    let mut e = e;
    while e > 0 {
        if e & 1 == 1 {
            result = wrap(int(&result).wrapping_mul(int(&sq)), t);
        }
        sq = wrap(int(&sq).wrapping_mul(int(&sq)), t);
        e >>= 1;
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Value::*;

    fn ev(op: Op, args: &[Value]) -> Value {
        op.eval(args).unwrap()
    }

    #[test]
    fn promotion_follows_julia() {
        use ScalarType as T;
        assert_eq!(promote(T::F32, T::I64), T::F32);
        assert_eq!(promote(T::F32, T::F64), T::F64);
        assert_eq!(promote(T::I32, T::I64), T::I64);
        assert_eq!(promote(T::U8, T::I64), T::I64);
        assert_eq!(promote(T::U64, T::I64), T::U64);
        assert_eq!(promote(T::Bool, T::U8), T::U8);
        assert_eq!(ev(Op::Add, &[Bool(true), Bool(true)]), I64(2));
        assert_eq!(ev(Op::Add, &[I64(1), F64(0.5)]), F64(1.5));
        assert_eq!(ev(Op::Mul, &[U8(200), U8(2)]), U8(144)); // wraps
    }

    #[test]
    fn arithmetic_and_division() {
        assert_eq!(ev(Op::Div, &[I64(7), I64(2)]), F64(3.5));
        assert_eq!(ev(Op::IntDiv, &[I64(-7), I64(2)]), I64(-3));
        assert_eq!(ev(Op::Fld, &[I64(-7), I64(2)]), I64(-4));
        assert_eq!(ev(Op::Rem, &[I64(-7), I64(2)]), I64(-1));
        assert_eq!(ev(Op::Mod, &[I64(-7), I64(2)]), I64(1));
        assert_eq!(ev(Op::Mod, &[F64(-7.0), F64(2.0)]), F64(1.0));
        assert!(Op::IntDiv.eval(&[I64(1), I64(0)]).is_err());
        assert!(Op::Rem.eval(&[U8(1), U8(0)]).is_err());
        assert_eq!(ev(Op::Pow, &[I64(3), I64(4)]), I64(81));
        assert_eq!(ev(Op::Pow, &[F64(2.0), I64(-1)]), F64(0.5));
        assert!(Op::Pow.eval(&[I64(2), I64(-1)]).is_err());
        assert_eq!(ev(Op::Sub, &[I64(5)]), I64(-5));
        assert_eq!(ev(Op::Neg, &[U8(1)]), U8(255));
        assert_eq!(ev(Op::Abs, &[I64(-3)]), I64(3));
    }

    #[test]
    fn bitwise_and_shifts() {
        assert_eq!(ev(Op::BitAnd, &[I64(6), I64(3)]), I64(2));
        assert_eq!(ev(Op::BitOr, &[Bool(false), Bool(true)]), Bool(true));
        assert_eq!(ev(Op::Xor, &[U8(0xff), U8(0x0f)]), U8(0xf0));
        assert_eq!(ev(Op::Not, &[U64(0)]), U64(u64::MAX));
        assert_eq!(ev(Op::Not, &[Bool(true)]), Bool(false));
        assert_eq!(ev(Op::Shl, &[U64(1), I64(63)]), U64(1 << 63));
        assert_eq!(ev(Op::Shl, &[U64(1), I64(64)]), U64(0));
        assert_eq!(ev(Op::Shr, &[U64(u64::MAX), I64(63)]), U64(1));
        assert_eq!(ev(Op::Shr, &[I64(-8), I64(100)]), I64(-1));
        assert!(Op::BitAnd.eval(&[F64(1.0), I64(1)]).is_err());
    }

    #[test]
    fn comparisons_logic_and_min_max() {
        assert_eq!(ev(Op::Le, &[I64(1), F64(1.0)]), Bool(true));
        assert_eq!(ev(Op::Eq, &[F64(f64::NAN), F64(f64::NAN)]), Bool(false));
        assert_eq!(ev(Op::Ne, &[F64(f64::NAN), F64(f64::NAN)]), Bool(true));
        assert_eq!(ev(Op::Lt, &[U64(u64::MAX), I64(-1)]), Bool(false));
        assert_eq!(ev(Op::And, &[Bool(true), Bool(false)]), Bool(false));
        assert!(Op::And.eval(&[Bool(true), I64(1)]).is_err());
        assert_eq!(ev(Op::Min, &[F64(2.0), I64(1)]), F64(1.0));
        assert_eq!(ev(Op::Max, &[I64(2), I64(5), I64(3)]), I64(5));
        assert!(ev(Op::Min, &[F64(f64::NAN), F64(1.0)])
            .as_f64()
            .unwrap()
            .is_nan());
    }

    #[test]
    fn math_functions() {
        assert_eq!(ev(Op::Sqrt, &[I64(4)]), F64(2.0));
        assert_eq!(ev(Op::Sqrt, &[F32(4.0)]), F32(2.0));
        assert!(Op::Sqrt.eval(&[F64(-1.0)]).is_err());
        assert!(Op::Log.eval(&[I64(-1)]).is_err());
        assert_eq!(ev(Op::Exp, &[F64(0.0)]), F64(1.0));
        assert_eq!(ev(Op::Cast(ScalarType::U8), &[I64(300)]), U8(44));
    }

    #[test]
    fn missing_propagates_except_coalesce_and_the_branch_not_taken() {
        assert_eq!(ev(Op::Add, &[Missing, I64(1)]), Missing);
        assert_eq!(ev(Op::Lt, &[Missing, I64(1)]), Missing);
        assert_eq!(ev(Op::IfElse, &[Missing, I64(1), I64(2)]), Missing);
        assert_eq!(ev(Op::IfElse, &[Bool(true), I64(1), Missing]), I64(1));
        assert_eq!(ev(Op::IfElse, &[Bool(true), Missing, I64(2)]), Missing);
        assert_eq!(ev(Op::Coalesce, &[Missing, I64(1)]), I64(1));
        assert_eq!(ev(Op::Coalesce, &[Missing, Missing]), Missing);
        assert_eq!(ev(Op::Coalesce, &[Bool(true), Missing]), Bool(true));
    }

    #[test]
    fn choose_overwrite_ifelse() {
        let c = Op::Choose(I64(0));
        assert_eq!(ev(c, &[I64(0), I64(5)]), I64(5));
        assert_eq!(ev(c, &[I64(3), I64(5)]), I64(3));
        assert_eq!(ev(Op::Overwrite, &[I64(3), I64(5)]), I64(5));
        assert_eq!(ev(Op::IfElse, &[Bool(false), I64(1), I64(2)]), I64(2));
        assert!(Op::IfElse.eval(&[I64(1), I64(1), I64(2)]).is_err());
    }

    #[test]
    fn arity_errors_name_the_operator() {
        let e = Op::IfElse.eval(&[Bool(true)]).unwrap_err().to_string();
        assert!(e.contains("ifelse") && e.contains('3'), "{e}");
        assert!(Op::Add.eval(&[]).is_err());
        assert!(Op::Lt.eval(&[I64(1)]).is_err());
    }
}
