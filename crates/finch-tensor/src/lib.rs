#![doc = include_str!("../../../README.md")]
//!
//! ## Pipeline
//!
//! text → [`notation`] (parse) → [`Program`] (formats checked) → `lower` (each level
//! unfurled into `looplets`, lowered recursively, with `simplify` after every step) →
//! `kernel` IR → a [`backend`]: generated C, compiled with the system compiler and
//! cached, or the kernel-IR interpreter. [`engine`] binds tensors to a compiled kernel and
//! runs it. The [`reference`](mod@reference) interpreter runs every program on dense
//! copies: it is the oracle the compiled engines are tested against. Files come in through
//! [`io`] as a [`tensor::Coo`] and are stored in a format as a [`tensor::Tensor`]. See
//! `ARCHITECTURE.md`.
//!
//! The API: [`Program`] (parse, check, run on the reference), [`Program::compile`] to a
//! [`CompiledProgram`] (`call` by name, or `run` on a map of tensors), [`Tensor`] (built
//! from CSR/CSC arrays, coordinates, dense values or files through [`io`]) and
//! [`Outputs`]. The compiler's stages (`lower`, `looplets`, `kernel`, `simplify`) are
//! public for the tools and tests of this repository, not as API: they change freely.
#![deny(missing_docs)]

pub mod algebra;
pub mod array;
pub mod backend;
pub mod engine;
pub mod error;
pub mod formats;
pub mod io;
#[doc(hidden)]
pub mod kernel;
#[doc(hidden)]
pub mod looplets;
#[doc(hidden)]
pub mod lower;
pub mod notation;
mod program;
mod recent;
pub mod reference;
#[doc(hidden)]
pub mod simplify;
pub mod tensor;

pub use algebra::{NativeScalar, Op, ScalarType, Value};
pub use array::Array;
pub use engine::{CompileOptions, CompiledProgram, Engine, Outputs};
pub use error::{Error, Result};
pub use program::{Program, TensorDecl};
pub use tensor::{Buffer, DenseArray, Tensor};
