//! Unfurling by the kind of a level's parameters: a Dense lookup, a structured level's
//! looplets by its kind (`Lowerer::unfurl_structured`), and a level read or written with
//! its module's own parameters through their trait (`ReadLevel`, `WrittenLevel`); and
//! how a level reads where a condition holds. Every match here lists every variant.

use super::*;

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
        LevelParams::Read(r) if r.get().reads_itself_where(read) => WhereRead::Itself,
        LevelParams::Written(w) if w.get().reads_itself_where(read) => WhereRead::Itself,
        LevelParams::Structured { .. } if read && !f.protocols.follows(f.depth) => {
            WhereRead::Itself
        }
        LevelParams::Structured { .. } if read => WhereRead::Searched,
        LevelParams::Read(_)
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
        LevelParams::Read(r) => r.get().unfurl(lw, f, present),
        LevelParams::Structured { kind, shape, bufs } => {
            lw.check_protocols(f, kind)?;
            lw.unfurl_structured(f, kind, shape, &bufs, present)
        }
        LevelParams::Written(w) => w.get().unfurl(lw, f, present),
        LevelParams::Element { .. } | LevelParams::Pattern => Err(Error::Program(format!(
            "internal: the leaf of `{}` indexed by a loop",
            lw.tensors[f.tensor].name
        ))),
    }
}
