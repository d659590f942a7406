//! Fixtures shared by the compiler's integration tests (`compile_oracle.rs`,
//! `kernel_size.rs`, `c_text.rs`, `compile_work.rs`, `compile_semantics.rs`): the
//! formats tried, kernel templates, data generators, and checks of the compiled engines
//! against the dense reference interpreter.

// Each test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

pub mod programs;

use std::collections::HashMap;

use finch::engine::{CompileOptions, Engine};
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, ScalarType, Value};
use proptest::prelude::*;

pub const VECTORS: [&str; 3] = [
    "Dense(Element(0.0))",
    "SparseList(Element(0.0))",
    "SparseList{UInt32}(Element(0.0))",
];

pub const MATRICES: [&str; 6] = [
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
    "Dense(SparseList{UInt32}(Element(0.0)))",
    "SparseList{UInt32}(SparseList(Element(0.0)))",
];

/// A kernel template: declarations use `{A}`, `{B}`, `{x}`, `{z}` placeholders for formats.
pub struct Kernel {
    pub name: &'static str,
    pub text: &'static str,
    /// Input name, is a matrix, size roles: (rows, cols) as indices into the sizes.
    pub inputs: &'static [(&'static str, bool, usize, usize)],
}

/// An `i64` vector with the given fill.
pub fn ints(vals: &[i64], fill: i64) -> DenseArray {
    DenseArray::from_data(
        ScalarType::I64,
        &[vals.len()],
        vals.iter().map(|&v| Value::I64(v)).collect(),
        Value::I64(fill),
    )
    .unwrap()
}

