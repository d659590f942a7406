//! What a level's lowering uses of the lowerer. Each level's module in `formats/` keeps
//! its looplets (how the lowerer reads and writes it) in a `lowering` submodule that
//! imports this kit, so the lowerer's internals stay private to `lower/` except for
//! what is named here.

pub(crate) use std::rc::Rc;

pub(crate) use super::bounds::ZERO;
pub(crate) use super::convert::{
    mode_shapes, structured_read_params, LevelAt, LevelParams, OutArray, ReadLevel, WriteTraits,
    WrittenLevel,
};
pub(crate) use super::unfurl::{
    dense_lookup, fiber_bounds, grow_to, linear_position, minus1, not_fill, plus1, seek_on, walker,
    where_present, within, zeros, ChildOf, Entries, SeekCode, SortedList, StructuredFiber,
};
pub(crate) use super::Lowerer;
pub(crate) use crate::algebra::{Op, ScalarType, Value};
pub(crate) use crate::error::{Error, Result};
pub(crate) use crate::formats::{IndexWidth, LevelFormat, LevelKind};
pub(crate) use crate::kernel::{BufId, KExpr, KStmt, Kernel, LocalId};
pub(crate) use crate::looplets::{Counted, Fiber, Looplet, Stepper, Tensor};
