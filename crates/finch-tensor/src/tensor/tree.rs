//! The fiber-tree printer (`Display` for `Tensor`), in the style of Finch.jl's
//! `tensor_tree`: one line per fiber and per stored entry, 1-based coordinates, `:` for the
//! modes below a fiber, long fibers elided after [`MAX_CHILDREN`] children.
//!
//! ```text
//! 2×3 Tensor Dense(SparseList(Element(0.0)))
//! └─ Dense [:, 1:3]
//!    ├─ [:, 1]: SparseList (1) [1:2]
//!    │  └─ [1, 1]: 1.0
//!    ├─ [:, 2]: SparseList (1) [1:2]
//!    │  └─ [2, 2]: 3.0
//!    └─ [:, 3]: SparseList (1) [1:2]
//!       └─ [1, 3]: 2.0
//! ```

use std::fmt::{self, Write};

use crate::formats::LevelStorage;
use crate::tensor::storage::TensorStorage;
use crate::tensor::{fmt_shape, Tensor};

/// Children shown per fiber before the rest are elided with `⋮`.
pub const MAX_CHILDREN: usize = 10;

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} Tensor {}", fmt_shape(&self.shape), self.format)?;
        match &self.storage {
            TensorStorage::Scalar(s) => {
                if s.kind.tracks_writes() {
                    writeln!(f, "└─ {} (dirty: {})", s.val, s.dirty)
                } else {
                    writeln!(f, "└─ {}", s.val)
                }
            }
            TensorStorage::Levels(root) => {
                let mut out = String::new();
                let n = self.shape.len();
                let header = format!("{} {}", root.name(), range_label(n, &[], &self.shape));
                Printer {
                    out: &mut out,
                    shape: &self.shape,
                }
                .node(root, 0, &mut Vec::new(), "", true, &header)?;
                f.write_str(&out)
            }
        }
    }
}

/// `[:, :, 1:3]`-style label for a fiber whose outer coordinates are `outer` (outermost
/// first, 0-based): the fixed coordinates, then the fiber's range, then `:`s.
fn range_label(n: usize, outer: &[(usize, usize)], shape: &[usize]) -> String {
    let mut parts = coord_label(n, outer)
        .trim_matches(|c| c == '[' || c == ']')
        .split(", ")
        .map(String::from)
        .collect::<Vec<_>>();
    if outer.len() < n {
        let m = n - 1 - outer.len();
        parts[m] = format!("1:{}", shape[m]);
    }
    format!("[{}]", parts.join(", "))
}

/// `[:, 2]`-style label: the fixed coordinates (a run shows its range, `[1:3, 2]`), `:`
/// for the modes below.
fn coord_label(n: usize, outer: &[(usize, usize)]) -> String {
    let mut parts = vec![":".to_string(); n];
    for (k, &(a, b)) in outer.iter().enumerate() {
        parts[n - 1 - k] = if a == b {
            (a + 1).to_string()
        } else {
            format!("{}:{}", a + 1, b + 1)
        };
    }
    format!("[{}]", parts.join(", "))
}

struct Printer<'a> {
    out: &'a mut String,
    shape: &'a [usize],
}

impl Printer<'_> {
    fn line(&mut self, prefix: &str, last: bool, text: &str) -> fmt::Result {
        writeln!(
            self.out,
            "{prefix}{}{text}",
            if last { "└─ " } else { "├─ " }
        )
    }

    /// Prints the fiber at position `p` of `level`, whose outer coordinates are `outer`.
    fn node(
        &mut self,
        level: &LevelStorage,
        p: usize,
        outer: &mut Vec<(usize, usize)>,
        prefix: &str,
        last: bool,
        label: &str,
    ) -> fmt::Result {
        self.line(prefix, last, label)?;
        let inner_prefix = format!("{prefix}{}", if last { "   " } else { "│  " });
        // (coordinates of the child, child position)
        let children = level.fiber(p).unwrap_or_default();
        let Some(child) = level.child() else {
            return Ok(());
        };
        let n = self.shape.len();
        let shown = children.len().min(MAX_CHILDREN);
        for (k, (coords, q)) in children.iter().take(shown).enumerate() {
            let is_last = k + 1 == children.len();
            let depth = outer.len();
            outer.extend_from_slice(coords);
            if let Some(v) = child.leaf_value(*q) {
                self.line(
                    &inner_prefix,
                    is_last,
                    &format!("{}: {v}", coord_label(n, outer)),
                )?;
            } else if child.child().is_none() {
                // (A leaf position outside the leaf's buffer: the storage is invalid.)
                self.line(
                    &inner_prefix,
                    is_last,
                    &format!("{}: ?", coord_label(n, outer)),
                )?;
            } else {
                let label = format!(
                    "{}: {} ({}) {}",
                    coord_label(n, outer),
                    child.name(),
                    stored_in_fiber(child, *q),
                    range_label(n, outer, self.shape)
                );
                self.node(child, *q, outer, &inner_prefix, is_last, &label)?;
            }
            outer.truncate(depth);
        }
        if children.len() > shown {
            self.line(
                &inner_prefix,
                true,
                &format!("⋮ ({} more)", children.len() - shown),
            )?;
        }
        Ok(())
    }
}

/// Number of entries stored in fiber `p` of a level (a Dense fiber stores every index).
fn stored_in_fiber(level: &LevelStorage, p: usize) -> usize {
    level.fiber(p).map_or(1, |c| c.len())
}
