//! The digest's golden cases (sparse-array-programming.md §8) that concern element-wise
//! operations and fills, through the array layer on the default (C) engine: result
//! values, fills, stored coordinates and formats.

use finch::algebra::{Op, ScalarType, Value};
use finch::array::ElementwiseOptions;
use finch::formats::Format;
use finch::tensor::Coo;
use finch::Array;

const INF: f64 = f64::INFINITY;

/// A vector of size `n` storing `entries` with fill `fill`, as a SparseList.
fn sparse(n: usize, entries: &[(usize, Value)], fill: Value) -> Array {
    let ty = fill.scalar_type().unwrap();
    let mut coo = Coo::new(ty, &[n]);
    for &(i, v) in entries {
        coo.push(&[i], v).unwrap();
    }
    Array::from_coo(&coo, fill, Op::Overwrite, None).unwrap()
}

fn f(entries: &[(usize, f64)]) -> Vec<(usize, Value)> {
    entries.iter().map(|&(i, v)| (i, Value::F64(v))).collect()
}

fn dense_f64(a: &Array) -> Vec<f64> {
    a.to_dense()
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn stored(a: &Array) -> Vec<(usize, Value)> {
    let coo = a.to_coo();
    (0..coo.len())
        .map(|k| (coo.coords[0][k], coo.vals[k]))
        .collect()
}

#[test]
fn t3_max_with_infinite_fills_intersects() {
    let a = sparse(6, &f(&[(1, 3.0), (2, 5.0), (4, -1.0)]), Value::F64(INF));
    let b = sparse(6, &f(&[(2, 4.0), (4, 2.0), (5, 9.0)]), Value::F64(INF));
    let c = sparse(6, &f(&[(2, 7.0), (3, 1.0)]), Value::F64(0.0));
    let ab = a.maximum(&b).unwrap();
    let r = ab.maximum(&c).unwrap();
    assert!(r.fill_value().same(&Value::F64(INF)));
    assert_eq!(dense_f64(&r), [INF, INF, 7.0, INF, 2.0, INF]);
    // A ∩ B: only coordinates 2 and 4 are stored.
    assert_eq!(stored(&r), f(&[(2, 7.0), (4, 2.0)]));
    assert_eq!(r.format().to_string(), "SparseList(Element(Inf))");
}

#[test]
fn t4_min_with_equal_fills_is_a_union() {
    let a = sparse(5, &f(&[(0, 3.0), (2, 8.0)]), Value::F64(5.0));
    let b = sparse(5, &f(&[(2, 1.0), (3, 9.0)]), Value::F64(5.0));
    let r = a.minimum(&b).unwrap();
    assert!(r.fill_value().same(&Value::F64(5.0)));
    assert_eq!(dense_f64(&r), [3.0, 5.0, 1.0, 5.0, 5.0]);
    // {3: min(5, 9) = 5} is a fill: not stored.
    assert_eq!(stored(&r), f(&[(0, 3.0), (2, 1.0)]));
}

#[test]
fn t5_max_with_an_identity_fill_takes_the_other_fill() {
    let a = sparse(5, &f(&[(0, 50.0), (1, 7.0)]), Value::F64(-INF));
    let b = sparse(5, &f(&[(1, 3.0), (3, 40.0)]), Value::F64(42.0));
    let r = a.maximum(&b).unwrap();
    assert!(r.fill_value().same(&Value::F64(42.0)));
    assert_eq!(dense_f64(&r), [50.0, 7.0, 42.0, 40.0, 42.0]);
}

#[test]
fn t6a_product_with_a_zero_fill_keeps_that_operands_space() {
    let a = sparse(4, &f(&[(0, 2.0), (1, 3.0)]), Value::F64(1.0));
    let b = sparse(4, &f(&[(1, 4.0), (2, 5.0)]), Value::F64(0.0));
    let r = a.multiply(&b).unwrap();
    assert!(r.fill_value().same(&Value::F64(0.0)));
    assert_eq!(stored(&r), f(&[(1, 12.0), (2, 5.0)]));
}

#[test]
fn t6b_sum_folds_the_fills() {
    let a = sparse(4, &f(&[(0, 5.0)]), Value::F64(1.0));
    let b = sparse(4, &f(&[(2, 7.0)]), Value::F64(2.0));
    let r = a.add(&b).unwrap();
    assert!(r.fill_value().same(&Value::F64(3.0)));
    assert_eq!(stored(&r), f(&[(0, 7.0), (2, 8.0)]));
    assert_eq!(dense_f64(&r), [7.0, 3.0, 8.0, 3.0]);
}

#[test]
fn t6c_a_declared_fill_stores_every_coordinate() {
    let a = sparse(4, &f(&[(0, 5.0)]), Value::F64(1.0));
    let b = sparse(4, &f(&[(2, 7.0)]), Value::F64(2.0));
    let options = ElementwiseOptions {
        fill: Some(Value::F64(0.0)),
        format: None,
    };
    let r = Array::elementwise(finch::array::ElementwiseOp::Add, &[&a, &b], &options).unwrap();
    assert!(r.fill_value().same(&Value::F64(0.0)));
    assert_eq!(r.format().to_string(), "Dense(Element(0.0))");
    assert_eq!(stored(&r), f(&[(0, 7.0), (1, 3.0), (2, 8.0), (3, 3.0)]));
}

#[test]
fn t7_division_by_a_sparse_vector_with_fill_two() {
    let a = sparse(4, &f(&[(0, 6.0), (2, 3.0)]), Value::F64(0.0));
    let b = sparse(4, &f(&[(2, 4.0), (3, 8.0)]), Value::F64(2.0));
    let r = a.divide(&b).unwrap();
    assert!(r.fill_value().same(&Value::F64(0.0)));
    assert_eq!(dense_f64(&r), [3.0, 0.0, 0.75, 0.0]);
    // 0 / 8 at coordinate 3 is the fill: not stored.
    assert_eq!(stored(&r), f(&[(0, 3.0), (2, 0.75)]));
}

#[test]
fn t8b_logical_xor_ignores_an_explicit_false() {
    let t = Value::Bool(true);
    let fl = Value::Bool(false);
    // a stores an explicit `false` at 2.
    let a = sparse(6, &[(0, t), (2, fl), (4, t)], fl);
    let b = sparse(6, &[(2, t), (3, t), (4, t)], fl);
    let r = a.logical_xor(&b).unwrap();
    assert!(r.fill_value().same(&fl));
    let dense: Vec<bool> = r
        .to_dense()
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_bool().unwrap())
        .collect();
    assert_eq!(dense, [true, false, true, true, false, false]);
    // Coordinate 4 (true xor true) is the fill: not stored.
    assert_eq!(stored(&r), vec![(0, t), (2, t), (3, t)]);
}

