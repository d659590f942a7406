//! `Tensor`: a format, a shape, and the storage of its levels; reads (`get`, `to_coo`,
//! `to_dense`, `countstored`) and `validate`.
//!
//! Trust boundary: a tensor built from outside buffers (`from_parts`, `from_csc`,
//! `from_csr`) is validated when it is built; tensors the library builds (`from_dense`,
//! `from_coo`) are valid by construction. Every read below assumes a valid tensor, which
//! the constructors guarantee.

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::{Format, LevelFormat, LevelStorage, ScalarStorage};
use crate::tensor::{fmt_shape, Buffer, Coo, DenseArray};

/// The storage of a tensor: a scalar, or a tree of levels.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorStorage {
    /// A 0-d tensor.
    Scalar(ScalarStorage),
    /// The root level of a tensor with one or more modes.
    Levels(LevelStorage),
}

/// A tensor stored in a format.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub(crate) format: Format,
    pub(crate) shape: Vec<usize>,
    pub(crate) storage: TensorStorage,
}

impl Tensor {
    /// Builds a tensor from raw storage (e.g. buffers handed in by a caller) and checks
    /// that the storage matches the format and shape and passes `validate`.
    pub fn from_parts(format: Format, shape: Vec<usize>, storage: TensorStorage) -> Result<Tensor> {
        let t = Tensor {
            format,
            shape,
            storage,
        };
        t.validate()?;
        Ok(t)
    }

    /// The format, shape and storage.
    pub fn into_parts(self) -> (Format, Vec<usize>, TensorStorage) {
        (self.format, self.shape, self.storage)
    }

    /// The value buffer of a tensor whose levels are all Dense over an Element leaf,
    /// consuming the tensor; `None` for any other structure.
    pub fn into_dense_values(self) -> Option<Buffer> {
        let TensorStorage::Levels(level) = self.storage else {
            return None;
        };
        crate::formats::named::dense_values(level)
    }

    /// The format.
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// Size of each mode.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of modes.
    pub fn ndims(&self) -> usize {
        self.shape.len()
    }

    /// The storage.
    pub fn storage(&self) -> &TensorStorage {
        &self.storage
    }

    /// The fill (background) value.
    pub fn fill_value(&self) -> Value {
        self.format.fill_value()
    }

    /// The element type.
    pub fn element_type(&self) -> ScalarType {
        self.format.element_type()
    }

    /// Number of stored leaf positions (a Dense level counts every index; a scalar is 1).
    pub fn countstored(&self) -> usize {
        match &self.storage {
            TensorStorage::Scalar(_) => 1,
            TensorStorage::Levels(root) => root.leaf_positions(1),
        }
    }

    /// The value at a 0-based coordinate (the fill where nothing is stored).
    pub fn get(&self, coord: &[usize]) -> Result<Value> {
        if coord.len() != self.shape.len() {
            return Err(Error::Program(format!(
                "a {}-mode tensor indexed with {} coordinates",
                self.shape.len(),
                coord.len()
            )));
        }
        if let Some(m) = (0..coord.len()).find(|&m| coord[m] >= self.shape[m]) {
            return Err(Error::Program(format!(
                "coordinate {coord:?} out of bounds in mode {} (size {})",
                m + 1,
                self.shape[m]
            )));
        }
        Ok(match &self.storage {
            TensorStorage::Scalar(s) => s.val,
            TensorStorage::Levels(root) => {
                let key: Vec<usize> = coord.iter().rev().copied().collect();
                root.get(0, &key).unwrap_or(self.fill_value())
            }
        })
    }

    /// Calls `f(coord, value)` for every stored entry in storage order (column-major:
    /// the last mode varies slowest); `coord` is 0-based, mode 0 first.
    pub fn for_each_stored(&self, mut f: impl FnMut(&[usize], Value)) {
        match &self.storage {
            TensorStorage::Scalar(s) => f(&[], s.val),
            TensorStorage::Levels(root) => {
                let mut coord = Vec::with_capacity(self.shape.len());
                root.walk(0, &mut Vec::new(), &mut |key, v| {
                    coord.clear();
                    coord.extend(key.iter().rev());
                    f(&coord, v)
                });
            }
        }
    }

    /// The stored entries (including explicitly stored fills), in storage order.
    pub fn to_coo(&self) -> Coo {
        let mut coo = Coo::new(self.element_type(), &self.shape);
        coo.vals.reserve(self.countstored());
        self.for_each_stored(|c, v| {
            for (m, &i) in c.iter().enumerate() {
                coo.coords[m].push(i);
            }
            coo.vals.push(v);
        });
        coo
    }

