//! See `main.rs`.

use super::*;
use finch::Value;

/// The harness itself: a program every engine already runs alike passes.
#[test]
fn the_harness_accepts_an_agreeing_program() {
    let text = "input x :: SparseList(Element(0.0))\noutput y :: SparseList(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] * 2.0\nend\n";
    let out = agree(text, &[("x", array(&[4], &[0.0, 1.0, 0.0, 3.0]))]);
    assert_eq!(out["y"], array(&[4], &[0.0, 2.0, 0.0, 6.0]));
}

/// Issue #27, 8: `ifelse` is the branch its condition chooses; a `missing` the other
/// branch would read does not count, with a constant or a data-dependent condition.
#[test]
fn ifelse_is_the_branch_taken_even_where_the_other_is_missing() {
    let x = array(&[4], &[1.0, 2.0, 3.0, 4.0]);
    for cond in ["true", "x[i] < 1.5", "i == 1"] {
        let text = format!("input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = ifelse({cond}, x[i], x[~(i - 1)])\nend\n");
        let out = agree(&text, &[("x", x.clone())]);
        let want = match cond {
            "true" => [1.0, 2.0, 3.0, 4.0],
            _ => [1.0, 1.0, 2.0, 3.0],
        };
        assert_eq!(out["y"], array(&[4], &want), "{cond}");
    }
}

