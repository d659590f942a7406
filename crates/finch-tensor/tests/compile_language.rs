//! Language features through the compiler against the reference interpreter: shifted
//! and permissive writes, sparse scalars, index sums, `let` shadowing, windows, swizzles,
//! loop ranges, sliding windows, outputs too large for memory or for 64-bit positions,
//! and writes that come back to an in-order fiber.

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{Tensor, TensorStorage};
use finch::{DenseArray, Program, ScalarType, Value};

mod common;
use common::programs::*;

#[test]
fn shifted_and_permissive_writes_match_the_reference() {
    // Shifting a vector by one: the write that falls off the end goes nowhere (`~`), and
    // a histogram whose out-of-range bins are dropped the same way.
    let shift = "input  x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[~(i + 1)] = x[i]\nend\n";
    let hist = "input  I :: Dense(Element(0))\noutput h :: Dense(Element(0))\nh .= 0\nfor i = _\n  h[~I[i]] += 1\nend\n";
    let x = DenseArray::from_f64(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let bins = DenseArray::from_data(
        ScalarType::I64,
        &[8],
        [3, 0, 7, 3, -2, 1, 4, 9].map(Value::I64).to_vec(),
        Value::I64(0),
    )
    .unwrap();
    for (text, name, input, out, n) in [(shift, "x", &x, "y", 5), (hist, "I", &bins, "h", 4)] {
        let shapes = HashMap::from([(out.to_string(), vec![n])]);
        let p = Program::parse(text).unwrap();
        let mut b = Bindings::new();
        b.insert(name, input.clone());
        p.run_reference(
            &mut b,
            &RunOptions {
                shapes: shapes.clone(),
                ..Default::default()
            },
        )
        .unwrap();
        let want = b.get(out).unwrap().clone();
        for engine in [Engine::Interp, Engine::C] {
            let f = Format::parse(&p.decl(name).unwrap().format.to_string()).unwrap();
            let mut t = HashMap::from([(name.to_string(), Tensor::from_dense(&f, input).unwrap())]);
            p.compile(engine).unwrap().run(&mut t, &shapes).unwrap();
            assert_eq!(t[out].to_dense().unwrap(), want, "{text} {engine:?}");
        }
    }
    // y = [0, 1, 2, 3, 4]; bins 1..=4 hold [1, 0, 2, 1] (0, 7, -2 and 9 are dropped).
    let mut b = Bindings::new();
    b.insert("I", bins.clone());
    Program::parse(hist)
        .unwrap()
        .run_reference(
            &mut b,
            &RunOptions {
                shapes: HashMap::from([("h".to_string(), vec![4])]),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        b.get("h").unwrap().data,
        [1, 0, 2, 1].map(Value::I64).to_vec()
    );
}

#[test]
fn sparse_scalar_reads_specialize_on_whether_it_was_written() {
    // `y[i] += x[i] * a[]`: while `a` is unwritten the loop is never entered; `b` is
    // written only where `x` is stored, so `z` sees it only then.
    let text = "input  x :: SparseList(Element(0.0))\ninput  a :: SparseScalar(0.0)\noutput y :: Dense(Element(0.0))\noutput b :: SparseScalar(0.0)\noutput z :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] += x[i] * a[]\nend\nb .= 0\nfor i = _\n  b[] <<max>>= x[i]\nend\nz .= 0\nfor i = _\n  z[i] += b[] * x[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let xs = DenseArray::from_f64(&[6], &[0.0, 2.0, 0.0, 0.0, 5.0, 0.0]).unwrap();
    for a in [0.0, 3.0] {
        let av = DenseArray::from_f64(&[], &[a]).unwrap();
        let mut b = Bindings::new();
        b.insert("x", xs.clone());
        b.insert("a", av.clone());
        p.run_reference(&mut b, &RunOptions::default()).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t = HashMap::new();
            for (name, v) in [("x", &xs), ("a", &av)] {
                let f = Format::parse(&p.decl(name).unwrap().format.to_string()).unwrap();
                t.insert(name.to_string(), Tensor::from_dense(&f, v).unwrap());
            }
            let k = p.compile(engine).unwrap();
            k.run(&mut t, &HashMap::new()).unwrap();
            for out in ["y", "b", "z"] {
                assert_eq!(
                    &t[out].to_dense().unwrap(),
                    b.get(out).unwrap(),
                    "{out} with a = {a}, {engine:?}"
                );
            }
            let TensorStorage::Scalar(s) = t["b"].storage() else {
                panic!()
            };
            assert!(s.dirty, "b was written");
            let ir = k.kernel().to_string();
            // The read of `a` is one test of its flag around the whole first loop (at the
            // top level of the kernel), not one per entry.
            let flag = ir
                .lines()
                .find_map(|l| l.strip_prefix("  local ")?.strip_suffix(": bool a_dirty"))
                .expect("a_dirty local");
            assert!(ir.contains(&format!("\n  if {flag}\n")), "{ir}");
        }
    }
    // Declaring a SparseScalar with a value other than its fill is refused.
    let bad = "output s :: SparseScalar(0.0)\ns .= 1.0\n";
    let e = Program::parse(bad).unwrap().compile(Engine::Interp);
    assert!(e.is_err_and(|e| e.to_string().contains("declared with its fill")));
}

/// A SparseScalar written only with its fill value is reported clean by every engine, as
/// the one built from the reference's value is (its flag says it holds something else).
#[test]
fn a_sparse_scalar_written_with_its_fill_stays_clean() {
    let text = "input  x :: SparseList(Element(0.0))\noutput b :: SparseScalar(0.0)\nb .= 0\nfor i = _\n  b[] += x[i] - x[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let xs = DenseArray::from_f64(&[4], &[0.0, 2.0, 0.0, 5.0]).unwrap();
    let mut b = Bindings::new();
    b.insert("x", xs.clone());
    p.run_reference(&mut b, &RunOptions::default()).unwrap();
    let f = Format::parse("SparseScalar(0.0)").unwrap();
    let reference = Tensor::from_dense(&f, b.get("b").unwrap()).unwrap();
    let TensorStorage::Scalar(expected) = reference.storage() else {
        panic!()
    };
    assert!(!expected.dirty);
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::new();
        let xf = Format::parse("SparseList(Element(0.0))").unwrap();
        t.insert("x".to_string(), Tensor::from_dense(&xf, &xs).unwrap());
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        let TensorStorage::Scalar(s) = t["b"].storage() else {
            panic!()
        };
        assert_eq!(
            (s.val, s.dirty),
            (expected.val, expected.dirty),
            "{engine:?}"
        );
    }
}

