//! Scalar element types and dynamically typed scalar values.
//!
//! `ScalarType` is the element type of a tensor (`f64 f32 i64 i32 i16 i8 u64 u32 u16 u8
//! bool`). `Value` is one scalar of any of those types, or `missing` (the value an
//! out-of-bounds permissive read produces, Finch paper §5.2).
//!
//! Literal text: `f64` prints as `1.0`, `i64` as `1`, `bool` as `true`; every other type
//! carries its suffix (`1.5f32`, `7u8`, `-3i16`), so that printing and parsing a value is
//! the identity. `missing` prints as `missing`; the float specials print as `Inf`, `-Inf`
//! and `NaN` (with a suffix for `f32`).

use std::fmt;

/// The element type of a tensor or scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    /// `bool`
    Bool,
    /// `u8`
    U8,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// `i8`
    I8,
    /// `i16`
    I16,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl ScalarType {
    /// Every scalar type, in a fixed order.
    pub const ALL: [ScalarType; 11] = [
        ScalarType::F64,
        ScalarType::F32,
        ScalarType::I64,
        ScalarType::I32,
        ScalarType::I16,
        ScalarType::I8,
        ScalarType::U64,
        ScalarType::U32,
        ScalarType::U16,
        ScalarType::U8,
        ScalarType::Bool,
    ];

    /// The type's name as written in programs and format strings (`f64`, `u8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::U8 => "u8",
            ScalarType::U16 => "u16",
            ScalarType::U32 => "u32",
            ScalarType::U64 => "u64",
            ScalarType::I8 => "i8",
            ScalarType::I16 => "i16",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
        }
    }

    /// Parses a type name (`"f64"`, `"u8"`, `"bool"`, ...).
    pub fn from_name(name: &str) -> Option<ScalarType> {
        ScalarType::ALL.iter().copied().find(|t| t.name() == name)
    }

    /// True for `f32` and `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F32 | ScalarType::F64)
    }

    /// True for the signed and unsigned integer types (not `bool`).
    pub fn is_integer(self) -> bool {
        !self.is_float() && self != ScalarType::Bool
    }

    /// True for the signed integer types.
    pub fn is_signed_integer(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64
        )
    }

    /// Width in bits (`bool` counts as 8, its storage size).
    pub fn bits(self) -> u32 {
        match self {
            ScalarType::Bool | ScalarType::U8 | ScalarType::I8 => 8,
            ScalarType::U16 | ScalarType::I16 => 16,
            ScalarType::U32 | ScalarType::I32 | ScalarType::F32 => 32,
            ScalarType::U64 | ScalarType::I64 | ScalarType::F64 => 64,
        }
    }

    /// The zero of this type (`false` for `bool`).
    pub fn zero(self) -> Value {
        Value::zero_of(self)
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One scalar value of any element type, or `missing`.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    /// `missing`: the result of an out-of-bounds permissive read.
    Missing,
    /// A `bool`.
    Bool(bool),
    /// A `u8`.
    U8(u8),
    /// A `u16`.
    U16(u16),
    /// A `u32`.
    U32(u32),
    /// A `u64`.
    U64(u64),
    /// An `i8`.
    I8(i8),
    /// An `i16`.
    I16(i16),
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// An `f32`.
    F32(f32),
    /// An `f64`.
    F64(f64),
}

impl Value {
    /// The zero of a type (`false` for `bool`).
    pub fn zero_of(ty: ScalarType) -> Value {
        match ty {
            ScalarType::Bool => Value::Bool(false),
            ScalarType::U8 => Value::U8(0),
            ScalarType::U16 => Value::U16(0),
            ScalarType::U32 => Value::U32(0),
            ScalarType::U64 => Value::U64(0),
            ScalarType::I8 => Value::I8(0),
            ScalarType::I16 => Value::I16(0),
            ScalarType::I32 => Value::I32(0),
            ScalarType::I64 => Value::I64(0),
            ScalarType::F32 => Value::F32(0.0),
            ScalarType::F64 => Value::F64(0.0),
        }
    }

    /// The one of a type (`true` for `bool`).
    pub fn one_of(ty: ScalarType) -> Value {
        match ty {
            ScalarType::Bool => Value::Bool(true),
            ScalarType::U8 => Value::U8(1),
            ScalarType::U16 => Value::U16(1),
            ScalarType::U32 => Value::U32(1),
            ScalarType::U64 => Value::U64(1),
            ScalarType::I8 => Value::I8(1),
            ScalarType::I16 => Value::I16(1),
            ScalarType::I32 => Value::I32(1),
            ScalarType::I64 => Value::I64(1),
            ScalarType::F32 => Value::F32(1.0),
            ScalarType::F64 => Value::F64(1.0),
        }
    }