#[test]
fn t9_masked_power() {
    let int = |es: &[(usize, i64)]| {
        es.iter()
            .map(|&(i, v)| (i, Value::I64(v)))
            .collect::<Vec<_>>()
    };
    let b = sparse(6, &int(&[(0, 2), (1, 3), (3, 2)]), Value::I64(0));
    let c = sparse(6, &int(&[(0, 3), (2, 5), (3, 0)]), Value::I64(0));
    let d = sparse(
        6,
        &[(1, Value::Bool(true)), (4, Value::Bool(true))],
        Value::Bool(false),
    );
    let p = b.pow(&c).unwrap();
    // 0 ^ 0 = 1.
    assert!(p.fill_value().same(&Value::I64(1)));
    let mask = d.logical_not().unwrap();
    assert!(mask.fill_value().same(&Value::Bool(true)));
    let r = p.multiply(&mask.astype(ScalarType::I64).unwrap()).unwrap();
    assert!(r.fill_value().same(&Value::I64(1)));
    let dense: Vec<i64> = r
        .to_dense()
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_i128().unwrap() as i64)
        .collect();
    assert_eq!(dense, [8, 0, 0, 1, 0, 1]);
}

#[test]
fn broadcasting_a_row_against_a_csc_matrix_stays_sparse() {
    // A = [1 0 2; 0 3 0] (2×3, CSC), x = [10, 100, 1000] (a row of shape 1×3).
    let a = Array::from_csr(
        2,
        3,
        vec![0usize, 2, 3],
        vec![0usize, 2, 1],
        vec![1.0, 2.0, 3.0],
    )
    .unwrap();
    let x = Array::from_values(&[1, 3], vec![10.0, 100.0, 1000.0]).unwrap();
    let r = a.multiply(&x).unwrap();
    assert_eq!(r.shape(), [2, 3]);
    assert_eq!(r.format().to_string(), "Dense(SparseList(Element(0.0)))");
    assert_eq!(dense_f64(&r), [10.0, 0.0, 0.0, 300.0, 2000.0, 0.0]);
    // A vector of shape [3] broadcasts the same way (trailing modes aligned).
    let v = Array::from_values(&[3], vec![10.0, 100.0, 1000.0]).unwrap();
    assert_eq!(dense_f64(&a.multiply(&v).unwrap()), dense_f64(&r));
    // A column of shape 2×1 against a 1×3 row: an outer sum of shape 2×3.
    let col = Array::from_values(&[2, 1], vec![1.0, 2.0]).unwrap();
    let outer = col.add(&x).unwrap();
    assert_eq!(outer.shape(), [2, 3]);
    assert_eq!(
        dense_f64(&outer),
        [11.0, 12.0, 101.0, 102.0, 1001.0, 1002.0]
    );
}

