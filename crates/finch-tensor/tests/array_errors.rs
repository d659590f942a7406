//! Errors of the array layer (issue #29 item 8): shape and broadcast mismatches,
//! unsupported type combinations and malformed inputs are errors that name the
//! operation and the operands; none panics.

use std::path::Path;

use finch::algebra::{Op, ScalarType, Value};
use finch::array::{self, ElementwiseOp, ElementwiseOptions};
use finch::formats::Format;
use finch::tensor::Coo;
use finch::{Array, Engine, Error};

fn vector(values: Vec<f64>) -> Array {
    Array::from_values(&[values.len()], values).unwrap()
}

fn message(r: finch::Result<Array>) -> String {
    match r {
        Ok(a) => panic!("expected an error, got {a}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broadcast_mismatch_names_both_operands_and_the_mode() {
    let a = Array::from_values(&[3, 4], vec![0.0; 12]).unwrap();
    let b = vector(vec![1.0; 5]);
    let m = message(a.add(&b));
    assert!(m.contains("`add`"), "{m}");
    assert!(m.contains("operand 1 (f64 array of shape 3×4)"), "{m}");
    assert!(m.contains("operand 2 (f64 array of shape 5)"), "{m}");
    assert!(m.contains("mode 2"), "{m}");
}

#[test]
fn types_without_a_common_type_are_refused() {
    let f = vector(vec![1.0, 2.0]);
    let b = Array::from_values(&[2], vec![true, false]).unwrap();
    let m = message(f.add(&b));
    assert!(m.contains("operand 1 is f64, operand 2 is bool"), "{m}");
    let u = Array::from_values(&[2], vec![1u64, 2]).unwrap();
    let i = Array::from_values(&[2], vec![1i64, 2]).unwrap();
    let m = message(u.multiply(&i));
    assert!(
        m.contains("`multiply`") && m.contains("u64") && m.contains("i64"),
        "{m}"
    );
}

#[test]
fn operations_refuse_operand_kinds_they_do_not_take() {
    let f = vector(vec![1.0, 2.0]);
    let b = Array::from_values(&[2], vec![true, false]).unwrap();
    let i = Array::from_values(&[2], vec![1i32, 2]).unwrap();
    let cases = [
        (f.logical_and(&f), "`logical_and` needs bool operands"),
        (
            f.bitwise_and(&f),
            "`bitwise_and` needs integer or bool operands",
        ),
        (b.left_shift(&b), "`left_shift` needs integer operands"),
        (b.add(&b), "`add` needs numeric operands"),
        (b.sqrt(), "`sqrt` needs a numeric operand"),
        (f.logical_not(), "`logical_not` needs a bool operand"),
        (
            f.bitwise_invert(),
            "`bitwise_invert` needs an integer or bool operand",
        ),
        (Array::where_(&f, &f, &f), "`where` needs a bool condition"),
        (
            Array::where_(&b, &f, &b),
            "`where` needs branches of types with a common type",
        ),
        (f.ldexp(&f), "`ldexp` needs an integer exponent"),
        (
            i.negative().and_then(|_| b.abs()),
            "`abs` needs a numeric operand",
        ),
    ];
    for (r, want) in cases {
        let m = message(r);
        assert!(m.contains(want), "{m} (wanted {want})");
    }
}

#[test]
fn wrong_arity_and_declared_fills_are_refused() {
    let f = vector(vec![1.0, 2.0]);
    let m = message(Array::elementwise(
        ElementwiseOp::Add,
        &[&f],
        &ElementwiseOptions::default(),
    ));
    assert!(m.contains("`add` takes 2 operands, got 1"), "{m}");
    let opts = ElementwiseOptions {
        fill: Some(Value::I64(0)),
        format: None,
    };
    let m = message(Array::elementwise(ElementwiseOp::Add, &[&f, &f], &opts));
    assert!(m.contains("the declared fill 0 is not a f64"), "{m}");
    let opts = ElementwiseOptions {
        fill: None,
        format: Some(Format::parse("Dense(Dense(Element(0.0)))").unwrap()),
    };
    let m = message(Array::elementwise(ElementwiseOp::Add, &[&f, &f], &opts));
    assert!(m.contains("has 2 modes, the result has shape 2"), "{m}");
}

#[test]
fn fills_whose_arithmetic_fails_are_refused() {
    array::set_engine(Engine::Interp);
    let a = Array::full(&[3], Value::I64(1)).unwrap();
    let z = Array::zeros(&[3], ScalarType::I64).unwrap();
    let m = message(a.floor_divide(&z));
    assert!(m.contains("fill values 1, 0"), "{m}");
}

#[test]
fn stored_values_that_fail_are_errors_of_the_run() {
    array::set_engine(Engine::Interp);
    let a = vector(vec![4.0, -1.0]);
    let m = message(a.sqrt());
    assert!(m.contains("sqrt"), "{m}");
    let i = Array::from_values(&[2], vec![2i64, 3]).unwrap();
    let n = Array::from_values(&[2], vec![1i64, -1]).unwrap();
    let m = message(i.pow(&n));
    assert!(m.contains("negative exponent"), "{m}");
}

#[test]
fn malformed_raw_arrays_are_refused() {
    // Row pointers that decrease.
    let e = Array::from_csr(2, 2, vec![0usize, 2, 1], vec![0usize, 1], vec![1.0, 2.0]).unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e}");
    // A column index past the matrix.
    let e = Array::from_csc(2, 2, vec![0usize, 1, 2], vec![0usize, 5], vec![1.0, 2.0]).unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e}");
    // COO coordinates out of order.
    let e =
        Array::from_coo_arrays(&[3, 3], vec![vec![0, 1], vec![2, 0]], vec![1.0, 2.0]).unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e}");
    let m = message(Array::from_coo_arrays(
        &[3, 3],
        vec![vec![0, 1]],
        vec![1.0, 2.0],
    ));
    assert!(m.contains("1 coordinate vectors for shape 3×3"), "{m}");
    let m = message(Array::from_triples(
        2,
        2,
        &[0, 1],
        &[0],
        &[Value::F64(1.0)],
        Value::F64(0.0),
        Op::Add,
    ));
    assert!(m.contains("2 rows, 1 columns and 1 values"), "{m}");
    let m = message(Array::from_triples(
        2,
        2,
        &[0],
        &[7],
        &[Value::F64(1.0)],
        Value::F64(0.0),
        Op::Add,
    ));
    assert!(m.contains("entry 0") && m.contains("out of bounds"), "{m}");
}

