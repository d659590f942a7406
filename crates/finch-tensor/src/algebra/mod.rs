//! Scalar types and values, operators, their semantics and algebraic properties.

mod eval;
mod op;
mod scalar;

pub use eval::promote;
pub use op::{Fixity, Op};
pub use scalar::{ScalarType, Value};
