//! Writes into sparse outputs: what each index ends up holding, and that a value equal to
//! the fill is never stored (see `main.rs` for the harness).

use super::*;

/// The one-mode output levels over an Element leaf (`{}(Element(0.0))`).
const VECTOR_LEVELS: [&str; 11] = [
    "SparseList",
    "SparsePoint",
    "SparseInterval",
    "SparseBand",
    "SparseBlockList",
    "RunList",
    "SparseRunList",
    "SparseCOO{1}",
    "SparseByteMap",
    "SparseHash",
    "Dense",
];

/// The formats the matrix `X` of the tests is read in: sparse and dense columns.
const MATRIX_INPUTS: [&str; 2] = [
    "Dense(SparseList(Element(0.0)))",
    "Dense(Dense(Element(0.0)))",
];

/// Issue #27, reproducer 10: `y[i] *= x[i]` into a zero SparseInterval computes the fill
/// at every index, and a SparseInterval or SparsePoint output recorded it as an entry (an
/// interval of explicit zeros) where the reference stores nothing. So does a sum that
/// comes back to the fill (`5 + -5`).
#[test]
fn point_and_interval_outputs_do_not_store_a_computed_fill() {
    for level in ["SparseInterval", "SparsePoint"] {
        for input in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            let text = format!(
                "input x :: {input}\noutput y :: {level}(Element(0.0))\ny .= 0\nfor i = _\n  y[i] *= x[i]\nend\n"
            );
            let out = agree(&text, &[("x", array(&[4], &[1.0, 0.0, 2.0, 3.0]))]);
            assert_eq!(out["y"], array(&[4], &[0.0; 4]), "{text}");
        }
    }
    // Column 1 sums to 0 (the fill), column 2 to 7.
    let x = array(&[2, 2], &[5.0, -5.0, 0.0, 7.0]);
    for level in VECTOR_LEVELS {
        for input in MATRIX_INPUTS {
            let text = format!(
                "input X :: {input}\noutput w :: {level}(Element(0.0))\nw .= 0\nfor j = _, i = _\n  w[j] += X[i, j]\nend\n"
            );
            let out = agree(&text, &[("X", x.clone())]);
            assert_eq!(out["w"], array(&[2], &[0.0, 7.0]), "{text}");
        }
    }
}