#[test]
fn scalars_are_literals_folded_with_the_fill() {
    let a = sparse(5, &f(&[(1, 2.0), (3, -4.0)]), Value::F64(0.0));
    let two = Array::scalar(Value::F64(2.0)).unwrap();
    let r = a.add(&two).unwrap();
    assert!(r.fill_value().same(&Value::F64(2.0)));
    assert_eq!(r.format().to_string(), "SparseList(Element(2.0))");
    assert_eq!(stored(&r), f(&[(1, 4.0), (3, -2.0)]));
    let s = two.multiply(&two).unwrap();
    assert_eq!(s.ndim(), 0);
    assert!(s.get(&[]).unwrap().same(&Value::F64(4.0)));
}

#[test]
fn integer_promotion_casts_to_the_array_api_type() {
    let a = Array::from_values(&[3], vec![200u8, 1, 255]).unwrap();
    let b = Array::from_values(&[3], vec![-1i8, -128, 127]).unwrap();
    let r = a.add(&b).unwrap();
    assert_eq!(r.dtype(), ScalarType::I16);
    let got: Vec<i128> = r
        .to_dense()
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_i128().unwrap())
        .collect();
    assert_eq!(got, [199, -127, 382]);
    let q = a.divide(&b).unwrap();
    assert_eq!(q.dtype(), ScalarType::F64);
    let cmp = a.greater(&b).unwrap();
    assert_eq!(cmp.dtype(), ScalarType::Bool);
}

#[test]
fn format_conversions_keep_values() {
    let a = sparse(6, &f(&[(1, 3.0), (4, 0.0)]), Value::F64(0.0));
    // The explicit 0.0 at 4 is stored until dropped.
    assert_eq!(a.countstored(), 2);
    let d = a.dropfills().unwrap();
    assert_eq!(d.countstored(), 1);
    assert_eq!(dense_f64(&d), dense_f64(&a));
    let dense = a
        .asformat(&Format::parse("Dense(Element(0.0))").unwrap())
        .unwrap();
    assert_eq!(dense.countstored(), 6);
    assert_eq!(dense_f64(&dense), dense_f64(&a));
    let ones = a.with_fill_value(Value::F64(1.0)).unwrap();
    assert!(ones.fill_value().same(&Value::F64(1.0)));
    assert_eq!(dense_f64(&ones), dense_f64(&a));
    // Every coordinate but the stored ones held 0, which is no longer the fill.
    assert_eq!(ones.countstored(), 6);
}
