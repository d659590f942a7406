//! Shared by `reassociate_scalar.rs` and `reassociate_avx2.rs`: row-major SpMV compiled with
//! `reassociate` over every inner level, checked against the dense reference on data where
//! every order of summation is exact (small integers), with the kernels built under the
//! `FINCH_CFLAGS` a test process sets.

use std::collections::HashMap;

use finch::backend::c::CheckMode;
use finch::engine::{CompileOptions, CompiledProgram, Engine};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program};

/// Integer values in -9..=9 at the positions `keep` accepts, else 0 (a fixed generator).
fn values(rows: usize, cols: usize, keep: impl Fn(usize, usize, u64) -> bool) -> Vec<f64> {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = vec![0.0; rows * cols];
    // Column-major, as `DenseArray` stores a matrix: `out[i + rows * j]` is `A[i, j]`.
    for j in 0..cols {
        for i in 0..rows {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            if keep(i, j, s >> 33) {
                out[i + rows * j] = ((s >> 40) % 19) as f64 - 9.0;
            }
        }
    }
    out
}

/// Data each inner level can hold, for `A[i, j]` with `i` the stored (inner) mode, one
/// fiber per `j`: runs of rows for bands and blocks, one run of one value for intervals,
/// one entry for points.
fn data_for(level: &str, rows: usize, cols: usize) -> Vec<f64> {
    match level {
        "SparseBand" => values(rows, cols, |i, j, _| i.abs_diff(j * rows / cols) <= 12),
        // Short blocks in odd columns, blocks of 19 in even ones: AVX2 code takes groups
        // of eight, then the last three masked; blocks of fewer than four run scalar.
        "SparseBlockList" => values(rows, cols, |i, j, _| {
            let step = if j % 2 == 0 { 1 } else { 3 };
            (j * 7 + step * i) % 40 < 19 || (i * 5 + j) % 23 == 0
        }),
        "SparseInterval" => {
            let mut v = vec![0.0; rows * cols];
            for j in 0..cols {
                for i in (j % 11)..(j % 11 + 1 + j % 29).min(rows) {
                    v[i + rows * j] = (j % 7) as f64 - 3.0;
                }
            }
            v
        }
        "SparsePoint" => values(rows, cols, |i, j, _| i == (j * 13 + 5) % rows && j % 5 != 0),
        _ => values(rows, cols, |_, _, r| r % 100 < 35),
    }
}

/// `program` compiled to C with `reassociate`, or `None` where no C compiler runs.
pub fn compile_reassociated(program: &Program) -> Option<CompiledProgram> {
    let kernel = program
        .compile_with(
            Engine::C,
            &CompileOptions {
                reassociate: true,
                ..Default::default()
            },
        )
        .unwrap();
    (kernel.engine() == Engine::C).then_some(kernel)
}

/// The vector SpMV multiplies by: small integers, so that every order of summation is exact.
pub fn x_values(rows: usize) -> DenseArray {
    DenseArray::from_f64(
        &[rows],
        &(0..rows).map(|i| (i % 5) as f64 - 2.0).collect::<Vec<_>>(),
    )
    .unwrap()
}

/// Runs `kernel` (compiled from `program`) on `inputs`, each stored in the format `program`
/// declares for it, and the reference on the same dense values, and asserts that their
/// outputs `y` agree (`label` names the case).
pub fn assert_y_matches_reference(
    program: &Program,
    kernel: &CompiledProgram,
    inputs: Vec<(&str, DenseArray)>,
    label: &str,
) {
    let mut stored = HashMap::new();
    let mut dense = Bindings::new();
    for (name, values) in inputs {
        let format = &program.decl(name).unwrap().format;
        let tensor = Tensor::from_dense(format, &values).unwrap_or_else(|e| panic!("{label}: {e}"));
        stored.insert(name.to_string(), tensor);
        dense.insert(name, values);
    }
    program
        .run_reference(&mut dense, &RunOptions::default())
        .unwrap();
    kernel.run(&mut stored, &HashMap::new()).unwrap();
    assert_eq!(
        &stored["y"].to_dense().unwrap(),
        dense.get("y").unwrap(),
        "{label}"
    );
}

/// Sets `FINCH_CFLAGS` to `cflags` (for this process: the variable is read once, before
/// the first compile), then runs SpMV over each inner level and compares it with the
/// reference. Returns how many kernels had a copy named `_{copy}(` (and then checks that
/// `FINCH_NO_{COPY}` leaves it out), or `None` where no C compiler runs.
pub fn spmv_over_every_level(cflags: &str, copy: &str) -> Option<usize> {
    std::env::set_var("FINCH_CFLAGS", cflags);
    let levels = [
        "Dense",
        "SparseList",
        "SparseList{UInt32}",
        "SparseBand",
        "SparseBlockList",
        "SparseInterval",
        "SparsePoint",
        "SparseByteMap",
        "SparseHash",
        "RunList",
        "SparseRunList",
    ];
    let (rows, cols) = (97, 131);
    let mut copies = 0;
    for level in levels {
        let format = format!("Dense({level}(Element(0.0)))");
        // `A[i, j]` with `i` inner: row `j` of the product walks one stored fiber.
        let text = format!("input A :: {format}\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n");
        let program = Program::parse(&text).unwrap();
        let kernel = compile_reassociated(&program)?;
        let source = kernel.c_source(CheckMode::Trusted).unwrap();
        if source.contains(&format!("_{copy}(")) {
            let guard = format!("!defined(FINCH_NO_{})", copy.to_uppercase());
            assert!(source.contains(&guard), "{source}");
            copies += 1;
        }
        let a = DenseArray::from_f64(&[rows, cols], &data_for(level, rows, cols)).unwrap();
        assert_y_matches_reference(
            &program,
            &kernel,
            vec![("A", a), ("x", x_values(rows))],
            &format,
        );
    }
    Some(copies)
}
