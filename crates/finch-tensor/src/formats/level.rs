//! `LevelStorage`: the run-time storage of one level of a fiber tree, dispatching to the
//! level files. Positions are 0-based and global within a level; a level with `P` parent
//! positions validates its buffers against `P` and reports its child position count
//! (verified-formats §8, G1).

use super::dense::DenseStorage;
use super::element::ElementStorage;
use super::pattern::PatternStorage;
use super::sparse_coo::SparseCooStorage;
use super::sparse_list::SparseListStorage;
use crate::algebra::Value;
use crate::error::{Error, Result};

/// Storage of one level and (recursively) its children.
#[derive(Clone, Debug, PartialEq)]
pub enum LevelStorage {
    /// A Dense level.
    Dense(DenseStorage),
    /// A SparseList level.
    SparseList(SparseListStorage),
    /// A SparseCOO{N} level.
    SparseCoo(SparseCooStorage),
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
            LevelStorage::Element(_) | LevelStorage::Pattern(_) => None,
        }
    }

    /// Sizes of the modes this level spans, innermost first.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            LevelStorage::Dense(l) => vec![l.shape],
            LevelStorage::SparseList(l) => vec![l.shape],
            LevelStorage::SparseCoo(l) => l.shape.clone(),
            LevelStorage::Element(_) | LevelStorage::Pattern(_) => vec![],
        }
    }

    /// Validates this level and its descendants top-down for `parents` positions; returns
    /// the number of leaf positions.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let children = match self {
            LevelStorage::Dense(l) => l.validate(depth, parents)?,
            LevelStorage::SparseList(l) => l.validate(depth, parents)?,
            LevelStorage::SparseCoo(l) => l.validate(depth, parents)?,
            LevelStorage::Element(l) => return l.validate(depth, parents),
            LevelStorage::Pattern(_) => return Ok(parents),
        };
        match self.child() {
            Some(c) => c.validate(depth + 1, children),
            None => Err(Error::Invalid {
                depth,
                level: self.name(),
                invariant: "inner level has a child",
                detail: "missing child level".into(),
            }),
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
            LevelStorage::SparseCoo(l) => {
                let n = l.shape.len();
                if coords.len() < n {
                    return None;
                }
                l.child.get(l.locate(p, &coords[..n])?, &coords[n..])
            }
            LevelStorage::Element(l) => l.val.get(p),
            LevelStorage::Pattern(_) => Some(Value::Bool(true)),
        }
    }

    /// Calls `f(coords, value)` for every stored leaf position below `p`, in storage order;
    /// `coords` are outermost mode first. Assumes the storage is valid.
    pub fn walk(&self, p: usize, prefix: &mut Vec<usize>, f: &mut dyn FnMut(&[usize], Value)) {
        match self {
            LevelStorage::Dense(l) => {
                for i in 0..l.shape {
                    prefix.push(i);
                    l.child.walk(p * l.shape + i, prefix, f);
                    prefix.pop();
                }
            }
            LevelStorage::SparseList(l) => {
                for q in l.ptr[p]..l.ptr[p + 1] {
                    prefix.push(l.idx[q]);
                    l.child.walk(q, prefix, f);
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
        }
    }

    /// Number of positions of the leaf level below `parents` root positions.
    pub fn leaf_positions(&self, parents: usize) -> usize {
        let children = match self {
            LevelStorage::Dense(l) => parents.saturating_mul(l.shape),
            LevelStorage::SparseList(l) => l.ptr.get(parents).copied().unwrap_or(0),
            LevelStorage::SparseCoo(l) => l.ptr.get(parents).copied().unwrap_or(0),
            LevelStorage::Element(_) | LevelStorage::Pattern(_) => return parents,
        };
        self.child()
            .map_or(children, |c| c.leaf_positions(children))
    }
}
