//! What the kernel sees of each tensor: the kernel parameters of each of its levels
//! (buffers, sizes, and the state of written levels) and the tensor's facts.

use super::*;

use std::fmt;

use crate::kernel::KStmt;
use crate::looplets::Looplet;
use crate::lower::Lowerer;

/// The kernel parameters of one level of a tensor.
#[derive(Clone, Debug)]
pub enum LevelParams {
    /// `shape` as an `i64` input local.
    Dense {
        /// Size of the mode.
        shape: LocalId,
    },
    /// A level read by a kernel whose module reads it with parameters of its own (a
    /// sorted list, the modes of a SparseCOO level), behind [`ReadLevel`].
    Read(Read),
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
    /// A level the kernel writes itself (in order, or in any order): its module's
    /// parameters (`lowering::OutParams`), behind [`WrittenLevel`].
    Written(Written),
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

/// What the lowering and the run time ask of a level a kernel reads with parameters of its
/// own module (`lowering::ReadParams`; the structured levels share
/// [`LevelParams::Structured`]).
pub(crate) trait ReadLevel: fmt::Debug + Send + Sync {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn ReadLevel>;

    /// The local holding the size of the mode.
    fn shape(&self) -> LocalId;

    /// The kernel buffers bound to the tensor's storage, in the order the storage lists
    /// them, and whether the next level's storage is the child's.
    fn read_buffers(&self) -> (Vec<BufId>, bool);

    /// The looplet nest of fiber `f` of the level (only where `present` holds when given,
    /// for a level that reads itself where a condition holds).
    fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, present: Option<&KExpr>) -> Result<Looplet>;

    /// Whether the level's own read takes a condition (in a fiber read, `read`).
    fn reads_itself_where(&self, read: bool) -> bool;

    /// For one mode of a group of modes: which mode, and how many.
    fn read_group_mode(&self) -> Option<(usize, usize)> {
        None
    }
}

/// A read level's parameters ([`LevelParams::Read`]).
pub struct Read(Box<dyn ReadLevel>);

impl Read {
    /// The parameters `p` of a read level.
    pub(crate) fn new(p: impl ReadLevel + 'static) -> Read {
        Read(Box::new(p))
    }

    /// The level's parameters.
    pub(crate) fn get(&self) -> &dyn ReadLevel {
        self.0.as_ref()
    }
}

impl Clone for Read {
    fn clone(&self) -> Read {
        Read(self.0.clone_box())
    }
}

impl fmt::Debug for Read {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What the lowering and the run time ask of a level a kernel writes itself. Each written
/// level's parameters (its module's `lowering::OutParams`) implement it; the provided
/// methods are those of a level written in order that holds no more state than its
/// claim flag.
pub(crate) trait WrittenLevel: fmt::Debug + Send + Sync {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn WrittenLevel>;

    /// How a kernel writes the level (its module's `WRITE_TRAITS`).
    fn write_traits(&self) -> WriteTraits;

    /// The local holding the size of the mode.
    fn shape(&self) -> LocalId;

    /// The flag the level claims an index with, and for a hash table the local of the
    /// entry being written.
    fn claim_state_mut(&mut self) -> (&mut LocalId, Option<&mut LocalId>);

    /// The level's kernel buffers, each with the output array it is bound to.
    fn output_arrays(&self) -> Vec<(BufId, OutArray)>;

    /// The looplet nest of fiber `f` of the level (written, or read back where the level
    /// allows; read only where `present` holds when given, for a level that reads itself
    /// where a condition holds).
    fn unfurl(&self, lw: &mut Lowerer, f: &Fiber, present: Option<&KExpr>) -> Result<Looplet>;

    /// The kind of the level the run time freezes in place; `None` for a SparseHash group
    /// (recorded as entries).
    fn written_kind(&self) -> Option<LevelKind>;

    /// Whether the level, read back (`read`), takes a condition in its own read.
    fn reads_itself_where(&self, _read: bool) -> bool {
        false
    }

    /// `w .= v` of a workspace inside a loop, emptied by the level the way it knows.
    fn reset_workspace(&self, _leaf: Option<(BufId, Value)>, _q: LocalId) -> Option<Vec<KStmt>> {
        None
    }

    /// The code that freezes the level in the kernel for a later statement to read it.
    fn freeze_in_kernel(&self, _p: LocalId) -> Option<Vec<KStmt>> {
        None
    }

    /// Buffers the kernel uses as scratch space of its own.
    fn scratch_buffers(&self) -> Vec<BufId> {
        vec![]
    }

