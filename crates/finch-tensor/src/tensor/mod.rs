//! Tensors: a format tree plus the buffers of each level, with constructors, reads,
//! `validate` and the fiber-tree printer.

mod buffer;
pub(crate) mod build;
mod coo;
mod dense_array;
mod index_vec;
pub mod memory;
mod storage;
mod tree;

pub(crate) use buffer::resize_fallibly;
pub use buffer::Buffer;
pub use coo::{fmt_shape, Coo};
pub use dense_array::{checked_len, dense_len, DenseArray, MAX_DENSE_ENTRIES};
pub use index_vec::{IndexInt, IndexVec};
pub use storage::{Tensor, TensorStorage};
pub use tree::MAX_CHILDREN;