    /// The value's type, or `None` for `missing`.
    pub fn scalar_type(&self) -> Option<ScalarType> {
        Some(match self {
            Value::Missing => return None,
            Value::Bool(_) => ScalarType::Bool,
            Value::U8(_) => ScalarType::U8,
            Value::U16(_) => ScalarType::U16,
            Value::U32(_) => ScalarType::U32,
            Value::U64(_) => ScalarType::U64,
            Value::I8(_) => ScalarType::I8,
            Value::I16(_) => ScalarType::I16,
            Value::I32(_) => ScalarType::I32,
            Value::I64(_) => ScalarType::I64,
            Value::F32(_) => ScalarType::F32,
            Value::F64(_) => ScalarType::F64,
        })
    }

    /// True for `missing`.
    pub fn is_missing(&self) -> bool {
        matches!(self, Value::Missing)
    }

    /// The value as `f64` (`bool` as 0/1); `None` for `missing`.
    pub fn as_f64(&self) -> Option<f64> {
        Some(match *self {
            Value::Missing => return None,
            Value::Bool(b) => b as u8 as f64,
            Value::U8(x) => x as f64,
            Value::U16(x) => x as f64,
            Value::U32(x) => x as f64,
            Value::U64(x) => x as f64,
            Value::I8(x) => x as f64,
            Value::I16(x) => x as f64,
            Value::I32(x) => x as f64,
            Value::I64(x) => x as f64,
            Value::F32(x) => x as f64,
            Value::F64(x) => x,
        })
    }

