//! `LevelStorage`: the run-time storage of one level of a fiber tree, dispatching to the
//! level files. Positions are 0-based and global within a level; a level with `P` parent
//! positions validates its buffers against `P` and reports its child position count
//! (verified-formats §8, G1).

use crate::algebra::Value;
use crate::error::{Error, Result};
use crate::formats::{IndexWidth, LevelKind};
use crate::tensor::{Buffer, IndexVec};

/// A buffer as a compiled kernel receives it.
pub(crate) enum KernelBuf<'a> {
    /// Indices or positions (`i64` in the kernel).
    Indices(&'a [usize]),
    /// Indices or positions stored as `u32` (`SparseList{UInt32}`); `i64` in the kernel.
    NarrowIndices(&'a [u32]),
    /// Typed values (flags, element values).
    Values(&'a Buffer),
}

impl<'a> KernelBuf<'a> {
    /// Stored indices at their width.
    pub(crate) fn of(v: &'a IndexVec) -> KernelBuf<'a> {
        match v {
            IndexVec::Wide(v) => KernelBuf::Indices(v),
            IndexVec::Narrow(v) => KernelBuf::NarrowIndices(v),
        }
    }
}

/// A child of a fiber ([`LevelStorage::fiber`]): per mode the level spans, outermost
/// first, the `(first, last)` indices it covers, and its position in the child level.
pub type FiberChild = (Vec<(usize, usize)>, usize);

pub use super::registry::LevelStorage;
use super::registry::Node;

impl LevelStorage {
    /// The level's name as in format strings.
    pub fn name(&self) -> &'static str {
        match self.node() {
            Node::Inner(l) => l.kind().name(),
            Node::Element(_) => "Element",
            Node::Pattern => "Pattern",
        }
    }

    /// The level's kind, for inner levels.
    pub fn kind(&self) -> Option<LevelKind> {
        match self.node() {
            Node::Inner(l) => Some(l.kind()),
            Node::Element(_) | Node::Pattern => None,
        }
    }

    /// The child level, for inner levels.
    pub fn child(&self) -> Option<&LevelStorage> {
        match self.node() {
            Node::Inner(l) => Some(l.child()),
            Node::Element(_) | Node::Pattern => None,
        }
    }

    /// Sizes of the modes this level spans, innermost first.
    pub fn shape(&self) -> Vec<usize> {
        match self.node() {
            Node::Inner(l) => l.shape(),
            Node::Element(_) | Node::Pattern => vec![],
        }
    }

    /// The children of fiber `p` of a one-mode level as `(first index, last index, child
    /// position)`, in index order (a run covers several indices; a Dense level lists
    /// every index); `None` for SparseCOO and leaves.
    pub fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        match self.node() {
            Node::Inner(l) => l.children(p),
            Node::Element(_) | Node::Pattern => None,
        }
    }

    /// The children of fiber `p` of an inner level of any number of modes, in storage
    /// order, as (per mode the level spans, outermost first, the `(first, last)` indices
    /// the child covers; child position); `None` for leaves.
    pub fn fiber(&self, p: usize) -> Option<Vec<FiberChild>> {
        match self.node() {
            Node::Inner(l) => Some(l.fiber(p)),
            Node::Element(_) | Node::Pattern => None,
        }
    }

    /// The value a leaf stores at position `q`; `None` for inner levels (and outside
    /// the leaf's buffer).
    pub fn leaf_value(&self, q: usize) -> Option<Value> {
        match self.node() {
            Node::Element(e) => e.val.get(q),
            Node::Pattern => Some(Value::Bool(true)),
            Node::Inner(_) => None,
        }
    }

    /// How the level's stored index buffers differ from the width its format declares
    /// (only SparseList stores narrow indices), or `None` when they agree.
    pub fn index_width_mismatch(&self, index: IndexWidth) -> Option<String> {
        match self.node() {
            Node::Inner(l) => l.index_width_mismatch(index),
            Node::Element(_) | Node::Pattern => None,
        }
    }

    /// The buffers a compiled kernel reads, in the order of the level's `BUFFERS` names.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        match self.node() {
            Node::Inner(l) => l.kernel_buffers(),
            Node::Element(e) => vec![KernelBuf::Values(&e.val)],
            Node::Pattern => vec![],
        }
    }

    /// Validates this level and its descendants top-down for `parents` positions; returns
    /// the number of leaf positions.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let level = match self.node() {
            Node::Inner(l) => l,
            Node::Element(e) => return e.validate(depth, parents),
            Node::Pattern => return Ok(parents),
        };
        let children = level.validate(depth, parents)?;
        let leaves = level.child().validate(depth + 1, children)?;
        // Checks that read the child's values, once the child is known to be well formed
        // (reading a malformed child would index outside its buffers).
        level.validate_unstored(depth)?;
        Ok(leaves)
    }

    /// I3 of a single-entry or single-run level above this one: the subfibers at the
    /// positions it declares `empty` store nothing but the fill (checked once this level is
    /// known to be well formed).
    pub(crate) fn empty_fibers_hold_fill(
        &self,
        depth: usize,
        level: &'static str,
        mut empty: impl Iterator<Item = usize>,
    ) -> Result<()> {
        match empty.find(|&p| !self.is_fill_at(p)) {
            Some(p) => Err(Error::Invalid {
                depth,
                level,
                invariant: "I3 the child of an empty fiber is all fill",
                detail: format!("fiber {p} is empty but its child holds a stored value"),
            }),
            None => Ok(()),
        }
    }

    /// True when the subfiber at position `p` stores nothing but the fill (used to check
    /// that positions a level declares empty hold no data). Assumes the storage below is
    /// valid.
    pub fn is_fill_at(&self, p: usize) -> bool {
        let fill = self.fill();
        let mut all_fill = true;
        self.walk(p, &mut Vec::new(), &mut |_, v| {
            if !v.same(&fill) {
                all_fill = false;
            }
        });
        all_fill
    }

    /// The fill value of the leaf below this level.
    pub fn fill(&self) -> Value {
        match self.node() {
            Node::Inner(l) => l.child().fill(),
            Node::Element(e) => e.fill,
            Node::Pattern => Value::Bool(false),
        }
    }

    /// The value at coordinates (outermost mode first) below position `p`, or `None` when
    /// it is not stored (it reads as the fill). Assumes the storage is valid.
    pub fn get(&self, p: usize, coords: &[usize]) -> Option<Value> {
        match self.node() {
            Node::Inner(l) => l.get(p, coords),
            Node::Element(e) => e.val.get(p),
            Node::Pattern => Some(Value::Bool(true)),
        }
    }

    /// Calls `f(coords, value)` for every stored leaf position below `p`, in storage order;
    /// `coords` are outermost mode first; a run's child is visited once per index it
    /// covers. Assumes the storage is valid.
    pub fn walk(&self, p: usize, prefix: &mut Vec<usize>, f: &mut dyn FnMut(&[usize], Value)) {
        match self.node() {
            Node::Inner(l) => l.walk(p, prefix, f),
            Node::Element(e) => {
                if let Some(v) = e.val.get(p) {
                    f(prefix, v)
                }
            }
            Node::Pattern => f(prefix, Value::Bool(true)),
        }
    }

    /// Number of positions of the leaf level below `parents` root positions.
    pub fn leaf_positions(&self, parents: usize) -> usize {
        match self.node() {
            Node::Inner(l) => l.child().leaf_positions(l.positions(parents)),
            Node::Element(_) | Node::Pattern => parents,
        }
    }
}
