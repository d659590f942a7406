//! Property tests of the array layer: element-wise operations on random shapes (with
//! broadcasting), random formats, random fill values (`inf`, `-inf` and `NaN` among
//! them) and random stored data (explicit fills among it), compared with a dense
//! computation written here in plain Rust arithmetic, independent of the compiler and
//! of the language's operator semantics.
//!
//! The semantics checked (docs/array.md): the IEEE result of the operation at every
//! coordinate, except that where an operand whose fill annihilates a float operation
//! (`0` of `*`, `-Inf` of `min`, `+Inf` of `max`) holds that value, the result is the
//! annihilator (`0 * NaN = 0`), whether the value is stored or implicit. The programs
//! run in the kernel interpreter, or in C with `FINCH_ARRAY_TEST_ENGINE=c`.

use finch::algebra::{Op, ScalarType, Value};
use finch::array::{self, ElementwiseOp, ElementwiseOptions};
use finch::formats::Format;
use finch::tensor::Coo;
use finch::{Array, Engine};
use proptest::prelude::*;

/// A small deterministic generator, so that one proptest seed fixes a whole case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// The interpreter, or the C engine with `FINCH_ARRAY_TEST_ENGINE=c` (slower: one C
/// compile per new program).
fn use_test_engine() {
    let c = std::env::var("FINCH_ARRAY_TEST_ENGINE").is_ok_and(|e| e == "c");
    array::set_engine(if c { Engine::C } else { Engine::Interp });
}

const SPECIAL: [f64; 8] = [
    0.0,
    1.0,
    -2.5,
    3.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    -0.5,
];

/// A random format of `rank` modes over `leaf`: each level Dense or SparseList, or one
/// SparseCOO level for all modes.
fn random_format(rng: &mut Rng, rank: usize, leaf: &str) -> Format {
    let text = if rank >= 1 && rng.below(5) == 0 {
        format!("SparseCOO{{{rank}}}({leaf})")
    } else {
        let mut t = leaf.to_string();
        for _ in 0..rank {
            let kind = if rng.below(2) == 0 {
                "Dense"
            } else {
                "SparseList"
            };
            t = format!("{kind}({t})");
        }
        t
    };
    Format::parse(&text).unwrap()
}

fn linear(shape: &[usize], coord: &[usize]) -> usize {
    let mut pos = 0;
    let mut stride = 1;
    for (&i, &n) in coord.iter().zip(shape) {
        pos += i * stride;
        stride *= n;
    }
    pos
}

fn unlinear(shape: &[usize], mut pos: usize) -> Vec<usize> {
    shape
        .iter()
        .map(|&n| {
            let i = pos % n;
            pos /= n;
            i
        })
        .collect()
}

/// A random array of `shape`: values drawn by `value`, each coordinate left implicit,
/// stored as the fill (an explicit fill) or stored as a drawn value. Returns the array
/// and its dense values (column-major).
fn random_array(
    rng: &mut Rng,
    shape: &[usize],
    fill: Value,
    value: &mut dyn FnMut(&mut Rng) -> Value,
) -> (Array, Vec<Value>) {
    let ty = fill.scalar_type().unwrap();
    let len: usize = shape.iter().product();
    let mut coo = Coo::new(ty, shape);
    let mut dense = vec![fill; len];
    for (pos, slot) in dense.iter_mut().enumerate() {
        match rng.below(4) {
            0 => {}
            1 => {
                coo.push(&unlinear(shape, pos), fill).unwrap();
            }
            _ => {
                let v = value(rng);
                coo.push(&unlinear(shape, pos), v).unwrap();
                *slot = v;
            }
        }
    }
    if shape.is_empty() {
        let v = value(rng);
        return (Array::scalar(v).unwrap(), vec![v]);
    }
    let leaf = format!("Element({fill})");
    let format = random_format(rng, shape.len(), &leaf);
    let a = Array::from_coo(&coo, fill, Op::Overwrite, Some(&format)).unwrap();
    (a, dense)
}

