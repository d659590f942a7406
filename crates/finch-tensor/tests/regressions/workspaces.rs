//! See `main.rs`.

use super::*;

/// Issue #27, reproducer 3a: a RunList workspace whose only write is simplified away
/// (`+=` of a product with the constant 0.0) holds no run when read; it reads as its
/// declared value, 0.0, where the compiled engines read nothing and left `z` at Inf.
#[test]
fn an_unwritten_run_list_workspace_reads_as_its_declared_value() {
    let text = "input x :: Dense(Element(0.0))
output z :: Dense(Element(Inf))
temp W :: RunList(Element(0.0))
z .= Inf
W .= 0.0
for j = _
  W[j] += 0.0 * x[j]
end
for j = _
  z[j] = W[j]
end
";
    let out = agree(text, &[("x", array(&[3], &[1.0, 0.0, 3.0]))]);
    assert_eq!(out["z"].data, array(&[3], &[0.0, 0.0, 0.0]).data);
}

/// Issue #27, reproducer 3b: a RunList workspace declared in a loop whose write loop is
/// skipped in the last iteration (an empty column of `A`) reads as its declared value
/// there: `y` ends as 0.0 + 1.0, not as column 2's 5.0 + 1.0.
#[test]
fn a_run_list_workspace_declared_in_a_loop_reads_as_declared_after_an_empty_column() {
    let text = "input A :: SparseList(SparseList(Element(0.0)))
output y :: Scalar(0.0)
temp W :: RunList(Element(0.0))
y .= 0
for i = _
  W .= 0.0
  for j = _
    W[j] += A[j, i]
  end
  for j = _
    y[] = W[j] + 1.0
  end
end
";
    // Columns: [3, 0], [0, 5], [0, 0].
    let a = array(&[2, 3], &[3.0, 0.0, 0.0, 5.0, 0.0, 0.0]);
    let out = agree(text, &[("A", a)]);
    assert_eq!(out["y"].data, vec![finch::Value::F64(1.0)]);
}

/// A galloped read of a RunList workspace assumes a run covers each index: where the
/// first iteration skipped its write, the interpreter stopped reading `W_lvl1_right` at
/// position 0 of an empty buffer and the C kernel read outside it.
#[test]
fn a_galloped_run_list_workspace_has_a_run_where_its_write_was_skipped() {
    let text = "input A :: SparseList(SparseList(Element(0.0)))
input x :: Dense(Element(0.0))
output y :: Dense(Element(0.0))
temp W :: RunList(Element(0.0))
y .= 0
for i = _
  W .= 0.0
  for j = _
    W[j] += A[j, i]
  end
  for j = _
    y[i] += W[gallop(j)] * x[j] + 1.0
  end
end
";
    // Columns: [0, 0], [3, 5], [0, 0].
    let a = array(&[2, 3], &[0.0, 0.0, 3.0, 5.0, 0.0, 0.0]);
    let x = array(&[2], &[1.0, 2.0]);
    let out = agree(text, &[("A", a), ("x", x)]);
    assert_eq!(out["y"], array(&[3], &[2.0, 15.0, 2.0]));
}
