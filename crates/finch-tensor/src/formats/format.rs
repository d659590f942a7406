//! The format tree and its text form.

use crate::algebra::{ScalarType, Value};

pub use super::registry::LevelKind;

impl LevelKind {
    /// The level's mode count as its format string writes it (`SparseCOO{2}`), for the
    /// levels that take one.
    pub fn mode_count_param(self) -> Option<usize> {
        self.level().mode_count_param(self)
    }

    /// The level of this kind spanning `modes` modes (`SparseCOO{modes}`), for the levels
    /// whose format string gives a number of modes.
    pub fn with_modes(self, modes: usize) -> Option<LevelKind> {
        self.level().with_modes(self, modes)
    }

    /// The registry: every level as written in a format string, with each index width a
    /// level takes (`SparseList{UInt32}`) and a level of several modes as of one
    /// (`SparseCOO{1}`). Tests and tools iterate it instead of lists of their own, so a
    /// new level reaches them all.
    pub fn registry() -> Vec<String> {
        let mut names = Vec::new();
        for &kind in LevelKind::ALL {
            match kind.mode_count_param() {
                Some(n) => names.push(format!("{}{{{n}}}", kind.name())),
                None => names.push(kind.name().to_string()),
            }
            if kind.takes_narrow_indices() {
                names.push(format!("{}{{UInt32}}", kind.name()));
            }
        }
        names
    }

    /// Whether the level stores 32-bit indices when asked (`{UInt32}`).
    pub fn takes_narrow_indices(self) -> bool {
        self.level().takes_narrow_indices()
    }

    /// Builds a level of this kind from sorted entries (`tensor::build`): its storage and,
    /// through `at.child`, the levels below it.
    pub(crate) fn build(
        self,
        at: &crate::tensor::build::BuildAt,
    ) -> crate::error::Result<super::LevelStorage> {
        self.level().build(self, at)
    }

    /// A level of this kind from the buffers a kernel wrote it into (`formats::output`).
    pub(crate) fn assemble_output(
        self,
        at: &super::output::OutputAt,
        bufs: super::output::OutBufs,
    ) -> crate::error::Result<super::LevelStorage> {
        self.level().assemble_output(self, at, bufs)
    }

    /// The looplets of a structured level's fiber (`lower/unfurl/structured.rs`): each
    /// level's read rule, in its module's `lowering`.
    pub(crate) fn unfurl_structured(
        self,
        lw: &mut crate::lower::kit::Lowerer,
        cx: &crate::lower::kit::StructuredFiber,
    ) -> crate::error::Result<crate::looplets::Looplet> {
        self.level().unfurl_structured(lw, cx)
    }

    /// The kernel parameters of a level of this kind read by a kernel, one per mode.
    pub(crate) fn read_params(
        self,
        kernel: &mut crate::kernel::Kernel,
        at: &crate::lower::kit::LevelAt,
        index: IndexWidth,
    ) -> Vec<crate::lower::kit::LevelParams> {
        self.level().read_params(self, kernel, at, index)
    }

    /// The kernel parameters of a level of this kind that a kernel writes itself above
    /// `child` (in order, in place, or a SparseByteMap in any order), one per mode; `None`
    /// where the kernel records entries instead and the run time builds the level from
    /// them ([`LevelKind::recorded_params`]).
    pub(crate) fn written_params(
        self,
        kernel: &mut crate::kernel::Kernel,
        at: &crate::lower::kit::LevelAt,
        child: &LevelFormat,
    ) -> Option<Vec<crate::lower::kit::LevelParams>> {
        self.level().written_params(self, kernel, at, child)
    }

    /// The levels the compiler writes instead where a program writes an output in an
    /// order its format cannot take (`lower::convert`'s any-order rewrite): a vector
    /// takes this level (a flag per index)...
    pub(crate) const ANY_ORDER_VECTOR: LevelKind = LevelKind::SparseByteMap;
    /// ... and the levels below an output's leading Dense ones become one group of this
    /// level (a hash table over every mode).
    pub(crate) const ANY_ORDER_GROUP: LevelKind = LevelKind::SparseHash;

    /// The kernel parameters of a level of this kind written in any order as a group of
    /// `modes` modes ([`LevelKind::ANY_ORDER_VECTOR`], [`LevelKind::ANY_ORDER_GROUP`]);
    /// `None` for the other levels.
    pub(crate) fn any_order_params(
        self,
        kernel: &mut crate::kernel::Kernel,
        at: &crate::lower::kit::LevelAt,
        modes: usize,
    ) -> Option<Vec<crate::lower::kit::LevelParams>> {
        self.level().any_order_params(kernel, at, modes)
    }