pub fn data(n: usize, density: f64, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(2862933555777941757)
        .wrapping_add(3037000493);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
            let r = (s >> 33) as f64 / (1u64 << 31) as f64;
            if r < density {
                ((s >> 7) % 19) as f64 - 9.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Data shaped for structured levels: `0` random (`data`), `1` runs of repeated values
/// down each column, `2` one run per column, `3` at most one entry per column.
pub fn structured_data(shape: &[usize], structure: u8, density: f64, seed: u64) -> Vec<f64> {
    let len: usize = shape.iter().product();
    let rows = shape.first().copied().unwrap_or(1).max(1);
    let noise = data(len * 3 + 3, 1.0, seed);
    let mut pick = noise.into_iter().map(|x| (x + 9.0) as usize);
    let mut next = move || pick.next().unwrap_or(0);
    match structure {
        1 => {
            let mut out = Vec::with_capacity(len);
            while out.len() < len {
                let run = 1 + next() % 4;
                let v = if next() % 2 == 0 {
                    0.0
                } else {
                    (next() % 9) as f64 - 4.0
                };
                let col_left = rows - out.len() % rows;
                out.extend(std::iter::repeat_n(
                    v,
                    run.min(col_left).min(len - out.len()),
                ));
            }
            out
        }
        2 | 3 => {
            let mut out = vec![0.0; len];
            for col in 0..len / rows {
                let start = next() % rows;
                let width = if structure == 3 { 1 } else { next() % 4 };
                let v = (next() % 9) as f64 - 4.0;
                if next() % 3 == 0 {
                    continue;
                }
                for i in start..(start + width).min(rows) {
                    out[col * rows + i] = v;
                }
            }
            out
        }
        _ => data(len, density, seed),
    }
}

/// Stores `a` in `format`; data a single-entry or single-run level cannot hold is
/// replaced by data it can (only the first stored entry kept, then nothing).
pub fn store(format: &Format, a: DenseArray) -> (Tensor, DenseArray) {
    if let Ok(t) = Tensor::from_dense(format, &a) {
        return (t, a);
    }
    let mut first = vec![0.0; a.data.len()];
    if let Some(k) = a.data.iter().position(|v| v.as_f64() != Some(0.0)) {
        first[k] = a.data[k].as_f64().unwrap_or(0.0);
    }
    for data in [first, vec![0.0; a.data.len()]] {
        let b = DenseArray::from_f64(&a.shape, &data).unwrap();
        if let Ok(t) = Tensor::from_dense(format, &b) {
            return (t, b);
        }
    }
    panic!(
        "{format} cannot store an all-zero array of shape {:?}",
        a.shape
    )
}

pub fn check(
    k: &Kernel,
    formats: &[&str; 4],
    sizes: [usize; 3],
    density: f64,
    seed: u64,
) -> Result<(), TestCaseError> {
    check_structured(k, formats, sizes, density, seed, 0)
}

pub fn check_structured(
    k: &Kernel,
    formats: &[&str; 4],
    sizes: [usize; 3],
    density: f64,
    seed: u64,
    structure: u8,
) -> Result<(), TestCaseError> {
    check_engines(
        k,
        formats,
        sizes,
        density,
        seed,
        structure,
        &[Engine::Interp, Engine::C],
    )
}

pub fn check_engines(
    k: &Kernel,
    formats: &[&str; 4],
    sizes: [usize; 3],
    density: f64,
    seed: u64,
    structure: u8,
    engines: &[Engine],
) -> Result<(), TestCaseError> {
    let text = k
        .text
        .replace("{A}", formats[0])
        .replace("{B}", formats[1])
        .replace("{x}", formats[2])
        .replace("{z}", formats[3]);
    check_program(
        k, &text, sizes, density, seed, structure, engines, false, false,
    )
}

/// [`check_engines`] on `text` (the kernel with its formats filled in). With
/// `refusals_allowed`, a program the compiler refuses ("not supported yet") passes.
#[allow(clippy::too_many_arguments)]
pub fn check_program(
    k: &Kernel,
    text: &str,
    sizes: [usize; 3],
    density: f64,
    seed: u64,
    structure: u8,
    engines: &[Engine],
    refusals_allowed: bool,
    compact: bool,
) -> Result<(), TestCaseError> {
    let formats = text
        .lines()
        .filter_map(|l| l.split(" :: ").nth(1))
        .collect::<Vec<_>>();
    let program = Program::parse(text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let mut dense = Bindings::new();
    let mut stored: HashMap<String, Tensor> = HashMap::new();
    for (n, &(name, matrix, r, c)) in k.inputs.iter().enumerate() {
        let shape = if matrix {
            vec![sizes[r], sizes[c]]
        } else {
            vec![sizes[r]]
        };
        let values = structured_data(&shape, structure, density, seed + n as u64);
        let a = DenseArray::from_f64(&shape, &values).unwrap();
        let f = Format::parse(&program.decl(name).unwrap().format.to_string()).unwrap();
        let (t, a) = store(&f, a);
        stored.insert(name.to_string(), t);
        dense.insert(name, a);
    }
    program
        .run_reference(&mut dense, &RunOptions::default())
        .map_err(|e| TestCaseError::fail(format!("reference: {e}")))?;
    // Reassociated C too: the data are small integers, so every summation order gives the
    // same floating-point result.
    for (engine, reassociate) in [
        (Engine::Interp, false),
        (Engine::C, false),
        (Engine::C, true),
    ]
    .into_iter()
    .filter(|(e, _)| engines.contains(e))
    {
        let compiled = match program.compile_with(
            engine,
            &CompileOptions {
                reassociate,
                compact,
            },
        ) {
            Ok(c) => c,
            // A protocol the level lacks is refused by name, never miscompiled.
            Err(e) if e.to_string().contains("does not support the") => return Ok(()),
            Err(finch::Error::Unsupported(_)) if refusals_allowed => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("{}: {e}\n{text}", k.name))),
        };
        // A kernel too large for C runs in the interpreter (with a warning): only where
        // refusals are allowed may C not run what was asked of it.
        if compiled.engine() != engine && finch::backend::c::available() && !refusals_allowed {
            return Err(TestCaseError::fail(format!(
                "{}: asked for {engine:?}, ran {:?}: {:?}\n{text}",
                k.name,
                compiled.engine(),
                compiled.warnings()
            )));
        }
        let mut tensors = stored.clone();
        if let Err(e) = compiled.run(&mut tensors, &HashMap::new()) {
            // A result the output's format cannot hold is refused; then the reference
            // result must not fit that format either.
            let fits = program
                .decls()
                .iter()
                .filter(|d| d.kind == finch::notation::DeclKind::Output)
                .all(|d| {
                    let f = Format::parse(&d.format.to_string()).unwrap();
                    Tensor::from_dense(&f, dense.get(&d.name).unwrap()).is_ok()
                });
            prop_assert!(
                e.to_string().contains("cannot store the result") && !fits,
                "{} {engine:?}: {e}\n{text}\n{}",
                k.name,
                compiled.kernel()
            );
            continue;
        }
        for d in program
            .decls()
            .iter()
            .filter(|d| d.kind == finch::notation::DeclKind::Output)
        {
            let want = dense.get(&d.name).unwrap();
            let got = tensors[&d.name].to_dense().unwrap();
            prop_assert_eq!(&got.shape, &want.shape, "{} {:?}", k.name, engine);
            prop_assert!(
                got.data.iter().zip(&want.data).all(|(a, b)| a.same(b)),
                "{} {:?} formats {:?} sizes {:?}:\n got {:?}\nwant {:?}\n{}",
                k.name,
                engine,
                formats,
                sizes,
                got.data,
                want.data,
                compiled.kernel()
            );
        }
    }
    Ok(())
}

pub fn sizes() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1), 2usize..7, Just(23)]
}

