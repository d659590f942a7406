//! Tensors: a format tree plus the buffers of each level.

mod dense_array;

pub use dense_array::{checked_len, DenseArray};
