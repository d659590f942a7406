//! `SparseList(child)`: each fiber stores a sorted list of indices (CSR/CSC, DCSR).
//!
//! Buffers: `ptr` (length `P + 1`) and `idx`. Fiber `p` holds entries
//! `q in ptr[p] .. ptr[p+1]` with index `idx[q]` and child position `q`. Invariants:
//! * **I1** `len(ptr) == P + 1`
//! * **I2** `ptr[0] == 0`
//! * **I3** `ptr` is non-decreasing
//! * **I4** `ptr[P] == len(idx)`
//! * **I5** `idx[q] < shape`
//! * **I6** `idx` is strictly increasing within each fiber
//!
//! Properties: ordered, unique, compact, not full. Protocols (compiler, issue #3): read
//! walk, gallop, follow; update extrude.

use super::level::LevelStorage;
use crate::error::{Error, Result};

/// Storage of a SparseList level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseListStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into `idx`.
    pub ptr: Vec<usize>,
    /// Stored indices, 0-based.
    pub idx: Vec<usize>,
    /// The child level (one position per stored index).
    pub child: Box<LevelStorage>,
}

/// Checks the `ptr` array shared by SparseList-like levels (invariants I1–I4 above, with
/// `entries` the length `ptr[P]` must reach). Returns the entry count.
pub(crate) fn validate_ptr(
    depth: usize,
    level: &'static str,
    ptr: &[usize],
    parents: usize,
    entries: usize,
) -> Result<usize> {
    let bad = |invariant: &'static str, detail: String| Error::Invalid {
        depth,
        level,
        invariant,
        detail,
    };
    if ptr.len() != parents.saturating_add(1) {
        return Err(bad(
            "I1 len(ptr) == P + 1",
            format!("len(ptr) = {} for P = {parents}", ptr.len()),
        ));
    }
    if ptr[0] != 0 {
        return Err(bad("I2 ptr[0] == 0", format!("ptr[0] = {}", ptr[0])));
    }
    if let Some(p) = (0..parents).find(|&p| ptr[p] > ptr[p + 1]) {
        return Err(bad(
            "I3 ptr non-decreasing",
            format!("ptr[{p}] = {} > ptr[{}] = {}", ptr[p], p + 1, ptr[p + 1]),
        ));
    }
    if ptr[parents] != entries {
        return Err(bad(
            "I4 ptr[P] == number of entries",
            format!(
                "ptr[{parents}] = {} but there are {entries} entries",
                ptr[parents]
            ),
        ));
    }
    Ok(entries)
}

impl SparseListStorage {
    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let n = validate_ptr(depth, "SparseList", &self.ptr, parents, self.idx.len())?;
        if let Some(q) = self.idx.iter().position(|&i| i >= self.shape) {
            return Err(Error::Invalid {
                depth,
                level: "SparseList",
                invariant: "I5 idx < shape",
                detail: format!("idx[{q}] = {} with shape {}", self.idx[q], self.shape),
            });
        }
        for p in 0..parents {
            let fiber = &self.idx[self.ptr[p]..self.ptr[p + 1]];
            if let Some(k) = fiber.windows(2).position(|w| w[0] >= w[1]) {
                let q = self.ptr[p] + k;
                return Err(Error::Invalid {
                    depth,
                    level: "SparseList",
                    invariant: "I6 idx strictly increasing within a fiber",
                    detail: format!(
                        "fiber {p}: idx[{q}] = {} then idx[{}] = {}",
                        self.idx[q],
                        q + 1,
                        self.idx[q + 1]
                    ),
                });
            }
        }
        Ok(n)
    }

    /// The child position of index `i` in fiber `p` (binary search), if stored.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        let (lo, hi) = (self.ptr[p], self.ptr[p + 1]);
        self.idx[lo..hi].binary_search(&i).ok().map(|k| lo + k)
    }
}
