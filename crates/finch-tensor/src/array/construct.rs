//! Building arrays: from dense data, coordinates, raw CSR/CSC/COO arrays, Matrix Market
//! and FROSTT files, and as `zeros`, `full`, `eye` and random sparse arrays.
//!
//! Buffers from outside (raw CSR/CSC/COO) are moved in and validated once, by the
//! tensor constructors; data the library arranges itself (dense values, coordinates,
//! files) is valid by construction. The default sparse format of a coordinate list is
//! `SparseList` for a vector and `Dense` over `SparseList`s for more modes (CSC for a
//! matrix, CSF below the root for more).

use std::path::Path;

use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::{named, Format, ScalarKind, ScalarStorage};
use crate::tensor::{
    checked_len, fmt_shape, Buffer, Coo, DenseArray, IndexVec, Tensor, TensorStorage,
};

use super::Array;

/// The default sparse format of `rank` modes with fill `fill`: `SparseList` for a vector,
/// `Dense` over `SparseList`s for more modes; a `Scalar` for rank 0.
pub(crate) fn sparse_format(rank: usize, fill: Value) -> Format {
    if rank == 0 {
        return Format::Scalar(ScalarKind::Scalar, fill);
    }
    let sparse: Vec<bool> = (0..rank).map(|m| m + 1 < rank || rank == 1).collect();
    named::lists_or_dense(&sparse, fill)
}

fn check_fill_type(fill: Value, ty: ScalarType, what: &str) -> Result<()> {
    if fill.scalar_type() != Some(ty) {
        return Err(Error::Program(format!(
            "{what}: the fill value {fill} is not a {ty}, the element type"
        )));
    }
    Ok(())
}

impl Array {
    /// A 0-d array holding `v`.
    pub fn scalar(v: Value) -> Result<Array> {
        if v.is_missing() {
            return Err(Error::Program("an array cannot hold `missing`".into()));
        }
        let tensor = Tensor::from_parts(
            Format::Scalar(ScalarKind::Scalar, v),
            Vec::new(),
            TensorStorage::Scalar(ScalarStorage {
                kind: ScalarKind::Scalar,
                fill: v,
                val: v,
                dirty: false,
            }),
        )?;
        Ok(Array::from_tensor(tensor))
    }

    /// A dense array of `shape` from column-major `values` (the first index fastest),
    /// with fill zero, in an all-`Dense` format (moved in without a copy).
    pub fn from_values(shape: &[usize], values: impl Into<Buffer>) -> Result<Array> {
        if shape.is_empty() {
            let buf = values.into();
            return match (buf.len(), buf.get(0)) {
                (1, Some(v)) => Array::scalar(v),
                (n, _) => Err(Error::Program(format!(
                    "{n} values for a 0-d array, which holds one"
                ))),
            };
        }
        Ok(Array::from_tensor(Tensor::from_values(shape, values)?))
    }

    /// An array holding a dense array's values in `format`: values equal to the format's
    /// fill are not stored by its sparse levels. The element types must agree.
    pub fn from_dense(a: &DenseArray, format: &Format) -> Result<Array> {
        if format.ndims() != a.shape.len() {
            return Err(Error::Program(format!(
                "from_dense: the format {format} has {} modes, the data has shape {}",
                format.ndims(),
                fmt_shape(&a.shape)
            )));
        }
        if a.shape.is_empty() {
            let v =
                a.data.first().copied().ok_or_else(|| {
                    Error::Program("from_dense: a 0-d array without a value".into())
                })?;
            return Array::scalar(v);
        }
        Ok(Array::from_tensor(Tensor::from_dense(format, a)?))
    }

