//! The registry of levels: every inner level once, by the [`LevelKind`] variant that names
//! it, the [`Level`] its module implements and its storage type, which implements
//! [`StoredLevel`]. `LevelKind` and `LevelStorage` ask the level for everything it knows
//! (building, writing, lowering, capabilities; shape, children, validation), so a new
//! level is its module plus its line below.

use super::element::ElementStorage;
use super::format::{Capabilities, IndexWidth, LevelFormat};
use super::level::{FiberChild, KernelBuf};
use super::output::{AllocateAt, FreezeAt, OutBufs, OutputAt};
use super::pattern::PatternStorage;
use crate::algebra::Value;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::looplets::Looplet;
use crate::lower::kit::{LevelAt, LevelParams, Lowerer, StructuredFiber};
use crate::tensor::build::BuildAt;

/// What a level's module tells the rest of the library about levels of its kind. Each
/// method gets the [`LevelKind`] it is asked for (a level spanning several modes reads
/// their number from it). The provided methods are those of a level that is not
/// structured, cannot be written in any order, allocates nothing beyond per-fiber counts
/// and freezes nothing.
pub(crate) trait Level: Sync {
    /// The level's name as written in format strings (without `{N}`).
    fn name(&self) -> &'static str;

    /// What the level can do.
    fn capabilities(&self) -> Capabilities;

    /// Builds a level of this kind from sorted entries (`tensor::build`): its storage and,
    /// through `at.child`, the levels below it.
    fn build(&self, kind: LevelKind, at: &BuildAt) -> Result<LevelStorage>;

    /// A level of this kind from the buffers a kernel wrote it into (`formats::output`).
    fn assemble_output(
        &self,
        kind: LevelKind,
        at: &OutputAt,
        bufs: OutBufs,
    ) -> Result<LevelStorage>;

    /// The kernel parameters of a level of this kind read by a kernel, one per mode.
    fn read_params(
        &self,
        kind: LevelKind,
        kernel: &mut Kernel,
        at: &LevelAt,
        index: IndexWidth,
    ) -> Vec<LevelParams>;

    /// The kernel parameters of a level of this kind that a kernel writes itself above
    /// `child`, one per mode; `None` where the kernel records entries instead and the run
    /// time builds the level from them ([`LevelKind::recorded_params`]).
    fn written_params(
        &self,
        kind: LevelKind,
        kernel: &mut Kernel,
        at: &LevelAt,
        child: &LevelFormat,
    ) -> Option<Vec<LevelParams>>;

    /// The number of modes a format string gives the level (`SparseCOO{2}`), for levels
    /// that take one.
    fn mode_count_param(&self, _kind: LevelKind) -> Option<usize> {
        None
    }

    /// The level of this kind spanning `modes` modes, for levels that take a number.
    fn with_modes(&self, _kind: LevelKind, _modes: usize) -> Option<LevelKind> {
        None
    }

    /// Whether the level stores 32-bit indices when asked (`{UInt32}`).
    fn takes_narrow_indices(&self) -> bool {
        false
    }

    /// The looplets of a structured level's fiber (`lower/unfurl/structured.rs`).
    fn unfurl_structured(&self, _lw: &mut Lowerer, _cx: &StructuredFiber) -> Result<Looplet> {
        Err(Error::Program(format!(
            "internal: {} is not a structured level",
            self.name()
        )))
    }

    /// The kernel parameters of the level written in any order as a group of `modes`
    /// modes, for the levels the compiler writes instead of an output's own
    /// ([`LevelKind::ANY_ORDER_VECTOR`], [`LevelKind::ANY_ORDER_GROUP`]).
    fn any_order_params(
        &self,
        _kernel: &mut Kernel,
        _at: &LevelAt,
        _modes: usize,
    ) -> Option<Vec<LevelParams>> {
        None
    }

    /// How many levels of this kind `level` starts that run down to an Element or
    /// Pattern leaf, for a level a kernel writes as one group in any order.
    fn any_order_modes(&self, _level: &LevelFormat) -> Option<usize> {
        None
    }

