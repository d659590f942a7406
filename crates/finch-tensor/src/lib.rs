#![doc = include_str!("../../../README.md")]
//!
//! ## Pipeline
//!
//! text → [`notation`] (parse) → [`Program`] (formats checked) → [`lower`] (each level
//! unfurled into [`looplets`], lowered recursively, with [`simplify`] after every step) →
//! [`kernel`] IR → a [`backend`]: generated C, compiled with the system compiler and
//! cached, or the kernel-IR interpreter. [`engine`] binds tensors to a compiled kernel and
//! runs it. The [`reference`](mod@reference) interpreter runs every program on dense
//! copies: it is the oracle the compiled engines are tested against. Files come in through
//! [`io`] as a [`tensor::Coo`] and are stored in a format as a [`tensor::Tensor`]. See
//! `ARCHITECTURE.md`.
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
