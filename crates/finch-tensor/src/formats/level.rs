//! `LevelStorage`: the run-time storage of one level of a fiber tree, dispatching to the
//! level files. Positions are 0-based and global within a level; a level with `P` parent
//! positions validates its buffers against `P` and reports its child position count
//! (verified-formats §8, G1).

use super::dense::DenseStorage;
use super::element::ElementStorage;
use super::pattern::PatternStorage;
use super::run_list::RunListStorage;
use super::sparse_band::SparseBandStorage;
use super::sparse_block_list::SparseBlockListStorage;
use super::sparse_byte_map::SparseByteMapStorage;
use super::sparse_coo::SparseCooStorage;
use super::sparse_hash::SparseHashStorage;
use super::sparse_interval::SparseIntervalStorage;
use super::sparse_list::SparseListStorage;
use super::sparse_point::SparsePointStorage;
use super::sparse_run_list::SparseRunListStorage;
use crate::algebra::Value;
use crate::error::{Error, Result};
use crate::formats::IndexWidth;
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

/// Storage of one level and (recursively) its children.
#[derive(Clone, Debug, PartialEq)]
pub enum LevelStorage {
    /// A Dense level.
    Dense(DenseStorage),
    /// A SparseList level.
    SparseList(SparseListStorage),
    /// A SparseCOO{N} level.
    SparseCoo(SparseCooStorage),
    /// A SparsePoint level.
    SparsePoint(SparsePointStorage),
    /// A SparseInterval level.
    SparseInterval(SparseIntervalStorage),
    /// A SparseBand level.
    SparseBand(SparseBandStorage),
    /// A SparseBlockList level.
    SparseBlockList(SparseBlockListStorage),
    /// A RunList level.
    RunList(RunListStorage),
    /// A SparseRunList level.
    SparseRunList(SparseRunListStorage),
    /// A SparseByteMap level.
    SparseByteMap(SparseByteMapStorage),
    /// A SparseHash level.
    SparseHash(SparseHashStorage),
    /// An Element leaf.
    Element(ElementStorage),
    /// A Pattern leaf.
    Pattern(PatternStorage),
}

