#![doc = include_str!("../../../README.md")]
//!
//! ## Pipeline
//!
//! text → [`notation`] (parse) → [`Program`] (formats checked) → [`reference`] interpreter
//! (the dense oracle). Files come in through [`io`] as a [`tensor::Coo`] and are stored in
//! a format as a [`tensor::Tensor`]. The compiler (looplets, lowering, kernel IR, C and
//! interpreter backends) is the next milestone; see `ARCHITECTURE.md`.
#![deny(missing_docs)]

pub mod algebra;
pub mod backend;
pub mod engine;
pub mod error;
pub mod formats;
pub mod io;
pub mod kernel;
pub mod looplets;
pub mod lower;
pub mod notation;
mod program;
pub mod reference;
pub mod simplify;
pub mod tensor;

pub use algebra::{Op, ScalarType, Value};
pub use error::{Error, Result};
pub use program::{Program, TensorDecl};
pub use tensor::DenseArray;
