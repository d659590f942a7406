//! The work compiled kernels do, counted by the kernel interpreter: loops over the stored
//! entries only (no loop over zeros or over a written fill, masked triangles, workspaces,
//! run-length outputs), and short-circuit scalars that stop a reduction early.

mod common;

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, ScalarType, Value};

use common::*;

#[test]
fn spmv_over_csc_has_no_loop_over_zeros() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spmv.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let ir = k.kernel().to_string();
    // One `for` (over columns) and, per column, one `while` counting over its stored
    // positions (the column's last stored index is within its size, so no clipped
    // stepper is needed); nothing else: the runs of zeros vanished.
    assert_eq!(ir.matches("for ").count(), 1, "{ir}");
    assert_eq!(ir.matches("while ").count(), 1, "{ir}");
    assert!(
        ir.contains("local v5: i64 A_lvl2_q\n")
            && ir.contains("local v6: i64 A_lvl2_q_stop\n")
            && ir.contains("while (v5 < v6)"),
        "a counted walk over A_lvl2_q < A_lvl2_q_stop: {ir}"
    );
    // The interpreter does one multiply-add per stored entry: 3 stored -> 3 stores.
    let a = DenseArray::from_rows_f64(&[
        &[1.0, 0.0, 0.0, 0.0],
        &[0.0, 0.0, 2.0, 0.0],
        &[0.0, 0.0, 0.0, 3.0],
    ])
    .unwrap();
    let mut t = HashMap::new();
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
    let r = k.run(&mut t, &HashMap::new()).unwrap();
    assert_eq!(r.stats.unwrap().stores, 3);
}

/// Figs. 17-18: with the `i <= j` mask the compiled upper-triangle sum reads the value of
/// every stored entry of the upper triangle and of no other entry.
#[test]
fn upper_triangle_sum_reads_only_the_triangle() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/fig17_upper_triangle_sum.fin"
    ))
    .unwrap();
    let p = Program::parse(
        &text
            .replace("Element(0)", "Element(0.0)")
            .replace("Scalar(0)", "Scalar(0.0)"),
    )
    .unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let val = k
        .kernel()
        .bufs
        .iter()
        .position(|b| b.name == "A_lvl3_val")
        .unwrap();
    for (rows, sum, upper_stored) in [
        (
            vec![
                vec![1.0, 0.0, 2.0],
                vec![0.0, 3.0, 0.0],
                vec![4.0, 0.0, 5.0],
            ],
            11.0,
            4,
        ),
        (
            vec![
                vec![1.0, 0.0, 2.0],
                vec![0.0, 3.0, 0.0],
                vec![4.0, 0.0, 5.0],
                vec![6.0, 7.0, 8.0],
            ],
            11.0,
            4,
        ),
        (
            vec![
                vec![0.0, 0.0, 2.0],
                vec![0.0, 0.0, 7.0],
                vec![4.0, 0.0, 5.0],
            ],
            14.0,
            3,
        ),
    ] {
        let r: Vec<&[f64]> = rows.iter().map(|r| r.as_slice()).collect();
        let a = DenseArray::from_rows_f64(&r).unwrap();
        let mut t = HashMap::new();
        t.insert(
            "A".to_string(),
            Tensor::from_dense(
                &Format::parse("Dense(SparseList(Element(0.0)))").unwrap(),
                &a,
            )
            .unwrap(),
        );
        let report = k.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(t["s"].get(&[]).unwrap(), finch::Value::F64(sum));
        assert_eq!(
            report.stats.unwrap().buf_loads[val],
            upper_stored,
            "{rows:?}\n{}",
            k.kernel()
        );
    }
}

/// Fig. 7: a product into a ShortCircuitScalar stops once it is 0: with a zero at
/// position k, at most k + 1 steps run however long the vector is. So does one into a
/// SparseShortCircuitScalar (declared with its fill, 1).
#[test]
fn short_circuit_product_stops_early() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/fig07_product_early_exit.fin"
    ))
    .unwrap();
    for scalar in ["ShortCircuitScalar(0)", "SparseShortCircuitScalar(1)"] {
        for format in [
            "SparseList(Element(0))",
            "Dense(Element(0))",
            "RunList(Element(0))",
            "SparseRunList(Element(0))",
            "SparseBand(Element(0))",
            "SparseBlockList(Element(0))",
            "SparseByteMap(Element(0))",
            "SparseHash(Element(0))",
        ] {
            let text = text
                .replace("SparseList(Element(0))", format)
                .replace("ShortCircuitScalar(0)", scalar);
            short_circuit_in(&text, format);
        }
    }
}