    /// Whether the level, read back, can be searched where it would be walked.
    fn searchable(&self) -> bool {
        false
    }

    /// For one mode of a group of modes read back: which mode, and how many.
    fn read_group_mode(&self) -> Option<(usize, usize)> {
        None
    }

    /// The flag the level sets for data it cannot hold.
    fn conflict_flag(&self) -> Option<LocalId> {
        None
    }

    /// For a level recording entries by their linear position: how many modes it spans,
    /// and whether it is a SparseHash group.
    fn recorded_modes(&self) -> Option<(usize, bool)> {
        None
    }

    /// The local the level counts its set positions in (a SparseByteMap's).
    fn entry_count(&self) -> Option<LocalId> {
        None
    }

    /// The local counting the entries of a written SparseHash group.
    fn hash_entry_count(&self) -> Option<LocalId> {
        None
    }

    /// Whether the run time builds the levels from the recorded entries in a format of
    /// their own.
    fn rebuilt_from_entries(&self) -> bool {
        false
    }
}

/// A written level's parameters ([`LevelParams::Written`]).
pub struct Written(Box<dyn WrittenLevel>);

impl Written {
    /// The parameters `p` of a written level.
    pub(crate) fn new(p: impl WrittenLevel + 'static) -> Written {
        Written(Box::new(p))
    }

    /// The level's parameters.
    pub(crate) fn get(&self) -> &dyn WrittenLevel {
        self.0.as_ref()
    }

    fn get_mut(&mut self) -> &mut dyn WrittenLevel {
        self.0.as_mut()
    }
}

impl Clone for Written {
    fn clone(&self) -> Written {
        Written(self.0.clone_box())
    }
}

impl fmt::Debug for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
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
    /// The parameters `p` of a level a kernel reads with its module's own parameters.
    pub(crate) fn read(p: impl ReadLevel + 'static) -> LevelParams {
        LevelParams::Read(Read::new(p))
    }

    /// The parameters `p` of a level the kernel writes itself.
    pub(crate) fn written(p: impl WrittenLevel + 'static) -> LevelParams {
        LevelParams::Written(Written::new(p))
    }

    /// The written level's parameters, for a level the kernel writes itself.
    pub(crate) fn as_written(&self) -> Option<&dyn WrittenLevel> {
        match self {
            LevelParams::Written(w) => Some(w.get()),
            LevelParams::Dense { .. }
            | LevelParams::Read(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => None,
        }
    }

    /// How a kernel writes this level ([`WriteTraits::READ_ONLY`] for read levels, Dense
    /// levels and leaves).
    pub(crate) fn write_traits(&self) -> WriteTraits {
        self.as_written()
            .map_or(WriteTraits::READ_ONLY, WrittenLevel::write_traits)
    }

    /// `w .= v` of a workspace inside a loop, emptied by the level the way it knows
    /// (`leaf`: the leaf's values and the value they start from; `q` a fresh local);
    /// `None` for levels that do not empty themselves (Dense levels: the leaf is set).
    pub(crate) fn reset_workspace(
        &self,
        leaf: Option<(BufId, Value)>,
        q: LocalId,
    ) -> Option<Vec<crate::kernel::KStmt>> {
        self.as_written()?.reset_workspace(leaf, q)
    }

    /// The code that freezes a written level in the kernel for a later statement to read
    /// it (`p` a fresh local), for the levels whose `freezes_in_kernel` trait says so.
    pub(crate) fn freeze_in_kernel(&self, p: LocalId) -> Option<Vec<crate::kernel::KStmt>> {
        self.as_written()?.freeze_in_kernel(p)
    }

    /// The kernel buffers of a level read from a tensor passed in, in the order its
    /// storage lists them (`LevelStorage::kernel_buffers`), and whether the next level's
    /// storage is the child's (not for the modes of a SparseCOO level above its last,
    /// which share its storage; the first mode binds its buffers); `None` for written
    /// levels.
    pub(crate) fn read_buffers(&self) -> Option<(Vec<BufId>, bool)> {
        Some(match self {
            LevelParams::Dense { .. } => (vec![], true),
            LevelParams::Read(r) => r.get().read_buffers(),
            LevelParams::Structured { bufs, .. } => (bufs.clone(), true),
            LevelParams::Element { val, .. } => (vec![*val], false),
            LevelParams::Pattern => (vec![], false),
            LevelParams::Written(_) => return None,
        })
    }

    /// Buffers the kernel uses as scratch space of its own (a SparseHash group's view
    /// for reading it back, on its first mode).
    pub(crate) fn scratch_buffers(&self) -> Vec<BufId> {
        self.as_written()
            .map_or_else(Vec::new, WrittenLevel::scratch_buffers)
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
            | LevelParams::Read(_)
            | LevelParams::Structured { .. }
            | LevelParams::Written(_) => None,
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
            LevelParams::Read(_) | LevelParams::Structured { .. } => true,
            LevelParams::Written(w) => w.get().searchable(),
            LevelParams::Dense { .. } | LevelParams::Element { .. } | LevelParams::Pattern => false,
        }
    }