#[test]
fn an_index_sum_walks_the_sparse_level_shifted() {
    // `x[~(i + j - 2)]` in `j`'s loop inside `i`'s (Finch's ToeplitzTensor): the sparse
    // level is walked shifted by `i - 2` rather than searched at each `j`, and the padding
    // outside `x` (read as `missing`, made 0 by `coalesce`) costs nothing.
    let text = "input  x :: SparseList(Element(0.0))\ninput  w :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  for j = _\n    y[i] += coalesce(x[~(i + j - 2)], 0.0) * w[j]\n  end\nend\n";
    let p = Program::parse(text).unwrap();
    let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
    // A walk (with one seek to each window's start), not a one-index loop per `j`.
    assert!(
        !ir.contains("concordant") && ir.contains("while (") && ir.matches("search(").count() == 1,
        "{ir}"
    );
    let n = 200;
    let mut v = vec![0.0; n];
    for (k, i) in [0usize, 17, 18, 90, 199].iter().enumerate() {
        v[*i] = k as f64 - 1.5;
    }
    let x = DenseArray::from_f64(&[n], &v).unwrap();
    let w = DenseArray::from_f64(&[5], &[1.0, -2.0, 4.0, 0.5, 3.0]).unwrap();
    let shapes = HashMap::from([("y".to_string(), vec![n])]);
    let mut b = Bindings::new();
    b.insert("x", x.clone());
    b.insert("w", w.clone());
    p.run_reference(
        &mut b,
        &RunOptions {
            shapes: shapes.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([
            (
                "x".to_string(),
                Tensor::from_dense(&Format::parse("SparseList(Element(0.0))").unwrap(), &x)
                    .unwrap(),
            ),
            (
                "w".to_string(),
                Tensor::from_dense(&Format::parse("Dense(Element(0.0))").unwrap(), &w).unwrap(),
            ),
        ]);
        let k = p.compile(engine).unwrap();
        let r = k.run(&mut t, &shapes).unwrap();
        assert_eq!(
            &t["y"].to_dense().unwrap(),
            b.get("y").unwrap(),
            "{engine:?}"
        );
        if let Some(stats) = r.stats {
            // One step per stored entry in reach of each output, not one per (i, j).
            assert!(
                stats.iterations < 3 * n as u64,
                "{} iterations",
                stats.iterations
            );
        }
    }
}

#[test]
fn an_inner_let_shadows_an_outer_one() {
    // `let a = 2x; let a = a + 1; s += a`: the inner `a` is 2x + 1 wherever it is used.
    let text = "input  x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  let a = x[i] * 2.0\n    let a = a + 1.0\n      s[] += a\n    end\n  end\nend\n";
    let x = DenseArray::from_f64(&[4], &[0.0, 2.0, 0.0, 4.0]).unwrap();
    let want = reference(text, &[("x", &x)]);
    assert_eq!(want.get("s").unwrap().data, vec![Value::F64(16.0)]);
    for engine in [Engine::Interp, Engine::C] {
        let got = compiled(text, engine, &[("x", &x)]);
        assert_eq!(&got["s"], want.get("s").unwrap(), "{engine:?}");
    }
}

/// Windows `A[(lo:hi)(j)]` (Finch's WindowedTensor): `j` runs over `1:hi-lo+1` and reads
/// index `lo + j - 1`. Reads of every level kind (the level walked shifted by the window's
/// start), windows of both modes of a matrix, bounds from input scalars, empty windows and
/// writes through a window, compiled on both engines against the reference.
#[test]
fn windows_read_and_write_slices() {
    let x =
        DenseArray::from_f64(&[10], &[0.0, 2.0, 0.0, 0.0, 5.0, 6.0, 0.0, 8.0, 9.0, 0.0]).unwrap();
    let a = DenseArray::from_f64(
        &[4, 5],
        &(0..20)
            .map(|k| if k % 3 == 0 { 0.0 } else { k as f64 })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let lo = int_scalar(3);
    let hi = int_scalar(9);
    let vectors = [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
        "SparseBand(Element(0.0))",
        "SparseBlockList(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseRunList(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "SparseHash(Element(0.0))",
    ];
    let matrices = [
        "Dense(Dense(Element(0.0)))",
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
    ];
    let mut programs = Vec::new();
    for f in vectors {
        for (w, out) in [
            ("(3:7)", "Dense"),
            ("(1:10)", "SparseList"),
            ("(6:5)", "Dense"),
        ] {
            programs.push(format!(
                "input x :: {f}\noutput y :: {out}(Element(0.0))\ny .= 0\nfor j = _\n  y[j] = x[{w}(j)] * 2.0\nend\n"
            ));
        }
        programs.push(format!(
            "input x :: {f}\ninput lo :: Scalar(0)\ninput hi :: Scalar(0)\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _\n  s[] += x[(lo[]:hi[])(j)] * x[(2:8)(j)]\nend\n"
        ));
    }
    for f in matrices {
        programs.push(format!(
            "input A :: {f}\noutput B :: Dense(Dense(Element(0.0)))\nB .= 0\nfor j = _, i = _\n  B[i, j] = A[(2:3)(i), (2:5)(j)]\nend\n"
        ));
    }
    // A window indexed by an expression (read at a computed index); a permissive one
    // reaching past the tensor (`x` has 10 entries) reads `missing` there.
    for f in [
        "SparseList(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseBand(Element(0.0))",
    ] {
        programs.push(format!(
            "input x :: {f}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = 1:3\n  s[] += x[(4:8)(i + 2)] * i\nend\n"
        ));
        programs.push(format!(
            "input x :: {f}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = 1:5\n  s[] += coalesce(x[~(7:12)(i + 1)], 10.0) * i\nend\n"
        ));
    }
    // Writes through a window into a dense output of a given size.
    programs.push(
        "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _\n  y[(4:13)(j)] = x[j] + 1.0\nend\n"
            .to_string(),
    );
    let inputs: [(&str, &DenseArray); 4] = [("x", &x), ("A", &a), ("lo", &lo), ("hi", &hi)];
    for text in &programs {
        let p = Program::parse(text).unwrap();
        let used: Vec<(&str, &DenseArray)> = inputs
            .iter()
            .copied()
            .filter(|(n, _)| p.decl(n).is_some())
            .collect();
        let mut shapes = HashMap::new();
        let mut opts = RunOptions::default();
        if text.contains("(4:13)") {
            shapes.insert("y".to_string(), vec![15]);
            opts.shapes.insert("y".to_string(), vec![15]);
        }
        let mut want = bindings(&used);
        p.run_reference(&mut want, &opts)
            .unwrap_or_else(|e| panic!("reference: {e}\n{text}"));
        for engine in [Engine::Interp, Engine::C] {
            let mut t = stored(&p, &used);
            let k = p
                .compile(engine)
                .unwrap_or_else(|e| panic!("{engine:?}: {e}\n{text}"));
            k.run(&mut t, &shapes)
                .unwrap_or_else(|e| panic!("{engine:?}: {e}\n{text}"));
            for d in p
                .decls()
                .iter()
                .filter(|d| d.kind == finch::notation::DeclKind::Output)
            {
                let got = t[&d.name].to_dense().unwrap();
                assert_eq!(&got, want.get(&d.name).unwrap(), "{engine:?}\n{text}");
            }
        }
    }
}

/// A window outside its mode, or one whose length differs from another range of the same
/// index, is a clear error on every engine.
#[test]
fn windows_outside_the_tensor_are_errors() {
    let x = DenseArray::from_f64(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let z = DenseArray::from_f64(&[4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let cases = [
        (
            "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _\n  y[j] = x[(3:7)(j)]\nend\n",
            "outside its size 5",
        ),
        (
            "input x :: SparseList(Element(0.0))\ninput z :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _\n  s[] += x[(1:3)(j)] * z[j]\nend\n",
            "3",
        ),
        // A permissive window reads `missing` outside the tensor, but its index may not
        // leave the window.
        (
            "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = 1:4\n  s[] += coalesce(x[~(4:6)(i + 1)], 0.0)\nend\n",
            "outside the window",
        ),
    ];
    for (text, needle) in cases {
        let p = Program::parse(text).unwrap();
        let mut b = Bindings::new();
        b.insert("x", x.clone());
        if text.contains("input z") {
            b.insert("z", z.clone());
        }
        let e = p
            .run_reference(&mut b, &RunOptions::default())
            .expect_err("the reference refuses it");
        assert!(e.to_string().contains(needle), "reference: {e}");
        for engine in [Engine::Interp, Engine::C] {
            let mut t = stored(&p, &[("x", &x), ("z", &z)]);
            let e = p
                .compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .expect_err("the compiled program refuses it");
            assert!(
                e.to_string().contains(needle) && e.to_string().contains("window"),
                "{engine:?}: {e}"
            );
        }
    }
}

/// `swizzle(A, 2, 1)` is `A` transposed with no copy: over a CSC matrix, `A^T x` written
/// with the swizzle walks the stored columns in order (no search), and matches the
/// reference.
#[test]
fn swizzle_reads_a_transpose_in_storage_order() {
    let text = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += swizzle(A, 2, 1)[j, i] * x[i]\nend\n";
    let a = DenseArray::from_f64(&[3, 2], &[1.0, 0.0, 2.0, 0.0, 3.0, 4.0]).unwrap();
    let x = DenseArray::from_f64(&[3], &[1.0, 10.0, 100.0]).unwrap();
    let want = reference(text, &[("A", &a), ("x", &x)]);
    // A = [1 0; 0 3; 2 4], so A^T x = [201, 430].
    assert_eq!(
        want.get("y").unwrap(),
        &DenseArray::from_f64(&[2], &[201.0, 430.0]).unwrap()
    );
    for engine in [Engine::Interp, Engine::C] {
        let got = compiled(text, engine, &[("A", &a), ("x", &x)]);
        assert_eq!(&got["y"], want.get("y").unwrap(), "{engine:?}");
    }
    let p = Program::parse(text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    assert!(k.warnings().is_empty(), "{:?}", k.warnings());
    assert!(!k.kernel().to_string().contains("search"), "{}", k.kernel());
}

/// A non-permissive index sum `x[i + j - 1]` (the "valid" convolution) walks the sparse
/// level shifted by the outer index, like the permissive form, with no search per
/// element; reading outside `x` stops the kernel with an error naming it, as the
/// reference does.
#[test]
fn a_non_permissive_index_sum_walks_the_level_and_checks_its_range() {
    let text = "input x :: {x}\ninput z :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[i] += x[i + j - 1] * z[j]\nend\n";
    let x =
        DenseArray::from_f64(&[10], &[0.0, 1.0, 0.0, 3.0, 4.0, 0.0, 0.0, 7.0, 0.0, 9.0]).unwrap();
    let z = DenseArray::from_f64(&[3], &[1.0, -2.0, 0.5]).unwrap();
    for format in [
        "SparseList(Element(0.0))",
        "Dense(Element(0.0))",
        "SparseBand(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseHash(Element(0.0))",
    ] {
        let text = text.replace("{x}", format);
        let p = Program::parse(&text).unwrap();
        for (n, ok) in [(8usize, true), (9, false)] {
            let mut opts = RunOptions::default();
            opts.shapes.insert("y".to_string(), vec![n]);
            let mut b = Bindings::new();
            b.insert("x", x.clone());
            b.insert("z", z.clone());
            let want = p.run_reference(&mut b, &opts);
            assert_eq!(want.is_ok(), ok, "reference, y of size {n}");
            for engine in [Engine::Interp, Engine::C] {
                let fx = Format::parse(format).unwrap();
                let fz = Format::parse("Dense(Element(0.0))").unwrap();
                let mut t = HashMap::from([
                    ("x".to_string(), Tensor::from_dense(&fx, &x).unwrap()),
                    ("z".to_string(), Tensor::from_dense(&fz, &z).unwrap()),
                ]);
                let k = p.compile(engine).unwrap();
                let ir = k.kernel().to_string();
                // A shifted walk: at most one seek per window, no one-index loop per `i`.
                assert!(
                    !ir.contains("concordant") && ir.matches("search(").count() <= 1,
                    "{ir}"
                );
                let got = k.run(&mut t, &HashMap::from([("y".to_string(), vec![n])]));
                match (&got, ok) {
                    (Ok(_), true) => assert_eq!(
                        &t["y"].to_dense().unwrap(),
                        b.get("y").unwrap(),
                        "{engine:?} {format}"
                    ),
                    (Err(e), false) => assert!(e.to_string().contains("`x`"), "{e}"),
                    _ => panic!("{engine:?} {format} size {n}: {got:?}"),
                }
            }
        }
    }
}

/// Explicit loop ranges with literal or scalar bounds (`for i = 3:7`, `for i = 1:n[]`,
/// `for i = 2:n[] - 1`): over permissive reads, windows and scalars, compiled on both
/// engines as the reference runs them; a range not starting at 1 over a bare tensor index
/// is an error on every engine.
#[test]
fn loop_ranges_with_literal_and_scalar_bounds() {
    let x = DenseArray::from_f64(&[6], &[1.0, 0.0, 3.0, 0.0, 5.0, 6.0]).unwrap();
    let n = int_scalar(4);
    let programs = [
        "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = 3:7\n  s[] += coalesce(x[~i], 0.5) * i\nend\n",
        "input x :: SparseList(Element(0.0))\ninput n :: Scalar(0)\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = 1:n[]\n  y[i] = x[(2:n[] + 1)(i)] + coalesce(x[~i], 0.0)\nend\n",
        "input n :: Scalar(0)\noutput s :: Scalar(0)\ns .= 0\nfor i = 2:n[] - 1, j = 1:3\n  s[] += i * j\nend\n",
        "input x :: RunList(Element(0.0))\ninput n :: Scalar(0)\noutput s :: Scalar(0.0)\ns .= 0\nfor i = n[]:6, j = _\n  s[] += x[(i:i)(j)]\nend\n",
    ];
    for text in programs {
        let p = Program::parse(text).unwrap();
        let inputs: Vec<(&str, &DenseArray)> = [("x", &x), ("n", &n)]
            .into_iter()
            .filter(|(name, _)| p.decl(name).is_some())
            .collect();
        let want = reference(text, &inputs);
        for engine in [Engine::Interp, Engine::C] {
            let got = compiled(text, engine, &inputs);
            for (name, arr) in &got {
                assert_eq!(arr, want.get(name).unwrap(), "{engine:?}\n{text}");
            }
        }
    }
    // `i` indexes `x` directly, so it must run over x's whole mode.
    let text = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = 2:5\n  s[] += x[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let mut b = Bindings::new();
    b.insert("x", x.clone());
    assert!(p.run_reference(&mut b, &RunOptions::default()).is_err());
    let e = p
        .compile(Engine::Interp)
        .expect_err("a range over a bare index");
    assert!(e.to_string().contains("from 1"), "{e}");
}

/// Windows bounded by enclosing loop indices (`x[(i:i + 2)(j)]`, a sliding window): the
/// loop over the window runs over its length, computed where `i` is bound, and each
/// window is checked against its tensor and the other ranges of `j` in the kernel. Every
/// vector format, both engines, against the reference; a window that does not fit is a
/// clear error.
#[test]
fn sliding_windows_bounded_by_loop_indices() {
    let x = DenseArray::from_f64(&[8], &[1.0, 0.0, 3.0, 0.0, 0.0, 6.0, 7.0, 0.0]).unwrap();
    let w = DenseArray::from_f64(&[3], &[1.0, -2.0, 0.5]).unwrap();
    for format in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "SparseBand(Element(0.0))",
        "SparseBlockList(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseRunList(Element(0.0))",
        "SparseByteMap(Element(0.0))",
        "SparseHash(Element(0.0))",
        "SparseCOO{1}(Element(0.0))",
    ] {
        // Inside `x`, and centred windows reaching past both ends read `missing`.
        for body in [
            "for i = 1:6, j = _\n  y[i] += x[(i:i + 2)(j)] * w[j]\nend\n",
            "for i = 1:8, j = _\n  y[i] += coalesce(x[~(i - 1:i + 1)(j)], 0.25) * w[j]\nend\n",
        ] {
            let text = format!(
                "input x :: {format}\ninput w :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\n{body}"
            );
            let p = Program::parse(&text).unwrap();
            let mut b = Bindings::new();
            b.insert("x", x.clone());
            b.insert("w", w.clone());
            p.run_reference(&mut b, &RunOptions::default()).unwrap();
            for engine in [Engine::Interp, Engine::C] {
                let got = compiled(&text, engine, &[("x", &x), ("w", &w)]);
                assert_eq!(
                    &got["y"],
                    b.get("y").unwrap(),
                    "{engine:?} {format}\n{text}"
                );
            }
        }
    }
    // Windows running past `x` (i + 2 > 8 at i = 7), or longer than `w`.
    for text in [
        "input x :: SparseList(Element(0.0))\ninput w :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = 1:7, j = _\n  y[i] += x[(i:i + 2)(j)] * w[j]\nend\n",
        "input x :: SparseList(Element(0.0))\ninput w :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = 1:5, j = _\n  y[i] += x[(i:i + 3)(j)] * w[j]\nend\n",
    ] {
        let p = Program::parse(text).unwrap();
        let mut b = Bindings::new();
        b.insert("x", x.clone());
        b.insert("w", w.clone());
        assert!(p.run_reference(&mut b, &RunOptions::default()).is_err(), "{text}");
        for engine in [Engine::Interp, Engine::C] {
            let mut t = stored(&p, &[("x", &x), ("w", &w)]);
            let e = p
                .compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .expect_err("a window that does not fit");
            assert!(e.to_string().contains("window of `x`"), "{engine:?}: {e}");
        }
    }
}

/// An output sized by a huge (sparse) input is an error on both engines, not an aborted
/// process: 2^44 positions of 8 bytes need 2^47.
#[test]
fn outputs_larger_than_memory_are_errors() {
    let mut coo = finch::tensor::Coo::new(finch::ScalarType::F64, &[2, 1 << 44]);
    coo.push(&[1, 5], finch::Value::F64(1.0)).unwrap();
    let format = Format::parse("SparseList(SparseList(Element(0.0)))").unwrap();
    let a = Tensor::from_coo(&format, &coo).unwrap();
    // A dense vector, and a matrix whose Dense root has 2^44 positions of a SparseList.
    for (text, engine) in [
        "input A :: SparseList(SparseList(Element(0.0)))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(SparseList(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(SparseByteMap(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(SparseHash(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(SparsePoint(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(SparseInterval(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(SparseBand(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
        "input A :: SparseList(SparseList(Element(0.0)))\noutput C :: Dense(RunList(Element(0.0)))\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n",
    ]
    .into_iter()
    .flat_map(|t| [(t, Engine::Interp), (t, Engine::C)])
    {
        let p = Program::parse(text).unwrap();
        let mut t = HashMap::from([("A".to_string(), a.clone())]);
        let e = p
            .compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory") || e.contains("could not be resized"), "{engine:?}: {e}");
    }
}

/// Written SparseCOO, recorded and SparseHash levels record entries by their linear
/// position in 64 bits: an output whose shape's product does not fit is refused with a
/// clear error before the kernel runs (the shapes here only fit an unsigned 64-bit size).
#[test]
fn outputs_too_large_for_64_bit_positions_are_refused() {
    let shape = [1usize << 32, (1usize << 31) + 1];
    let mut coo = finch::tensor::Coo::new(ScalarType::F64, &shape);
    coo.push(&[5, 7], Value::F64(1.5)).unwrap();
    let fa = Format::parse("SparseCOO{2}(Element(0.0))").unwrap();
    let a = Tensor::from_coo(&fa, &coo).unwrap();
    for (out, needle) in [
        ("SparseCOO{2}(Element(0.0))", "sparse levels"),
        ("SparseList(SparseList(Element(0.0)))", "sparse levels"),
        ("SparseHash(SparseHash(Element(0.0)))", "SparseHash levels"),
    ] {
        let text = format!(
            "input A :: SparseCOO{{2}}(Element(0.0))\noutput C :: {out}\nC .= 0\nfor j = _, i = _\n  C[i, j] = A[i, j]\nend\n"
        );
        let p = Program::parse(&text).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t = HashMap::from([("A".to_string(), a.clone())]);
            let e = p
                .compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .expect_err("too large");
            assert!(
                e.to_string().contains("too large to be written") && e.to_string().contains(needle),
                "{engine:?} {out}: {e}"
            );
        }
    }
}

/// A loop that does not index an output, around the loop over a level written in order,
/// once per index (`for j, i: y[i] += A[i, j] * x[j]`), comes back to that level's fibers
/// on every iteration, which the level cannot take (it would start the fiber again and
/// lose the earlier passes, as it once did silently). The compiler writes such an output
/// through a hash table (its levels below the leading Dense ones become one SparseHash
/// group; a vector takes a SparseByteMap) and builds the declared format when it is frozen; data the format cannot hold
/// is refused then, as the reference refuses to store it. A Pattern leaf has no hash
/// group: such a program is refused by name. (Found by a differential fuzz.)
#[test]
fn writes_that_come_back_to_an_in_order_fiber_go_through_a_hash_table() {
    let a = DenseArray::from_f64(&[2, 2], &[-5.0, -3.0, 0.0, 7.0]).unwrap();
    let x = DenseArray::from_f64(&[2], &[2.0, 3.0]).unwrap();
    let spmv = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: {y}\ny .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend\n";
    let spgemm = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: {y}\ny .= 0\nfor j = _, k = _, i = _\n  y[i, j] += A[i, k] * A[k, j] * x[k]\nend\n";
    // k outermost: each column of `y` (a Dense parent) is come back to for every k.
    let outer = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: {y}\ny .= 0\nfor k = _, j = _, i = _\n  y[i, j] += A[i, k] * A[k, j] * x[k]\nend\n";
    for (template, out) in [
        (spmv, "SparseList(Element(0.0))"),
        (spmv, "RunList(Element(0.0))"),
        (spmv, "SparseBand(Element(0.0))"),
        (spmv, "SparseCOO{1}(Element(0.0))"),
        (spmv, "SparseInterval(Element(0.0))"),
        (spmv, "SparsePoint(Element(0.0))"),
        (spgemm, "Dense(SparseList(Element(0.0)))"),
        (spgemm, "SparseList(Dense(Element(0.0)))"),
        (spgemm, "SparseCOO{2}(Element(0.0))"),
        (outer, "Dense(SparseList(Element(0.0)))"),
        (outer, "Dense(RunList(Element(0.0)))"),
        (outer, "SparseList(SparseBlockList(Element(0.0)))"),
        (outer, "Dense(SparseByteMap(Element(0.0)))"),
    ] {
        let text = template.replace("{y}", out);
        let p = Program::parse(&text).unwrap();
        let mut want = Bindings::new();
        want.insert("A", a.clone());
        want.insert("x", x.clone());
        p.run_reference(&mut want, &RunOptions::default()).unwrap();
        let want = want.get("y").unwrap();
        let fits = Tensor::from_dense(&Format::parse(out).unwrap(), want).is_ok();
        for engine in [Engine::Interp, Engine::C] {
            let k = p.compile(engine).unwrap();
            // A vector goes through a SparseByteMap (a flag per index), not a hash table.
            let ir = k.kernel().to_string();
            if template == spmv && !out.starts_with("SparsePoint") {
                assert!(
                    ir.contains("y_lvl1_tbl") && !ir.contains("table"),
                    "{out}\n{ir}"
                );
            }
            let mut t = stored(&p, &[("A", &a), ("x", &x)]);
            match k.run(&mut t, &HashMap::new()) {
                Ok(_) => {
                    assert!(fits, "{engine:?} {out}: stored data the format cannot hold");
                    assert_eq!(&t["y"].to_dense().unwrap(), want, "{engine:?} {out}");
                    t["y"].validate().unwrap();
                }
                Err(e) => assert!(
                    !fits && e.to_string().contains("cannot store the result"),
                    "{engine:?} {out}: {e}"
                ),
            }
        }
    }
    // Shifted (down one row, the last row dropped) and transposed writes into CSC.
    for write in ["B[~(i + 1), j] = A[i, j]", "B[j, i] = A[i, j] * 2.0"] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput B :: Dense(SparseList(Element(0.0)))\nB .= 0\nfor j = _, i = _\n  {write}\nend\n");
        let p = Program::parse(&text).unwrap();
        let mut opts = RunOptions::default();
        opts.shapes.insert("B".to_string(), vec![2, 2]);
        let mut want = Bindings::new();
        want.insert("A", a.clone());
        p.run_reference(&mut want, &opts).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t = stored(&p, &[("A", &a)]);
            let shapes = HashMap::from([("B".to_string(), vec![2, 2])]);
            p.compile(engine).unwrap().run(&mut t, &shapes).unwrap();
            assert_eq!(
                &t["B"].to_dense().unwrap(),
                want.get("B").unwrap(),
                "{engine:?} {write}"
            );
        }
    }
    // A Pattern leaf: the vector goes through a bytemap of flags (rows with an entry).
    let pattern = "input A :: Dense(SparseList(Element(0.0)))\noutput y :: SparseList(Pattern())\ny .= false\nfor j = _, i = _\n  y[i] |= A[i, j] != 0.0\nend\n";
    let p = Program::parse(pattern).unwrap();
    let mut want = Bindings::new();
    want.insert("A", a.clone());
    p.run_reference(&mut want, &RunOptions::default()).unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let k = p.compile(engine).unwrap();
        assert!(
            k.kernel().to_string().contains("y_lvl1_tbl"),
            "{}",
            k.kernel()
        );
        let mut t = stored(&p, &[("A", &a)]);
        k.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(
            &t["y"].to_dense().unwrap(),
            want.get("y").unwrap(),
            "{engine:?}"
        );
    }
    // A workspace declared inside the outer loop is a fresh fiber on every iteration:
    // written in order, no hash table.
    let fresh = "input A :: Dense(SparseList(Element(0.0)))\noutput s :: Scalar(0.0)\ntemp w :: SparseList(Element(0.0))\ns .= 0\nfor j = _\n  w .= 0\n  for i = _\n    w[i] = A[i, j] * 2.0\n  end\n  for i = _\n    s[] += w[i]\n  end\nend\n";
    for engine in [Engine::Interp, Engine::C] {
        let k = Program::parse(fresh).unwrap().compile(engine).unwrap();
        assert!(!k.kernel().to_string().contains("table"), "{}", k.kernel());
        let got = compiled(fresh, engine, &[("A", &a)]);
        assert_eq!(
            got["s"].data,
            vec![Value::F64(-2.0 * (5.0 + 3.0 - 7.0))],
            "{engine:?}"
        );
    }
}
