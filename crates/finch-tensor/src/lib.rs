//! # Finch-RS
//!
//! A sparse and structured tensor compiler. A Finch program (loops, `if`, `let`,
//! reductions) runs over tensors stored as fiber trees of level formats.
//!
//! Pipeline (see `ARCHITECTURE.md`): text → [`notation`] AST → normalization → lowering
//! through looplets → kernel IR → backend. The [`reference`] interpreter runs any program
//! on dense copies of its inputs and is the oracle every compiled kernel is tested against.
#![deny(missing_docs)]

pub mod algebra;
pub mod error;
pub mod formats;
pub mod io;
mod program;
pub mod notation;
pub mod reference;
pub mod tensor;

pub use algebra::{Op, ScalarType, Value};
pub use error::{Error, Result};
pub use program::{Program, TensorDecl};
pub use tensor::DenseArray;