    /// The value as `i128` if it is an integer or `bool`, or a float with an integral value.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::Missing => return None,
            Value::Bool(b) => b as i128,
            Value::U8(x) => x as i128,
            Value::U16(x) => x as i128,
            Value::U32(x) => x as i128,
            Value::U64(x) => x as i128,
            Value::I8(x) => x as i128,
            Value::I16(x) => x as i128,
            Value::I32(x) => x as i128,
            Value::I64(x) => x as i128,
            Value::F32(x) => return float_to_i128(x as f64),
            Value::F64(x) => return float_to_i128(x),
        })
    }

    /// The value as `bool` if it is a `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// Is this the zero of its type (`false`, `0`, `0.0` or `-0.0`)?
    pub fn is_zero(&self) -> bool {
        match self.scalar_type() {
            None => false,
            Some(ty) => self.same(&Value::zero_of(ty)) || self.as_f64() == Some(0.0),
        }
    }

    /// Exact identity: same type and same bits, except that every NaN equals every NaN of
    /// the same type and `0.0 == -0.0`. This is the equality used for fill values and
    /// tensor comparison in tests (a NaN fill must equal itself).
    pub fn same(&self, other: &Value) -> bool {
        match (*self, *other) {
            (Value::Missing, Value::Missing) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::U8(a), Value::U8(b)) => a == b,
            (Value::U16(a), Value::U16(b)) => a == b,
            (Value::U32(a), Value::U32(b)) => a == b,
            (Value::U64(a), Value::U64(b)) => a == b,
            (Value::I8(a), Value::I8(b)) => a == b,
            (Value::I16(a), Value::I16(b)) => a == b,
            (Value::I32(a), Value::I32(b)) => a == b,
            (Value::I64(a), Value::I64(b)) => a == b,
            (Value::F32(a), Value::F32(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Value::F64(a), Value::F64(b)) => a == b || (a.is_nan() && b.is_nan()),
            _ => false,
        }
    }

    /// Numeric equality across types (`1 == 1.0` is true, `NaN` equals nothing,
    /// `missing` equals nothing). This is the language's `==` once both sides are promoted.
    pub fn num_eq(&self, other: &Value) -> bool {
        match (self.as_i128(), other.as_i128()) {
            (Some(a), Some(b)) if !self.is_float_value() && !other.is_float_value() => a == b,
            _ => match (self.as_f64(), other.as_f64()) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            },
        }
    }

    fn is_float_value(&self) -> bool {
        matches!(self, Value::F32(_) | Value::F64(_))
    }

    /// Converts to `ty` exactly: integers must fit, floats converted to integers must be
    /// integral and in range, and `f64 -> f32` may round (as Julia's `convert` does).
    /// Returns `None` when the conversion is inexact, or for `missing`.
    pub fn convert_exact(&self, ty: ScalarType) -> Option<Value> {
        if self.is_missing() {
            return None;
        }
        if ty.is_float() {
            let x = self.as_f64()?;
            // u64/i64 -> f64 may round, as in Julia; that is allowed.
            return Some(match ty {
                ScalarType::F32 => Value::F32(x as f32),
                _ => Value::F64(x),
            });
        }
        let n = self.as_i128()?;
        Value::from_i128(n, ty)
    }

    /// Converts with C-like wrapping/truncating semantics (used by explicit casts such as
    /// `u8(x)`): floats truncate toward zero and saturate, integers wrap. `None` only for
    /// `missing`.
    pub fn convert_wrapping(&self, ty: ScalarType) -> Option<Value> {
        if self.is_missing() {
            return None;
        }
        if let Some(v) = self.convert_exact(ty) {
            return Some(v);
        }
        let n: i128 = match *self {
            Value::F32(x) => x as i128,
            Value::F64(x) => x as i128,
            _ => self.as_i128()?,
        };
        Some(Value::from_i128_wrapping(n, ty))
    }

    /// `n` as type `ty` with C-like wrapping (`bool` is `n != 0`).
    pub fn from_i128_wrapping(n: i128, ty: ScalarType) -> Value {
        match ty {
            ScalarType::Bool => Value::Bool(n != 0),
            ScalarType::U8 => Value::U8(n as u8),
            ScalarType::U16 => Value::U16(n as u16),
            ScalarType::U32 => Value::U32(n as u32),
            ScalarType::U64 => Value::U64(n as u64),
            ScalarType::I8 => Value::I8(n as i8),
            ScalarType::I16 => Value::I16(n as i16),
            ScalarType::I32 => Value::I32(n as i32),
            ScalarType::I64 => Value::I64(n as i64),
            ScalarType::F32 => Value::F32(n as f32),
            ScalarType::F64 => Value::F64(n as f64),
        }
    }

    /// An integer of type `ty` if `n` fits in it (`bool` accepts only 0 and 1).
    pub fn from_i128(n: i128, ty: ScalarType) -> Option<Value> {
        Some(match ty {
            ScalarType::Bool => match n {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return None,
            },
            ScalarType::U8 => Value::U8(u8::try_from(n).ok()?),
            ScalarType::U16 => Value::U16(u16::try_from(n).ok()?),
            ScalarType::U32 => Value::U32(u32::try_from(n).ok()?),
            ScalarType::U64 => Value::U64(u64::try_from(n).ok()?),
            ScalarType::I8 => Value::I8(i8::try_from(n).ok()?),
            ScalarType::I16 => Value::I16(i16::try_from(n).ok()?),
            ScalarType::I32 => Value::I32(i32::try_from(n).ok()?),
            ScalarType::I64 => Value::I64(i64::try_from(n).ok()?),
            ScalarType::F32 => Value::F32(n as f32),
            ScalarType::F64 => Value::F64(n as f64),
        })
    }

    /// Parses a literal in the canonical text form (see the module docs): `1.0`, `-2`,
    /// `true`, `missing`, `3u8`, `0.5f32`, `Inf`, `-Inf`, `NaN`, `NaNf32`, and also exponent
    /// forms such as `1e-3`. An unsuffixed integer is `i64`; one with a `.` or exponent is
    /// `f64`. Returns `None` when the text is not a literal or does not fit its type.
    pub fn parse_literal(text: &str) -> Option<Value> {
        let text = text.trim();
        match text {
            "missing" => return Some(Value::Missing),
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
        let (body, suffix) = split_suffix(text);
        let (neg, mag) = match body.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, body),
        };
        if mag.is_empty() {
            return None;
        }
        let special = match mag {
            "Inf" => Some(f64::INFINITY),
            "NaN" => Some(f64::NAN),
            _ => None,
        };
        let is_float_text =
            special.is_some() || mag.contains('.') || mag.contains('e') || mag.contains('E');
        let ty = match suffix {
            Some(s) => ScalarType::from_name(s)?,
            None if is_float_text => ScalarType::F64,
            None => ScalarType::I64,
        };
        if ty == ScalarType::Bool {
            return None;
        }
        if is_float_text {
            if !ty.is_float() {
                return None;
            }
            let x = match special {
                Some(x) => x,
                None => {
                    if !mag
                        .chars()
                        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
                        || !mag.starts_with(|c: char| c.is_ascii_digit())
                    {
                        return None;
                    }
                    mag.parse::<f64>().ok()?
                }
            };
            let x = if neg { -x } else { x };
            return Some(if ty == ScalarType::F32 {
                Value::F32(x as f32)
            } else {
                Value::F64(x)
            });
        }
        if !mag.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let n: i128 = mag.parse().ok()?;
        let n = if neg { -n } else { n };
        Value::from_i128(n, ty)
    }
}

fn float_to_i128(x: f64) -> Option<i128> {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1.7e38 {
        Some(x as i128)
    } else {
        None
    }
}