/// A SparseShortCircuitScalar both stops a reduction at an annihilator and remembers
/// whether it was written: Finch.jl's BFS step (a column's search stops at its first
/// frontier parent) against the reference, and its written flag after an empty loop and
/// a loop that writes it.
#[test]
fn sparse_short_circuit_scalar_stops_and_tracks_writes() {
    let bfs = "input A :: Dense(SparseList(Pattern()))\ninput y :: Dense(Element(false))\noutput x :: Dense(Element(false))\ntemp t :: SparseShortCircuitScalar(false)\nx .= false\nfor j = _\n  t .= false\n  for i = _\n    t[] |= A[i, j] && y[i]\n  end\n  x[j] = t[]\nend\n";
    let program = Program::parse(bfs).unwrap();
    let n = 300;
    // Column j holds rows j..j + 40 (mod n); the frontier y is every third vertex, so
    // every column's search stops within three entries.
    let mut a = vec![false; n * n];
    for j in 0..n {
        for k in 0..40 {
            a[j * n + (j + k) % n] = true;
        }
    }
    let y: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let bools = |shape: &[usize], v: &[bool]| {
        let data = v.iter().map(|&b| Value::Bool(b)).collect();
        DenseArray::from_data(ScalarType::Bool, shape, data, Value::Bool(false)).unwrap()
    };
    let (a, y) = (bools(&[n, n], &a), bools(&[n], &y));
    let mut reference = Bindings::new();
    reference.insert("A", a.clone());
    reference.insert("y", y.clone());
    program
        .run_reference(&mut reference, &RunOptions::default())
        .unwrap();
    let want = reference.get("x").unwrap().clone();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([
            (
                "A".to_string(),
                Tensor::from_dense(&program.decl("A").unwrap().format, &a).unwrap(),
            ),
            (
                "y".to_string(),
                Tensor::from_dense(&program.decl("y").unwrap().format, &y).unwrap(),
            ),
        ]);
        let r = program
            .compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(t["x"].to_dense().unwrap(), want, "{engine:?}");
        if let Some(stats) = r.stats {
            // Without the early exit the columns take 40 steps each.
            assert!(stats.iterations <= 5 * n as u64, "{stats:?}");
        }
    }
    let product = "input A :: SparseList(Element(0))\noutput p :: SparseShortCircuitScalar(1)\np .= 1\nfor j = _\n  p[] *= A[j]\nend\n";
    let program = Program::parse(product).unwrap();
    let f = program.decl("A").unwrap().format.clone();
    for engine in [Engine::Interp, Engine::C] {
        let k = program.compile(engine).unwrap();
        for (a, want, written) in [(vec![], 1, false), (vec![2, 3], 6, true)] {
            let mut t = HashMap::from([(
                "A".to_string(),
                Tensor::from_dense(&f, &ints(&a, 0)).unwrap(),
            )]);
            k.run(&mut t, &HashMap::new()).unwrap();
            assert_eq!(t["p"].get(&[]).unwrap(), finch::Value::I64(want));
            let finch::tensor::TensorStorage::Scalar(s) = t["p"].storage() else {
                panic!("p is a scalar")
            };
            assert_eq!(s.dirty, written, "{engine:?} on {a:?}");
        }
    }
}

