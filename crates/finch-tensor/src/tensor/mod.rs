//! Tensors: a format tree plus the buffers of each level.

mod coo;
mod dense_array;

pub use coo::{fmt_shape, Coo};
pub use dense_array::{checked_len, DenseArray};
