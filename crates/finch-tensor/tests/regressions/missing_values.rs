//! See `main.rs`. Permissive reads and `missing`: what reads it, what skips it (`coalesce`,
//! the branch `ifelse` does not take) and what an assignment of it does (nothing).

use super::*;

use finch::{ScalarType, Value};

/// An array of `i64` values (fill 0).
fn ints(shape: &[usize], data: &[i64]) -> DenseArray {
    let data = data.iter().map(|&x| Value::I64(x)).collect();
    DenseArray::from_data(ScalarType::I64, shape, data, Value::I64(0))
        .expect("a well-formed test array")
}

/// Issue #27, difftest seed 101 #487: `y[i] = x[~I[i], i]` with `I[i] = 0` reads outside
/// `x`, so it is `missing` and the assignment does nothing (`y` keeps 3.0). `x` is a
/// sparse list of columns that lacks column `i`; reading a lacking column's fiber as
/// empty keeps the read's bounds (`absent_fibers_keep_bounds`), but the reads that need
/// it were named by their printed indices before `I[i]` was unfurled and looked up
/// after, so none was found and the lacking column read as the fill, NaN.
#[test]
fn a_permissive_computed_index_outside_a_lacking_column_is_missing() {
    let text = "input x :: SparseList(SparseList(Element(NaN)))
input I :: SparseList(Element(0))
output y :: SparseList(Element(NaN))
y .= NaN
for i = _
  y[i] = 3.0
  y[i] = x[~I[i], i]
end
";
    let nan = f64::NAN;
    let out = agree(text, &[("x", array(&[0, 1], &[])), ("I", ints(&[1], &[0]))]);
    assert_eq!(out["y"].data, array(&[1], &[3.0]).data);
    // Columns 1 and 3 lack entries, column 2 holds 5.0 at row 2 and column 4 6.0 at
    // row 1; rows 0 and 3 are outside `x`.
    let x = array(&[2, 4], &[nan, nan, nan, 5.0, nan, nan, 6.0, nan]);
    let i = ints(&[4], &[1, 2, 0, 3]);
    let out = agree(text, &[("x", x), ("I", i)]);
    let y = out["y"].data.iter().map(|v| v.as_f64().unwrap_or(0.0));
    let y: Vec<f64> = y.collect();
    assert!(y[0].is_nan(), "{y:?}");
    assert_eq!(y[1..], [5.0, 3.0, 3.0]);
}
