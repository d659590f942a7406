//! What the kernel sees of each tensor: the kernel parameters of each of its levels
//! (buffers, sizes, and the state of written levels) and the tensor's facts.

use super::*;

// The parameters of the levels whose modules own their write side (each module's
// `lowering::OutParams`), named after their `LevelParams` variants.
pub use crate::formats::run_list::lowering::OutParams as RunsOut;
pub use crate::formats::sparse_band::lowering::OutParams as SparseBandOut;
pub use crate::formats::sparse_block_list::lowering::OutParams as SparseBlockListOut;
pub use crate::formats::sparse_byte_map::lowering::OutParams as SparseByteMapOut;
pub use crate::formats::sparse_interval::lowering::OutParams as SparseIntervalOut;
pub use crate::formats::sparse_list::lowering::OutParams as SparseListOut;
pub use crate::formats::sparse_point::lowering::OutParams as SparsePointOut;

/// The kernel parameters of one level of a tensor.
#[derive(Clone, Debug)]
pub enum LevelParams {
    /// `shape` as an `i64` input local.
    Dense {
        /// Size of the mode.
        shape: LocalId,
    },
    /// `ptr` and `idx` buffers and the shape.
    SparseList {
        /// Size of the mode.
        shape: LocalId,
        /// Fiber boundaries.
        ptr: BufId,
        /// Stored indices (0-based).
        idx: BufId,
    },
    /// A SparseList level of an output, written in order (extrude): `ptr` holds per-fiber
    /// counts until the run time prefix-sums it; `idx` grows by doubling.
    SparseListOut(SparseListOut),
    /// One mode of a SparseCOO{N} level read by a kernel: the level has `modes` entries in
    /// the tensor's levels, outermost mode (`mode == 0`) first, sharing `ptr` and `tbl`.
    /// Mode 0 walks fiber `p`'s tuples `ptr[p] .. ptr[p+1]`; each further mode walks the
    /// run of tuples its parent mode hands down (the fiber's `end`).
    Coo {
        /// Size of this mode.
        shape: LocalId,
        /// Fiber boundaries into the tuples.
        ptr: BufId,
        /// Coordinates per mode (0-based), innermost mode first, as stored.
        tbl: Vec<BufId>,
        /// Which mode of the level, 0 = outermost.
        mode: usize,
        /// How many modes the level spans.
        modes: usize,
    },
    /// One mode of a SparseCOO{N} level of an output, written in order (extrude): the
    /// modes above the last pass a linear position down (as Dense levels do), and the last
    /// records each written entry's linear position in `idx`, which the run time splits
    /// into coordinates at freeze. Mode 0 counts the fiber's entries into `ptr`.
    CooOut {
        /// Size of this mode.
        shape: LocalId,
        /// Per-fiber counts (`P + 1` entries, prefix-summed after the kernel).
        ptr: BufId,
        /// Linear positions of the written entries (over every mode down to this level),
        /// growable.
        idx: BufId,
        /// The next free position.
        qos: LocalId,
        /// Whether the current index was written.
        dirty: LocalId,
        /// Which mode of the level, 0 = outermost.
        mode: usize,
        /// How many modes the level spans.
        modes: usize,
        /// The modes are not one SparseCOO level but every level from a sparse one down to
        /// the leaf, of a format the kernel does not assemble itself (a SparseList above
        /// another level, ...): the run time builds those levels from the recorded entries.
        rebuilt: bool,
    },
    /// One mode of a group of SparseHash levels a kernel writes (laminate: any order,
    /// repeated), from the group's first level down to the Element leaf. The group is one
    /// open-addressing hash table keyed by an entry's linear position over every mode of
    /// the tensor (column-major), so modes above the last pass the linear position down as
    /// Dense levels do. Slot `h` is `table[2h]`, the key + 1 (0 = empty), and
    /// `table[2h + 1]`, the entry (the capacity is a power of two, at most half full);
    /// `keys[q]` is entry `q`'s key and `slot_of[q]` its
    /// slot; entry `q`'s value is at child position `q`. The run time builds the sorted
    /// levels from the entries at freeze.
    HashOut {
        /// Size of this mode.
        shape: LocalId,
        /// Which mode of the group, 0 = outermost.
        mode: usize,
        /// How many modes (SparseHash levels) the group spans.
        modes: usize,
        /// Slots: entry number + 1, or 0 (growable).
        table: BufId,
        /// Key (linear position) per entry, in insertion order (growable).
        keys: BufId,
        /// Slot per entry (growable).
        slot_of: BufId,
        /// Entries so far.
        count: LocalId,
        /// The entry of the index being written.
        at: LocalId,
        /// Whether the current index was written (its entry looked up).
        dirty: LocalId,
        /// Buffers for reading the group back in the kernel.
        view: HashView,
    },
    /// A SparseByteMap level of an output or workspace, written in any order (laminate):
    /// a flag per position, dense child positions `p·shape + i`, and the list `srt` of the
    /// set positions (linear, unsorted while written, grown by doubling) with its length
    /// in `nsrt`. Read back (root level only) after sorting `srt`.
    SparseByteMapOut(SparseByteMapOut),
    /// A SparsePoint level of an output, written in order (extrude): `idx` (one per fiber,
    /// `shape` when empty) and dense child positions (one per fiber). A fiber written at
    /// two indices sets `conflict` (the run time reports it).
    SparsePointOut(SparsePointOut),
    /// A SparseBand level of an output, written in order (extrude): the first written
    /// index of a fiber fixes its origin, later ones land at `start + (i - origin)` (gaps
    /// hold the fill); `ofs` holds per-fiber widths until the run time prefix-sums it.
    SparseBandOut(SparseBandOut),
    /// A SparseBlockList level of an output, written in order (extrude): values are
    /// appended at `qos` like SparseList's; an index that does not follow the last one
    /// written starts a new block. `ptr` holds per-fiber block counts until the run time
    /// prefix-sums it; `idx` (block last index) and `ofs` (block ends) grow by doubling.
    SparseBlockListOut(SparseBlockListOut),
    /// A RunList or SparseRunList level of an output, written in order through AcceptRun:
    /// each written run (a whole extent where the value is constant, else one index) gets
    /// a child position; a RunList also fills the gaps with fill runs so its runs tile the
    /// fiber. `ptr` holds per-fiber run counts until the run time prefix-sums it (and
    /// merges touching runs of equal values); `left`/`right` grow by doubling.
    RunsOut(RunsOut),
    /// A SparseInterval level of an output, written in order through AcceptRun: a written
    /// run lands in a scratch position (the last value slot); after it, the first run of
    /// a fiber becomes its interval, a touching run of the same value extends it, and
    /// anything else sets `conflict`.
    SparseIntervalOut(SparseIntervalOut),
    /// A read-only structured level (SparsePoint, SparseInterval, SparseBand,
    /// SparseBlockList, RunList, SparseRunList, SparseByteMap, SparseHash): its kind and
    /// its buffers in the order of the storage's `BUFFERS`.
    Structured {
        /// Which level.
        kind: LevelKind,
        /// Size of the mode.
        shape: LocalId,
        /// The level's buffers.
        bufs: Vec<BufId>,
    },
    /// The value buffer.
    Element {
        /// Values.
        val: BufId,
        /// Fill value.
        fill: Value,
    },
    /// Nothing stored.
    Pattern,
}