impl LevelStorage {
    /// The level's name as in format strings.
    pub fn name(&self) -> &'static str {
        match self {
            LevelStorage::Dense(_) => "Dense",
            LevelStorage::SparseList(_) => "SparseList",
            LevelStorage::SparseCoo(_) => "SparseCOO",
            LevelStorage::SparsePoint(_) => "SparsePoint",
            LevelStorage::SparseInterval(_) => "SparseInterval",
            LevelStorage::SparseBand(_) => "SparseBand",
            LevelStorage::SparseBlockList(_) => "SparseBlockList",
            LevelStorage::RunList(_) => "RunList",
            LevelStorage::SparseRunList(_) => "SparseRunList",
            LevelStorage::SparseByteMap(_) => "SparseByteMap",
            LevelStorage::SparseHash(_) => "SparseHash",
            LevelStorage::Element(_) => "Element",
            LevelStorage::Pattern(_) => "Pattern",
        }
    }

    /// The child level, for inner levels.
    pub fn child(&self) -> Option<&LevelStorage> {
        match self {
            LevelStorage::Dense(l) => Some(&l.child),
            LevelStorage::SparseList(l) => Some(&l.child),
            LevelStorage::SparseCoo(l) => Some(&l.child),
            LevelStorage::SparsePoint(l) => Some(&l.child),
            LevelStorage::SparseInterval(l) => Some(&l.child),
            LevelStorage::SparseBand(l) => Some(&l.child),
            LevelStorage::SparseBlockList(l) => Some(&l.child),
            LevelStorage::RunList(l) => Some(&l.child),
            LevelStorage::SparseRunList(l) => Some(&l.child),
            LevelStorage::SparseByteMap(l) => Some(&l.child),
            LevelStorage::SparseHash(l) => Some(&l.child),
            LevelStorage::Element(_) | LevelStorage::Pattern(_) => None,
        }
    }

    /// Sizes of the modes this level spans, innermost first.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            LevelStorage::Dense(l) => vec![l.shape],
            LevelStorage::SparseList(l) => vec![l.shape],
            LevelStorage::SparseCoo(l) => l.shape.clone(),
            LevelStorage::SparsePoint(l) => vec![l.shape],
            LevelStorage::SparseInterval(l) => vec![l.shape],
            LevelStorage::SparseBand(l) => vec![l.shape],
            LevelStorage::SparseBlockList(l) => vec![l.shape],
            LevelStorage::RunList(l) => vec![l.shape],
            LevelStorage::SparseRunList(l) => vec![l.shape],
            LevelStorage::SparseByteMap(l) => vec![l.shape],
            LevelStorage::SparseHash(l) => vec![l.shape],
            LevelStorage::Element(_) | LevelStorage::Pattern(_) => vec![],
        }
    }

    /// The children of fiber `p` of a one-mode level as `(first index, last index, child
    /// position)`, in index order (a run covers several indices; a Dense level lists
    /// every index); `None` for SparseCOO and leaves.
    pub fn children(&self, p: usize) -> Option<Vec<(usize, usize, usize)>> {
        Some(match self {
            LevelStorage::Dense(l) => l.children(p),
            LevelStorage::SparseList(l) => l.children(p),
            LevelStorage::SparsePoint(l) => l.children(p),
            LevelStorage::SparseInterval(l) => l.children(p),
            LevelStorage::SparseBand(l) => l.children(p),
            LevelStorage::SparseBlockList(l) => l.children(p),
            LevelStorage::RunList(l) => l.children(p),
            LevelStorage::SparseRunList(l) => l.children(p),
            LevelStorage::SparseByteMap(l) => l.children(p),
            LevelStorage::SparseHash(l) => l.children(p),
            LevelStorage::SparseCoo(_) | LevelStorage::Element(_) | LevelStorage::Pattern(_) => {
                return None
            }
        })
    }

    /// The children of fiber `p` of an inner level of any number of modes, in storage
    /// order, as (per mode the level spans, outermost first, the `(first, last)` indices
    /// the child covers; child position); `None` for leaves.
    pub fn fiber(&self, p: usize) -> Option<Vec<FiberChild>> {
        match self {
            LevelStorage::SparseCoo(l) => Some(
                l.tuples(p)
                    .into_iter()
                    .map(|(key, q)| (key.into_iter().map(|i| (i, i)).collect(), q))
                    .collect(),
            ),
            one_mode => Some(
                one_mode
                    .children(p)?
                    .into_iter()
                    .map(|(a, b, q)| (vec![(a, b)], q))
                    .collect(),
            ),
        }
    }

    /// The value a leaf stores at position `q`; `None` for inner levels (and outside
    /// the leaf's buffer).
    pub fn leaf_value(&self, q: usize) -> Option<Value> {
        match self {
            LevelStorage::Element(e) => e.val.get(q),
            LevelStorage::Pattern(_) => Some(Value::Bool(true)),
            // (`child` names the leaves: the levels without one.)
            inner => {
                debug_assert!(inner.child().is_some(), "{} is a leaf", inner.name());
                None
            }
        }
    }

    /// How the level's stored index buffers differ from the width its format declares
    /// (only SparseList stores narrow indices), or `None` when they agree.
    pub fn index_width_mismatch(&self, index: IndexWidth) -> Option<String> {
        match self {
            LevelStorage::SparseList(l) => l.index_width_mismatch(index),
            LevelStorage::Dense(_)
            | LevelStorage::SparseCoo(_)
            | LevelStorage::SparsePoint(_)
            | LevelStorage::SparseInterval(_)
            | LevelStorage::SparseBand(_)
            | LevelStorage::SparseBlockList(_)
            | LevelStorage::RunList(_)
            | LevelStorage::SparseRunList(_)
            | LevelStorage::SparseByteMap(_)
            | LevelStorage::SparseHash(_)
            | LevelStorage::Element(_)
            | LevelStorage::Pattern(_) => None,
        }
    }

    /// The buffers a compiled kernel reads, in the order of the level's `BUFFERS` names.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        match self {
            LevelStorage::SparseList(l) => {
                vec![KernelBuf::of(&l.ptr), KernelBuf::of(&l.idx)]
            }
            LevelStorage::SparsePoint(l) => l.kernel_buffers(),
            LevelStorage::SparseInterval(l) => l.kernel_buffers(),
            LevelStorage::SparseBand(l) => l.kernel_buffers(),
            LevelStorage::SparseBlockList(l) => l.kernel_buffers(),
            LevelStorage::RunList(l) => l.kernel_buffers(),
            LevelStorage::SparseRunList(l) => l.kernel_buffers(),
            LevelStorage::SparseByteMap(l) => l.kernel_buffers(),
            LevelStorage::SparseHash(l) => l.kernel_buffers(),
            LevelStorage::SparseCoo(l) => {
                let mut v = vec![KernelBuf::Indices(&l.ptr)];
                v.extend(l.tbl.iter().map(|t| KernelBuf::Indices(t)));
                v
            }
            LevelStorage::Element(l) => vec![KernelBuf::Values(&l.val)],
            LevelStorage::Dense(_) | LevelStorage::Pattern(_) => vec![],
        }
    }

    /// Validates this level and its descendants top-down for `parents` positions; returns
    /// the number of leaf positions.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let children = match self {
            LevelStorage::Dense(l) => l.validate(depth, parents)?,
            LevelStorage::SparseList(l) => l.validate(depth, parents)?,
            LevelStorage::SparseCoo(l) => l.validate(depth, parents)?,
            LevelStorage::SparsePoint(l) => l.validate(depth, parents)?,
            LevelStorage::SparseInterval(l) => l.validate(depth, parents)?,
            LevelStorage::SparseBand(l) => l.validate(depth, parents)?,
            LevelStorage::SparseBlockList(l) => l.validate(depth, parents)?,
            LevelStorage::RunList(l) => l.validate(depth, parents)?,
            LevelStorage::SparseRunList(l) => l.validate(depth, parents)?,
            LevelStorage::SparseByteMap(l) => l.validate(depth, parents)?,
            LevelStorage::SparseHash(l) => l.validate(depth, parents)?,
            LevelStorage::Element(l) => return l.validate(depth, parents),
            LevelStorage::Pattern(_) => return Ok(parents),
        };
        let leaves = match self.child() {
            Some(c) => c.validate(depth + 1, children)?,
            None => {
                return Err(Error::Invalid {
                    depth,
                    level: self.name(),
                    invariant: "inner level has a child",
                    detail: "missing child level".into(),
                })
            }
        };
        // Checks that read the child's values, once the child is known to be well formed
        // (reading a malformed child would index outside its buffers).
        match self {
            LevelStorage::SparsePoint(l) => l.validate_unstored(depth)?,
            LevelStorage::SparseInterval(l) => l.validate_unstored(depth)?,
            LevelStorage::SparseByteMap(l) => l.validate_unstored(depth)?,
            // These levels' child positions all hold stored entries; a leaf has no child.
            LevelStorage::Dense(_)
            | LevelStorage::SparseList(_)
            | LevelStorage::SparseCoo(_)
            | LevelStorage::SparseBand(_)
            | LevelStorage::SparseBlockList(_)
            | LevelStorage::RunList(_)
            | LevelStorage::SparseRunList(_)
            | LevelStorage::SparseHash(_)
            | LevelStorage::Element(_)
            | LevelStorage::Pattern(_) => {}
        }
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
        match self {
            LevelStorage::Element(e) => e.fill,
            LevelStorage::Pattern(_) => Value::Bool(false),
            inner => inner.child().map_or(Value::Bool(false), LevelStorage::fill),
        }
    }

    /// The value at coordinates (outermost mode first) below position `p`, or `None` when
    /// it is not stored (it reads as the fill). Assumes the storage is valid.
    pub fn get(&self, p: usize, coords: &[usize]) -> Option<Value> {
        match self {
            LevelStorage::Dense(l) => l.child.get(l.locate(p, *coords.first()?)?, &coords[1..]),
            LevelStorage::SparseList(l) => {
                l.child.get(l.locate(p, *coords.first()?)?, &coords[1..])
            }
            LevelStorage::SparseByteMap(l) => {
                l.child.get(l.locate(p, *coords.first()?)?, &coords[1..])
            }
            LevelStorage::SparseHash(l) => {
                l.child.get(l.locate(p, *coords.first()?)?, &coords[1..])
            }
            LevelStorage::SparseCoo(l) => {
                let n = l.shape.len();
                if coords.len() < n {
                    return None;
                }
                l.child.get(l.locate(p, &coords[..n])?, &coords[n..])
            }
            LevelStorage::Element(l) => l.val.get(p),
            LevelStorage::Pattern(_) => Some(Value::Bool(true)),
            other => {
                let i = *coords.first()?;
                let (_, _, q) = other
                    .children(p)?
                    .into_iter()
                    .find(|&(a, b, _)| a <= i && i <= b)?;
                other.child()?.get(q, &coords[1..])
            }
        }
    }

    /// Calls `f(coords, value)` for every stored leaf position below `p`, in storage order;
    /// `coords` are outermost mode first; a run's child is visited once per index it
    /// covers. Assumes the storage is valid.
    pub fn walk(&self, p: usize, prefix: &mut Vec<usize>, f: &mut dyn FnMut(&[usize], Value)) {
        match self {
            LevelStorage::Dense(l) => {
                for i in 0..l.shape {
                    prefix.push(i);
                    l.child.walk(p * l.shape + i, prefix, f);
                    prefix.pop();
                }
            }
            LevelStorage::SparseCoo(l) => {
                for q in l.ptr[p]..l.ptr[p + 1] {
                    let key = l.key(q);
                    prefix.extend_from_slice(&key);
                    l.child.walk(q, prefix, f);
                    prefix.truncate(prefix.len() - key.len());
                }
            }
            LevelStorage::Element(l) => {
                if let Some(v) = l.val.get(p) {
                    f(prefix, v)
                }
            }
            LevelStorage::Pattern(_) => f(prefix, Value::Bool(true)),
            other => {
                let (Some(children), Some(child)) = (other.children(p), other.child()) else {
                    return;
                };
                for (a, b, q) in children {
                    for i in a..=b {
                        prefix.push(i);
                        child.walk(q, prefix, f);
                        prefix.pop();
                    }
                }
            }
        }
    }

    /// Number of positions of the leaf level below `parents` root positions.
    pub fn leaf_positions(&self, parents: usize) -> usize {
        let children = match self {
            LevelStorage::Dense(l) => parents.saturating_mul(l.shape),
            LevelStorage::SparseList(l) => l.ptr.get(parents).unwrap_or(0),
            LevelStorage::SparseCoo(l) => l.ptr.get(parents).copied().unwrap_or(0),
            LevelStorage::SparsePoint(_) | LevelStorage::SparseInterval(_) => parents,
            LevelStorage::SparseBand(l) => l.ofs.get(parents).copied().unwrap_or(0),
            LevelStorage::SparseBlockList(l) => l.ofs.last().copied().unwrap_or(0),
            LevelStorage::RunList(l) => l.ptr.get(parents).copied().unwrap_or(0),
            LevelStorage::SparseRunList(l) => l.ptr.get(parents).copied().unwrap_or(0),
            LevelStorage::SparseByteMap(l) => l.srt.len(),
            LevelStorage::SparseHash(l) => l.idx.len(),
            LevelStorage::Element(_) | LevelStorage::Pattern(_) => return parents,
        };
        self.child()
            .map_or(children, |c| c.leaf_positions(children))
    }
}
