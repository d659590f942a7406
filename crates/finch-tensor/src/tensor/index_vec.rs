//! `IndexVec`: a level's stored indices or positions, 64-bit (`usize`) or 32-bit (`u32`)
//! as its format says (`SparseList{UInt32}`). Narrow storage reads a quarter fewer bytes per
//! stored `f64` entry, which memory-bound kernels (SpMV) turn into time.

use std::fmt;

use crate::error::{Error, Result};
use crate::formats::IndexWidth;

/// An element type an [`IndexVec`] stores.
pub trait IndexInt: Copy + Ord + fmt::Debug {
    /// The value as `usize`.
    fn to_usize(self) -> usize;
}

impl IndexInt for usize {
    fn to_usize(self) -> usize {
        self
    }
}

impl IndexInt for u32 {
    fn to_usize(self) -> usize {
        self as usize
    }
}

/// Stored indices or positions of one level.
#[derive(Clone, PartialEq, Eq)]
pub enum IndexVec {
    /// 64-bit.
    Wide(Vec<usize>),
    /// 32-bit.
    Narrow(Vec<u32>),
}

/// Applies `$body` to the inner slice whatever its width.
macro_rules! with_slice {
    ($v:expr, $s:ident => $body:expr) => {
        match $v {
            IndexVec::Wide($s) => $body,
            IndexVec::Narrow($s) => $body,
        }
    };
}

impl IndexVec {
    /// `v` stored at `width`; an error names `what` if a value does not fit.
    pub fn with_width(v: Vec<usize>, width: IndexWidth, what: &str) -> Result<IndexVec> {
        match width {
            IndexWidth::U64 => Ok(IndexVec::Wide(v)),
            IndexWidth::U32 => {
                let narrow: Option<Vec<u32>> = v.iter().map(|&x| u32::try_from(x).ok()).collect();
                narrow.map(IndexVec::Narrow).ok_or_else(|| {
                    let big = v.iter().copied().max().unwrap_or(0);
                    Error::Program(format!(
                        "{what} holds {big}, which does not fit the level's 32-bit indices \
                         (`{{UInt32}}` stores values up to {}); use the default 64-bit width",
                        u32::MAX
                    ))
                })
            }
        }
    }

    /// The storage width.
    pub fn width(&self) -> IndexWidth {
        match self {
            IndexVec::Wide(_) => IndexWidth::U64,
            IndexVec::Narrow(_) => IndexWidth::U32,
        }
    }

    /// Number of stored values.
    pub fn len(&self) -> usize {
        with_slice!(self, v => v.len())
    }

    /// True if nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at `q` (panics out of range, like slice indexing: callers index within
    /// validated bounds).
    pub fn at(&self, q: usize) -> usize {
        with_slice!(self, v => v[q].to_usize())
    }

    /// The value at `q`, if in range.
    pub fn get(&self, q: usize) -> Option<usize> {
        with_slice!(self, v => v.get(q).map(|x| x.to_usize()))
    }

    /// The last value.
    pub fn last(&self) -> Option<usize> {
        with_slice!(self, v => v.last().map(|x| x.to_usize()))
    }

    /// The values as `usize`.
    pub fn iter(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        with_slice!(self, v => Box::new(v.iter().map(|x| x.to_usize())))
    }

    /// The values as a `Vec<usize>` (a copy when narrow).
    pub fn to_wide(&self) -> Vec<usize> {
        match self {
            IndexVec::Wide(v) => v.clone(),
            IndexVec::Narrow(v) => v.iter().map(|&x| x as usize).collect(),
        }
    }

    /// The values as a `Vec<usize>`, without a copy when already wide.
    pub fn into_wide(self) -> Vec<usize> {
        match self {
            IndexVec::Wide(v) => v,
            IndexVec::Narrow(v) => v.iter().map(|&x| x as usize).collect(),
        }
    }

    /// The position in `lo..hi` holding `i` (the range sorted), if any.
    pub fn search(&self, lo: usize, hi: usize, i: usize) -> Option<usize> {
        match self {
            IndexVec::Wide(v) => v[lo..hi].binary_search(&i).ok().map(|k| lo + k),
            IndexVec::Narrow(v) => {
                let i = u32::try_from(i).ok()?;
                v[lo..hi].binary_search(&i).ok().map(|k| lo + k)
            }
        }
    }
}

impl Default for IndexVec {
    fn default() -> Self {
        IndexVec::Wide(Vec::new())
    }
}

impl From<Vec<usize>> for IndexVec {
    fn from(v: Vec<usize>) -> Self {
        IndexVec::Wide(v)
    }
}

impl From<Vec<u32>> for IndexVec {
    fn from(v: Vec<u32>) -> Self {
        IndexVec::Narrow(v)
    }
}

impl PartialEq<Vec<usize>> for IndexVec {
    fn eq(&self, other: &Vec<usize>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, &b)| a == b)
    }
}

impl fmt::Debug for IndexVec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        with_slice!(self, v => v.fmt(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_storage_reads_like_wide_and_refuses_what_does_not_fit() {
        let w = IndexVec::with_width(vec![0, 3, 7], IndexWidth::U32, "idx").unwrap();
        assert_eq!(w.width(), IndexWidth::U32);
        assert_eq!(w, vec![0, 3, 7]);
        assert_eq!((w.at(1), w.get(3), w.last()), (3, None, Some(7)));
        assert_eq!(w.search(0, 3, 7), Some(2));
        assert_eq!(w.search(0, 3, 1 << 40), None);
        let big = IndexVec::with_width(vec![1, 1 << 33], IndexWidth::U32, "A's idx");
        let msg = big.unwrap_err().to_string();
        assert!(msg.contains("A's idx holds 8589934592"), "{msg}");
    }
}