fn short_circuit_in(text: &str, format: &str) {
    let p = Program::parse(text).unwrap();
    let f = p.decl("A").unwrap().format.clone();
    let k = p.compile(Engine::Interp).unwrap();
    let mut long = vec![2, 3, 0];
    long.extend(std::iter::repeat_n(5, 1000));
    // A block list also counts its step over the one block of [2, 3, 4].
    let short_steps = if format.starts_with("SparseBlockList") {
        4
    } else {
        3
    };
    for (a, want, max_steps) in [(long, 0, 4), (vec![2, 3, 4], 24, short_steps)] {
        let mut t = HashMap::from([(
            "A".to_string(),
            Tensor::from_dense(&f, &ints(&a, 0)).unwrap(),
        )]);
        let r = k.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(t["p"].get(&[]).unwrap(), finch::Value::I64(want));
        assert!(
            r.stats.clone().unwrap().iterations <= max_steps,
            "{format}: {:?}",
            r.stats
        );
        let c = p.compile(Engine::C).unwrap();
        c.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(t["p"].get(&[]).unwrap(), finch::Value::I64(want));
    }
}

#[test]
fn short_circuit_stops_at_a_gap_of_fill_values() {
    // `p[] *= x[i]` over [-5, -2, 3, 0, 0, 0, -4, 0, 0]: the reference stops at the first
    // zero with +0.0. A level whose gap of fill zeros and the next stored run or block come
    // in one step must not go on to the -4, which would give -0.0.
    let x = [-5.0, -2.0, 3.0, 0.0, 0.0, 0.0, -4.0, 0.0, 0.0];
    for level in [
        "SparseList",
        "Dense",
        "RunList",
        "SparseRunList",
        "SparseBand",
        "SparseBlockList",
        "SparseByteMap",
        "SparseHash",
        "SparseInterval",
    ] {
        // SparseBand and SparseInterval hold one block or one run: for them, a gap of
        // zeros and then the -4 alone.
        let mut values = x;
        if matches!(level, "SparseBand" | "SparseInterval") {
            values = [0.0, 0.0, -4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        }
        let a = DenseArray::from_f64(&[x.len()], &values).unwrap();
        let text = format!("input x :: {level}(Element(0.0))\noutput p :: ShortCircuitScalar(1.0)\np .= 1.0\nfor i = _\n  p[] *= x[i]\nend\n");
        let program = Program::parse(&text).unwrap();
        let mut reference = Bindings::new();
        reference.insert("x", a.clone());
        program
            .run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        let want = reference.get("p").unwrap().get(&[]).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let k = program.compile(engine).unwrap();
            let format = Format::parse(&format!("{level}(Element(0.0))")).unwrap();
            let mut t =
                HashMap::from([("x".to_string(), Tensor::from_dense(&format, &a).unwrap())]);
            k.run(&mut t, &HashMap::new()).unwrap();
            let got = t["p"].get(&[]).unwrap();
            let bits = |v: &finch::Value| v.as_f64().map(f64::to_bits);
            assert_eq!(
                bits(&got),
                bits(&want),
                "{level} {engine:?}: {got:?} vs {want:?}"
            );
        }
    }
}

