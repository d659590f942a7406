//! `structure_summary`: what `finch info` prints about a matrix — size, stored entries,
//! symmetry, bandwidth, entries per row and column, empty rows and columns, diagonals.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::algebra::Value;
use crate::tensor::{fmt_shape, Coo};

/// Structure statistics of a matrix (2-d data; other ranks report shape and entries only).
#[derive(Clone, Debug, PartialEq)]
pub struct StructureSummary {
    /// The shape.
    pub shape: Vec<usize>,
    /// Distinct stored coordinates.
    pub stored: usize,
    /// Matrix statistics when the data is 2-d.
    pub matrix: Option<MatrixStats>,
}

/// Statistics of a 2-d structure.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixStats {
    /// `A[i,j] == A[j,i]` for every stored entry (square matrices only).
    pub symmetric: bool,
    /// The stored pattern is symmetric.
    pub pattern_symmetric: bool,
    /// Largest `i - j` over stored entries (0 when none is below the diagonal).
    pub lower_bandwidth: usize,
    /// Largest `j - i` over stored entries.
    pub upper_bandwidth: usize,
    /// Most entries in a row.
    pub max_per_row: usize,
    /// Most entries in a column.
    pub max_per_col: usize,
    /// Mean entries per row.
    pub mean_per_row: f64,
    /// Rows without entries.
    pub empty_rows: usize,
    /// Columns without entries.
    pub empty_cols: usize,
    /// Distinct diagonals (`j - i`) holding entries.
    pub diagonals: usize,
}

/// Computes the summary in O(nnz log nnz); duplicate coordinates count once (last wins).
pub fn structure_summary(coo: &Coo) -> StructureSummary {
    let mut order: Vec<usize> = (0..coo.len()).collect();
    order.sort_by(|&a, &b| {
        coo.coords
            .iter()
            .map(|c| c[a])
            .cmp(coo.coords.iter().map(|c| c[b]))
    });
    order.dedup_by(|a, b| coo.coords.iter().all(|c| c[*a] == c[*b]));
    let stored = order.len();
    let matrix = (coo.shape.len() == 2).then(|| {
        let (m, n) = (coo.shape[0], coo.shape[1]);
        // Counts of the rows and columns that hold entries (sized by the entries, not the
        // shape, which may be far larger).
        let mut rows: HashMap<usize, usize> = HashMap::new();
        let mut cols: HashMap<usize, usize> = HashMap::new();
        let mut diags = HashSet::new();
        let (mut lo, mut up) = (0usize, 0usize);
        let mut entries: Vec<(usize, usize, Value)> = Vec::with_capacity(stored);
        for &k in &order {
            let (i, j) = (coo.coords[0][k], coo.coords[1][k]);
            *rows.entry(i).or_default() += 1;
            *cols.entry(j).or_default() += 1;
            diags.insert(j as i64 - i as i64);
            lo = lo.max(i.saturating_sub(j));
            up = up.max(j.saturating_sub(i));
            entries.push((i, j, coo.vals[k]));
        }
        let (symmetric, pattern_symmetric) = if m == n {
            let mut t: Vec<(usize, usize, Value)> =
                entries.iter().map(|&(i, j, v)| (j, i, v)).collect();
            t.sort_by_key(|&(i, j, _)| (i, j));
            let pattern = t
                .iter()
                .zip(&entries)
                .all(|(a, b)| a.0 == b.0 && a.1 == b.1);
            (
                pattern && t.iter().zip(&entries).all(|(a, b)| a.2.same(&b.2)),
                pattern,
            )
        } else {
            (false, false)
        };
        MatrixStats {
            symmetric,
            pattern_symmetric,
            lower_bandwidth: lo,
            upper_bandwidth: up,
            max_per_row: rows.values().copied().max().unwrap_or(0),
            max_per_col: cols.values().copied().max().unwrap_or(0),
            mean_per_row: if m == 0 {
                0.0
            } else {
                stored as f64 / m as f64
            },
            empty_rows: m.saturating_sub(rows.len()),
            empty_cols: n.saturating_sub(cols.len()),
            diagonals: diags.len(),
        }
    });
    StructureSummary {
        shape: coo.shape.clone(),
        stored,
        matrix,
    }
}

impl fmt::Display for StructureSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "distinct coordinates: {}", self.stored)?;
        let total: f64 = self.shape.iter().map(|&n| n as f64).product();
        if total > 0.0 {
            writeln!(f, "density: {:.3e}", self.stored as f64 / total)?;
        }
        if let Some(s) = &self.matrix {
            writeln!(
                f,
                "symmetry: {}",
                if s.symmetric {
                    "symmetric"
                } else if s.pattern_symmetric {
                    "pattern symmetric (values differ)"
                } else {
                    "not symmetric"
                }
            )?;
            writeln!(
                f,
                "bandwidth: lower {}, upper {}",
                s.lower_bandwidth, s.upper_bandwidth
            )?;
            writeln!(
                f,
                "entries per row: max {}, mean {:.2}",
                s.max_per_row, s.mean_per_row
            )?;
            writeln!(f, "entries per column: max {}", s.max_per_col)?;
            writeln!(
                f,
                "empty rows: {}, empty columns: {}",
                s.empty_rows, s.empty_cols
            )?;
            writeln!(f, "diagonals with entries: {}", s.diagonals)?;
        } else {
            writeln!(f, "shape: {}", fmt_shape(&self.shape))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algebra::ScalarType;

    #[test]
    fn summarizes_a_small_matrix() {
        let mut c = Coo::new(ScalarType::F64, &[3, 3]);
        for (i, j, v) in [(0, 0, 1.0), (1, 0, 2.0), (0, 1, 2.0), (2, 2, 3.0)] {
            c.push(&[i, j], Value::F64(v)).unwrap();
        }
        let s = structure_summary(&c);
        let m = s.matrix.clone().unwrap();
        assert!(m.symmetric);
        assert_eq!(
            (m.lower_bandwidth, m.upper_bandwidth, m.diagonals),
            (1, 1, 3)
        );
        assert_eq!((m.max_per_row, m.empty_rows, m.empty_cols), (2, 0, 0));
        c.vals[1] = Value::F64(5.0);
        let m = structure_summary(&c).matrix.unwrap();
        assert!(!m.symmetric && m.pattern_symmetric);
        assert!(s.to_string().contains("bandwidth: lower 1, upper 1"));
    }
}
