//! Tensor formats: the tree of level formats written as in the Finch paper
//! (`Dense(SparseList(Element(0.0)))`), its string form, and (one file per level) the
//! run-time storage of each level with its `validate` invariants.
//!
//! The root level of a format is the tensor's **last** mode (Finch is column-major):
//! `Dense(SparseList(Element(0.0)))` stores `A[i, j]` with `j` in the Dense level and `i`
//! in the SparseList level, i.e. CSC.

pub(crate) mod dense;
pub(crate) mod element;
mod format;
mod format_text;
mod level;
pub(crate) mod named;
pub(crate) mod output;
pub(crate) mod pattern;
mod registry;
pub(crate) mod run_list;
mod scalar;
pub(crate) mod sparse_band;
pub(crate) mod sparse_block_list;
pub(crate) mod sparse_byte_map;
pub(crate) mod sparse_coo;
pub(crate) mod sparse_hash;
pub(crate) mod sparse_interval;
pub(crate) mod sparse_list;
pub(crate) mod sparse_point;
mod sparse_run_list;

pub use dense::DenseStorage;
pub use element::ElementStorage;
pub use format::{Capabilities, Format, IndexWidth, LevelFormat, LevelKind, ScalarKind, MAX_MODES};
pub(crate) use level::KernelBuf;
pub use level::LevelStorage;
pub use pattern::PatternStorage;
pub use run_list::RunListStorage;
pub use scalar::ScalarStorage;
pub use sparse_band::SparseBandStorage;
pub use sparse_block_list::SparseBlockListStorage;
pub use sparse_byte_map::SparseByteMapStorage;
pub use sparse_coo::SparseCooStorage;
pub use sparse_hash::SparseHashStorage;
pub use sparse_interval::SparseIntervalStorage;
pub use sparse_list::SparseListStorage;
pub use sparse_point::SparsePointStorage;
pub use sparse_run_list::SparseRunListStorage;
