//! Regression tests for wrong results and internal errors that random programs found in
//! the compiled engines (issue #27 and the differential tester). Each test runs one
//! program on the dense reference engine and on every compiled configuration (the
//! interpreter and C, strict and reassociated, specialized and compact) and asks for the
//! same values and the same stored entries.

use std::collections::HashMap;

use finch::engine::{CompileOptions, Engine};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program};

mod internal_errors;
mod memory_safety;
mod missing_values;
mod output_writes;
mod refusals;
mod semantics;
mod shifted_reads;
mod workspaces;

/// The compiled configurations every regression runs: (engine, reassociate, compact).
const CONFIGS: [(Engine, bool, bool); 6] = [
    (Engine::Interp, false, false),
    (Engine::Interp, false, true),
    (Engine::C, false, false),
    (Engine::C, false, true),
    (Engine::C, true, false),
    (Engine::C, true, true),
];

/// A dense array of `f64` values in column-major order.
pub fn array(shape: &[usize], data: &[f64]) -> DenseArray {
    DenseArray::from_f64(shape, data).expect("a well-formed test array")
}

/// Runs `text` on the reference engine and on every compiled configuration with `inputs`
/// (each stored in the format the program declares for it) and asserts that every output
/// has the reference's values and the stored entries the reference's result has in the
/// output's format. Returns the reference's outputs, for tests that also check values
/// computed by hand.
pub fn agree(text: &str, inputs: &[(&str, DenseArray)]) -> HashMap<String, DenseArray> {
    let program = Program::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut reference = Bindings::new();
    for (name, a) in inputs {
        reference.insert(*name, a.clone());
    }
    program
        .run_reference(&mut reference, &RunOptions::default())
        .unwrap_or_else(|e| panic!("reference: {e}\n{text}"));
    let outputs: Vec<_> = program
        .decls()
        .iter()
        .filter(|d| d.kind == finch::notation::DeclKind::Output)
        .collect();
    for (engine, reassociate, compact) in CONFIGS {
        let what = format!("{engine:?} reassociate={reassociate} compact={compact}");
        let mut tensors = HashMap::new();
        for (name, a) in inputs {
            let format = &program.decl(name).expect("a declared input").format;
            let t = Tensor::from_dense(format, a).unwrap_or_else(|e| panic!("{name}: {e}"));
            tensors.insert(name.to_string(), t);
        }
        let options = CompileOptions {
            reassociate,
            compact,
        };
        let compiled = program
            .compile_with(engine, &options)
            .unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
        compiled
            .run(&mut tensors, &HashMap::new())
            .unwrap_or_else(|e| panic!("{what}: {e}\n{text}\n{}", compiled.kernel()));
        for d in &outputs {
            let want = reference
                .get(&d.name)
                .expect("the reference binds every output");
            let got = tensors[&d.name].to_dense().expect("a readable output");
            assert_eq!(got.shape, want.shape, "{}: {what}\n{text}", d.name);
            assert!(
                got.data.iter().zip(&want.data).all(|(a, b)| a.same(b)),
                "{}: {what}\n got {:?}\nwant {:?}\n{text}",
                d.name,
                got.data,
                want.data
            );
            let want_stored = Tensor::from_dense(&d.format, want)
                .unwrap_or_else(|e| panic!("{}: the reference result: {e}", d.name));
            assert_eq!(
                stored(&tensors[&d.name]),
                stored(&want_stored),
                "{}: stored entries, {what}\n{text}",
                d.name
            );
        }
    }
    program
        .decls()
        .iter()
        .filter(|d| d.kind == finch::notation::DeclKind::Output)
        .map(|d| {
            (
                d.name.clone(),
                reference.get(&d.name).cloned().expect("an output"),
            )
        })
        .collect()
}

/// A tensor's stored entries: coordinates and values (values compared with `same`, so
/// `NaN` equals `NaN`, by their debug text).
fn stored(t: &Tensor) -> (Vec<Vec<usize>>, Vec<String>) {
    let coo = t.to_coo();
    let vals = coo
        .vals
        .iter()
        .map(|v| match v.as_f64() {
            Some(x) if x.is_nan() => "NaN".to_string(),
            Some(0.0) => "0".to_string(),
            _ => format!("{v:?}"),
        })
        .collect();
    (coo.coords, vals)
}
