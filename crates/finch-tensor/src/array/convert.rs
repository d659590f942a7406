//! Reading arrays out (`to_dense`, `to_coo`, `countstored`) and converting them
//! (`asformat`, `with_fill_value`, `dropfills`). Conversions are copy programs
//! (`C[i1, ..] = A[i1, ..]` into the new format) run through the compiler, as
//! `examples/convert_band.fin`; a sparse output level stores only values that differ
//! from its fill, which is what drops explicit fills.

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::{Format, LevelFormat, ScalarKind};
use crate::tensor::{Coo, DenseArray};

use super::program::{run, ProgramOperand, OUTPUT};
use super::Array;

impl Array {
    /// Every entry (the fill where nothing is stored), as a dense array, column-major.
    pub fn to_dense(&self) -> Result<DenseArray> {
        self.tensor().to_dense()
    }

    /// The stored entries, explicit fills included, in storage order (`dropfills` first
    /// to leave them out).
    pub fn to_coo(&self) -> Coo {
        self.tensor().to_coo()
    }

    /// The number of stored positions (a Dense level stores every index; a scalar is 1),
    /// as Finch.jl's `countstored`.
    pub fn countstored(&self) -> usize {
        self.tensor().countstored()
    }

    /// The number of stored entries, explicit fills included: [`Array::countstored`], as
    /// pydata/sparse's `nnz`.
    pub fn nnz(&self) -> usize {
        self.countstored()
    }

    /// The same values in another format (of as many modes and the same element type).
    /// The format's fill may differ from this array's: the values stay the same, so
    /// coordinates holding the old fill are then stored.
    pub fn asformat(&self, format: &Format) -> Result<Array> {
        if format.ndims() != self.ndim() {
            return Err(Error::Program(format!(
                "asformat: the format {format} has {} modes, the array ({}) has {}",
                format.ndims(),
                self.describe(),
                self.ndim()
            )));
        }
        if format.element_type() != self.dtype() {
            return Err(Error::Program(format!(
                "asformat: the format {format} holds {}, the array ({}) holds {} (use astype)",
                format.element_type(),
                self.describe(),
                self.dtype()
            )));
        }
        if let Format::Scalar(kind, _) = format {
            if *kind != ScalarKind::Scalar {
                return Err(Error::Program(format!(
                    "asformat: an array is a plain `Scalar`, not {format}"
                )));
            }
            return Array::scalar(self.get(&[])?);
        }
        self.copy_into(format, false)
    }

    /// The same values stored with fill `fill` (same levels, `Element(fill)` leaf):
    /// coordinates holding the old fill are then stored.
    pub fn with_fill_value(&self, fill: Value) -> Result<Array> {
        if fill.scalar_type() != Some(self.dtype()) {
            return Err(Error::Program(format!(
                "with_fill_value: {fill} is not a {}, the element type of the array ({})",
                self.dtype(),
                self.describe()
            )));
        }
        match self.format() {
            Format::Scalar(..) => Array::scalar(self.get(&[])?),
            Format::Levels(level) => {
                let format = Format::Levels(level.with_leaf(LevelFormat::Element(fill)));
                self.copy_into(&format, false)
            }
        }
    }

    /// The array without explicitly stored fills: the same format, storing only values
    /// that differ from the fill (a `NaN` fill drops stored `NaN`s). Dense levels still
    /// store every index.
    pub fn dropfills(&self) -> Result<Array> {
        if self.ndim() == 0 {
            return Ok(self.clone());
        }
        let nan_fill =
            self.fill_value().as_f64().is_some_and(f64::is_nan) && self.dtype() != ScalarType::Bool;
        let format = self.format().clone();
        self.copy_into(&format, nan_fill)
    }

    /// Runs `C = A` with `C` in `format`; with `skip_nan`, only non-NaN values are
    /// written (a NaN equals nothing, so a sparse level's fill check keeps them).
    fn copy_into(&self, format: &Format, skip_nan: bool) -> Result<Array> {
        let rank = self.ndim();
        let indices: Vec<String> = (1..=rank).map(|m| format!("i{m}")).collect();
        let loops: Vec<String> = indices.iter().rev().map(|i| format!("{i} = _")).collect();
        let read = format!("A[{}]", indices.join(", "));
        let write = format!("{OUTPUT}[{}] = {read}", indices.join(", "));
        let body = if skip_nan {
            format!("if {read} == {read}\n    {write}\n  end")
        } else {
            write
        };
        let text = format!(
            "input A :: {}\noutput {OUTPUT} :: {format}\n{OUTPUT} .= {}\nfor {}\n  {body}\nend\n",
            self.format(),
            literal(&format.fill_value()),
            loops.join(", "),
        );
        let operand = ProgramOperand {
            tensor: self.tensor(),
            name: "A".into(),
        };
        Ok(Array::from_tensor(run(&text, &[operand])?))
    }
}

fn literal(v: &Value) -> String {
    v.to_string()
}
