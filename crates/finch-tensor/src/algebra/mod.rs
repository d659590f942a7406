//! Scalar types and values, operators, their semantics and algebraic properties.

mod eval;
mod op;
mod properties;
mod scalar;

pub use eval::promote;
pub use op::{Fixity, Op};
pub use properties::{type_max, type_min, Side};
pub use scalar::{NativeScalar, ScalarType, Value};
