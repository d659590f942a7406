//! The reference interpreter turns every misuse into a clear error, never a panic.

use finch::algebra::{ScalarType, Value};
use finch::reference::{Bindings, RunOptions};
use finch::{DenseArray, Program};

fn run_err(text: &str, inputs: Vec<(&str, DenseArray)>) -> String {
    let p = Program::parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mut b = Bindings::new();
    for (n, a) in inputs {
        b.insert(n, a);
    }
    match p.run_reference(&mut b, &RunOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error for\n{text}"),
    }
}

fn f(v: &[f64]) -> DenseArray {
    DenseArray::from_f64(&[v.len()], v).unwrap()
}

const COPY: &str = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i]\nend\n";

#[test]
fn missing_input() {
    assert!(run_err(COPY, vec![]).contains("missing input: x"));
}

#[test]
fn wrong_element_type_names_both() {
    let a = DenseArray::from_data(
        ScalarType::I64,
        &[2],
        vec![Value::I64(1), Value::I64(2)],
        Value::I64(0),
    )
    .unwrap();
    let e = run_err(COPY, vec![("x", a)]);
    assert!(
        e.contains("`x`") && e.contains("f64") && e.contains("i64"),
        "{e}"
    );
}

#[test]
fn wrong_number_of_modes() {
    let a = DenseArray::from_f64(&[2, 2], &[1.0; 4]).unwrap();
    assert!(run_err(COPY, vec![("x", a)]).contains("1 modes"));
}

#[test]
fn loop_bound_must_equal_tensor_size() {
    let text = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = 1:4\n  s[] += x[i]\nend\n";
    let e = run_err(text, vec![("x", f(&[1.0, 2.0, 3.0]))]);
    assert!(e.contains("1:4") && e.contains("1:3"), "{e}");
}

#[test]
fn two_tensors_of_different_sizes_on_one_index() {
    let text = "input x :: Dense(Element(0.0))\ninput z :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i] * z[i]\nend\n";
    let e = run_err(
        text,
        vec![("x", f(&[1.0, 2.0, 3.0])), ("z", f(&[1.0, 2.0]))],
    );
    assert!(
        e.contains("1:3") && e.contains("1:2") && e.contains("`i`"),
        "{e}"
    );
}

#[test]
fn out_of_bounds_read_is_an_error_but_permissive_reads_missing() {
    let text = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i] + x[4 - i + 1]\nend\n";
    let e = run_err(text, vec![("x", f(&[1.0, 2.0, 3.0]))]);
    assert!(e.contains("out of bounds") && e.contains("`x["), "{e}");
    let ok = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i] + coalesce(x[~(i + 1)], 10.0)\nend\n";
    let p = Program::parse(ok).unwrap();
    let mut b = Bindings::new();
    b.insert("x", f(&[1.0, 2.0, 3.0]));
    p.run_reference(&mut b, &RunOptions::default()).unwrap();
    assert_eq!(
        b.get("s").unwrap().data,
        vec![Value::F64((1.0 + 2.0) + (2.0 + 3.0) + (3.0 + 10.0))]
    );
}

#[test]
fn non_bool_condition() {
    let text = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  if x[i]\n    s[] += 1.0\n  end\nend\n";
    let e = run_err(text, vec![("x", f(&[1.0]))]);
    assert!(e.contains("not a bool"), "{e}");
}

#[test]
fn undeterminable_extent() {
    let text = "output s :: Scalar(0)\ns .= 0\nfor i = _\n  s[] += i\nend\n";
    let e = run_err(text, vec![]);
    assert!(e.contains("extent of `for i = _`"), "{e}");
}

#[test]
fn inexact_store() {
    let text = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0))\ny .= 0\nfor i = _\n  y[i] = x[i]\nend\n";
    let e = run_err(text, vec![("x", f(&[2.5]))]);
    assert!(e.contains("cannot store 2.5") && e.contains("i64"), "{e}");
}

#[test]
fn division_by_zero() {
    let text = "input x :: Dense(Element(0))\noutput s :: Scalar(0)\ns .= 0\nfor i = _\n  s[] += div(10, x[i])\nend\n";
    let a =
        DenseArray::from_data(ScalarType::I64, &[1], vec![Value::I64(0)], Value::I64(0)).unwrap();
    assert!(run_err(text, vec![("x", a)]).contains("division by zero"));
}

#[test]
fn access_arity_is_checked_at_parse_time() {
    let e = Program::parse("input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\nfor i = _\n  s[] += x[i, i]\nend\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`x` has 1 mode but is accessed with 2 indices"),
        "{e}"
    );
    let e = Program::parse("input x :: Dense(Sparselist(Element(0.0)))\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("1:1") && e.contains("did you mean `SparseList`"),
        "{e}"
    );
}

#[test]
fn sparse_scalar_is_declared_only_with_its_fill_as_the_compiler_requires() {
    let text = |init: &str| {
        format!(
            "input x :: Dense(Element(0.0))\noutput p :: SparseScalar(0.0)\np .= {init}\nfor i = _\n  p[] += x[i]\nend\n"
        )
    };
    let e = run_err(&text("1"), vec![("x", f(&[1.0, 2.0]))]);
    assert!(
        e.contains("`p .= 1`") && e.contains("SparseScalar is declared with its fill value (0.0)"),
        "{e}"
    );
    // The compiler refuses the same program in the same words.
    let compiled = Program::parse(&text("1"))
        .unwrap()
        .compile_with(finch::engine::Engine::Interp, &Default::default())
        .err()
        .map(|e| e.to_string());
    assert_eq!(compiled.as_deref(), Some(e.as_str()));
    // Declared with its fill, it runs.
    let mut b = Bindings::new();
    b.insert("x", f(&[1.0, 2.0]));
    let p = Program::parse(&text("0")).unwrap();
    assert!(p.run_reference(&mut b, &RunOptions::default()).is_ok());
}

/// Found by the `program_run` fuzz target: an input whose data its format cannot hold
/// (three stored indices in one SparsePoint fiber, where the fill is 1 and the data 0) ran
/// on the reference, which the compiled engines refuse when they store the input.
#[test]
fn an_input_that_does_not_fit_its_format_is_refused() {
    let text = "input x :: SparsePoint(Element(1.0))\noutput y :: Scalar(0.0)\ny .= 0\nfor i = _\n  y[] += x[i]\nend\n";
    let e = run_err(text, vec![("x", f(&[0.0, 0.0, 3.0]))]);
    assert!(
        e.contains("the input `x` does not fit its format SparsePoint(Element(1.0))")
            && e.contains("SparsePoint stores at most one index per fiber"),
        "{e}"
    );
    // Data that fits runs.
    let p = Program::parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mut b = Bindings::new();
    b.insert("x", f(&[1.0, 1.0, 3.0]));
    p.run_reference(&mut b, &RunOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
}
