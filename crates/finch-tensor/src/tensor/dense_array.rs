//! `DenseArray`: an N-dimensional array of values stored column-major (the first index
//! varies fastest), the plain representation used by the reference interpreter and by
//! `Tensor::to_dense`/`from_dense`.
//!
//! Indices here are 0-based; the language's 1-based indices are converted by callers.

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};

/// A dense N-d array with an element type and a fill value.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseArray {
    /// Element type: every entry of `data` has this type.
    pub ty: ScalarType,
    /// Size of each mode (empty for a 0-d array, which holds one value).
    pub shape: Vec<usize>,
    /// The entries, column-major; `len = product(shape)`.
    pub data: Vec<Value>,
    /// The background value (what a sparse format would not store).
    pub fill: Value,
}

impl DenseArray {
    /// An array of the given shape with every entry `fill`. Errors if `fill` is not of
    /// type `ty` or the size overflows.
    pub fn filled(ty: ScalarType, shape: &[usize], fill: Value) -> Result<DenseArray> {
        if fill.scalar_type() != Some(ty) {
            return Err(Error::Program(format!(
                "fill value {fill} does not have the element type {ty}"
            )));
        }
        let len = dense_len(shape)?;
        super::memory::check(len, std::mem::size_of::<Value>(), || {
            format!("a dense array of shape {}", super::fmt_shape(shape))
        })?;
        let mut data = Vec::new();
        super::resize_fallibly(&mut data, len, fill)?;
        Ok(DenseArray {
            ty,
            shape: shape.to_vec(),
            data,
            fill,
        })
    }

    /// An array from column-major data. Errors if the length or any element type is wrong.
    pub fn from_data(
        ty: ScalarType,
        shape: &[usize],
        data: Vec<Value>,
        fill: Value,
    ) -> Result<DenseArray> {
        let len = checked_len(shape)?;
        if data.len() != len {
            return Err(Error::Program(format!(
                "dense data has {} entries but shape {:?} needs {len}",
                data.len(),
                shape
            )));
        }
        if let Some(bad) = data
            .iter()
            .chain([&fill])
            .find(|v| v.scalar_type() != Some(ty))
        {
            return Err(Error::Program(format!(
                "value {bad} does not have the element type {ty}"
            )));
        }
        Ok(DenseArray {
            ty,
            shape: shape.to_vec(),
            data,
            fill,
        })
    }

    /// An `f64` array (fill `0.0`) from column-major numbers; a test and example helper.
    pub fn from_f64(shape: &[usize], data: &[f64]) -> Result<DenseArray> {
        DenseArray::from_data(
            ScalarType::F64,
            shape,
            data.iter().map(|&x| Value::F64(x)).collect(),
            Value::F64(0.0),
        )
    }

    /// An `f64` matrix from rows (the way matrices are written in papers).
    pub fn from_rows_f64(rows: &[&[f64]]) -> Result<DenseArray> {
        let m = rows.len();
        let n = rows.first().map_or(0, |r| r.len());
        if rows.iter().any(|r| r.len() != n) {
            return Err(Error::Program("rows of different lengths".into()));
        }
        let mut data = Vec::with_capacity(m * n);
        for j in 0..n {
            for row in rows {
                data.push(row[j]);
            }
        }
        DenseArray::from_f64(&[m, n], &data)
    }

    /// Number of modes.
    pub fn ndims(&self) -> usize {
        self.shape.len()
    }

    /// The column-major linear position of a 0-based index, or `None` if out of bounds or
    /// of the wrong arity.
    pub fn linear(&self, idx: &[usize]) -> Option<usize> {
        if idx.len() != self.shape.len() {
            return None;
        }
        let mut pos = 0usize;
        let mut stride = 1usize;
        for (&i, &n) in idx.iter().zip(&self.shape) {
            if i >= n {
                return None;
            }
            pos += i * stride;
            stride *= n;
        }
        Some(pos)
    }

    /// The entry at a 0-based index.
    pub fn get(&self, idx: &[usize]) -> Option<Value> {
        self.linear(idx).map(|p| self.data[p])
    }

    /// Sets the entry at a 0-based index; errors when out of bounds.
    pub fn set(&mut self, idx: &[usize], v: Value) -> Result<()> {
        match self.linear(idx) {
            Some(p) => {
                self.data[p] = v;
                Ok(())
            }
            None => Err(Error::Program(format!(
                "index {idx:?} out of bounds for shape {:?}",
                self.shape
            ))),
        }
    }

    /// The 0-based multi-index of a column-major linear position.
    pub fn unlinear(&self, mut pos: usize) -> Vec<usize> {
        self.shape
            .iter()
            .map(|&n| {
                let i = pos % n.max(1);
                pos /= n.max(1);
                i
            })
            .collect()
    }

    /// Number of entries different from the fill value.
    pub fn count_nonfill(&self) -> usize {
        self.data.iter().filter(|v| !v.same(&self.fill)).count()
    }
}

/// The most entries a `DenseArray` may hold (2^27 values, 2 GiB): dense copies exist for
/// the reference interpreter and tests, and a larger one means a sparse tensor was asked
/// to become dense by mistake.
pub const MAX_DENSE_ENTRIES: usize = 1 << 27;

/// `product(shape)` with overflow checked.
pub fn checked_len(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .ok_or_else(|| Error::Program(format!("shape {shape:?} is too large")))
}

/// `product(shape)`, which must not exceed [`MAX_DENSE_ENTRIES`].
pub fn dense_len(shape: &[usize]) -> Result<usize> {
    let len = checked_len(shape).ok();
    match len {
        Some(n) if n <= MAX_DENSE_ENTRIES => Ok(n),
        _ => Err(Error::Program(format!(
            "a dense copy of shape {} would hold {} entries, more than the limit of {MAX_DENSE_ENTRIES} \
             (the reference engine works on dense copies; use a smaller input)",
            crate::tensor::fmt_shape(shape),
            len.map_or("too many".to_string(), |n| n.to_string())
        ))),
    }
}
