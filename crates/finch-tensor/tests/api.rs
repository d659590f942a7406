//! The embedding API: a program called by name on tensors built from Rust vectors, and
//! the errors a caller gets for names, types and shapes that do not fit.

use finch::{Engine, Program, Tensor};

const SPMV: &str = "
input  A :: Dense(SparseList(Element(0.0)))
input  x :: Dense(Element(0.0))
output y :: Dense(Element(0.0))
output s :: Scalar(0.0)
y .= 0
s .= 0
for j = _, i = _
  y[i] += A[i, j] * x[j]
  s[] += A[i, j]
end
";

fn inputs() -> [(&'static str, Tensor); 2] {
    // A = [1 0 2; 0 3 0].
    let a = Tensor::from_csr(
        2,
        3,
        vec![0usize, 2, 3],
        vec![0usize, 2, 1],
        vec![1.0, 2.0, 3.0],
    )
    .unwrap();
    let x = Tensor::from_values(&[3], vec![1.0, 10.0, 100.0]).unwrap();
    [("A", a), ("x", x)]
}

#[test]
fn a_program_is_called_by_name_and_read_as_rust_values() {
    for engine in [Engine::Interp, Engine::C] {
        let spmv = Program::parse(SPMV).unwrap().compile(engine).unwrap();
        let out = spmv.call(inputs()).unwrap();
        assert_eq!(out.dense::<f64>("y").unwrap(), [201.0, 30.0]);
        assert_eq!(out.scalar::<f64>("s").unwrap(), 6.0);
        assert_eq!(out.get("y").unwrap().shape(), &[2]);
        let mut names: Vec<String> = out.into_map().into_keys().collect();
        names.sort();
        assert_eq!(names, ["s", "y"], "inputs are not returned");
    }
}

#[test]
fn callers_get_named_errors() {
    let spmv = Program::parse(SPMV)
        .unwrap()
        .compile(Engine::Interp)
        .unwrap();
    let err = |r: finch::Result<finch::Outputs>| r.unwrap_err().to_string();
    let [a, x] = inputs();
    let e = err(spmv.call([a.clone(), ("z", x.1.clone())]));
    assert!(e.contains("declares no tensor `z`"), "{e}");
    let e = err(spmv.call([a.clone(), x.clone(), ("y", x.1.clone())]));
    assert!(e.contains("`y` is not an input"), "{e}");
    let e = err(spmv.call([a.clone(), x.clone(), ("x", x.1.clone())]));
    assert!(e.contains("`x` is given twice"), "{e}");
    let e = err(spmv.call([a.clone()]));
    assert!(e.contains("missing input: x"), "{e}");

    let out = spmv.call([a, x]).unwrap();
    let e = out.dense::<f64>("w").unwrap_err().to_string();
    assert!(e.contains("no output `w` (the outputs are: s, y)"), "{e}");
    let e = out.dense::<i64>("y").unwrap_err().to_string();
    assert!(e.contains("`y` holds f64, not i64"), "{e}");
    let e = out.scalar::<f64>("y").unwrap_err().to_string();
    assert!(e.contains("has 1 modes, not a scalar"), "{e}");
}

#[test]
fn dense_values_need_their_shape() {
    let t = Tensor::from_values(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]).unwrap();
    assert_eq!(t.format().to_string(), "Dense(Dense(Element(0)))");
    // Column-major: the first index varies fastest.
    assert_eq!(t.get(&[1, 0]).unwrap(), finch::Value::I64(2));
    assert_eq!(t.get(&[0, 1]).unwrap(), finch::Value::I64(3));
    let e = Tensor::from_values(&[2, 2], vec![1.0; 3])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("3 values for a dense tensor of shape 2×2 (4 entries"),
        "{e}"
    );
    let e = Tensor::from_values(&[], vec![1.0]).unwrap_err().to_string();
    assert!(e.contains("a 0-d tensor is a Scalar"), "{e}");
}