/// A written SparseHash group read back in the kernel: its entries sorted by key into
/// `order`, split into coordinates `tbl` (outermost mode first) and into fibers of the
/// levels above (`ptr`), with `posmap[r]` the entry (child position) of sorted position
/// `r`; walked like a SparseCOO level. Built by the first read after an insertion
/// (`frozen` says it is current). Scratch buffers of the run.
#[derive(Clone, Debug)]
pub struct HashView {
    /// Sorted keys.
    pub order: BufId,
    /// Fiber boundaries per position of the levels above (`P + 1` entries).
    pub ptr: BufId,
    /// Whether the view matches the table (no insertion since it was built).
    pub frozen: LocalId,
    /// Coordinates (0-based) per mode, outermost first.
    pub tbl: Vec<BufId>,
    /// Entry per sorted position.
    pub posmap: BufId,
}

/// Which run-time array of an output's buffers (`engine::OutBufs`) a written level's
/// kernel buffer is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutArray {
    /// Per-fiber counts or offsets (SparseList, SparseBlockList, run lists, SparseByteMap),
    /// SparseBand widths, SparseInterval right ends.
    Ptr,
    /// Indices (SparseList), set positions (SparseByteMap), per-fiber indices (SparsePoint,
    /// SparseBand), block or run ends, SparseInterval left ends.
    Idx,
    /// SparseByteMap flags.
    Flags,
    /// SparseBlockList block ends, SparseRunList run starts.
    Aux,
}

