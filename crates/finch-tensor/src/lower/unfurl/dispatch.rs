//! The registry of unfurling: for each kind of level parameters, the level module whose
//! looplets fiber `f` gets (`formats/<level>.rs`, its `lowering`), and how the level reads
//! where a condition holds. Every match here lists every variant, so a new level cannot
//! fall through to another's looplets.

use super::*;
use crate::formats::{sparse_coo, sparse_list};

/// How fiber `f` of a level reads where a condition holds ([`Lowerer::unfurl_present`]).
pub(super) enum WhereRead {
    /// A Dense level of this size hands the condition down to its children.
    Dense(crate::kernel::LocalId),
    /// The level's own read takes the condition: its walk has no entries where it fails.
    Itself,
    /// A search, which runs (and whose hit counts) only where the condition holds.
    Searched,
    /// One `Switch` on the condition.
    Switch,
}

/// How fiber `f` of `level` reads where a condition holds.
pub(super) fn where_read(level: &LevelParams, f: &Fiber) -> WhereRead {
    let read = !f.protocols.is_written();
    match level {
        LevelParams::Dense { shape } => WhereRead::Dense(*shape),
        LevelParams::SparseList { .. } if read => WhereRead::Itself,
        LevelParams::Written(w) if w.get().reads_itself_where(read) => WhereRead::Itself,
        LevelParams::Coo { mode: 0, .. } => WhereRead::Itself,
        LevelParams::Structured { .. } if read && !f.protocols.follows(f.depth) => {
            WhereRead::Itself
        }
        LevelParams::Structured { .. } if read => WhereRead::Searched,
        LevelParams::SparseList { .. }
        | LevelParams::Coo { .. }
        | LevelParams::Structured { .. }
        | LevelParams::Written(_)
        | LevelParams::Element { .. }
        | LevelParams::Pattern => WhereRead::Switch,
    }
}

/// The looplet nest of fiber `f` of `level`, from its level's module; read only where
/// `present` holds when given (for the levels whose [`where_read`] is `Itself`).
pub(super) fn unfurl_level(
    lw: &mut Lowerer,
    f: &Fiber,
    level: LevelParams,
    present: Option<&KExpr>,
) -> Result<Looplet> {
    match level {
        LevelParams::Dense { shape } => Ok(dense_lookup(f, shape)),
        LevelParams::SparseList { ptr, idx, shape } => Ok(sparse_list::lowering::unfurl_read(
            lw,
            f,
            [ptr, idx],
            shape,
            present,
        )),
        LevelParams::Structured { kind, shape, bufs } => {
            lw.check_protocols(f, kind)?;
            lw.unfurl_structured(f, kind, shape, &bufs, present)
        }
        LevelParams::Coo {
            shape,
            ptr,
            tbl,
            mode,
            modes,
        } => sparse_coo::lowering::unfurl_read(lw, f, (shape, ptr, &tbl), [mode, modes], present),
        LevelParams::Written(w) => w.get().unfurl(lw, f, present),
        LevelParams::Element { .. } | LevelParams::Pattern => Err(Error::Program(format!(
            "internal: the leaf of `{}` indexed by a loop",
            lw.tensors[f.tensor].name
        ))),
    }
}