    /// An array from a coordinate list, in `format` (or the default sparse format with
    /// `fill`, see the module docs), duplicates combined with `combine` (`Op::Add`,
    /// `Op::Max`, `Op::Overwrite` to keep the last, ...). Listed values equal to the fill
    /// are stored (they are explicit fills; `dropfills` removes them).
    pub fn from_coo(coo: &Coo, fill: Value, combine: Op, format: Option<&Format>) -> Result<Array> {
        check_fill_type(fill, coo.ty, "from_coo")?;
        let default = sparse_format(coo.shape.len(), fill);
        let format = format.unwrap_or(&default);
        if !format.fill_value().same(&fill) {
            return Err(Error::Program(format!(
                "from_coo: the format {format} has another fill than {fill}"
            )));
        }
        if coo.shape.is_empty() {
            let v = coo.vals.iter().try_fold(None, |acc: Option<Value>, &v| {
                acc.map_or(Ok(Some(v)), |a| combine.eval(&[a, v]).map(Some))
            })?;
            return Array::scalar(v.unwrap_or(fill));
        }
        Ok(Array::from_tensor(Tensor::from_coo_with(
            format, coo, combine,
        )?))
    }

    /// A matrix from coordinate triples (`rows[k], cols[k], vals[k]`), in CSC
    /// (`Dense(SparseList(Element(fill)))`), duplicates combined with `combine`.
    pub fn from_triples(
        nrows: usize,
        ncols: usize,
        rows: &[usize],
        cols: &[usize],
        vals: &[Value],
        fill: Value,
        combine: Op,
    ) -> Result<Array> {
        if rows.len() != vals.len() || cols.len() != vals.len() {
            return Err(Error::Program(format!(
                "from_triples: {} rows, {} columns and {} values (one each per entry)",
                rows.len(),
                cols.len(),
                vals.len()
            )));
        }
        let ty = fill
            .scalar_type()
            .ok_or_else(|| Error::Program("from_triples: the fill is `missing`".into()))?;
        let mut coo = Coo::new(ty, &[nrows, ncols]);
        for k in 0..vals.len() {
            coo.push(&[rows[k], cols[k]], vals[k])
                .map_err(|e| Error::Program(format!("from_triples: entry {k}: {e}")))?;
        }
        Array::from_coo(&coo, fill, combine, None)
    }

    /// A CSR matrix (row pointers, column indices, values; fill zero) as the matrix of
    /// shape `[nrows, ncols]` in CSC, through one transposing copy. Validated.
    pub fn from_csr(
        nrows: usize,
        ncols: usize,
        rowptr: impl Into<IndexVec>,
        colidx: impl Into<IndexVec>,
        data: impl Into<Buffer>,
    ) -> Result<Array> {
        Ok(Array::from_tensor(Tensor::from_csr(
            nrows, ncols, rowptr, colidx, data,
        )?))
    }

    /// A CSC matrix (column pointers, row indices, values; fill zero), moved in without a
    /// copy (`u32` arrays give `SparseList{UInt32}`). Validated.
    pub fn from_csc(
        nrows: usize,
        ncols: usize,
        colptr: impl Into<IndexVec>,
        rowidx: impl Into<IndexVec>,
        data: impl Into<Buffer>,
    ) -> Result<Array> {
        Ok(Array::from_tensor(Tensor::from_csc(
            nrows, ncols, colptr, rowidx, data,
        )?))
    }

    /// Raw COO arrays (one coordinate vector per mode, mode 0 first, sorted with the last
    /// mode most significant and without duplicates; fill zero), moved in without a copy
    /// as one `SparseCOO{N}` level. Validated.
    pub fn from_coo_arrays(
        shape: &[usize],
        coords: Vec<Vec<usize>>,
        data: impl Into<Buffer>,
    ) -> Result<Array> {
        let val = data.into();
        let fill = Value::zero_of(val.scalar_type());
        let n = shape.len();
        if n == 0 || coords.len() != n {
            return Err(Error::Program(format!(
                "from_coo_arrays: {} coordinate vectors for shape {} (one per mode, at least one mode)",
                coords.len(),
                fmt_shape(shape)
            )));
        }
        let (format, storage) = named::coo(shape, coords, fill, val);
        let tensor = Tensor::from_parts(format, shape.to_vec(), TensorStorage::Levels(storage))?;
        Ok(Array::from_tensor(tensor))
    }

    /// An array of `shape` whose every entry is `value`, stored as nothing: the default
    /// sparse format with `value` as its fill.
    pub fn full(shape: &[usize], value: Value) -> Result<Array> {
        let ty = value
            .scalar_type()
            .ok_or_else(|| Error::Program("full: the value is `missing`".into()))?;
        checked_len(shape)?;
        Array::from_coo(&Coo::new(ty, shape), value, Op::Overwrite, None)
    }

