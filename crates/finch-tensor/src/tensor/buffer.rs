//! `Buffer`: a typed array of element values, the storage of `Element` levels. Typed (not
//! `Vec<Value>`) so that compiled kernels can take a raw pointer of the right C type.

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};

/// A typed vector of values.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum Buffer {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    U64(Vec<u64>),
    U32(Vec<u32>),
    U16(Vec<u16>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// A typed vector moves into a buffer without a copy: `Buffer::from(vec![1.0, 2.0])`.
macro_rules! buffer_from_vec {
    ($($t:ty => $variant:ident),*) => {$(
        impl From<Vec<$t>> for Buffer {
            fn from(v: Vec<$t>) -> Buffer {
                Buffer::$variant(v)
            }
        }
    )*};
}

buffer_from_vec!(f64 => F64, f32 => F32, i64 => I64, i32 => I32, i16 => I16, i8 => I8,
    u64 => U64, u32 => U32, u16 => U16, u8 => U8, bool => Bool);

/// Applies `$body` to the inner vector whatever its type.
macro_rules! each {
    ($buf:expr, $v:ident => $body:expr) => {
        match $buf {
            Buffer::F64($v) => $body,
            Buffer::F32($v) => $body,
            Buffer::I64($v) => $body,
            Buffer::I32($v) => $body,
            Buffer::I16($v) => $body,
            Buffer::I8($v) => $body,
            Buffer::U64($v) => $body,
            Buffer::U32($v) => $body,
            Buffer::U16($v) => $body,
            Buffer::U8($v) => $body,
            Buffer::Bool($v) => $body,
        }
    };
}

impl Buffer {
    /// An empty buffer of a type.
    pub fn new(ty: ScalarType) -> Buffer {
        match ty {
            ScalarType::F64 => Buffer::F64(Vec::new()),
            ScalarType::F32 => Buffer::F32(Vec::new()),
            ScalarType::I64 => Buffer::I64(Vec::new()),
            ScalarType::I32 => Buffer::I32(Vec::new()),
            ScalarType::I16 => Buffer::I16(Vec::new()),
            ScalarType::I8 => Buffer::I8(Vec::new()),
            ScalarType::U64 => Buffer::U64(Vec::new()),
            ScalarType::U32 => Buffer::U32(Vec::new()),
            ScalarType::U16 => Buffer::U16(Vec::new()),
            ScalarType::U8 => Buffer::U8(Vec::new()),
            ScalarType::Bool => Buffer::Bool(Vec::new()),
        }
    }

    /// `n` copies of `v` (which must have type `ty`).
    pub fn filled(ty: ScalarType, n: usize, v: Value) -> Result<Buffer> {
        let mut b = Buffer::new(ty);
        b.resize_filled(n, v)?;
        Ok(b)
    }

    /// Makes the buffer `n` long with every element `v` (of the buffer's type), reusing its
    /// allocation: a dense output handed back for another run is refilled in place rather
    /// than allocated (and page-faulted) again.
    pub fn resize_filled(&mut self, n: usize, x: Value) -> Result<()> {
        macro_rules! refill {
            ($v:expr, $a:expr) => {{
                $v.clear();
                resize_fallibly($v, n, $a)?;
            }};
        }
        match (self, x) {
            (Buffer::F64(v), Value::F64(a)) => refill!(v, a),
            (Buffer::F32(v), Value::F32(a)) => refill!(v, a),
            (Buffer::I64(v), Value::I64(a)) => refill!(v, a),
            (Buffer::I32(v), Value::I32(a)) => refill!(v, a),
            (Buffer::I16(v), Value::I16(a)) => refill!(v, a),
            (Buffer::I8(v), Value::I8(a)) => refill!(v, a),
            (Buffer::U64(v), Value::U64(a)) => refill!(v, a),
            (Buffer::U32(v), Value::U32(a)) => refill!(v, a),
            (Buffer::U16(v), Value::U16(a)) => refill!(v, a),
            (Buffer::U8(v), Value::U8(a)) => refill!(v, a),
            (Buffer::Bool(v), Value::Bool(a)) => refill!(v, a),
            (b, x) => return Err(b.type_error(x)),
        }
        Ok(())
    }

    /// A buffer holding `vals`, all of type `ty`.
    pub fn from_values(ty: ScalarType, vals: &[Value]) -> Result<Buffer> {
        let mut b = Buffer::new(ty);
        b.reserve(vals.len());
        for &v in vals {
            b.push(v)?;
        }
        Ok(b)
    }

    /// The element type.
    pub fn scalar_type(&self) -> ScalarType {
        match self {
            Buffer::F64(_) => ScalarType::F64,
            Buffer::F32(_) => ScalarType::F32,
            Buffer::I64(_) => ScalarType::I64,
            Buffer::I32(_) => ScalarType::I32,
            Buffer::I16(_) => ScalarType::I16,
            Buffer::I8(_) => ScalarType::I8,
            Buffer::U64(_) => ScalarType::U64,
            Buffer::U32(_) => ScalarType::U32,
            Buffer::U16(_) => ScalarType::U16,
            Buffer::U8(_) => ScalarType::U8,
            Buffer::Bool(_) => ScalarType::Bool,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        each!(self, v => v.len())
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shortens the buffer to `n` values (no effect if it is shorter).
    pub fn truncate(&mut self, n: usize) {
        each!(self, v => v.truncate(n))
    }

    /// Reserves room for `n` more values.
    pub fn reserve(&mut self, n: usize) {
        each!(self, v => v.reserve(n))
    }

    /// Room for `n` more elements, or an error when memory cannot hold them (a size
    /// computed from input data is an error, not an aborted process).
    pub fn try_reserve(&mut self, n: usize) -> Result<()> {
        fn reserve<T>(v: &mut Vec<T>, n: usize) -> Result<()> {
            let len = v.len().saturating_add(n);
            super::memory::check(len, std::mem::size_of::<T>(), || "a buffer".into())?;
            v.try_reserve(n)
                .map_err(|_| out_of_memory(len, std::mem::size_of::<T>()))
        }
        each!(self, v => reserve(v, n))
    }

    /// The value at `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Buffer::F64(v) => Value::F64(*v.get(i)?),
            Buffer::F32(v) => Value::F32(*v.get(i)?),
            Buffer::I64(v) => Value::I64(*v.get(i)?),
            Buffer::I32(v) => Value::I32(*v.get(i)?),
            Buffer::I16(v) => Value::I16(*v.get(i)?),
            Buffer::I8(v) => Value::I8(*v.get(i)?),
            Buffer::U64(v) => Value::U64(*v.get(i)?),
            Buffer::U32(v) => Value::U32(*v.get(i)?),
            Buffer::U16(v) => Value::U16(*v.get(i)?),
            Buffer::U8(v) => Value::U8(*v.get(i)?),
            Buffer::Bool(v) => Value::Bool(*v.get(i)?),
        })
    }

    fn type_error(&self, x: Value) -> Error {
        Error::Program(format!(
            "value {x} does not have the buffer's type {}",
            self.scalar_type()
        ))
    }

    /// Appends a value of the buffer's type.
    pub fn push(&mut self, x: Value) -> Result<()> {
        match (self, x) {
            (Buffer::F64(v), Value::F64(a)) => v.push(a),
            (Buffer::F32(v), Value::F32(a)) => v.push(a),
            (Buffer::I64(v), Value::I64(a)) => v.push(a),
            (Buffer::I32(v), Value::I32(a)) => v.push(a),
            (Buffer::I16(v), Value::I16(a)) => v.push(a),
            (Buffer::I8(v), Value::I8(a)) => v.push(a),
            (Buffer::U64(v), Value::U64(a)) => v.push(a),
            (Buffer::U32(v), Value::U32(a)) => v.push(a),
            (Buffer::U16(v), Value::U16(a)) => v.push(a),
            (Buffer::U8(v), Value::U8(a)) => v.push(a),
            (Buffer::Bool(v), Value::Bool(a)) => v.push(a),
            (b, x) => return Err(b.type_error(x)),
        }
        Ok(())
    }

    /// Overwrites the value at `i` (which must exist) with a value of the buffer's type.
    pub fn set(&mut self, i: usize, x: Value) -> Result<()> {
        let len = self.len();
        if i >= len {
            return Err(Error::Program(format!(
                "buffer index {i} out of bounds (length {len})"
            )));
        }
        match (self, x) {
            (Buffer::F64(v), Value::F64(a)) => v[i] = a,
            (Buffer::F32(v), Value::F32(a)) => v[i] = a,
            (Buffer::I64(v), Value::I64(a)) => v[i] = a,
            (Buffer::I32(v), Value::I32(a)) => v[i] = a,
            (Buffer::I16(v), Value::I16(a)) => v[i] = a,
            (Buffer::I8(v), Value::I8(a)) => v[i] = a,
            (Buffer::U64(v), Value::U64(a)) => v[i] = a,
            (Buffer::U32(v), Value::U32(a)) => v[i] = a,
            (Buffer::U16(v), Value::U16(a)) => v[i] = a,
            (Buffer::U8(v), Value::U8(a)) => v[i] = a,
            (Buffer::Bool(v), Value::Bool(a)) => v[i] = a,
            (b, x) => return Err(b.type_error(x)),
        }
        Ok(())
    }

    /// A pointer to the first element, for compiled kernels.
    pub(crate) fn as_mut_c_ptr(&mut self) -> *mut std::ffi::c_void {
        each!(self, v => v.as_mut_ptr() as *mut std::ffi::c_void)
    }

    /// A pointer to the first element, for compiled kernels that only read.
    pub(crate) fn as_c_ptr(&self) -> *const std::ffi::c_void {
        each!(self, v => v.as_ptr() as *const std::ffi::c_void)
    }

    /// The values as `f64`s if this is an `f64` buffer (for kernels and fast paths).
    pub fn as_f64_slice(&self) -> Option<&[f64]> {
        match self {
            Buffer::F64(v) => Some(v),
            _ => None,
        }
    }

    /// Every value, as `Value`s.
    pub fn values(&self) -> Vec<Value> {
        (0..self.len()).filter_map(|i| self.get(i)).collect()
    }
}

