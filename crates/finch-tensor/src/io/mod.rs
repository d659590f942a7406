//! Reading and writing tensors: Matrix Market (`.mtx`) and FROSTT (`.tns`). Readers yield
//! a [`Coo`](crate::tensor::Coo); `Tensor::from_coo` stores it in a format.

mod frostt;
mod matrix_market;
mod summary;

pub use frostt::{read_tns, read_tns_file, write_tns, write_tns_file};
pub use matrix_market::{
    read_matrix_market, read_matrix_market_file, read_matrix_market_structure,
    read_matrix_market_structure_file, write_matrix_market, write_matrix_market_file, MatrixMarket,
    MtxField, MtxHeader, MtxLayout, MtxSymmetry, MtxWriteOptions,
};
pub use summary::{structure_summary, MatrixStats, StructureSummary};
