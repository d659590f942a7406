//! The array layer's program cache: a second operation of the same structure, formats
//! and fills on new data compiles nothing. One test in its own binary, so that no other
//! test compiles programs between the counts.

use finch::algebra::Value;
use finch::array;
use finch::Array;

fn sparse(values: Vec<f64>) -> Array {
    let n = values.len();
    Array::from_values(&[n], values)
        .unwrap()
        .asformat(&"SparseList(Element(0.0))".parse().unwrap())
        .unwrap()
}

#[test]
fn a_repeated_operation_on_new_data_compiles_nothing() {
    let a = sparse(vec![1.0, 0.0, 2.0, 0.0]);
    let b = sparse(vec![0.0, 3.0, 4.0, 0.0]);
    // New values, new sizes and new structure; the same formats and fills.
    let c = sparse(vec![5.0, 0.0, 0.0, 6.0, 7.0, 0.0]);
    let d = sparse(vec![0.0, 0.0, 1.0, 1.0, 0.0, 9.0]);
    let first = a.add(&b).unwrap();
    let before = array::cache_stats();
    let second = c.add(&d).unwrap();
    let after = array::cache_stats();
    assert_eq!(after.compiles, before.compiles, "the second call compiled");
    assert_eq!(after.hits, before.hits + 1);
    let values = |x: &Array| x.to_dense().unwrap().data;
    assert_eq!(values(&first), [1.0, 3.0, 6.0, 0.0].map(Value::F64));
    assert_eq!(
        values(&second),
        [5.0, 0.0, 1.0, 7.0, 7.0, 9.0].map(Value::F64)
    );
    // Another fill is another program.
    let e = c.with_fill_value(Value::F64(1.0)).unwrap();
    let compiles = array::cache_stats().compiles;
    e.add(&d).unwrap();
    assert_eq!(array::cache_stats().compiles, compiles + 1);
    // Emptied, the cache compiles again.
    array::clear_cache();
    c.add(&d).unwrap();
    assert_eq!(array::cache_stats().compiles, compiles + 2);
}
