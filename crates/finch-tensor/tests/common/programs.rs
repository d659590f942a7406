//! Running a program on dense data: compiled (stored in the declared formats first) or on
//! the reference interpreter, for tests that compare the two on whole programs.

use std::borrow::Borrow;
use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, ScalarType, Value};

pub fn example(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../examples/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Runs `text` compiled with `engine` on `inputs`, returning the dense outputs.
pub fn compiled(
    text: &str,
    engine: Engine,
    inputs: &[(&str, &DenseArray)],
) -> HashMap<String, DenseArray> {
    let p = Program::parse(text).unwrap();
    let mut t = stored(&p, inputs);
    let k = p.compile(engine).unwrap();
    k.run(&mut t, &HashMap::new()).unwrap();
    p.decls()
        .iter()
        .filter(|d| d.kind == finch::notation::DeclKind::Output)
        .map(|d| (d.name.clone(), t[&d.name].to_dense().unwrap()))
        .collect()
}

/// The inputs of `p` (those it declares) stored in their declared formats.
pub fn stored<A: Borrow<DenseArray>>(p: &Program, inputs: &[(&str, A)]) -> HashMap<String, Tensor> {
    inputs
        .iter()
        .filter_map(|(name, a)| {
            let d = p.decl(name)?;
            let f = Format::parse(&d.format.to_string()).unwrap();
            Some((
                name.to_string(),
                Tensor::from_dense(&f, a.borrow()).unwrap(),
            ))
        })
        .collect()
}

/// A 0-d `i64` input holding `v` (an input scalar such as a loop bound).
pub fn int_scalar(v: i64) -> DenseArray {
    DenseArray::from_data(ScalarType::I64, &[], vec![Value::I64(v)], Value::I64(0)).unwrap()
}

/// The inputs as dense bindings for the reference interpreter.
pub fn bindings<A: Borrow<DenseArray>>(inputs: &[(&str, A)]) -> Bindings {
    let mut b = Bindings::new();
    for (name, a) in inputs {
        b.insert(*name, a.borrow().clone());
    }
    b
}

pub fn reference(text: &str, inputs: &[(&str, &DenseArray)]) -> Bindings {
    let p = Program::parse(text).unwrap();
    let mut b = bindings(inputs);
    p.run_reference(&mut b, &RunOptions::default()).unwrap();
    b
}
