//! Scalar types and values, operators, their semantics and algebraic properties.

mod op;
mod scalar;

pub use op::{Fixity, Op};
pub use scalar::{ScalarType, Value};