/// `v` made `n` long, new elements `x`, or an error when memory cannot hold it (a size
/// computed from input data is an error, not an aborted process).
pub(crate) fn resize_fallibly<T: Clone>(v: &mut Vec<T>, n: usize, x: T) -> Result<()> {
    super::memory::check(n, std::mem::size_of::<T>(), || "a buffer".into())?;
    v.try_reserve(n.saturating_sub(v.len()))
        .map_err(|_| out_of_memory(n, std::mem::size_of::<T>()))?;
    v.resize(n, x);
    Ok(())
}

/// The error of a buffer of `n` elements of `width` bytes that memory cannot hold.
pub(crate) fn out_of_memory(n: usize, width: usize) -> Error {
    Error::Program(format!(
        "a buffer of {n} elements ({} bytes) needs more memory than is available",
        n.saturating_mul(width)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_typed() {
        let mut b = Buffer::filled(ScalarType::U8, 3, Value::U8(0)).unwrap();
        assert!(b.push(Value::I64(1)).is_err());
        b.set(1, Value::U8(7)).unwrap();
        assert!(b.set(3, Value::U8(7)).is_err());
        assert_eq!(b.values(), vec![Value::U8(0), Value::U8(7), Value::U8(0)]);
        assert_eq!(b.scalar_type(), ScalarType::U8);
    }
}