    /// Allocates the buffers a written level of this kind starts with, beyond per-fiber
    /// counts in `ptr` (`engine`).
    fn allocate_output(&self, _bufs: &mut OutBufs, _at: &AllocateAt) -> Result<()> {
        Ok(())
    }

    /// Freezes a written level of this kind in place after its kernel ran.
    fn freeze_output(&self, _bufs: &mut OutBufs, _at: &FreezeAt) -> Result<()> {
        Ok(())
    }

    /// What a kernel wrote that a level of this kind written in order cannot hold, for the
    /// levels whose kernels flag it (`None`: the level takes anything written to it).
    fn write_conflict(&self) -> Option<&'static str> {
        None
    }
}

/// The run-time storage of one inner level, as the rest of the library asks it (through
/// [`LevelStorage`]): each level's storage implements it in its module. The provided
/// methods read the level through [`StoredLevel::children`].
pub(crate) trait StoredLevel {
    /// The level's kind.
    fn kind(&self) -> LevelKind;

    /// The child level.
    fn child(&self) -> &LevelStorage;

    /// Sizes of the modes this level spans, innermost first.
    fn shape(&self) -> Vec<usize>;

    /// The children of fiber `p` of a one-mode level as `(first index, last index, child
    /// position)`, in index order; `None` for a level of several modes.
    fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>>;

    /// Checks the level's invariants for `parents` parent positions; returns the number of
    /// child positions.
    fn validate(&self, depth: usize, parents: usize) -> Result<usize>;

    /// The buffers a compiled kernel reads, in the order of the level's `BUFFERS` names.
    fn kernel_buffers(&self) -> Vec<KernelBuf<'_>>;

    /// The number of child positions below `parents` parent positions (valid storage).
    fn positions(&self, parents: usize) -> usize;

    /// The checks that read the child's values, once the child is known to be well formed
    /// (the levels whose child positions may hold unstored entries).
    fn validate_unstored(&self, _depth: usize) -> Result<()> {
        Ok(())
    }

    /// How the level's stored index buffers differ from the width its format declares, or
    /// `None` when they agree.
    fn index_width_mismatch(&self, _index: IndexWidth) -> Option<String> {
        None
    }

    /// The children of fiber `p`, in storage order, as (per mode, outermost first, the
    /// `(first, last)` indices the child covers; child position).
    fn fiber(&self, p: usize) -> Vec<FiberChild> {
        self.children(p)
            .unwrap_or_default()
            .into_iter()
            .map(|(a, b, q)| (vec![(a, b)], q))
            .collect()
    }

    /// The value at coordinates (outermost mode first) below fiber `p`, or `None` when it
    /// is not stored (valid storage).
    fn get(&self, p: usize, coords: &[usize]) -> Option<Value> {
        let i = *coords.first()?;
        let (_, _, q) = self
            .children(p)?
            .into_iter()
            .find(|&(a, b, _)| a <= i && i <= b)?;
        self.child().get(q, &coords[1..])
    }

    /// Calls `f(coords, value)` for every stored leaf position below fiber `p`, in storage
    /// order (a run's child once per index it covers; valid storage).
    fn walk(&self, p: usize, prefix: &mut Vec<usize>, f: &mut dyn FnMut(&[usize], Value)) {
        for (a, b, q) in self.children(p).unwrap_or_default() {
            for i in a..=b {
                prefix.push(i);
                self.child().walk(q, prefix, f);
                prefix.pop();
            }
        }
    }
}

