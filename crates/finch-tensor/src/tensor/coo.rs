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

    /// Converts every value to `ty` exactly (`Value::convert_exact`): a `real` file bound to
    /// an integer tensor must hold integers, a pattern (`bool`) file becomes ones. Errors
    /// name the first entry that does not convert, with its 1-based coordinate.
    pub fn convert_to(&self, ty: ScalarType) -> Result<Coo> {
        if ty == self.ty {
            return Ok(self.clone());
        }
        let mut vals = Vec::with_capacity(self.vals.len());
        for (k, v) in self.vals.iter().enumerate() {
            match v.convert_exact(ty) {
                Some(w) => vals.push(w),
                None => {
                    let coord: Vec<String> =
                        self.coord(k).iter().map(|i| (i + 1).to_string()).collect();
                    return Err(Error::Program(format!(
                        "entry [{}] = {v} cannot be converted exactly to {ty}",
                        coord.join(", ")
                    )));
                }
            }
        }
        Ok(Coo {
            ty,
            shape: self.shape.clone(),
            coords: self.coords.clone(),
            vals,
        })
    }

    /// The same entries with modes of size 1 dropped or added so that the shape becomes
    /// `target` (e.g. a Matrix Market `n×1` column read as a vector of length `n`). Errors
    /// when the sizes other than 1 differ.
    pub fn reshape_unit_modes(&self, target: &[usize]) -> Result<Coo> {
        let keep: Vec<usize> = (0..self.shape.len())
            .filter(|&m| self.shape[m] != 1)
            .collect();
        let kept: Vec<usize> = keep.iter().map(|&m| self.shape[m]).collect();
        let wanted: Vec<usize> = target.iter().copied().filter(|&n| n != 1).collect();
        if kept != wanted {
            return Err(Error::Program(format!(
                "data of shape {} cannot be used as a tensor of shape {}",
                fmt_shape(&self.shape),
                fmt_shape(target)
            )));
        }
        let mut coords = Vec::with_capacity(target.len());
        let mut next = keep.iter();
        for &n in target {
            if n == 1 {
                coords.push(vec![0; self.vals.len()]);
            } else {
                // `kept == wanted`, so there is a source mode for every non-unit target mode.
                let m = next.next().copied().unwrap_or(0);
                coords.push(self.coords[m].clone());
            }
        }
        Ok(Coo {
            ty: self.ty,
            shape: target.to_vec(),
            coords,
            vals: self.vals.clone(),
        })
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

/// `3×5`-style text of a shape (`scalar` for 0 modes).
pub fn fmt_shape(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    shape
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("×")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coo_converts_exactly_or_names_the_entry() {
        let mut c = Coo::new(ScalarType::F64, &[2, 2]);
        c.push(&[0, 1], Value::F64(2.0)).unwrap();
        c.push(&[1, 1], Value::F64(2.5)).unwrap();
        let e = c.convert_to(ScalarType::I64).unwrap_err().to_string();
        assert!(e.contains("[2, 2]") && e.contains("2.5"), "{e}");
        c.vals[1] = Value::F64(3.0);
        let d = c.convert_to(ScalarType::I64).unwrap();
        assert_eq!(d.vals, vec![Value::I64(2), Value::I64(3)]);
    }

    #[test]
    fn coo_reshapes_unit_modes() {
        let mut c = Coo::new(ScalarType::F64, &[3, 1]);
        c.push(&[2, 0], Value::F64(1.0)).unwrap();
        let v = c.reshape_unit_modes(&[3]).unwrap();
        assert_eq!(v.shape, vec![3]);
        assert_eq!(v.coords, vec![vec![2]]);
        let back = v.reshape_unit_modes(&[1, 3]).unwrap();
        assert_eq!(back.coords, vec![vec![0], vec![2]]);
        assert!(c.reshape_unit_modes(&[4]).is_err());
        let s = Coo::new(ScalarType::F64, &[1, 1])
            .reshape_unit_modes(&[])
            .unwrap();
        assert!(s.shape.is_empty());
    }

    #[test]
    fn coo_push_rejects_out_of_bounds() {
        let mut c = Coo::new(ScalarType::F64, &[2]);
        assert!(c.push(&[2], Value::F64(1.0)).is_err());
        assert!(c.push(&[1], Value::I64(1)).is_err());
    }
}