/// Issue #27, 8: `missing` is not annihilated: `4.0 + B[~(i - 1)] * (0.0 * B[i])` is
/// `missing` (the assignment does nothing) where `B[~(i - 1)]` is outside `B`, and
/// `4.0` elsewhere, in every engine.
#[test]
fn a_zero_factor_does_not_swallow_missing() {
    let b = array(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let text = "input B :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = 4.0 + B[~(i - 1)] * (0.0 * B[i])\nend\n";
    let out = agree(text, &[("B", b)]);
    assert_eq!(out["y"], array(&[4], &[0.0, 4.0, 4.0, 4.0]));
}

/// `missing` under a condition: in `&&` after a condition that fails, in a `let`, and
/// beside a product with a zero, over a sparse operand (values checked by hand).
#[test]
fn conditional_missing_values_are_assigned_where_present() {
    let x = array(&[6], &[1.0, 2.0, 0.0, 3.0, 0.0, 1.0]);
    let text = "input x :: SparseList(Element(0.0))\noutput y :: Dense(Element(false))\noutput s :: Scalar(0.0)\noutput t :: Scalar(0.0)\ny .= false\ns .= 0\nt .= 0\nfor i = _\n  y[i] = x[i] > 1.5 && x[~(i - 1)] > 0.5\n  let v = ifelse(i > 2, x[~(i - 2)], x[~(i + 5)])\n    s[] += v * 10.0 + 1.0\n  end\n  t[] += ifelse(x[i] != 0.0, 0.0 * x[~(i + 1)], 7.0)\nend\n";
    let out = agree(text, &[("x", x)]);
    let y = out["y"].data.iter().map(|v| v.as_bool() == Some(true));
    assert_eq!(
        y.collect::<Vec<_>>(),
        [false, true, false, false, false, false]
    );
    assert_eq!(out["s"].data, [finch::Value::F64(75.0)]);
    assert_eq!(out["t"].data, [finch::Value::F64(14.0)]);
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

/// A zero the matrix holds as its fill does not annihilate a `missing` factor: the
/// product is `missing` outside the matrix, and `coalesce` pads it (7.5 by hand; the
/// compiled engines gave 5.5 when the zero annihilated).
#[test]
fn a_fill_zero_does_not_annihilate_a_missing_factor_under_coalesce() {
    let a = DenseArray::from_rows_f64(&[
        &[1.0, 0.0, 4.0, 0.0],
        &[2.0, 0.0, 0.0, 6.0],
        &[3.0, 0.0, 5.0, 0.0],
    ])
    .expect("a matrix");
    let text = "input A :: Dense(SparseList(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[i, j] * coalesce(A[~(i + 1), ~(j - 1)] * A[~(i - 1), j], 0.5)\nend\n";
    let out = agree(text, &[("A", a)]);
    assert_eq!(out["s"].data, [finch::Value::F64(7.5)]);
}

/// An integer value stored into a float tensor is converted (rounded to the nearest, as
/// the reference engine and Julia's `convert` do); the compiled engines refused it as
/// possibly inexact.
#[test]
fn integers_are_stored_into_float_tensors() {
    let x = DenseArray::from_data(
        finch::ScalarType::I64,
        &[2, 2],
        vec![1, -2, 3, 9_007_199_254_740_993]
            .into_iter()
            .map(finch::Value::I64)
            .collect(),
        finch::Value::I64(0),
    )
    .expect("an integer matrix");
    let text = "input x :: Dense(Dense(Element(0)))\noutput w :: Dense(Element(0.0))\noutput v :: Dense(Element(0.0f32))\nw .= 0.0\nv .= 0.0\nfor i = _\n  for j = _\n    w[j] = x[i, j] * 2\n    v[j] = x[i, j]\n  end\nend\n";
    let out = agree(text, &[("x", x)]);
    assert_eq!(out["w"], array(&[2], &[-4.0, 18_014_398_509_481_986.0]));
}

/// `--reassociate` reorders sums and products only in the loops it vectorizes; it does not
/// let the C compiler rewrite `(x - w) + w` into `x`, which is not `x` where `w` is
/// infinite (`NaN`) or NaN. The compiler's `associative-math` once did, for the whole
/// kernel: an infinite `w` then gave `x` in reassociated C and `NaN` everywhere else.
#[test]
fn reassociation_does_not_cancel_infinite_terms() {
    let text = "input x :: Dense(Element(0.0))
input w :: Dense(Element(0.0))
output y :: Dense(Element(0.0))
output s :: Scalar(0.0)
y .= 0.0
s .= 0.0
for i = _
  y[i] = (x[i] - w[i]) + w[i]
  s[] += (x[i] * w[i]) / w[i]
end
";
    let x = array(&[3], &[1.0, 2.0, 3.0]);
    let w = array(&[3], &[f64::INFINITY, 2.0, f64::NAN]);
    let out = agree(text, &[("x", x), ("w", w)]);
    assert!(out["y"].data[0].as_f64().is_some_and(f64::is_nan));
    assert_eq!(out["y"].data[1], Value::F64(2.0));
    assert!(out["s"].data[0].as_f64().is_some_and(f64::is_nan));
}

/// Found by the `program_run` fuzz target: a store that may not convert exactly (an `i64`
/// value into a `bool` output) was a compile error in the compiled engines, where the
/// reference stores a value that converts (`0`, `1`) and errs on one that does not (`2`),
/// as Julia's `convert` does. The compiled engines now check the conversion where it runs:
/// the same values where it converts, an error on every engine where it does not.
#[test]
fn a_narrowing_store_converts_where_it_runs() {
    let text = "input x2 :: SparseList(Element(0))\ninput x3 :: Dense(Element(false))\noutput y1 :: SparseInterval(Element(false))\n\ny1 .= false\nfor i = _\n  y1[i] = x2[walk(i)]\n  y1[i] &= x3[i]\nend\n";
    let ints = |v: &[i64]| {
        let data = v.iter().map(|&x| Value::I64(x)).collect();
        DenseArray::from_data(finch::ScalarType::I64, &[v.len()], data, Value::I64(0)).unwrap()
    };
    let x3 = {
        let data = vec![Value::Bool(true); 4];
        DenseArray::from_data(finch::ScalarType::Bool, &[4], data, Value::Bool(false)).unwrap()
    };
    let out = agree(text, &[("x2", ints(&[0, 1, 1, 0])), ("x3", x3.clone())]);
    let want: Vec<Value> = [false, true, true, false].map(Value::Bool).to_vec();
    assert_eq!(out["y1"].data, want);
    let program = Program::parse(text).unwrap();
    let mut reference = Bindings::new();
    reference.insert("x2", ints(&[0, 2, 0, 0]));
    reference.insert("x3", x3.clone());
    assert!(program
        .run_reference(&mut reference, &RunOptions::default())
        .is_err());
    for (engine, reassociate, compact) in CONFIGS {
        let mut tensors = HashMap::new();
        for (name, a) in [("x2", ints(&[0, 2, 0, 0])), ("x3", x3.clone())] {
            let format = &program.decl(name).unwrap().format;
            tensors.insert(name.to_string(), Tensor::from_dense(format, &a).unwrap());
        }
        let options = CompileOptions {
            reassociate,
            compact,
        };
        let compiled = program.compile_with(engine, &options).unwrap();
        let err = compiled.run(&mut tensors, &HashMap::new()).unwrap_err();
        assert!(
            err.to_string().contains("does not convert exactly"),
            "{engine:?} {reassociate} {compact}: {err}"
        );
    }
}