    /// An array of `shape` of zeros of type `ty`, stored as nothing (fill zero).
    pub fn zeros(shape: &[usize], ty: ScalarType) -> Result<Array> {
        Array::full(shape, Value::zero_of(ty))
    }

    /// The `n × n` identity matrix of type `ty` in CSC (fill zero).
    pub fn eye(n: usize, ty: ScalarType) -> Result<Array> {
        let one = if ty == ScalarType::Bool {
            Value::Bool(true)
        } else {
            Value::one_of(ty)
        };
        let mut coo = Coo::new(ty, &[n, n]);
        for i in 0..n {
            coo.push(&[i, i], one)?;
        }
        Array::from_coo(&coo, Value::zero_of(ty), Op::Overwrite, None)
    }

    /// A random sparse `f64` array (as Finch.jl's `fsprand`): `round(density × size)`
    /// distinct coordinates drawn uniformly, each holding a value uniform in `[0, 1)`,
    /// fill zero, in the default sparse format. The same seed gives the same array.
    pub fn random_sparse(shape: &[usize], density: f64, seed: u64) -> Result<Array> {
        if !(0.0..=1.0).contains(&density) {
            return Err(Error::Program(format!(
                "random_sparse: the density {density} is not in [0, 1]"
            )));
        }
        let total = checked_len(shape)?;
        let count = ((total as f64) * density).round() as usize;
        let count = count.min(total);
        let mut rng = SplitMix64(seed);
        let chosen = distinct_positions(&mut rng, total, count);
        let mut coo = Coo::new(ScalarType::F64, shape);
        let mut coord = vec![0usize; shape.len()];
        for pos in chosen {
            let mut rest = pos;
            for (c, &n) in coord.iter_mut().zip(shape) {
                *c = rest % n;
                rest /= n;
            }
            // A value in [0, 1), never the fill 0, so every drawn coordinate is stored.
            let mut v = rng.unit();
            while v == 0.0 {
                v = rng.unit();
            }
            coo.push(&coord, Value::F64(v))?;
        }
        Array::from_coo(&coo, Value::F64(0.0), Op::Overwrite, None)
    }

    /// A Matrix Market file as an array, in `format` (default: CSC with fill zero of the
    /// file's type).
    pub fn read_mtx(path: &Path, format: Option<&Format>) -> Result<Array> {
        let mm = crate::io::read_matrix_market_file(path)?;
        let fill = format.map_or(Value::zero_of(mm.coo.ty), Format::fill_value);
        let coo = match format {
            Some(f) if f.element_type() != mm.coo.ty => mm.coo.convert_to(f.element_type())?,
            _ => mm.coo,
        };
        Array::from_coo(&coo, fill, Op::Add, format)
    }

    /// A FROSTT `.tns` file as an array, in `format` (default: the default sparse format
    /// with fill zero); `shape` when the file does not give it (the largest coordinates).
    pub fn read_tns(
        path: &Path,
        shape: Option<&[usize]>,
        format: Option<&Format>,
    ) -> Result<Array> {
        let coo = crate::io::read_tns_file(path, shape)?;
        let fill = format.map_or(Value::zero_of(coo.ty), Format::fill_value);
        let coo = match format {
            Some(f) if f.element_type() != coo.ty => coo.convert_to(f.element_type())?,
            _ => coo,
        };
        Array::from_coo(&coo, fill, Op::Add, format)
    }
}

/// `count` distinct positions in `0..total`, sorted: Floyd's algorithm (one draw per
/// position, no table of size `total`).
fn distinct_positions(rng: &mut SplitMix64, total: usize, count: usize) -> Vec<usize> {
    let mut chosen = std::collections::BTreeSet::new();
    for j in (total - count)..total {
        let t = rng.below(j as u64 + 1) as usize;
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    chosen.into_iter().collect()
}

/// SplitMix64 (Steele, Lea and Flood 2014): a small, seedable generator, so the library
/// needs no random-number dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by rejection so that no value is favoured.
    fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