/// A result shape and the shapes of `n` operands that broadcast to it: the operands
/// draw from one full shape, dropping leading modes or shrinking modes to 1, and the
/// result is their broadcast.
fn broadcast_shapes(rng: &mut Rng, n: usize) -> (Vec<usize>, Vec<Vec<usize>>) {
    let rank = 1 + rng.below(3);
    let full: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
    let shapes: Vec<Vec<usize>> = (0..n)
        .map(|k| {
            // The first operand keeps the full rank; the others may drop leading modes.
            let drop = if k == 0 { 0 } else { rng.below(rank + 1) };
            full[drop..]
                .iter()
                .map(|&s| if rng.below(4) == 0 { 1 } else { s })
                .collect()
        })
        .collect();
    let mut result = vec![1usize; rank];
    for s in &shapes {
        for (j, &size) in s.iter().enumerate() {
            let m = rank - s.len() + j;
            result[m] = result[m].max(size);
        }
    }
    (result, shapes)
}

/// The value of a broadcast operand at a result coordinate.
fn at(dense: &[Value], shape: &[usize], result_coord: &[usize]) -> Value {
    let offset = result_coord.len() - shape.len();
    let coord: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(j, &n)| if n == 1 { 0 } else { result_coord[offset + j] })
        .collect();
    dense[linear(shape, &coord)]
}

fn f64_of(v: Value) -> f64 {
    v.as_f64().unwrap()
}

/// Julia's `min`/`max`: a NaN operand is the result.
fn min_max(x: f64, y: f64, max: bool) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if max {
        x.max(y)
    } else {
        x.min(y)
    }
}

/// The expected value of a binary float operation at one coordinate.
fn expected_binary(op: ElementwiseOp, x: f64, y: f64, fx: f64, fy: f64) -> Value {
    use ElementwiseOp::*;
    let annihilated = |a: f64| (x == a && fx == a) || (y == a && fy == a);
    let v = match op {
        Add => x + y,
        Subtract => x - y,
        Multiply if annihilated(0.0) => 0.0,
        Multiply => x * y,
        Divide => x / y,
        Pow => x.powf(y),
        Minimum if annihilated(f64::NEG_INFINITY) => f64::NEG_INFINITY,
        Minimum => min_max(x, y, false),
        Maximum if annihilated(f64::INFINITY) => f64::INFINITY,
        Maximum => min_max(x, y, true),
        Less => return Value::Bool(x < y),
        Equal => return Value::Bool(x == y),
        NotEqual => return Value::Bool(x != y),
        GreaterEqual => return Value::Bool(x >= y),
        _ => unreachable!("not a float binary op of this test"),
    };
    Value::F64(v)
}

/// Same value, a NaN equal to a NaN and `-0.0` to `0.0` (the simplifier's `x + 0 = x`
/// keeps the sign of a zero that IEEE addition would drop).
fn agrees(got: Value, want: Value) -> bool {
    got.same(&want) || (got.is_zero() && want.is_zero() && got.scalar_type() == want.scalar_type())
}

fn check_against(
    result: &Array,
    shape: &[usize],
    want: &[Value],
    want_fill: Value,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(result.shape(), shape);
    prop_assert!(
        agrees(result.fill_value(), want_fill),
        "fill {} expected {}",
        result.fill_value(),
        want_fill
    );
    let got = result.to_dense().unwrap().data;
    for (pos, (&g, &w)) in got.iter().zip(want).enumerate() {
        prop_assert!(
            agrees(g, w),
            "at {:?}: got {} want {}",
            unlinear(shape, pos),
            g,
            w
        );
    }
    Ok(())
}