    /// A dense copy (fill = the format's fill). Errors when it would exceed
    /// [`MAX_DENSE_ENTRIES`](crate::tensor::MAX_DENSE_ENTRIES).
    pub fn to_dense(&self) -> Result<DenseArray> {
        let ty = self.element_type();
        let fill = self.fill_value();
        let len = crate::tensor::dense_len(&self.shape)?;
        let mut data = vec![fill; len];
        let shape = &self.shape;
        self.for_each_stored(|c, v| {
            let mut pos = 0;
            let mut stride = 1;
            for (&i, &n) in c.iter().zip(shape) {
                pos += i * stride;
                stride *= n;
            }
            data[pos] = v;
        });
        Ok(DenseArray {
            ty,
            shape: self.shape.clone(),
            data,
            fill,
        })
    }

    /// Checks that the storage matches the format and shape, and every invariant of every
    /// level (`verified-formats.md` §8), top-down. Errors name the level's depth, its name
    /// and the violated invariant.
    pub fn validate(&self) -> Result<()> {
        let fill = self.fill_value();
        if fill.is_missing() {
            return Err(Error::Program(
                "a tensor's fill value cannot be `missing`".into(),
            ));
        }
        if self.format.ndims() != self.shape.len() {
            return Err(Error::Program(format!(
                "format {} has {} modes but the shape is {}",
                self.format,
                self.format.ndims(),
                fmt_shape(&self.shape)
            )));
        }
        match (&self.format, &self.storage) {
            (Format::Scalar(kind, f), TensorStorage::Scalar(s)) => {
                if s.kind != *kind || !s.fill.same(f) {
                    return Err(Error::Program(format!(
                        "scalar storage {}({}) does not match the format {}",
                        s.kind.name(),
                        s.fill,
                        self.format
                    )));
                }
                s.validate()
            }
            (Format::Levels(lf), TensorStorage::Levels(root)) => {
                check_matches(lf, root, &self.shape, 1)?;
                root.validate(1, 1).map(|_| ())
            }
            _ => Err(Error::Program(format!(
                "storage kind does not match the format {}",
                self.format
            ))),
        }
    }
}

/// Checks that a storage tree has the format's level kinds, the tensor's mode sizes and
/// the format's fill (G6). `shape` is the tensor's shape with the modes below this level.
fn check_matches(
    format: &LevelFormat,
    storage: &LevelStorage,
    shape: &[usize],
    depth: usize,
) -> Result<()> {
    let mismatch = |what: String| {
        Err(Error::Program(format!(
            "level {depth}: storage does not match the format {format}: {what}"
        )))
    };
    match (format, storage) {
        (LevelFormat::Element(fill), LevelStorage::Element(e)) => {
            if !e.fill.same(fill) {
                return mismatch(format!("fill {} instead of {fill}", e.fill));
            }
            if !shape.is_empty() {
                return mismatch(format!("{} modes left at the leaf", shape.len()));
            }
            Ok(())
        }
        (LevelFormat::Pattern, LevelStorage::Pattern(_)) => {
            if !shape.is_empty() {
                return mismatch(format!("{} modes left at the leaf", shape.len()));
            }
            Ok(())
        }
        (LevelFormat::Inner { kind, index, child }, s) => {
            if kind.name() != s.name() {
                return mismatch(format!(
                    "a {} level holds {} storage",
                    kind.name(),
                    s.name()
                ));
            }
            if let Some(what) = s.index_width_mismatch(*index) {
                return mismatch(format!(
                    "a {}{{{}}} level holds {what}",
                    kind.name(),
                    index.name()
                ));
            }
            let n = kind.modes();
            if shape.len() < n {
                return mismatch("more levels than modes".into());
            }
            // The level spans the last `n` of the remaining modes, innermost first.
            let (rest, mine) = shape.split_at(shape.len() - n);
            if s.shape() != mine {
                return mismatch(format!(
                    "mode sizes {:?} but the tensor's are {mine:?}",
                    s.shape()
                ));
            }
            match s.child() {
                Some(c) => check_matches(child, c, rest, depth + 1),
                None => mismatch("missing child".into()),
            }
        }
        (_, s) => mismatch(format!("a leaf holds {} storage", s.name())),
    }
}
