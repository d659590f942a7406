//! See `main.rs`.

use super::*;

/// The harness itself: a program every engine already runs alike passes.
#[test]
fn the_harness_accepts_an_agreeing_program() {
    let text = "input x :: SparseList(Element(0.0))\noutput y :: SparseList(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] * 2.0\nend\n";
    let out = agree(text, &[("x", array(&[4], &[0.0, 1.0, 0.0, 3.0]))]);
    assert_eq!(out["y"], array(&[4], &[0.0, 2.0, 0.0, 6.0]));
}