/// The structured levels of issue #4: every one-mode level of the registry but Dense and
/// SparseList, so a new level is tested here as soon as it is registered.
pub fn structured() -> Vec<&'static str> {
    finch::formats::LevelKind::ALL
        .iter()
        .filter(|k| k.mode_count_param().is_none())
        .map(|k| k.name())
        .filter(|n| !["Dense", "SparseList"].contains(n))
        .collect()
}

pub fn structured_vectors() -> Vec<String> {
    structured()
        .iter()
        .map(|l| format!("{l}(Element(0.0))"))
        .chain(VECTORS.iter().map(|s| s.to_string()))
        .chain(["SparseCOO{1}(Element(0.0))".to_string()])
        .collect()
}

/// Each structured level as the inner level under Dense and SparseList, and as the
/// outer level over Dense and over itself.
pub fn structured_matrices() -> Vec<String> {
    structured()
        .iter()
        .flat_map(|l| {
            [
                format!("Dense({l}(Element(0.0)))"),
                format!("SparseList({l}(Element(0.0)))"),
                format!("{l}(Dense(Element(0.0)))"),
                format!("{l}({l}(Element(0.0)))"),
            ]
        })
        // One SparseCOO level spanning both modes, and one per mode.
        .chain([
            "SparseCOO{2}(Element(0.0))".to_string(),
            "SparseCOO{1}(SparseCOO{1}(Element(0.0)))".to_string(),
            "Dense(SparseCOO{1}(Element(0.0)))".to_string(),
        ])
        .collect()
}

/// Runs `p` on both engines with the inputs stored in their declared formats (or as
/// given in `stored`) and checks every output against the reference on `dense`.
pub fn engines_match_reference(
    p: &Program,
    dense: &[(&str, &DenseArray)],
    stored: &[(&str, Tensor)],
    what: &str,
) {
    let mut reference = Bindings::new();
    for (name, a) in dense {
        reference.insert(*name, (*a).clone());
    }
    p.run_reference(&mut reference, &RunOptions::default())
        .unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::new();
        for (name, a) in dense {
            let f = Format::parse(&p.decl(name).unwrap().format.to_string()).unwrap();
            t.insert(name.to_string(), Tensor::from_dense(&f, a).unwrap());
        }
        for (name, given) in stored {
            t.insert(name.to_string(), given.clone());
        }
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        for d in p
            .decls()
            .iter()
            .filter(|d| d.kind == finch::notation::DeclKind::Output)
        {
            assert_eq!(
                &t[&d.name].to_dense().unwrap(),
                reference.get(&d.name).unwrap(),
                "{engine:?}: {what}"
            );
        }
    }
}
