//! `Coo`: a list of coordinates and values, the exchange type between file readers
//! (`io`), tensor construction (`Tensor::from_coo`) and `Tensor::to_coo`.
//!
//! Coordinates are 0-based and stored per mode: `coords[mode][entry]`. Entries may be in
//! any order and may repeat; `Tensor::from_coo` sorts them and combines duplicates.

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};

/// Coordinates and values of the stored entries of a tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Coo {
    /// Element type of every value.
    pub ty: ScalarType,
    /// Size of each mode.
    pub shape: Vec<usize>,
    /// `coords[mode][entry]`, 0-based; one vector per mode, all of length `vals.len()`.
    pub coords: Vec<Vec<usize>>,
    /// One value per entry, all of type `ty`.
    pub vals: Vec<Value>,
}

impl Coo {
    /// An empty list for the given type and shape.
    pub fn new(ty: ScalarType, shape: &[usize]) -> Coo {
        Coo {
            ty,
            shape: shape.to_vec(),
            coords: vec![Vec::new(); shape.len()],
            vals: Vec::new(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    /// Appends one entry; errors if the coordinate is out of bounds or the value has the
    /// wrong type.
    pub fn push(&mut self, coord: &[usize], val: Value) -> Result<()> {
        if coord.len() != self.shape.len() {
            return Err(Error::Program(format!(
                "coordinate {coord:?} has {} modes, the tensor has {}",
                coord.len(),
                self.shape.len()
            )));
        }
        if let Some(m) = (0..coord.len()).find(|&m| coord[m] >= self.shape[m]) {
            return Err(Error::Program(format!(
                "coordinate {coord:?} is out of bounds in mode {} (size {})",
                m + 1,
                self.shape[m]
            )));
        }
        if val.scalar_type() != Some(self.ty) {
            return Err(Error::Program(format!(
                "value {val} does not have the element type {}",
                self.ty
            )));
        }
        for (c, &i) in self.coords.iter_mut().zip(coord) {
            c.push(i);
        }
        self.vals.push(val);
        Ok(())
    }

    /// The coordinate of entry `k`.
    pub fn coord(&self, k: usize) -> Vec<usize> {
        self.coords.iter().map(|c| c[k]).collect()
    }

    /// Checks that all vectors have matching lengths, coordinates are in bounds and values
    /// have the element type.
    pub fn check(&self) -> Result<()> {
        if self.coords.len() != self.shape.len() {
            return Err(Error::Program(format!(
                "coordinate lists for {} modes, shape has {}",
                self.coords.len(),
                self.shape.len()
            )));
        }
        for (m, c) in self.coords.iter().enumerate() {
            if c.len() != self.vals.len() {
                return Err(Error::Program(format!(
                    "mode {} has {} coordinates for {} values",
                    m + 1,
                    c.len(),
                    self.vals.len()
                )));
            }
            if let Some(k) = c.iter().position(|&i| i >= self.shape[m]) {
                return Err(Error::Program(format!(
                    "entry {} is out of bounds in mode {}: {} >= {}",
                    k + 1,
                    m + 1,
                    c[k],
                    self.shape[m]
                )));
            }
        }
        if let Some(v) = self.vals.iter().find(|v| v.scalar_type() != Some(self.ty)) {
            return Err(Error::Program(format!(
                "value {v} does not have the element type {}",
                self.ty
            )));
        }
        Ok(())
    }
}