#[test]
fn malformed_constructor_arguments_are_refused() {
    let m = message(Array::from_values(&[2, 2], vec![1.0, 2.0, 3.0]));
    assert!(
        m.contains("3 values for a dense tensor of shape 2×2"),
        "{m}"
    );
    let m = message(Array::random_sparse(&[4], 1.5, 7));
    assert!(m.contains("density 1.5"), "{m}");
    let coo = Coo::new(ScalarType::F64, &[3]);
    let m = message(Array::from_coo(&coo, Value::I64(0), Op::Add, None));
    assert!(m.contains("fill value 0 is not a f64"), "{m}");
    let m = message(Array::scalar(Value::Missing));
    assert!(m.contains("missing"), "{m}");
    let e = Array::read_mtx(Path::new("/nonexistent/a.mtx"), None).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/a.mtx"), "{e}");
}

#[test]
fn conversions_refuse_mismatched_formats_and_types() {
    let f = vector(vec![1.0, 2.0]);
    let m = message(f.asformat(&Format::parse("Dense(Dense(Element(0.0)))").unwrap()));
    assert!(
        m.contains("has 2 modes, the array (f64 array of shape 2) has 1"),
        "{m}"
    );
    let m = message(f.asformat(&Format::parse("SparseList(Element(0))").unwrap()));
    assert!(m.contains("holds i64") && m.contains("use astype"), "{m}");
    let m = message(f.with_fill_value(Value::Bool(true)));
    assert!(m.contains("true is not a f64"), "{m}");
}
