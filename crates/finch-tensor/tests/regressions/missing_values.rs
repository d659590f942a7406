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

/// An array of `bool` values (fill `false`).
fn flags(shape: &[usize], data: &[bool]) -> DenseArray {
    let data = data.iter().map(|&x| Value::Bool(x)).collect();
    DenseArray::from_data(ScalarType::Bool, shape, data, Value::Bool(false))
        .expect("a well-formed test array")
}

/// Issue #27, difftest seed 101 #1015: a shifted Dense read `x[~(i + 1)]` assigned beside
/// another statement. The other statement keeps the read's `missing` from deciding the
/// loop, so the compact lowering walks it to the end, segment by segment, as a leaf read
/// where it is inside `x` and `missing` outside; only `coalesce` read that leaf, so a
/// plain assignment of it was an internal error ("the fill missing of a f64 leaf").
/// Outside `x` the assignment does nothing: `y2[j]` keeps `x[4]` from `i = 3`.
#[test]
fn a_shifted_read_assigned_beside_another_statement_does_nothing_outside() {
    let text = "input b :: SparseList(Element(0.0))
input x :: Dense(Element(0.0))
output s :: Scalar(0.0)
output y2 :: Dense(Element(0.0))
s .= 0
y2 .= 9
for i = _
  for j = 1:3
    s[] += b[i]
    y2[j] = x[~(i + 1)]
  end
end
";
    let b = array(&[4], &[1.0, 0.0, 0.0, 2.5]);
    let x = array(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let out = agree(text, &[("b", b), ("x", x)]);
    assert_eq!(out["s"].data, array(&[], &[3.0 * 3.5]).data);
    assert_eq!(out["y2"].data, array(&[3], &[4.0, 4.0, 4.0]).data);
    // The same in one loop, and the reads `coalesce` takes as selects beside them.
    let text = "input b :: SparseList(Element(0.0))
input x :: Dense(Element(0.0))
output s :: Scalar(0.0)
output y :: Dense(Element(0.0))
output z :: Dense(Element(0.0))
s .= 0
y .= 7
z .= 9
for i = _
  y[i] = coalesce(x[~(i - 1)], x[~(i + 1)])
  z[i] += x[~(i - 1)] * 2.0 + x[~(i + 1)]
  s[] += b[i]
end
";
    let b = array(&[5], &[1.5, 0.0, 0.0, 2.5, 0.0]);
    let x = array(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let out = agree(text, &[("b", b), ("x", x)]);
    assert_eq!(out["y"].data, array(&[5], &[2.0, 1.0, 2.0, 3.0, 4.0]).data);
    assert_eq!(
        out["z"].data,
        array(&[5], &[9.0, 14.0, 17.0, 20.0, 9.0]).data
    );
    assert_eq!(out["s"].data, array(&[], &[4.0]).data);
}

/// Issue #27, difftest seed 101 #140: a shifted Dense read in a branch of `ifelse`,
/// whose `missing` the other branch does not see, was the same internal error under
/// `--compact` (the reproducer's condition is a float, which every engine refuses; here
/// a `bool`). A `missing` that reaches the value of a reduction makes it do nothing.
#[test]
fn a_shifted_read_in_a_branch_of_ifelse_is_missing_only_there() {
    let text = "input x :: Dense(Element(0.0))
input b :: SparseList(Element(false))
output y :: Dense(Element(0.0))
y .= 7
for i = _
  y[i] = ifelse(b[i], x[3], x[~(i - 1)])
end
";
    let x = array(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let b = flags(&[5], &[false, false, true, false, true]);
    let out = agree(text, &[("x", x.clone()), ("b", b)]);
    // y[1] reads x[0], outside `x`: `missing`, not assigned.
    assert_eq!(out["y"].data, array(&[5], &[7.0, 1.0, 3.0, 3.0, 3.0]).data);
    let text = "input x :: Dense(Element(0.0))
input b :: SparseList(Element(0.0))
output s :: Scalar(0.0)
s .= 0
for i = _
  s[] += b[i] + ifelse(b[i] > 2.0, x[~(i + 2)], 1.0)
end
";
    let b = array(&[5], &[1.5, 0.0, 0.0, 2.5, 0.0]);
    let out = agree(text, &[("x", x), ("b", b)]);
    // i = 4 reads x[6], outside `x`: its b[4] = 2.5 is not added either.
    assert_eq!(out["s"].data, array(&[], &[1.5 + 4.0]).data);
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

/// Issue #27, an earlier report: a permissive offset read of a SparseList workspace past
/// its end is `missing`, so `coalesce` gives `true`, not the workspace's fill `false`
/// (interp and C, compact). It agrees on this code; kept as a regression test.
#[test]
fn a_permissive_read_past_a_sparse_workspace_is_missing() {
    let text = "input x5 :: Dense(Element(0))
input n11 :: Scalar(0)
output y8 :: SparseList(Element(true))
temp w7 :: SparseList(Element(false))
y8 .= true
for i = _
  w7 .= false
  for j = _
    w7[j] = x5[j] < x5[gallop(i)]
  end
  for j = 1:n11[]
    y8[i] = coalesce(w7[~(j + 2)], true)
  end
end
";
    let out = agree(
        text,
        &[("x5", ints(&[3], &[0, 0, 0])), ("n11", ints(&[], &[3]))],
    );
    assert_eq!(out["y8"].data, [Value::Bool(true); 3]);
}

/// Difftest seed 103 #724 (8 of 9059 programs on d18cb50): `x3[~I6[i], 1]`, a permissive
/// computed index beside a literal one, read outside `x3` gave its fill (-Inf) where the
/// read is `missing` and the assignment does nothing (`y5` keeps 0.0), in every compiled
/// configuration. Reads at bound indices now go into locals before their statement
/// (`Read a statement's random accesses into locals`), which keeps the read's bounds.
#[test]
fn a_permissive_computed_index_beside_a_literal_one_is_missing_outside() {
    let text = "input x3 :: SparseList(SparseList(Element(-Inf)))
input x4 :: SparseList(Element(0.0))
input I6 :: Dense(Element(0))
input I7 :: SparseList(Element(0))
output y5 :: Dense(SparseList(Element(0.0)))
y5 .= 0.0
for i = _
  for j = _
    y5[j, i] = x3[~I6[i], 1] + coalesce(x4[~I7[j]], 1.5)
  end
end
";
    let ninf = f64::NEG_INFINITY;
    let inputs = [
        ("x3", array(&[0, 1], &[])),
        ("x4", array(&[0], &[])),
        ("I6", ints(&[1], &[0])),
        ("I7", ints(&[1], &[0])),
    ];
    let out = agree(text, &inputs);
    assert_eq!(out["y5"].data, array(&[1, 1], &[0.0]).data);
    // Rows 0 and 3 of `x3` are outside it; row 2 lacks column 1 (its fill, -Inf).
    let x3 = array(&[2, 2], &[4.0, ninf, ninf, 2.0]);
    let x4 = array(&[3], &[0.5, 0.0, 2.0]);
    let inputs = [
        ("x3", x3),
        ("x4", x4),
        ("I6", ints(&[4], &[1, 0, 2, 3])),
        ("I7", ints(&[3], &[1, 0, 3])),
    ];
    let out = agree(text, &inputs);
    let col = |a: f64| [a + 0.5, a + 1.5, a + 2.0];
    let mut want = Vec::new();
    want.extend(col(4.0));
    want.extend([0.0; 3]);
    want.extend([ninf; 3]);
    want.extend([0.0; 3]);
    assert_eq!(out["y5"].data, array(&[3, 4], &want).data);
}

/// Difftest seed 105 #3283 (on 70ac8f6, and on d18cb50 once minimised): a sparse list
/// of columns searched at a bound index (`follow(i)`) that lacks the column read its
/// missing fiber as the fill (0.0) for every row, so `x[~(4:7)(i), follow(i)]`, outside
/// the one row `x` has, was 0.0 and not `missing`, and `y` was written where the
/// reference leaves it. A search's miss now keeps the level's bounds as a walk's gap
/// does (`absent_fibers_keep_bounds`).
#[test]
fn a_searched_column_a_list_lacks_keeps_its_bounds() {
    let text = "input x2 :: SparseList(Dense(Element(0.0)))
input I3 :: SparseList(Element(1))
output y1 :: SparseList(SparseList(Element(Inf)))
y1 .= Inf
for i = _
  for j = _
    y1[i, j] = x2[I3[j], j] * x2[~(4:7)(i), follow(i)]
  end
end
";
    let inf = f64::INFINITY;
    let inputs = [
        ("x2", array(&[1, 4], &[0.0; 4])),
        ("I3", ints(&[4], &[1; 4])),
    ];
    let out = agree(text, &inputs);
    assert_eq!(out["y1"].data, array(&[4, 4], &[inf; 16]).data);
    // Six rows, columns 1 and 3 stored: `(4:7)(i)` reads rows 4 to 6 for i = 1 to 3.
    let mut x = vec![0.0; 24];
    for r in 0..6 {
        x[r] = (r + 1) as f64;
        x[12 + r] = -((r + 1) as f64);
    }
    let inputs = [("x2", array(&[6, 4], &x)), ("I3", ints(&[4], &[2; 4]))];
    let out = agree(text, &inputs);
    let y = &out["y1"].data;
    // y[i, j] = x2[2, j] * x2[i + 3, i] for i <= 3; i = 4 reads row 7, outside.
    assert_eq!(y[0], array(&[1], &[2.0 * 4.0]).data[0]);
    assert_eq!(y[3], array(&[1], &[inf]).data[0]);
}
