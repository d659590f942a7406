//! See `main.rs`.

use super::*;

/// The harness itself: a program every engine already runs alike passes.
#[test]
fn the_harness_accepts_an_agreeing_program() {
    let text = "input x :: SparseList(Element(0.0))\noutput y :: SparseList(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] * 2.0\nend\n";
    let out = agree(text, &[("x", array(&[4], &[0.0, 1.0, 0.0, 3.0]))]);
    assert_eq!(out["y"], array(&[4], &[0.0, 2.0, 0.0, 6.0]));
}

/// Issue #27, 9: an output written only at shifted indices, `y[i - 1]` over `i = 2:n+1`,
/// is sized by every engine, the reference included.
#[test]
fn outputs_written_at_shifted_indices_are_sized() {
    let a = array(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let text = "input A :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i - 1] = 2.0 * A[i - 1]\nend\n";
    let out = agree(text, &[("A", a)]);
    assert_eq!(out["y"], array(&[4], &[2.0, 4.0, 6.0, 8.0]));
}