const FLOAT_BINARY: [ElementwiseOp; 12] = [
    ElementwiseOp::Add,
    ElementwiseOp::Subtract,
    ElementwiseOp::Multiply,
    ElementwiseOp::Divide,
    ElementwiseOp::Pow,
    ElementwiseOp::Minimum,
    ElementwiseOp::Maximum,
    ElementwiseOp::Less,
    ElementwiseOp::Equal,
    ElementwiseOp::NotEqual,
    ElementwiseOp::GreaterEqual,
    ElementwiseOp::Multiply,
];

fn float_value(rng: &mut Rng) -> Value {
    Value::F64(rng.pick(&SPECIAL))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn float_binary_ops_agree_with_dense_arithmetic(seed in any::<u64>()) {
        use_test_engine();
        let mut rng = Rng(seed);
        let op = rng.pick(&FLOAT_BINARY);
        let (shape, shapes) = broadcast_shapes(&mut rng, 2);
        let fa = Value::F64(rng.pick(&SPECIAL));
        let fb = Value::F64(rng.pick(&SPECIAL));
        let (a, da) = random_array(&mut rng, &shapes[0], fa, &mut float_value);
        let (b, db) = random_array(&mut rng, &shapes[1], fb, &mut float_value);
        let result = Array::elementwise(op, &[&a, &b], &ElementwiseOptions::default()).unwrap();
        let (xf, yf) = (f64_of(fa), f64_of(fb));
        let bfill = if shapes[1].is_empty() { f64_of(db[0]) } else { yf };
        let want: Vec<Value> = (0..shape.iter().product::<usize>())
            .map(|pos| {
                let c = unlinear(&shape, pos);
                let x = f64_of(at(&da, &shapes[0], &c));
                let y = f64_of(at(&db, &shapes[1], &c));
                expected_binary(op, x, y, xf, bfill)
            })
            .collect();
        let want_fill = expected_binary(op, xf, bfill, xf, bfill);
        check_against(&result, &shape, &want, want_fill)?;
    }

    #[test]
    fn float_unary_ops_agree_with_dense_arithmetic(seed in any::<u64>()) {
        use_test_engine();
        let mut rng = Rng(seed);
        let (shape, _) = broadcast_shapes(&mut rng, 1);
        let fa = Value::F64(rng.pick(&SPECIAL));
        let (a, da) = random_array(&mut rng, &shape, fa, &mut float_value);
        let which = rng.below(4);
        let (result, f): (Array, fn(f64) -> f64) = match which {
            0 => (a.negative().unwrap(), |x| -x),
            1 => (a.abs().unwrap(), f64::abs),
            2 => (a.exp().unwrap(), f64::exp),
            // sqrt of a negative number is an error in the language: abs first.
            _ => (a.abs().unwrap().sqrt().unwrap(), |x: f64| x.abs().sqrt()),
        };
        let want: Vec<Value> = da.iter().map(|&v| Value::F64(f(f64_of(v)))).collect();
        check_against(&result, &shape, &want, Value::F64(f(f64_of(fa))))?;
    }

    #[test]
    fn where_selects_elementwise(seed in any::<u64>()) {
        use_test_engine();
        let mut rng = Rng(seed);
        let (shape, shapes) = broadcast_shapes(&mut rng, 3);
        let fc = Value::Bool(rng.below(2) == 0);
        let (c, dc) = random_array(&mut rng, &shapes[0], fc, &mut |r: &mut Rng| Value::Bool(r.below(2) == 0));
        let fa = Value::F64(rng.pick(&SPECIAL));
        let fb = Value::F64(rng.pick(&SPECIAL));
        let (a, da) = random_array(&mut rng, &shapes[1], fa, &mut float_value);
        let (b, db) = random_array(&mut rng, &shapes[2], fb, &mut float_value);
        let result = Array::where_(&c, &a, &b).unwrap();
        let want: Vec<Value> = (0..shape.iter().product::<usize>())
            .map(|pos| {
                let k = unlinear(&shape, pos);
                if at(&dc, &shapes[0], &k).as_bool().unwrap() {
                    at(&da, &shapes[1], &k)
                } else {
                    at(&db, &shapes[2], &k)
                }
            })
            .collect();
        let pick = |v: Value, d: &[Value], s: &[usize]| if s.is_empty() { d[0] } else { v };
        let want_fill = if fc.as_bool().unwrap() { pick(fa, &da, &shapes[1]) } else { pick(fb, &db, &shapes[2]) };
        check_against(&result, &shape, &want, want_fill)?;
    }

    #[test]
    fn integer_ops_agree_with_wrapping_arithmetic(seed in any::<u64>()) {
        use_test_engine();
        let mut rng = Rng(seed);
        let types = [ScalarType::I64, ScalarType::I32, ScalarType::I8, ScalarType::U8, ScalarType::U16];
        let (ta, tb) = (rng.pick(&types), rng.pick(&types));
        let ops = [
            ElementwiseOp::Add, ElementwiseOp::Subtract, ElementwiseOp::Multiply,
            ElementwiseOp::Minimum, ElementwiseOp::Maximum, ElementwiseOp::BitwiseAnd,
            ElementwiseOp::BitwiseOr, ElementwiseOp::BitwiseXor,
        ];
        let op = rng.pick(&ops);
        let (shape, shapes) = broadcast_shapes(&mut rng, 2);
        let small = [0i128, 1, -1, 2, 7, -100, 127, 300];
        let value_of = |ty: ScalarType| move |r: &mut Rng| Value::from_i128_wrapping(r.pick(&small), ty);
        let fa = value_of(ta)(&mut rng);
        let fb = value_of(tb)(&mut rng);
        let (a, da) = random_array(&mut rng, &shapes[0], fa, &mut value_of(ta));
        let (b, db) = random_array(&mut rng, &shapes[1], fb, &mut value_of(tb));
        let result = Array::elementwise(op, &[&a, &b], &ElementwiseOptions::default()).unwrap();
        let rt = array::result_type(ta, tb).unwrap();
        prop_assert_eq!(result.dtype(), rt);
        let eval = |x: Value, y: Value| {
            let (x, y) = (x.as_i128().unwrap(), y.as_i128().unwrap());
            let v = match op {
                ElementwiseOp::Add => x + y,
                ElementwiseOp::Subtract => x - y,
                ElementwiseOp::Multiply => x * y,
                ElementwiseOp::Minimum => x.min(y),
                ElementwiseOp::Maximum => x.max(y),
                ElementwiseOp::BitwiseAnd => x & y,
                ElementwiseOp::BitwiseOr => x | y,
                _ => x ^ y,
            };
            Value::from_i128_wrapping(v, rt)
        };
        let want: Vec<Value> = (0..shape.iter().product::<usize>())
            .map(|pos| {
                let c = unlinear(&shape, pos);
                eval(at(&da, &shapes[0], &c), at(&db, &shapes[1], &c))
            })
            .collect();
        let bfill = if shapes[1].is_empty() { db[0] } else { fb };
        check_against(&result, &shape, &want, eval(fa, bfill))?;
    }

    #[test]
    fn conversions_keep_every_value(seed in any::<u64>()) {
        use_test_engine();
        let mut rng = Rng(seed);
        let (shape, _) = broadcast_shapes(&mut rng, 1);
        let fa = Value::F64(rng.pick(&SPECIAL));
        let (a, da) = random_array(&mut rng, &shape, fa, &mut float_value);
        let dropped = a.dropfills().unwrap();
        prop_assert!(dropped.countstored() <= a.countstored());
        check_against(&dropped, &shape, &da, fa)?;
        let target = random_format(&mut rng, shape.len(), &format!("Element({fa})"));
        check_against(&a.asformat(&target).unwrap(), &shape, &da, fa)?;
        let nf = Value::F64(rng.pick(&SPECIAL));
        let refilled = a.with_fill_value(nf).unwrap();
        check_against(&refilled, &shape, &da, nf)?;
    }
}
