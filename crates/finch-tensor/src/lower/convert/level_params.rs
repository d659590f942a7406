//! What the kernel sees of each tensor: the kernel parameters of each of its levels
//! (buffers, sizes, and the state of written levels) and the tensor's facts.

use super::*;

// The parameters of the levels whose modules own their write side (each module's
// `lowering::OutParams`), named after their `LevelParams` variants.
pub use crate::formats::run_list::lowering::OutParams as RunsOut;
pub use crate::formats::sparse_band::lowering::OutParams as SparseBandOut;
pub use crate::formats::sparse_block_list::lowering::OutParams as SparseBlockListOut;
pub use crate::formats::sparse_byte_map::lowering::OutParams as SparseByteMapOut;
pub use crate::formats::sparse_hash::lowering::OutParams as HashOut;
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
    /// repeated), one hash table over every mode of the group.
    HashOut(HashOut),
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

/// How a kernel writes a level, as the lowering's checks ask it (each written level's
/// module says it in its `lowering::WRITE_TRAITS`; read levels and leaves are
/// [`WriteTraits::READ_ONLY`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteTraits {
    /// Written in order, once per index (extrude): a second statement writing it, or a
    /// read after the write, is refused.
    pub extruded: bool,
    /// Written in any order, an index again and again (laminate).
    pub repeated: bool,
    /// Child positions are handed out as entries arrive, so the leaf's values grow.
    pub child_grows: bool,
    /// Child positions are dense (`p · shape + i`) and the level marks which are set: a
    /// workspace is emptied by clearing what was set, and only a root level is read
    /// back in the kernel that writes it.
    pub marks_dense_children: bool,
    /// Records the indices a Pattern leaf (which stores nothing) is written at.
    pub records_pattern: bool,
    /// A fiber keeps its state between passes over it (a later pass adds to it or
    /// conflicts), so a pass does not start the level over.
    pub keeps_fibers: bool,
    /// The kernel can freeze it in place, so a later statement reads it back.
    pub freezes_in_kernel: bool,
    /// As a temporary vector (the only level over an Element leaf), a later statement
    /// of the kernel reads it back after its writes.
    pub vector_read_back: bool,
}

impl WriteTraits {
    /// Not written by the kernel (or written in place: Dense levels, leaves).
    pub(crate) const READ_ONLY: WriteTraits = WriteTraits {
        extruded: false,
        repeated: false,
        child_grows: false,
        marks_dense_children: false,
        records_pattern: false,
        keeps_fibers: false,
        freezes_in_kernel: false,
        vector_read_back: false,
    };
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
    /// How a kernel writes this level ([`WriteTraits::READ_ONLY`] for read levels, Dense
    /// levels and leaves).
    pub(crate) fn write_traits(&self) -> WriteTraits {
        use crate::formats::{
            run_list, sparse_band, sparse_block_list, sparse_byte_map, sparse_coo, sparse_hash,
            sparse_interval, sparse_list, sparse_point,
        };
        match self {
            LevelParams::SparseListOut(_) => sparse_list::lowering::WRITE_TRAITS,
            LevelParams::CooOut { .. } => sparse_coo::lowering::WRITE_TRAITS,
            LevelParams::HashOut(_) => sparse_hash::lowering::WRITE_TRAITS,
            LevelParams::SparseByteMapOut(_) => sparse_byte_map::lowering::WRITE_TRAITS,
            LevelParams::SparsePointOut(_) => sparse_point::lowering::WRITE_TRAITS,
            LevelParams::SparseBandOut(_) => sparse_band::lowering::WRITE_TRAITS,
            LevelParams::SparseBlockListOut(_) => sparse_block_list::lowering::WRITE_TRAITS,
            LevelParams::RunsOut(_) => run_list::lowering::WRITE_TRAITS,
            LevelParams::SparseIntervalOut(_) => sparse_interval::lowering::WRITE_TRAITS,
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::Coo { .. }
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => WriteTraits::READ_ONLY,
        }
    }

