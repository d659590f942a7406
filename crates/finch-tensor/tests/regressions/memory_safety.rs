//! See `main.rs`. Faults the differential tester found where the bounds-checked
//! interpreter stopped at a position outside a buffer (which the C kernel, checking no
//! bounds, would read: undefined behaviour), and results only generated C got wrong.

use super::*;

use finch::{ScalarType, Value};

/// An `i64` vector.
fn ints(data: &[i64]) -> DenseArray {
    DenseArray::from_data(
        ScalarType::I64,
        &[data.len()],
        data.iter().map(|&v| Value::I64(v)).collect(),
        Value::I64(0),
    )
    .expect("a well-formed index vector")
}

/// Reproducer 02 (seed 101, case 669): `w1[(3:5)(i)]` reads a RunList workspace that
/// the loop over `i` declares, at `i`. The compiled engines walked `w1`'s runs in the
/// loop over `i`, outside the declaration, through run ends each iteration rewrites: the
/// compact kernel read `x3` at position -5 (the interpreter stopped there; C would read
/// it) and stored a broken `y2`. The read is now concordized after the writes.
#[test]
fn a_workspace_read_at_the_index_of_a_loop_around_its_declaration_is_not_walked_there() {
    let text = "input x3 :: Dense(Dense(Element(1.0)))
input I4 :: SparseBand(Element(0))
output y2 :: Dense(SparseList(Element(0.0)))
temp w1 :: RunList(Element(0.0))

y2 .= 0.0
for i = _
  w1 .= 0.0
  for j = _
    let t5 = x3[j, i] < coalesce(x3[~I4[i], ~(4:6)(i)], 3.0)
      w1[j] = 1.0
    end
  end
  for j = _
    y2[j, i] = w1[j] + w1[(3:5)(i)]
  end
end
";
    let x3 = array(&[5, 3], &[1.0; 15]);
    let out = agree(text, &[("x3", x3), ("I4", ints(&[0, 0, 0]))]);
    // Every `w1[j]` is 1.0 once written, so every `y2[j, i]` is 1.0 + 1.0.
    assert_eq!(out["y2"], array(&[5, 3], &[2.0; 15]));
}

/// The same walk gave wrong values wherever the workspace differs between iterations:
/// a read at the outer index (bare, through a window or shifted) saw the previous
/// iteration's contents, in every engine and every sparse format of the workspace.
#[test]
fn workspace_reads_at_an_enclosing_index_see_this_iterations_writes() {
    let x = array(&[3, 3], &[1.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 6.0, 0.0]);
    for format in [
        "RunList(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "SparseHash(Element(0.0))",
    ] {
        for (read, want) in [
            // Column i of x, plus its entry i.
            ("w[i]", [2.0, 3.0, 1.0, 0.0, 0.0, 3.0, 0.0, 6.0, 0.0]),
            // Plus its entry i + 1 (0.0 past the end).
            (
                "coalesce(w[~(i + 1)], 0.0)",
                [3.0, 4.0, 2.0, 3.0, 3.0, 6.0, 0.0, 6.0, 0.0],
            ),
            // Plus its entry i, through a window of the whole column.
            ("w[(1:3)(i)]", [2.0, 3.0, 1.0, 0.0, 0.0, 3.0, 0.0, 6.0, 0.0]),
        ] {
            let text = format!(
                "input x :: Dense(Dense(Element(0.0)))
output y :: Dense(Dense(Element(0.0)))
temp w :: {format}
y .= 0.0
for i = _
  w .= 0.0
  for j = _
    w[j] = x[j, i]
  end
  for j = _
    y[j, i] = w[j] + {read}
  end
end
"
            );
            let out = agree(&text, &[("x", x.clone())]);
            assert_eq!(out["y"], array(&[3, 3], &want), "{format}: {read}");
        }
    }
}

/// Writes at the outer index of a sparse workspace declared inside that loop recorded
/// their index after the loop's body (its reads) had run: `w` read back as empty.
#[test]
fn workspace_writes_at_an_enclosing_index_are_read_in_the_same_iteration() {
    let x = array(&[3, 3], &[1.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 6.0, 0.0]);
    for format in [
        "RunList(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseByteMap(Element(0.0))",
    ] {
        let text = format!(
            "input x :: Dense(Dense(Element(0.0)))
output y :: Dense(Dense(Element(0.0)))
temp w :: {format}
y .= 0.0
for i = _
  w .= 0.0
  for j = _
    w[i] += x[j, i]
  end
  for j = _
    y[j, i] = w[j]
  end
end
"
        );
        let out = agree(&text, &[("x", x.clone())]);
        // Column sums on the diagonal.
        let want = [3.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 6.0];
        assert_eq!(out["y"], array(&[3, 3], &want), "{format}");
    }
}

/// Reproducer 04 (seed 101, case 1403): the vector copies of a reassociating kernel took
/// the loop `y1[] += -2.5; y2[] = Inf` for a reduction with a dead temporary, dropped the
/// store, and returned `y2` as 0.0 where every other engine gives Inf.
#[test]
fn a_vectorized_reduction_keeps_an_output_its_loop_assigns() {
    let text = "input x4 :: SparseList(Dense(Element(Inf)))
output y1 :: Scalar(-Inf)
output y2 :: Scalar(0.0)

y1 .= -Inf
y2 .= 0.0
for i = _
  for j = _
    y1[] += -2.5
    y2[] = x4[i + 1, j]
  end
end
";
    let out = agree(text, &[("x4", array(&[1, 1], &[f64::INFINITY]))]);
    assert_eq!(out["y1"].data, vec![Value::F64(f64::NEG_INFINITY)]);
    assert_eq!(out["y2"].data, vec![Value::F64(f64::INFINITY)]);
    // Longer loops, where the vector groups run (and the last one is masked).
    let text = "input x :: Dense(Element(0.0))
output s :: Scalar(0.0)
output t :: Scalar(0.0)
s .= 0.0
t .= 0.0
for i = _
  s[] += x[i]
  t[] = 7.0
end
";
    for n in [3, 4, 9, 21] {
        let x: Vec<f64> = (1..=n).map(f64::from).collect();
        let out = agree(text, &[("x", array(&[x.len()], &x))]);
        assert_eq!(out["s"].data, vec![Value::F64(f64::from(n * (n + 1) / 2))]);
        assert_eq!(out["t"].data, vec![Value::F64(7.0)]);
    }
}
