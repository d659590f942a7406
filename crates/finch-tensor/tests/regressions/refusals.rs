//! Programs the compiled engines refused where the reference runs them (issue #27, item
//! 3): those Finch.jl compiles now compile; the rest are refused with a message that says
//! what to write instead.

use super::*;

fn matrix() -> DenseArray {
    // Column-major 3x4: (1,1) = 3, (2,2) = 5, (3,2) = 1, (1,4) = 2, (3,4) = -1.
    let mut a = vec![0.0; 12];
    for (i, j, v) in [
        (0, 0, 3.0),
        (1, 1, 5.0),
        (2, 1, 1.0),
        (0, 3, 2.0),
        (2, 3, -1.0),
    ] {
        a[i + 3 * j] = v;
    }
    array(&[3, 4], &a)
}

/// A tensor declared inside a loop in any format: each declaration empties it (levels
/// that cannot be emptied in place are written as one SparseHash group below the leading
/// Dense levels), and an output keeps what the last iteration wrote, in its own format.
#[test]
fn tensors_of_any_format_are_declared_inside_loops() {
    for w in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseCOO{1}(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
    ] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput y :: Dense(Element(0.0))\ntemp w :: {w}\ny .= 0\nfor k = 1:3\n  w .= 0\n  if k != 2\n    for j = _, i = _\n      w[i, j] = A[i, j] * k\n    end\n  end\n  for j = _, i = _\n    y[k] += w[i, j] * j\n  end\nend\n");
        let out = agree(&text, &[("A", matrix())]);
        // sum of A[i, j] * j = 3 + 6 * 2 + 1 * 4 = 19, times k; nothing at k = 2.
        assert_eq!(out["y"], array(&[3], &[19.0, 0.0, 57.0]), "{w}");
    }
    for c in [
        "Dense(SparseList(Element(false)))",
        "Dense(SparseInterval(Element(false)))",
        "SparseList(SparseList(Pattern()))",
    ] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput C :: {c}\nfor k = 1:3\n  C .= false\n  if k != 1\n    for j = _, i = _\n      C[i, j] = A[i, j] * k > 2.0\n    end\n  end\nend\n");
        let out = agree(&text, &[("A", matrix())]);
        let set: Vec<bool> = out["C"]
            .data
            .iter()
            .map(|v| v.as_bool() == Some(true))
            .collect();
        // At k = 3: 9, 15 and 3 are over 2; 6 is too; -3 is not.
        let mut want = vec![false; 12];
        for p in [0, 4, 5, 9] {
            want[p] = true;
        }
        assert_eq!(set, want, "{c}");
    }
}

/// A sparse output declared with a value other than its fill is refused, as Finch.jl
/// refuses it, by a message that says what to write instead.
#[test]
fn a_sparse_output_declared_with_another_value_says_what_to_write() {
    let text = "input x :: Dense(Element(0.0))\noutput y :: SparseList(Element(0.0))\ny .= 1.0\nfor i = _\n  y[i] += x[i]\nend\n";
    let program = Program::parse(text).expect("a valid program");
    for engine in [Engine::Interp, Engine::C] {
        let Err(e) = program.compile(engine) else {
            panic!("{engine:?} compiled a sparse output declared with 1.0");
        };
        let e = e.to_string();
        assert!(
            e.contains("`y .= 0") && e.contains("Element(1") && e.contains("Dense"),
            "{e}"
        );
    }
}
