//! Errors of compiled programs: inputs that do not match the declared formats or sizes, and
//! lifecycle errors naming the tensor.

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::tensor::Tensor;
use finch::{DenseArray, Program};

#[test]
fn mismatched_inputs_are_clear_errors() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spmv.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let a = DenseArray::from_f64(&[2, 3], &[1.0; 6]).unwrap();
    let mut t = HashMap::new();
    t.insert(
        "A".to_string(),
        Tensor::from_dense(&Format::parse("Dense(Dense(Element(0.0)))").unwrap(), &a).unwrap(),
    );
    t.insert(
        "x".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(Element(0.0))").unwrap(),
            &DenseArray::from_f64(&[3], &[1.0; 3]).unwrap(),
        )
        .unwrap(),
    );
    let e = k.run(&mut t, &HashMap::new()).unwrap_err().to_string();
    assert!(e.contains("stored as Dense(Dense(Element(0.0)))"), "{e}");
    t.insert(
        "A".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(SparseList(Element(0.0)))").unwrap(),
            &a,
        )
        .unwrap(),
    );
    t.insert(
        "x".to_string(),
        Tensor::from_dense(
            &Format::parse("Dense(Element(0.0))").unwrap(),
            &DenseArray::from_f64(&[4], &[1.0; 4]).unwrap(),
        )
        .unwrap(),
    );
    let e = k.run(&mut t, &HashMap::new()).unwrap_err().to_string();
    assert!(
        e.contains("`j`") && e.contains("size 3") && e.contains("size 4"),
        "{e}"
    );
    // A read out of loop order compiles (concordized), with a warning for its sparse level.
    let k = Program::parse(&text.replace("y[i] += A[i, j] * x[j]", "y[i] += A[j, i] * x[j]"))
        .unwrap()
        .compile(Engine::Interp)
        .unwrap();
    assert!(
        k.warnings().iter().any(|w| w.contains("not in loop order")),
        "{:?}",
        k.warnings()
    );
}

/// Lifecycles: a tensor is read or updated within one loop nest, not both. The program
/// is refused when it is made, so no engine (the reference included) runs it.
#[test]
fn lifecycle_errors_name_the_tensor() {
    let head = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] + 1.0\nend\n";
    for nest in [
        "for i = _\n  y[i] += y[i]\nend\n",
        // Inside a branch and a `let` of the nest.
        "for i = _\n  if x[i] > 0.0\n    let t = y[i]\n      y[i] = t\n    end\n  end\nend\n",
        // A loop nest inside a loop: the statement is the outer loop.
        "for j = _\n  for i = _\n    y[i] += y[j]\n  end\nend\n",
    ] {
        let e = Program::parse(&format!("{head}{nest}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`y` is read and written in the same loop nest"),
            "{nest}: {e}"
        );
    }
    // A temporary declared inside the statement is private to it; a scalar is exempt.
    let private = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ntemp t :: Dense(Element(0.0))\ns .= 0\nfor j = _\n  begin\n    t .= 0\n    for i = _\n      t[i] += x[i]\n    end\n    for i = _\n      s[] += t[i] * s[]\n    end\n  end\nend\n";
    Program::parse(private).unwrap_or_else(|e| panic!("{e}"));
    // Reading a dense output in a later loop nest is fine.
    let ok = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ny .= 0\nfor i = _\n  y[i] = x[i] + 1.0\nend\ns .= 0\nfor i = _\n  s[] += y[i]\nend\n";
    let k = Program::parse(ok).unwrap().compile(Engine::Interp).unwrap();
    let x = Tensor::from_dense(
        &Format::parse("Dense(Element(0.0))").unwrap(),
        &DenseArray::from_f64(&[3], &[1.0, 2.0, 3.0]).unwrap(),
    )
    .unwrap();
    let mut t = HashMap::from([("x".to_string(), x)]);
    k.run(&mut t, &HashMap::new()).unwrap();
    assert_eq!(t["s"].get(&[]).unwrap(), finch::Value::F64(9.0));
}