/// Gustavson's SpGEMM with a SparseByteMap workspace does work proportional to the stored
/// entries and products, not to the matrix size squared: the workspace is walked over its
/// sorted set positions and reset only where it was set.
#[test]
fn gustavson_workspace_touches_only_set_positions() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/spgemm_gustavson.fin"
    ))
    .unwrap();
    let p = Program::parse(&text).unwrap();
    let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
    assert!(
        ir.contains("sort "),
        "the workspace is sorted before it is read: {ir}"
    );
    let n = 600;
    let f = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
    let mut coo = finch::tensor::Coo::new(finch::ScalarType::F64, &[n, n]);
    for i in 0..n {
        coo.push(&[i, i], finch::Value::F64(2.0)).unwrap();
        coo.push(&[(i * 7) % n, i], finch::Value::F64(1.0)).unwrap();
    }
    let a = Tensor::from_coo(&f, &coo).unwrap();
    let mut t = HashMap::from([("A".to_string(), a.clone()), ("B".to_string(), a.clone())]);
    let k = p.compile(Engine::Interp).unwrap();
    let stats = k.run(&mut t, &HashMap::new()).unwrap().stats.unwrap();
    assert!(
        stats.iterations < 40 * n as u64,
        "{} iterations for n = {n}",
        stats.iterations
    );
    // And the product is right (C = A * A), against a direct sparse product.
    let entries = a.to_coo();
    let mut want: std::collections::BTreeMap<(usize, usize), f64> = Default::default();
    for x in 0..entries.len() {
        for y in 0..entries.len() {
            // A[i, k] * A[k, j]
            let (i, k1) = (entries.coords[0][x], entries.coords[1][x]);
            let (k2, j) = (entries.coords[0][y], entries.coords[1][y]);
            if k1 == k2 {
                let v = entries.vals[x].as_f64().unwrap() * entries.vals[y].as_f64().unwrap();
                *want.entry((i, j)).or_default() += v;
            }
        }
    }
    let got = t["C"].to_coo();
    let got: std::collections::BTreeMap<(usize, usize), f64> = (0..got.len())
        .map(|e| {
            (
                (got.coords[0][e], got.coords[1][e]),
                got.vals[e].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
}

/// Writing run-length output from run-length input accepts whole runs: the work follows
/// the number of runs, not the length (AcceptRun), and equal touching runs are merged.
#[test]
fn run_length_output_costs_one_step_per_run() {
    let text = "input x :: RunList(Element(0.0))\ninput z :: SparseRunList(Element(0.0))\noutput w :: SparseRunList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] * z[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    for n in [10_000usize, 20_000] {
        // 10 runs of x, 5 runs of z (the second half of each of its blocks is zero).
        let xs: Vec<f64> = (0..n).map(|i| (i * 10 / n) as f64 + 1.0).collect();
        let zs: Vec<f64> = (0..n)
            .map(|i| if (i * 10 / n) % 2 == 0 { 2.0 } else { 0.0 })
            .collect();
        let x = DenseArray::from_f64(&[n], &xs).unwrap();
        let z = DenseArray::from_f64(&[n], &zs).unwrap();
        let mut t = HashMap::from([
            (
                "x".to_string(),
                Tensor::from_dense(&Format::parse("RunList(Element(0.0))").unwrap(), &x).unwrap(),
            ),
            (
                "z".to_string(),
                Tensor::from_dense(&Format::parse("SparseRunList(Element(0.0))").unwrap(), &z)
                    .unwrap(),
            ),
        ]);
        let stats = k.run(&mut t, &HashMap::new()).unwrap().stats.unwrap();
        assert!(
            stats.iterations < 40,
            "{} iterations for n = {n}",
            stats.iterations
        );
        let w = t["w"].to_dense().unwrap();
        let want: Vec<f64> = xs.iter().zip(&zs).map(|(a, b)| a * b).collect();
        assert_eq!(w, DenseArray::from_f64(&[n], &want).unwrap());
        assert_eq!(t["w"].countstored(), 5, "one stored run per non-zero run");
    }
}

/// A sum over every position beside a sparse output's write: where the operand holds its
/// fill the write stores nothing, so the fill between entries is one addition of its
/// length, not a loop (the interpreter counts iterations), and the results equal the
/// reference's.
#[test]
fn a_write_of_the_fill_does_not_keep_a_loop_over_the_fill() {
    let text = "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput w :: SparseList(Element(0.0))\ns .= 0\nw .= 0\nfor i = _\n  s[] += x[i] + 1.0\n  w[i] = x[i] * 3.0\nend\n";
    let p = Program::parse(text).unwrap();
    let n = 1_000_000;
    let mut x = vec![0.0; n];
    x[1] = 2.0;
    x[n / 2] = -1.0;
    let x = DenseArray::from_f64(&[n], &x).unwrap();
    let f = p.decl("x").unwrap().format.clone();
    let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&f, &x).unwrap())]);
    let stats = p
        .compile(Engine::Interp)
        .unwrap()
        .run(&mut t, &HashMap::new())
        .unwrap()
        .stats
        .unwrap();
    assert!(stats.iterations < 100, "{stats:?}");
    assert_eq!(t["s"].get(&[]).unwrap(), Value::F64(n as f64 + 1.0));
    assert_eq!(t["w"].countstored(), 2);
    let small = DenseArray::from_f64(&[7], &[0.0, 2.0, 0.0, 0.0, -1.0, 0.0, 0.0]).unwrap();
    engines_match_reference(&p, &[("x", &small)], &[], "sum beside a fill write");
}
