//! `SparseHash(child)`: stored indices in any order of insertion, with child positions
//! assigned as entries arrive (Finch's SparseDict); frozen, each fiber's entries are
//! listed sorted so reads walk them in order.
//!
//! Buffers: `ptr` (length `P + 1`), `idx` (sorted indices per fiber) and `pos` (the child
//! position of each listed entry). Invariants:
//! * **I1**–**I4** as SparseList for `ptr` over the entries
//! * **I5** `len(pos) == len(idx)` and `pos` is a permutation of `0 ..< len(idx)`
//! * **I6** `idx[q] < shape`, strictly increasing within a fiber
//!
//! Properties: ordered (when frozen), unique, not full, random access. Protocols: read
//! walk, gallop, follow.

use super::format::Capabilities;
use super::level::{KernelBuf, LevelStorage};
use super::sparse_list::validate_ptr;
use crate::error::{Error, Result};
use crate::tensor::build::*;

/// What the level can do (read back sorted; written at any index through an in-kernel hash table).
pub const CAPABILITIES: Capabilities = Capabilities {
    gallop: true,
    follow: true,
    append: true,
    insert: true,
    accept_run: false,
};

/// Storage of a SparseHash level.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseHashStorage {
    /// Size of the mode.
    pub shape: usize,
    /// Fiber boundaries into the sorted entries.
    pub ptr: Vec<usize>,
    /// Stored indices, sorted within each fiber.
    pub idx: Vec<usize>,
    /// Child position of each sorted entry.
    pub pos: Vec<usize>,
    /// The child level (one position per entry).
    pub child: Box<LevelStorage>,
}

impl SparseHashStorage {
    /// Names of the kernel buffers, in `kernel_buffers` order.
    pub const BUFFERS: &'static [&'static str] = &["ptr", "idx", "pos"];

    /// Checks the invariants for `parents` parent positions; returns the child count.
    pub fn validate(&self, depth: usize, parents: usize) -> Result<usize> {
        let bad = |invariant: &'static str, detail: String| Error::Invalid {
            depth,
            level: "SparseHash",
            invariant,
            detail,
        };
        let n = validate_ptr(depth, "SparseHash", &self.ptr, parents, self.idx.len())?;
        if self.pos.len() != n {
            return Err(bad(
                "I5 len(pos) == len(idx)",
                format!("len(pos) = {}, len(idx) = {n}", self.pos.len()),
            ));
        }
        let mut seen = vec![false; n];
        for (q, &c) in self.pos.iter().enumerate() {
            if c >= n || std::mem::replace(&mut seen[c], true) {
                return Err(bad(
                    "I5 pos is a permutation of the positions",
                    format!("pos[{q}] = {c} is out of range or repeated ({n} entries)"),
                ));
            }
        }
        if let Some(q) = self.idx.iter().position(|&i| i >= self.shape) {
            return Err(bad(
                "I6 idx < shape",
                format!("idx[{q}] = {} with shape {}", self.idx[q], self.shape),
            ));
        }
        for p in 0..parents {
            let seg = &self.idx[self.ptr[p]..self.ptr[p + 1]];
            if let Some(k) = seg.windows(2).position(|w| w[0] >= w[1]) {
                return Err(bad(
                    "I6 idx strictly increasing within a fiber",
                    format!("fiber {p}: {} then {}", seg[k], seg[k + 1]),
                ));
            }
        }
        Ok(n)
    }

    /// Stored `(first index, last index, child position)` triples of fiber `p`.
    pub fn children(&self, p: usize) -> Vec<(usize, usize, usize)> {
        (self.ptr[p]..self.ptr[p + 1])
            .map(|q| (self.idx[q], self.idx[q], self.pos[q]))
            .collect()
    }

    /// The child position of index `i` in fiber `p`, if stored.
    pub fn locate(&self, p: usize, i: usize) -> Option<usize> {
        let (lo, hi) = (self.ptr[p], self.ptr[p + 1]);
        self.idx[lo..hi]
            .binary_search(&i)
            .ok()
            .map(|k| self.pos[lo + k])
    }

    /// The kernel's view of the buffers.
    pub(crate) fn kernel_buffers(&self) -> Vec<KernelBuf<'_>> {
        vec![
            KernelBuf::Indices(&self.ptr),
            KernelBuf::Indices(&self.idx),
            KernelBuf::Indices(&self.pos),
        ]
    }
}

/// Builds the level from sorted entries (`tensor::build`): per parent position `groups[p]`
/// (a range of entries), what the level stores, and the entries below each of its
/// positions for its child.
pub(crate) fn build(at: &BuildAt) -> Result<LevelStorage> {
    let size = at.size();
    let BuildAt { m, e, groups, .. } = *at;
    let mut child_groups = Vec::new();
    let (ptr, idx) = sorted_lists(e, m, groups, &mut child_groups);
    let c = at.child_of(&child_groups)?;
    Ok(LevelStorage::SparseHash(SparseHashStorage {
        shape: size,
        ptr,
        pos: (0..idx.len()).collect(),
        idx,
        child: Box::new(c),
    }))
}

/// The level's looplets and kernel parameters: how the lowerer reads and writes it.
pub(crate) mod lowering {
    use crate::lower::kit::*;

    /// Sorted entries with a child position each.
    pub(crate) fn unfurl_read(lw: &mut Lowerer, cx: &StructuredFiber) -> Result<Looplet> {
        let shape = cx.shape;
        let f = cx.fiber;
        let present = cx.present;
        let (ptr, idx, posbuf) = (cx.buf(0)?, cx.buf(1)?, cx.buf(2)?);
        let child_of: ChildOf = Rc::new(move |q| KExpr::load(posbuf, q));
        let list = SortedList {
            entries: Entries::of_fiber(ptr, present),
            idx,
            child_of,
            shape,
            runs: false,
        };
        Ok(lw.sorted_read(f, list))
    }
}
