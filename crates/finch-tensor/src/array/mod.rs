//! The array layer: NumPy-like arrays over [`Tensor`]s with any fill value, whose
//! operations are Finch programs run through the compiler (issue #29, items 1, 2 and 8).
//!
//! An [`Array`] owns a tensor: a shape, an element type, a format and a fill value (the
//! value of every coordinate the format does not store). Constructors build one from dense
//! data, coordinates, raw CSR/CSC/COO arrays, files, or as `zeros`/`full`/`eye`/random
//! (`construct`). Element-wise operations broadcast as NumPy does and promote types as
//! the array API does (`promote`); each one derives the result's fill value and iteration
//! space by rules R1-R5 of the sparse-array-programming digest §3 (`rules`), writes a
//! `.fin` program for it (`program`), compiles it once (programs are cached in memory by
//! their text, which holds every format; the C backend caches on disk) and runs it. No
//! result is computed beside the compiler: the only scalar arithmetic done in Rust is
//! the constant folding of fill values that the rules call for, with the language's own
//! operator semantics (`Op::eval`).
//!
//! Guarantees: an operation never panics on user input (errors name the operation and the
//! operands by position, shape and type); a value an input stores explicitly equal to its
//! fill gives the same result as an implicit one (`rules::fill_guard`); the result's
//! format follows the documented rule of `rules::output_format` (`docs/array.md`).

mod construct;
mod convert;
mod elementwise;
mod program;
mod promote;
mod rules;

use crate::algebra::{ScalarType, Value};
use crate::error::Result;
use crate::formats::Format;
use crate::tensor::Tensor;

pub use elementwise::{ElementwiseOp, ElementwiseOptions};
pub use program::{cache_stats, clear_cache, engine, set_engine, CacheStats};
pub use promote::result_type;
pub use rules::{derive_fill, Algebra};

/// An array: a tensor in a format, with a shape, an element type and a fill value.
///
/// Coordinates are 0-based; dense data is column-major (the first index varies fastest),
/// as everywhere in the library, and a format's root level is the last mode.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    tensor: Tensor,
}

impl Array {
    /// Wraps a tensor (valid by construction or validated when it was built).
    pub fn from_tensor(tensor: Tensor) -> Array {
        Array { tensor }
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// The tensor, consuming the array.
    pub fn into_tensor(self) -> Tensor {
        self.tensor
    }

    /// The size of each mode (empty for a 0-d array).
    pub fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }

    /// The number of modes.
    pub fn ndim(&self) -> usize {
        self.tensor.ndims()
    }

    /// The element type.
    pub fn dtype(&self) -> ScalarType {
        self.tensor.element_type()
    }

    /// The format.
    pub fn format(&self) -> &Format {
        self.tensor.format()
    }

    /// The fill value: the value of every coordinate the format does not store.
    pub fn fill_value(&self) -> Value {
        self.tensor.fill_value()
    }

    /// The value at a 0-based coordinate.
    pub fn get(&self, coord: &[usize]) -> Result<Value> {
        self.tensor.get(coord)
    }

    /// A short description for error messages: `f64 array of shape 3×4`.
    pub(crate) fn describe(&self) -> String {
        if self.ndim() == 0 {
            format!("{} scalar", self.dtype())
        } else {
            format!(
                "{} array of shape {}",
                self.dtype(),
                crate::tensor::fmt_shape(self.shape())
            )
        }
    }
}

impl std::fmt::Display for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.tensor.fmt(f)
    }
}