impl LevelParams {
    /// The kind of a level the kernel writes and the run time freezes in place; `None` for
    /// read levels, Dense levels, leaves and SparseHash groups (recorded as entries).
    pub(crate) fn written_kind(&self) -> Option<LevelKind> {
        Some(match self {
            LevelParams::SparseListOut(SparseListOut { .. }) => LevelKind::SparseList,
            LevelParams::CooOut { modes, .. } => LevelKind::SparseCoo(*modes),
            LevelParams::SparseByteMapOut(SparseByteMapOut { .. }) => LevelKind::SparseByteMap,
            LevelParams::SparsePointOut(SparsePointOut { .. }) => LevelKind::SparsePoint,
            LevelParams::SparseIntervalOut(SparseIntervalOut { .. }) => LevelKind::SparseInterval,
            LevelParams::SparseBandOut(SparseBandOut { .. }) => LevelKind::SparseBand,
            LevelParams::SparseBlockListOut(SparseBlockListOut { .. }) => {
                LevelKind::SparseBlockList
            }
            LevelParams::RunsOut(RunsOut { dense: true, .. }) => LevelKind::RunList,
            LevelParams::RunsOut(RunsOut { dense: false, .. }) => LevelKind::SparseRunList,
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::Coo { .. }
            | LevelParams::HashOut { .. }
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => return None,
        })
    }

