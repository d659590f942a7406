//! Type promotion of the array layer: the array API standard's rules, with NumPy's
//! answers where the standard leaves a combination unspecified.
//!
//! * `bool` with `bool` is `bool`; `bool` does not mix with numbers (the standard has no
//!   promotion between kinds; an error names the operands).
//! * Integers of one signedness take the wider type. Mixed signedness takes the signed
//!   type if it is wider than the unsigned one, else the next wider signed type
//!   (`u8, i8 -> i16`, `u32, i32 -> i64`); `u64` with a signed integer has no common type
//!   (an error, as in the standard).
//! * Floats take the wider float.
//! * An integer with a float (unspecified by the standard) takes the float if it holds
//!   every value of the integer type exactly (`i16, f32 -> f32`), else `f64`, as NumPy.
//!
//! The language promotes as Julia does (`u8 + i8` is `u8`), so the program generator casts
//! every operand to the type computed here before the operator sees it.

use crate::algebra::ScalarType;

/// The array-API result type of two element types, `None` when they have no common type
/// (`bool` with a number, `u64` with a signed integer).
pub fn result_type(a: ScalarType, b: ScalarType) -> Option<ScalarType> {
    use ScalarType::*;
    if a == b {
        return Some(a);
    }
    if a == Bool || b == Bool {
        return None;
    }
    match (a.is_float(), b.is_float()) {
        (true, true) => Some(if a.bits() >= b.bits() { a } else { b }),
        (true, false) => Some(float_holding(a, b)),
        (false, true) => Some(float_holding(b, a)),
        (false, false) => {
            let (sa, sb) = (a.is_signed_integer(), b.is_signed_integer());
            if sa == sb {
                return Some(if a.bits() >= b.bits() { a } else { b });
            }
            let (signed, unsigned) = if sa { (a, b) } else { (b, a) };
            if signed.bits() > unsigned.bits() {
                return Some(signed);
            }
            match unsigned.bits() {
                8 => Some(I16),
                16 => Some(I32),
                32 => Some(I64),
                _ => None,
            }
        }
    }
}

/// The float type an integer type meets `float` in: `float` itself when its mantissa
/// holds every integer of `int` (16 bits or fewer for `f32`, 32 or fewer for `f64`),
/// else `f64`.
fn float_holding(float: ScalarType, int: ScalarType) -> ScalarType {
    let mantissa = if float == ScalarType::F32 { 24 } else { 53 };
    if int.bits() < mantissa {
        float
    } else {
        ScalarType::F64
    }
}

/// The common type of several element types, folding [`result_type`] left to right.
pub(crate) fn common_type(types: &[ScalarType]) -> Option<ScalarType> {
    let (&first, rest) = types.split_first()?;
    rest.iter().try_fold(first, |acc, &t| result_type(acc, t))
}

/// The float type a math function (`sqrt`, `exp`, `log`, `/`, `ldexp`) computes in for
/// an argument type: floats keep their type, integers go to `f64`; `None` for `bool`.
pub(crate) fn float_type(t: ScalarType) -> Option<ScalarType> {
    match t {
        ScalarType::Bool => None,
        ScalarType::F32 => Some(ScalarType::F32),
        _ => Some(ScalarType::F64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    #[test]
    fn promotion_follows_the_array_api_table() {
        assert_eq!(result_type(U8, I8), Some(I16));
        assert_eq!(result_type(U16, I8), Some(I32));
        assert_eq!(result_type(U32, I64), Some(I64));
        assert_eq!(result_type(U8, I64), Some(I64));
        assert_eq!(result_type(U64, I64), None);
        assert_eq!(result_type(I32, I8), Some(I32));
        assert_eq!(result_type(F32, F64), Some(F64));
        assert_eq!(result_type(Bool, Bool), Some(Bool));
        assert_eq!(result_type(Bool, I8), None);
        assert_eq!(result_type(I16, F32), Some(F32));
        assert_eq!(result_type(I32, F32), Some(F64));
        assert_eq!(result_type(U64, F64), Some(F64));
    }

    #[test]
    fn promotion_is_commutative_and_idempotent() {
        for a in ScalarType::ALL {
            assert_eq!(result_type(a, a), Some(a));
            for b in ScalarType::ALL {
                assert_eq!(result_type(a, b), result_type(b, a), "{a} {b}");
            }
        }
    }
}