    /// For one mode of a level read as a group of modes (a SparseCOO level, a SparseHash
    /// group read back): which mode, and how many.
    pub(crate) fn read_group_mode(&self) -> Option<(usize, usize)> {
        match self {
            LevelParams::Read(r) => r.get().read_group_mode(),
            LevelParams::Written(w) => w.get().read_group_mode(),
            LevelParams::Dense { .. }
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => None,
        }
    }

    /// The flag a written level claims an index with, and for a hash table the local of
    /// the entry being written; `None` for levels that claim nothing (read levels,
    /// Dense levels, leaves).
    pub(crate) fn claim_state_mut(&mut self) -> Option<(&mut LocalId, Option<&mut LocalId>)> {
        match self {
            LevelParams::Written(w) => Some(w.get_mut().claim_state_mut()),
            LevelParams::Dense { .. }
            | LevelParams::Read(_)
            | LevelParams::Structured { .. }
            | LevelParams::Element { .. }
            | LevelParams::Pattern => None,
        }
    }

    /// The kind of a level the kernel writes and the run time freezes in place; `None` for
    /// read levels, Dense levels, leaves and SparseHash groups (recorded as entries).
    pub(crate) fn written_kind(&self) -> Option<LevelKind> {
        self.as_written()?.written_kind()
    }

    /// The flag a written level sets for data it cannot hold (a second index of a
    /// SparsePoint fiber, an index out of order), if it has one.
    pub(crate) fn conflict_flag(&self) -> Option<LocalId> {
        self.as_written()?.conflict_flag()
    }

    /// For a level whose kernel records entries by their linear position (a SparseHash
    /// group, or levels built from recorded entries): how many modes it spans, and
    /// whether it is a SparseHash group.
    pub(crate) fn recorded_modes(&self) -> Option<(usize, bool)> {
        self.as_written()?.recorded_modes()
    }

    /// The local a level counts its entries in, returned by the kernel (a SparseByteMap's
    /// set positions).
    pub(crate) fn entry_count(&self) -> Option<LocalId> {
        self.as_written()?.entry_count()
    }

    /// The local counting the entries of a written SparseHash group (on each of its
    /// modes).
    pub(crate) fn hash_entry_count(&self) -> Option<LocalId> {
        self.as_written()?.hash_entry_count()
    }

    /// Levels the kernel records as entries for the run time to build in their own
    /// format (one it does not assemble itself).
    pub(crate) fn rebuilt_from_entries(&self) -> bool {
        self.as_written()
            .is_some_and(WrittenLevel::rebuilt_from_entries)
    }

    /// Is this a sparse level being written?
    pub fn is_sparse_out(&self) -> bool {
        let w = self.write_traits();
        w.extruded || w.repeated
    }

    /// The local holding the size of the mode the level indexes (`None` for a leaf).
    pub fn shape(&self) -> Option<LocalId> {
        match self {
            LevelParams::Dense { shape } | LevelParams::Structured { shape, .. } => Some(*shape),
            LevelParams::Read(r) => Some(r.get().shape()),
            LevelParams::Written(w) => Some(w.get().shape()),
            LevelParams::Element { .. } | LevelParams::Pattern => None,
        }
    }

    /// The kernel buffers of a written sparse level, each with the output array it is
    /// bound to (empty for other levels).
    pub fn output_arrays(&self) -> Vec<(BufId, OutArray)> {
        self.as_written()
            .map_or_else(Vec::new, WrittenLevel::output_arrays)
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
        self.levels.iter().all(|l| match l {
            LevelParams::Dense { .. } | LevelParams::Element { .. } | LevelParams::Pattern => true,
            LevelParams::Written(w) => w.get().write_traits().repeated,
            LevelParams::Read(_) | LevelParams::Structured { .. } => false,
        })
    }
}
