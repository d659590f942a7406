//! See `main.rs`. Programs the reference engine runs and the compiled engines refused
//! with an "internal:" error, or ran wrongly once that error was gone (issue #27).

use super::*;

use finch::{ScalarType, Value};

/// The value of scalar output `name`.
fn scalar(out: &HashMap<String, DenseArray>, name: &str) -> f64 {
    out[name].data[0].as_f64().expect("an f64 scalar output")
}

/// The 3x4 matrix the tests read: its second column is empty, so a sparse level over
/// the columns lacks that fiber.
fn matrix_with_an_empty_column() -> DenseArray {
    DenseArray::from_rows_f64(&[
        &[1.0, 0.0, 4.0, 0.0],
        &[2.0, 0.0, 0.0, 6.0],
        &[3.0, 0.0, 5.0, 0.0],
    ])
    .expect("a well-formed test matrix")
}

/// A permissive computed index (`~(I[i])`) into a column a sparse level lacks reads
/// `missing` outside the matrix (the padding), not the fill: the compiled engines gave
/// 16 where the reference gives 17.
#[test]
fn a_permissive_computed_index_pads_absent_columns() {
    let i = DenseArray::from_data(
        ScalarType::I64,
        &[3],
        vec![Value::I64(2), Value::I64(4), Value::I64(1)],
        Value::I64(0),
    )
    .expect("a well-formed index vector");
    let text = "input A :: SparseList(Dense(Element(0.0)))\ninput I :: Dense(Element(0))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += coalesce(A[~(I[i]), j], 1.0)\nend\n";
    let out = agree(text, &[("A", matrix_with_an_empty_column()), ("I", i)]);
    // Rows 2, 4 (outside: 1.0) and 1 of each column.
    let want = (2.0 + 1.0 + 1.0) + (0.0 + 1.0 + 0.0) + (0.0 + 1.0 + 4.0) + (6.0 + 1.0 + 0.0);
    assert_eq!(scalar(&out, "s"), want);
}
