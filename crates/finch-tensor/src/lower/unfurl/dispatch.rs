//! The registry of unfurling: for each kind of level parameters, the level module whose
//! looplets fiber `f` gets (`formats/<level>.rs`, its `lowering`), and how the level reads
//! where a condition holds. Every match here lists every variant, so a new level cannot
//! fall through to another's looplets.

use super::*;
use crate::formats::{
    run_list, sparse_band, sparse_block_list, sparse_byte_map, sparse_coo, sparse_hash,
    sparse_interval, sparse_list, sparse_point,
};

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
        LevelParams::SparseList { .. } | LevelParams::SparseListOut(_) if read => WhereRead::Itself,
        LevelParams::Coo { mode: 0, .. } => WhereRead::Itself,
        LevelParams::Structured { .. } if read && !f.protocols.follows(f.depth) => {
            WhereRead::Itself
        }
        LevelParams::Structured { .. } if read => WhereRead::Searched,
        LevelParams::SparseList { .. }
        | LevelParams::SparseListOut(_)
        | LevelParams::Coo { .. }
        | LevelParams::Structured { .. }
        | LevelParams::CooOut { .. }
        | LevelParams::HashOut(_)
        | LevelParams::SparseByteMapOut(_)
        | LevelParams::SparsePointOut(_)
        | LevelParams::SparseBandOut(_)
        | LevelParams::SparseBlockListOut(_)
        | LevelParams::RunsOut(_)
        | LevelParams::SparseIntervalOut(_)
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
    let name = lw.tensors[f.tensor].name.clone();
    let read = !f.protocols.is_written();
    match level {
        LevelParams::Dense { shape } => Ok(dense_lookup(f, shape)),
        LevelParams::SparseList { ptr, idx, shape } => Ok(sparse_list::lowering::unfurl_read(
            lw,
            f,
            [ptr, idx],
            shape,
            present,
        )),
        // Read by a later statement, after the kernel froze it: a sorted list.
        LevelParams::SparseListOut(p) if read => Ok(sparse_list::lowering::unfurl_read(
            lw,
            f,
            [p.ptr, p.idx],
            p.shape,
            present,
        )),
        LevelParams::SparseListOut(p) => sparse_list::lowering::unfurl_write(lw, f, &p),
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
        LevelParams::CooOut {
            shape,
            ptr,
            idx,
            qos,
            dirty,
            mode,
            modes,
            ..
        } => {
            lw.written_only(f, &name)?;
            sparse_list::lowering::unfurl_list_out(
                lw,
                f,
                shape,
                [ptr, idx],
                [qos, dirty],
                Some((mode, modes)),
            )
        }
        LevelParams::HashOut(p) => sparse_hash::lowering::unfurl(lw, f, &p),
        LevelParams::SparseByteMapOut(p) => sparse_byte_map::lowering::unfurl_write(lw, f, &p),
        LevelParams::SparsePointOut(p) => sparse_point::lowering::unfurl_write(lw, f, &p),
        LevelParams::SparseBlockListOut(p) => {
            lw.written_only(f, &name)?;
            sparse_block_list::lowering::unfurl_write(lw, f, &p)
        }
        LevelParams::RunsOut(p) => {
            if read && f.depth == 0 {
                return run_list::lowering::unfurl_read_back(lw, f, &p);
            }
            lw.written_only(f, &name)?;
            run_list::lowering::unfurl_write(lw, f, &p)
        }
        LevelParams::SparseIntervalOut(p) => {
            lw.written_only(f, &name)?;
            sparse_interval::lowering::unfurl_write(lw, f, &p)
        }
        LevelParams::SparseBandOut(p) => {
            lw.written_only(f, &name)?;
            sparse_band::lowering::unfurl_write(lw, f, &p)
        }
        LevelParams::Element { .. } | LevelParams::Pattern => Err(Error::Program(format!(
            "internal: the leaf of `{name}` indexed by a loop"
        ))),
    }
}