    /// How many levels of this kind `level` starts that run down to an Element or
    /// Pattern leaf, for a level a kernel writes as one group in any order; `None` for the
    /// other levels, or when they do not reach the leaf.
    pub(crate) fn any_order_modes(self, level: &LevelFormat) -> Option<usize> {
        self.level().any_order_modes(level)
    }

    /// The kernel parameters of `modes` modes of levels a kernel writes by recording
    /// their entries in order, as a SparseCOO level does, for the run time to build them
    /// in their own format.
    pub(crate) fn recorded_params(
        kernel: &mut crate::kernel::Kernel,
        at: &crate::lower::kit::LevelAt,
        modes: usize,
    ) -> Vec<crate::lower::kit::LevelParams> {
        use crate::lower::kit::mode_shapes;
        let shapes = mode_shapes(kernel, at.name, at.depth, at.shape, modes);
        super::sparse_coo::lowering::recorded_params(kernel, at, &shapes, true)
    }

    /// A Dense level.
    pub fn is_dense(self) -> bool {
        self == LevelKind::Dense
    }

    /// Allocates the buffers a written level of this kind starts with, beyond per-fiber
    /// counts in `ptr` (`engine`): its module's `allocate_output`.
    pub(crate) fn allocate_output(
        self,
        bufs: &mut super::output::OutBufs,
        at: &super::output::AllocateAt,
    ) -> crate::error::Result<()> {
        self.level().allocate_output(bufs, at)
    }

    /// Freezes a written level of this kind in place after its kernel ran
    /// (`engine::freeze`): its module's `freeze_output`.
    pub(crate) fn freeze_output(
        self,
        bufs: &mut super::output::OutBufs,
        at: &super::output::FreezeAt,
    ) -> crate::error::Result<()> {
        self.level().freeze_output(bufs, at)
    }

    /// What a kernel wrote that a level of this kind written in order cannot hold, for the
    /// levels whose kernels flag it (`None`: the level takes anything written to it).
    pub(crate) fn write_conflict(self) -> Option<&'static str> {
        self.level().write_conflict()
    }

    /// What the level can do.
    pub fn capabilities(self) -> Capabilities {
        self.level().capabilities()
    }

    /// The level's name as written in format strings (without COO's `{N}`).
    pub fn name(self) -> &'static str {
        self.level().name()
    }

    /// How many tensor modes the level spans.
    pub fn modes(self) -> usize {
        self.mode_count_param().unwrap_or(1)
    }
}

/// What a level can do, by name (as TACO's mode formats name theirs): how compiled code
/// may read it besides walking it, and how it may be written. Each level's module holds
/// its own ([`LevelKind::capabilities`] gathers them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Galloped over (`gallop`): a walk that skips ahead to the other operands' indices.
    pub gallop: bool,
    /// Read by random access (`follow`): a lookup, a search, or a check of its one entry.
    pub follow: bool,
    /// Written in increasing index order, one fiber after another.
    pub append: bool,
    /// Written at any index, an index again and again.
    pub insert: bool,
    /// Takes a run of equal values at once.
    pub accept_run: bool,
}

impl Capabilities {
    /// The read protocols, `walk` first.
    pub fn protocols(self) -> Vec<&'static str> {
        let mut p = vec!["walk"];
        if self.gallop {
            p.push("gallop");
        }
        if self.follow {
            p.push("follow");
        }
        p
    }
}

/// How wide a level's stored indices and positions are at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IndexWidth {
    /// 64-bit (`usize`): the default.
    #[default]
    U64,
    /// 32-bit (`u32`), written `SparseList{UInt32}`: 12 instead of 16 bytes per stored
    /// `f64` entry, for levels whose size and entry count stay below 2^32.
    U32,
}

impl IndexWidth {
    /// The name as written in format strings.
    pub fn name(self) -> &'static str {
        match self {
            IndexWidth::U64 => "UInt64",
            IndexWidth::U32 => "UInt32",
        }
    }

    /// The largest index or position it holds.
    pub fn max(self) -> usize {
        match self {
            IndexWidth::U64 => usize::MAX,
            IndexWidth::U32 => u32::MAX as usize,
        }
    }
}

/// A level format tree: inner levels down to one leaf.
#[derive(Clone, Debug, PartialEq)]
pub enum LevelFormat {
    /// An inner level with its child.
    Inner {
        /// Which level.
        kind: LevelKind,
        /// Width of its stored indices and positions (only SparseList offers `UInt32`).
        index: IndexWidth,
        /// The child level (the next mode inward).
        child: Box<LevelFormat>,
    },
    /// A leaf storing one value per position; the value is the fill (and fixes the
    /// element type): `Element(0.0)`.
    Element(Value),
    /// A leaf storing nothing: stored positions read `true`, others `false`.
    Pattern,
}