/// Splits a type suffix (`f32`, `u8`, ...) off a literal's text.
fn split_suffix(text: &str) -> (&str, Option<&str>) {
    for ty in ScalarType::ALL {
        let name = ty.name();
        if ty != ScalarType::Bool && text.len() > name.len() && text.ends_with(name) {
            let body = &text[..text.len() - name.len()];
            // `1e32` is not `1` with suffix `e32`; a suffix follows a digit, `.`, `Inf` or `NaN`.
            if body.ends_with(|c: char| c.is_ascii_digit() || c == '.' || c == 'f' || c == 'N') {
                return (body, Some(name));
            }
        }
    }
    (text, None)
}

fn fmt_float(f: &mut fmt::Formatter<'_>, x: f64, suffix: &str) -> fmt::Result {
    if x.is_nan() {
        write!(f, "NaN{suffix}")
    } else if x.is_infinite() {
        write!(f, "{}Inf{suffix}", if x < 0.0 { "-" } else { "" })
    } else {
        // `{:?}` prints the shortest text that parses back to the same float and always
        // includes a `.` or an exponent, so an f64 never reads back as an integer.
        write!(f, "{x:?}{suffix}")
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Missing => f.write_str("missing"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::U8(x) => write!(f, "{x}u8"),
            Value::U16(x) => write!(f, "{x}u16"),
            Value::U32(x) => write!(f, "{x}u32"),
            Value::U64(x) => write!(f, "{x}u64"),
            Value::I8(x) => write!(f, "{x}i8"),
            Value::I16(x) => write!(f, "{x}i16"),
            Value::I32(x) => write!(f, "{x}i32"),
            Value::I64(x) => write!(f, "{x}"),
            Value::F32(x) => {
                if x.is_finite() {
                    write!(f, "{x:?}f32")
                } else {
                    fmt_float(f, x as f64, "f32")
                }
            }
            Value::F64(x) => fmt_float(f, x, ""),
        }
    }
}

/// `PartialEq` is [`Value::same`]: exact identity with NaN equal to NaN.
/// A Rust type that a tensor's values convert to exactly: the element types
/// (`f64`, `f32`, `i64`, ..., `u8`, `bool`). A value of another type does not convert.
pub trait NativeScalar: Sized {
    /// The element type.
    const TYPE: ScalarType;
    /// The value as this type, if it has this type.
    fn from_value(v: Value) -> Option<Self>;
}

macro_rules! native_scalar {
    ($($t:ty => $variant:ident),*) => {$(
        impl NativeScalar for $t {
            const TYPE: ScalarType = ScalarType::$variant;
            fn from_value(v: Value) -> Option<$t> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}

native_scalar!(f64 => F64, f32 => F32, i64 => I64, i32 => I32, i16 => I16, i8 => I8,
    u64 => U64, u32 => U32, u16 => U16, u8 => U8, bool => Bool);

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.same(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_text_round_trips() {
        let vals = [
            Value::Missing,
            Value::Bool(true),
            Value::F64(0.0),
            Value::F64(-1.5),
            Value::F64(1e-300),
            Value::F64(f64::INFINITY),
            Value::F64(f64::NEG_INFINITY),
            Value::F64(f64::NAN),
            Value::F32(0.1),
            Value::F32(f32::NEG_INFINITY),
            Value::I64(-42),
            Value::I64(i64::MIN),
            Value::U64(u64::MAX),
            Value::U8(255),
            Value::I8(-128),
            Value::I32(7),
        ];
        for v in vals {
            let text = v.to_string();
            let back = Value::parse_literal(&text);
            assert_eq!(back, Some(v), "{text}");
        }
    }

    #[test]
    fn literal_rejects_overflow_and_junk() {
        assert_eq!(Value::parse_literal("256u8"), None);
        assert_eq!(Value::parse_literal("-1u32"), None);
        assert_eq!(Value::parse_literal("1.5i64"), None);
        assert_eq!(Value::parse_literal("abc"), None);
        assert_eq!(Value::parse_literal("-"), None);
        assert_eq!(Value::parse_literal("1e3"), Some(Value::F64(1000.0)));
        assert_eq!(Value::parse_literal("0.0f32"), Some(Value::F32(0.0)));
    }

    #[test]
    fn exact_conversion() {
        assert_eq!(
            Value::F64(2.0).convert_exact(ScalarType::I64),
            Some(Value::I64(2))
        );
        assert_eq!(Value::F64(2.5).convert_exact(ScalarType::I64), None);
        assert_eq!(Value::I64(300).convert_exact(ScalarType::U8), None);
        assert_eq!(
            Value::I64(300).convert_wrapping(ScalarType::U8),
            Some(Value::U8(44))
        );
        assert_eq!(
            Value::Bool(true).convert_exact(ScalarType::F64),
            Some(Value::F64(1.0))
        );
    }
}