    /// `w .= v` of a workspace inside a loop, emptied by the level the way it knows
    /// (`leaf`: the leaf's values and the value they start from; `q` a fresh local);
    /// `None` for levels that do not empty themselves (Dense levels: the leaf is set).
    pub(crate) fn reset_workspace(
        &self,
        leaf: Option<(BufId, Value)>,
        q: LocalId,
    ) -> Option<Vec<crate::kernel::KStmt>> {
        use crate::formats::{run_list, sparse_byte_map, sparse_hash, sparse_list};
        Some(match self {
            LevelParams::RunsOut(p) => run_list::lowering::reset(p),
            LevelParams::SparseListOut(p) => sparse_list::lowering::reset(p),
            LevelParams::HashOut(p) => sparse_hash::lowering::reset(p, q),
            LevelParams::SparseByteMapOut(p) => sparse_byte_map::lowering::reset(p, leaf, q),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::SparseIntervalOut(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => return None,
        })
    }

    /// The code that freezes a written level in the kernel for a later statement to read
    /// it (`p` a fresh local), for the levels whose `freezes_in_kernel` trait says so.
    pub(crate) fn freeze_in_kernel(&self, p: LocalId) -> Option<Vec<crate::kernel::KStmt>> {
        match self {
            LevelParams::SparseListOut(out) => Some(
                crate::formats::sparse_list::lowering::freeze_in_kernel(out, p),
            ),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::HashOut(_)
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

    /// The kernel buffers of a level read from a tensor passed in, in the order its
    /// storage lists them (`LevelStorage::kernel_buffers`), and whether the next level's
    /// storage is the child's (not for the modes of a SparseCOO level above its last,
    /// which share its storage; the first mode binds its buffers); `None` for written
    /// levels.
    pub(crate) fn read_buffers(&self) -> Option<(Vec<BufId>, bool)> {
        Some(match self {
            LevelParams::Dense { .. } => (vec![], true),
            LevelParams::SparseList { ptr, idx, .. } => (vec![*ptr, *idx], true),
            LevelParams::Coo {
                ptr,
                tbl,
                mode,
                modes,
                ..
            } => {
                let bufs = if *mode == 0 {
                    std::iter::once(*ptr).chain(tbl.iter().copied()).collect()
                } else {
                    vec![]
                };
                (bufs, *mode + 1 == *modes)
            }
            LevelParams::Structured { bufs, .. } => (bufs.clone(), true),
            LevelParams::Element { val, .. } => (vec![*val], false),
            LevelParams::Pattern => (vec![], false),
            LevelParams::SparseListOut(_)
            | LevelParams::CooOut { .. }
            | LevelParams::HashOut(_)
            | LevelParams::SparseByteMapOut(_)
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::RunsOut(_)
            | LevelParams::SparseIntervalOut(_) => return None,
        })
    }

    /// Buffers the kernel uses as scratch space of its own (a SparseHash group's view
    /// for reading it back, on its first mode).
    pub(crate) fn scratch_buffers(&self) -> Vec<BufId> {
        match self {
            LevelParams::HashOut(p) if p.mode == 0 => p.view.scratch_buffers(),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::HashOut(_)
            | LevelParams::SparseByteMapOut(_)
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::RunsOut(_)
            | LevelParams::SparseIntervalOut(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => vec![],
        }
    }

    /// The parameters of a leaf; `None` for inner levels.
    pub(crate) fn as_leaf(&self) -> Option<LeafParams> {
        match self {
            LevelParams::Element { val, fill } => Some(LeafParams::Element {
                val: *val,
                fill: *fill,
            }),
            LevelParams::Pattern => Some(LeafParams::Pattern),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::HashOut(_)
            | LevelParams::SparseByteMapOut(_)
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::RunsOut(_)
            | LevelParams::SparseIntervalOut(_)
            | LevelParams::Structured { .. } => None,
        }
    }

    /// A Dense level (its positions are `parent · shape + index`).
    pub(crate) fn is_dense(&self) -> bool {
        matches!(self, LevelParams::Dense { .. })
    }

    /// A leaf (Element or Pattern).
    pub(crate) fn is_leaf(&self) -> bool {
        matches!(self, LevelParams::Element { .. } | LevelParams::Pattern)
    }

    /// Can the level, read, be searched (`follow`) where it would be walked? Sorted
    /// lists (a SparseList, a SparseCOO mode, a written list or hash table read back)
    /// and structured levels are; Dense levels are looked up anyway.
    pub(crate) fn searchable(&self) -> bool {
        match self {
            LevelParams::SparseList { .. }
            | LevelParams::Structured { .. }
            | LevelParams::Coo { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::HashOut(_) => true,
            LevelParams::Dense { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::SparseByteMapOut(_)
            | LevelParams::SparsePointOut(_)
            | LevelParams::SparseBandOut(_)
            | LevelParams::SparseBlockListOut(_)
            | LevelParams::RunsOut(_)
            | LevelParams::SparseIntervalOut(_)
            | LevelParams::Element { .. }
            | LevelParams::Pattern => false,
        }
    }

    /// For one mode of a level read as a group of modes (a SparseCOO level, a SparseHash
    /// group read back): which mode, and how many.
    pub(crate) fn read_group_mode(&self) -> Option<(usize, usize)> {
        match self {
            LevelParams::Coo { mode, modes, .. } => Some((*mode, *modes)),
            LevelParams::HashOut(p) => Some((p.mode, p.modes)),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::SparseListOut(_)
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

    /// The flag a written level claims an index with, and for a hash table the local of
    /// the entry being written; `None` for levels that claim nothing (read levels,
    /// Dense levels, leaves).
    pub(crate) fn claim_state_mut(&mut self) -> Option<(&mut LocalId, Option<&mut LocalId>)> {
        Some(match self {
            LevelParams::HashOut(p) => (&mut p.dirty, Some(&mut p.at)),
            LevelParams::SparseListOut(SparseListOut { dirty, .. })
            | LevelParams::CooOut { dirty, .. }
            | LevelParams::SparseByteMapOut(SparseByteMapOut { dirty, .. })
            | LevelParams::SparsePointOut(SparsePointOut { dirty, .. })
            | LevelParams::SparseBlockListOut(SparseBlockListOut { dirty, .. })
            | LevelParams::RunsOut(RunsOut { dirty, .. })
            | LevelParams::SparseIntervalOut(SparseIntervalOut { dirty, .. })
            | LevelParams::SparseBandOut(SparseBandOut { dirty, .. }) => (dirty, None),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::Coo { .. }
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => return None,
        })
    }

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
            | LevelParams::HashOut(_)
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
            | LevelParams::HashOut(_)
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
            LevelParams::HashOut(HashOut { modes, .. }) => Some((*modes, true)),
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
            | LevelParams::HashOut(_)
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

    /// The local counting the entries of a written SparseHash group (on each of its
    /// modes).
    pub(crate) fn hash_entry_count(&self) -> Option<LocalId> {
        match self {
            LevelParams::HashOut(p) => Some(p.count),
            LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::SparseListOut(_)
            | LevelParams::Coo { .. }
            | LevelParams::CooOut { .. }
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

    /// Levels the kernel records as entries for the run time to build in their own
    /// format (one it does not assemble itself).
    pub(crate) fn rebuilt_from_entries(&self) -> bool {
        matches!(self, LevelParams::CooOut { rebuilt: true, .. })
    }

    /// Is this a sparse level being written (any `*Out` variant)?
    pub fn is_sparse_out(&self) -> bool {
        let w = self.write_traits();
        w.extruded || w.repeated
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
            | LevelParams::HashOut(HashOut { shape, .. })
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
            LevelParams::HashOut(HashOut {
                table,
                keys,
                slot_of,
                mode: 0,
                ..
            }) => vec![(*slot_of, Ptr), (*keys, Idx), (*table, Aux)],
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
            LevelParams::CooOut { .. }
            | LevelParams::HashOut(_)
            | LevelParams::Dense { .. }
            | LevelParams::SparseList { .. }
            | LevelParams::Coo { .. }
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => vec![],
        }
    }
}

/// The kernel parameters of a leaf ([`LevelParams::as_leaf`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeafParams {
    /// An Element leaf: its values and fill.
    Element {
        /// Values.
        val: BufId,
        /// Fill value.
        fill: Value,
    },
    /// A Pattern leaf: nothing stored.
    Pattern,
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
    /// Every level is Dense, over an Element leaf: every position holds a value in place.
    pub fn holds_dense_values(&self) -> bool {
        self.levels
            .iter()
            .all(|l| l.is_dense() || matches!(l, LevelParams::Element { .. }))
    }

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
                    | LevelParams::HashOut(_)
            )
        })
    }
}