/// The kind of a 0-dimensional tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `Scalar(fill)`.
    Scalar,
    /// `SparseScalar(fill)`: remembers whether it was written.
    SparseScalar,
    /// `ShortCircuitScalar(fill)`: a reduction into it stops once it reaches an annihilator.
    ShortCircuitScalar,
    /// `SparseShortCircuitScalar(fill)`: both: remembers whether it was written, and a
    /// reduction into it stops once it reaches an annihilator.
    SparseShortCircuitScalar,
}

impl ScalarKind {
    /// The name as written in format strings.
    pub fn name(self) -> &'static str {
        match self {
            ScalarKind::Scalar => "Scalar",
            ScalarKind::SparseScalar => "SparseScalar",
            ScalarKind::ShortCircuitScalar => "ShortCircuitScalar",
            ScalarKind::SparseShortCircuitScalar => "SparseShortCircuitScalar",
        }
    }

    /// Whether it remembers being written since declared (and reads as its fill until then).
    pub fn tracks_writes(self) -> bool {
        matches!(
            self,
            ScalarKind::SparseScalar | ScalarKind::SparseShortCircuitScalar
        )
    }

    /// Whether a reduction into it stops once it holds an annihilator of the reduction.
    pub fn short_circuits(self) -> bool {
        matches!(
            self,
            ScalarKind::ShortCircuitScalar | ScalarKind::SparseShortCircuitScalar
        )
    }
}

/// The most modes a format may have: sizes, loops and indices are kept per mode, and no
/// real tensor comes near it (a dense copy of 64 modes of size 2 would not fit in memory).
pub const MAX_MODES: usize = 64;

/// A tensor's format: a scalar kind, or a tree of levels.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// A 0-d tensor with its fill (initial) value.
    Scalar(ScalarKind, Value),
    /// A tensor of one or more modes.
    Levels(LevelFormat),
}

impl LevelFormat {
    /// An inner level with 64-bit indices.
    pub fn inner(kind: LevelKind, child: LevelFormat) -> LevelFormat {
        LevelFormat::Inner {
            kind,
            index: IndexWidth::U64,
            child: Box::new(child),
        }
    }

    /// The leaf's fill value (`false` for `Pattern`).
    pub fn fill_value(&self) -> Value {
        match self {
            LevelFormat::Inner { child, .. } => child.fill_value(),
            LevelFormat::Element(v) => *v,
            LevelFormat::Pattern => Value::Bool(false),
        }
    }

    /// The element type (`bool` for `Pattern`).
    pub fn element_type(&self) -> ScalarType {
        self.fill_value().scalar_type().unwrap_or(ScalarType::F64)
    }

    /// The leaf (`Element` or `Pattern`) under every level.
    pub fn leaf(&self) -> &LevelFormat {
        match self {
            LevelFormat::Inner { child, .. } => child.leaf(),
            leaf => leaf,
        }
    }

    /// Whether one of the levels is of `kind`.
    pub fn has_level(&self, kind: LevelKind) -> bool {
        match self {
            LevelFormat::Inner { kind: k, child, .. } => *k == kind || child.has_level(kind),
            LevelFormat::Element(_) | LevelFormat::Pattern => false,
        }
    }

    /// The same levels over another leaf.
    pub fn with_leaf(&self, leaf: LevelFormat) -> LevelFormat {
        match self {
            LevelFormat::Inner { kind, index, child } => LevelFormat::Inner {
                kind: *kind,
                index: *index,
                child: Box::new(child.with_leaf(leaf)),
            },
            _ => leaf,
        }
    }

    /// The number of tensor modes (sum of the levels' modes).
    pub fn ndims(&self) -> usize {
        match self {
            LevelFormat::Inner { kind, child, .. } => kind.modes() + child.ndims(),
            _ => 0,
        }
    }
}

impl Format {
    /// The fill value.
    pub fn fill_value(&self) -> Value {
        match self {
            Format::Scalar(_, v) => *v,
            Format::Levels(l) => l.fill_value(),
        }
    }

    /// The element type.
    pub fn element_type(&self) -> ScalarType {
        match self {
            Format::Scalar(_, v) => v.scalar_type().unwrap_or(ScalarType::F64),
            Format::Levels(l) => l.element_type(),
        }
    }

    /// The number of modes (0 for scalars).
    pub fn ndims(&self) -> usize {
        match self {
            Format::Scalar(..) => 0,
            Format::Levels(l) => l.ndims(),
        }
    }
}