/// A level of a fiber tree as the library reads it: an inner level's storage, or a leaf.
pub(crate) enum Node<'a> {
    /// An inner level.
    Inner(&'a dyn StoredLevel),
    /// An Element leaf.
    Element(&'a ElementStorage),
    /// A Pattern leaf (it stores nothing).
    Pattern,
}

/// Makes [`LevelKind`] and [`LevelStorage`] from the registry's lines (`Variant => level
/// [storage]`, a variant spanning several modes written `Variant(usize)`), with their
/// dispatches, [`LevelKind::level`] and [`LevelStorage::node`].
macro_rules! registry {
    ($( $(#[$doc:meta])* $kind:ident $(($modes:ty))? => $level:path [$storage:ty], )*) => {
        /// The kind of a non-leaf level.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum LevelKind {
            $( $(#[$doc])* $kind $(($modes))?, )*
        }

        impl LevelKind {
            /// Every level once, in the registry's order (a level spanning several modes
            /// as of one: `SparseCOO{1}`).
            pub const ALL: &'static [LevelKind] = &[
                $( LevelKind::$kind $((registry!(@one $modes)))?, )*
            ];

            /// The level's module.
            pub(crate) fn level(self) -> &'static dyn Level {
                match self {
                    $( LevelKind::$kind { .. } => &$level, )*
                }
            }
        }

        /// Storage of one level and (recursively) its children.
        #[derive(Clone, Debug, PartialEq)]
        pub enum LevelStorage {
            $( $(#[$doc])* $kind($storage), )*
            /// An Element leaf.
            Element(ElementStorage),
            /// A Pattern leaf.
            Pattern(PatternStorage),
        }

        impl LevelStorage {
            /// The level as the library reads it.
            pub(crate) fn node(&self) -> Node<'_> {
                match self {
                    $( LevelStorage::$kind(l) => Node::Inner(l), )*
                    LevelStorage::Element(e) => Node::Element(e),
                    LevelStorage::Pattern(_) => Node::Pattern,
                }
            }
        }
    };
    (@one $modes:ty) => { 1 };
}

registry! {
    /// Every index stored (`Dense`).
    Dense => super::dense::Dense [super::dense::DenseStorage],
    /// Sorted list of stored indices (`SparseList`): CSR/CSC/DCSR.
    SparseList => super::sparse_list::SparseList [super::sparse_list::SparseListStorage],
    /// At most one stored index per fiber (`SparsePoint`).
    SparsePoint => super::sparse_point::SparsePoint [super::sparse_point::SparsePointStorage],
    /// One run of stored indices per fiber (`SparseInterval`).
    SparseInterval => super::sparse_interval::SparseInterval [super::sparse_interval::SparseIntervalStorage],
    /// One contiguous block per fiber (`SparseBand`).
    SparseBand => super::sparse_band::SparseBand [super::sparse_band::SparseBandStorage],
    /// Variable-length blocks (`SparseBlockList`, VBL).
    SparseBlockList => super::sparse_block_list::SparseBlockList [super::sparse_block_list::SparseBlockListStorage],
    /// Runs of equal subfibers covering the dimension (`RunList`).
    RunList => super::run_list::RunList [super::run_list::RunListStorage],
    /// Sparse runs of equal subfibers (`SparseRunList`).
    SparseRunList => super::sparse_run_list::SparseRunList [super::sparse_run_list::SparseRunListStorage],
    /// Hash map from index to child (`SparseHash`).
    SparseHash => super::sparse_hash::SparseHash [super::sparse_hash::SparseHashStorage],
    /// Dense bytemap plus a list of set indices (`SparseByteMap`).
    SparseByteMap => super::sparse_byte_map::SparseByteMap [super::sparse_byte_map::SparseByteMapStorage],
    /// `N` coordinate lists in one level spanning `N` modes (`SparseCOO{N}`).
    SparseCoo(usize) => super::sparse_coo::SparseCoo [super::sparse_coo::SparseCooStorage],
}

/// What a level's `impl Level` names (each level module imports it).
pub(crate) mod kit {
    pub(crate) use super::{Level, LevelKind, StoredLevel};
    pub(crate) use crate::algebra::Value;
    pub(crate) use crate::formats::format::{Capabilities, IndexWidth, LevelFormat};
    pub(crate) use crate::formats::level::{FiberChild, KernelBuf};
    pub(crate) use crate::formats::output::{AllocateAt, FreezeAt, OutBufs, OutputAt};
    pub(crate) use crate::kernel::Kernel;
    pub(crate) use crate::looplets::Looplet;
    pub(crate) use crate::lower::kit::{LevelAt, LevelParams, Lowerer, StructuredFiber};
    pub(crate) use crate::tensor::build::BuildAt;
}