    /// The flag a written level sets for data it cannot hold (a second index of a
    /// SparsePoint fiber, an index out of order), if it has one.
    pub(crate) fn conflict_flag(&self) -> Option<LocalId> {
        match self {
            LevelParams::SparsePointOut(SparsePointOut { conflict, .. })
            | LevelParams::SparseIntervalOut(SparseIntervalOut { conflict, .. })
            | LevelParams::RunsOut(RunsOut { conflict, .. })
            | LevelParams::SparseBlockListOut(SparseBlockListOut { conflict, .. })
            | LevelParams::SparseBandOut(SparseBandOut { conflict, .. }) => Some(*conflict),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::HashOut { .. }
            | LevelParams::SparseByteMapOut(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => None,
        }
    }

    /// For a level whose kernel records entries by their linear position (a SparseHash
    /// group, or levels built from recorded entries): how many modes it spans, and
    /// whether it is a SparseHash group.
    pub(crate) fn recorded_modes(&self) -> Option<(usize, bool)> {
        match self {
            LevelParams::HashOut { modes, .. } => Some((*modes, true)),
            LevelParams::CooOut { modes, .. } => Some((*modes, false)),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::Coo { .. }
            | LevelParams::SparseByteMapOut(_)
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::RunsOut(_)
            | LevelParams::SparseIntervalOut(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => None,
        }
    }

    /// The local a level counts its entries in, returned by the kernel (a SparseByteMap's
    /// set positions).
    pub(crate) fn entry_count(&self) -> Option<LocalId> {
        match self {
            LevelParams::SparseByteMapOut(SparseByteMapOut { nsrt, .. }) => Some(*nsrt),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::HashOut { .. }
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::RunsOut(_)
            | LevelParams::SparseIntervalOut(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => None,
        }
    }

    /// Is this a sparse level being written (any `*Out` variant)?
    pub fn is_sparse_out(&self) -> bool {
        is_extruded(self)
            || matches!(
                self,
                LevelParams::SparseByteMapOut(SparseByteMapOut { .. })
                    | LevelParams::HashOut { .. }
            )
    }

    /// The local holding the size of the mode the level indexes (`None` for a leaf).
    pub fn shape(&self) -> Option<LocalId> {
        match self {
            LevelParams::Dense { shape }
            | LevelParams::SparseList { shape, .. }
            | LevelParams::Structured { shape, .. }
            | LevelParams::SparseListOut(SparseListOut { shape, .. })
            | LevelParams::Coo { shape, .. }
            | LevelParams::CooOut { shape, .. }
            | LevelParams::HashOut { shape, .. }
            | LevelParams::SparseByteMapOut(SparseByteMapOut { shape, .. })
            | LevelParams::SparsePointOut(SparsePointOut { shape, .. })
            | LevelParams::SparseBandOut(SparseBandOut { shape, .. })
            | LevelParams::SparseBlockListOut(SparseBlockListOut { shape, .. })
            | LevelParams::RunsOut(RunsOut { shape, .. })
            | LevelParams::SparseIntervalOut(SparseIntervalOut { shape, .. }) => Some(*shape),
            LevelParams::Element { .. } | LevelParams::Pattern => None,
        }
    }

    /// The kernel buffers of a written sparse level, each with the output array it is
    /// bound to (empty for other levels).
    pub fn output_arrays(&self) -> Vec<(BufId, OutArray)> {
        use OutArray::{Aux, Flags, Idx, Ptr};
        match self {
            LevelParams::SparseListOut(SparseListOut { ptr, idx, .. }) => {
                vec![(*ptr, Ptr), (*idx, Idx)]
            }
            LevelParams::CooOut {
                ptr, idx, mode: 0, ..
            } => vec![(*ptr, Ptr), (*idx, Idx)],
            LevelParams::HashOut {
                table,
                keys,
                slot_of,
                mode: 0,
                ..
            } => vec![(*slot_of, Ptr), (*keys, Idx), (*table, Aux)],
            LevelParams::SparseByteMapOut(SparseByteMapOut { ptr, tbl, srt, .. }) => {
                vec![(*ptr, Ptr), (*tbl, Flags), (*srt, Idx)]
            }
            LevelParams::SparsePointOut(SparsePointOut { idx, .. }) => vec![(*idx, Idx)],
            LevelParams::SparseBandOut(SparseBandOut { idx, ofs, .. }) => {
                vec![(*idx, Idx), (*ofs, Ptr)]
            }
            LevelParams::SparseBlockListOut(SparseBlockListOut { ptr, idx, ofs, .. }) => {
                vec![(*ptr, Ptr), (*idx, Idx), (*ofs, Aux)]
            }
            LevelParams::RunsOut(RunsOut {
                ptr, left, right, ..
            }) => {
                let mut v = vec![(*ptr, Ptr), (*right, Idx)];
                v.extend(left.map(|l| (l, Aux)));
                v
            }
            LevelParams::SparseIntervalOut(SparseIntervalOut { left, right, .. }) => {
                vec![(*left, Idx), (*right, Ptr)]
            }
            _ => vec![],
        }
    }
}

/// A tensor of the program as the kernel sees it.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// Declared name.
    pub name: String,
    /// Declaration kind.
    pub kind: DeclKind,
    /// Format.
    pub format: Format,
    /// One entry per level, root first (empty for scalars).
    pub levels: Vec<LevelParams>,
    /// For scalars: the local holding the value (an input and an output of the kernel).
    pub scalar: Option<LocalId>,
    /// For a SparseScalar: the local that is true once it was written since declared (an
    /// input and an output too).
    pub dirty: Option<LocalId>,
    /// Written by the program.
    pub written: bool,
    /// Initial value from a top-level `X .= v` (outputs and temporaries).
    pub init: Option<Value>,
    /// A sparse output the kernel itself freezes (read by a later statement), so the run
    /// time must not prefix-sum it again.
    pub frozen_in_kernel: bool,
}

impl TensorInfo {
    /// Whether the tensor's levels below its leading Dense ones can be written as one
    /// SparseHash group instead (see `any_order_or`): an output or temporary over an
    /// Element or Pattern leaf, not an input updated in place.
    pub fn records_in_any_order(&self) -> bool {
        self.written
            && self.kind != DeclKind::Input
            && matches!(&self.format, Format::Levels(lf) if matches!(lf.leaf(), LevelFormat::Element(_) | LevelFormat::Pattern))
    }

    /// Every level takes writes in any order, repeated (laminate): Dense, SparseByteMap
    /// and SparseHash levels over an Element or Pattern leaf (a Pattern leaf is written
    /// only under a sparse level).
    pub fn takes_writes_in_any_order(&self) -> bool {
        self.levels.iter().all(|l| {
            matches!(
                l,
                LevelParams::Dense { .. }
                    | LevelParams::Element { .. }
                    | LevelParams::Pattern
                    | LevelParams::SparseByteMapOut(SparseByteMapOut { .. })
                    | LevelParams::HashOut { .. }
            )
        })
    }
}
