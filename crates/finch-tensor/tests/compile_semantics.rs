//! What compiled programs compute and store, on both engines, against the reference
//! interpreter and the paper's programs: outputs that store only their structure,
//! single-entry outputs, computed fills, `let` bindings and element types, indirect
//! reads, `return`, `ifelse`, `&&` and `||`.

mod common;

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, ScalarType, Value};

use common::*;

/// Sparse outputs store the union (`+`) or intersection (`*`) of the operands' patterns:
/// fill regions write nothing.
#[test]
fn sparse_outputs_store_only_the_structure() {
    let f = Format::parse("SparseList(Element(0.0))").unwrap();
    let x = Tensor::from_dense(
        &f,
        &DenseArray::from_f64(&[8], &[1.0, 0.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0]).unwrap(),
    )
    .unwrap();
    let z = Tensor::from_dense(
        &f,
        &DenseArray::from_f64(&[8], &[0.0, 0.0, 5.0, 0.0, 7.0, 3.0, 0.0, 1.0]).unwrap(),
    )
    .unwrap();
    for (op, stored, want) in [
        ("+", 5, vec![1.0, 0.0, 7.0, 0.0, 7.0, 6.0, 0.0, 1.0]),
        ("*", 2, vec![0.0, 0.0, 10.0, 0.0, 0.0, 9.0, 0.0, 0.0]),
    ] {
        let text = format!(
            "input x :: SparseList(Element(0.0))\ninput z :: SparseList(Element(0.0))\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i] {op} z[i]\nend\n"
        );
        for engine in [Engine::Interp, Engine::C] {
            let k = Program::parse(&text).unwrap().compile(engine).unwrap();
            let mut t = HashMap::from([("x".to_string(), x.clone()), ("z".to_string(), z.clone())]);
            k.run(&mut t, &HashMap::new()).unwrap();
            assert_eq!(
                t["w"].countstored(),
                stored,
                "{op} {engine:?}\n{}",
                k.kernel()
            );
            let got: Vec<f64> = t["w"]
                .to_dense()
                .unwrap()
                .data
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(got, want, "{op} {engine:?}");
        }
    }
    // Writing a sparse output from two statements breaks the in-order, once-per-index
    // rule: the output is written through a hash table instead, and read back after.
    let two = "input x :: SparseList(Element(0.0))\noutput w :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\nw .= 0\ns .= 0\nfor i = _\n  w[i] = x[i]\nend\nfor i = _\n  w[i] += x[i]\nend\nfor i = _\n  s[] += w[i]\nend\n";
    for engine in [Engine::Interp, Engine::C] {
        let k = Program::parse(two).unwrap().compile(engine).unwrap();
        let mut t = HashMap::from([("x".to_string(), x.clone())]);
        k.run(&mut t, &HashMap::new()).unwrap();
        let got: Vec<f64> = t["w"]
            .to_dense()
            .unwrap()
            .data
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(got, [2.0, 0.0, 4.0, 0.0, 0.0, 6.0, 0.0, 0.0], "{engine:?}");
        assert_eq!(t["w"].countstored(), 3, "{engine:?}");
        assert_eq!(t["s"].to_dense().unwrap().data, [finch::Value::F64(12.0)]);
    }
    // So is a Pattern output (its hash table holds keys only).
    let pattern = "input x :: SparseList(Element(0.0))\noutput w :: SparseList(Pattern())\nw .= false\nfor i = _\n  w[i] = x[i] > 1.0\nend\nfor i = _\n  w[i] |= x[i] < 0.0\nend\n";
    for engine in [Engine::Interp, Engine::C] {
        let k = Program::parse(pattern).unwrap().compile(engine).unwrap();
        let mut t = HashMap::from([("x".to_string(), x.clone())]);
        k.run(&mut t, &HashMap::new()).unwrap();
        let got: Vec<bool> = t["w"]
            .to_dense()
            .unwrap()
            .data
            .iter()
            .map(|v| *v == finch::Value::Bool(true))
            .collect();
        let want = [false, false, true, false, false, true, false, false];
        assert_eq!(got, want, "{engine:?}");
        assert_eq!(t["w"].countstored(), 2, "{engine:?}");
    }
}

/// Updates by a value that changes nothing (`+= 0`: a stored zero run of a RunList times
/// `x`) claim no index of a single-entry output: a result the reference stores in a
/// SparsePoint or SparseInterval level is stored by the compiled program too, and one that
/// does not fit is refused by both. (Found by a differential fuzz against the reference.)
#[test]
fn identity_updates_claim_no_index_of_single_entry_outputs() {
    // `y[i] = sum_j A[j, i] x[j]`. Fiber 1 of A is one zero run (`y[1] += 0 * x[j]`), fiber
    // 3 holds 7 at j = 3; fiber 2 is empty (y = [0, 0, 7, 0]: fits) or holds 3 (two
    // non-zeros: fits neither format).
    let a = |fiber2: [f64; 4]| {
        let mut d = vec![0.0; 4];
        d.extend(fiber2);
        d.extend([0.0, 0.0, 7.0, 0.0]);
        d.extend([0.0; 4]);
        DenseArray::from_f64(&[4, 4], &d).unwrap()
    };
    let x = DenseArray::from_f64(&[4], &[5.0, 1.0, 1.0, 0.0]).unwrap();
    for out in ["SparsePoint", "SparseInterval"] {
        let text = format!("input A :: Dense(RunList(Element(0.0)))\ninput x :: SparseBand(Element(0.0))\noutput y :: {out}(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n");
        let p = Program::parse(&text).unwrap();
        let format = Format::parse(&format!("{out}(Element(0.0))")).unwrap();
        for (fiber2, fits) in [([0.0; 4], true), ([0.0, 3.0, 0.0, 0.0], false)] {
            let a = a(fiber2);
            let mut want = Bindings::new();
            want.insert("A", a.clone());
            want.insert("x", x.clone());
            p.run_reference(&mut want, &RunOptions::default()).unwrap();
            let y = want.get("y").unwrap();
            assert_eq!(Tensor::from_dense(&format, y).is_ok(), fits, "{out}: {y:?}");
            for engine in [Engine::Interp, Engine::C] {
                let mut t = HashMap::from([
                    (
                        "A".to_string(),
                        Tensor::from_dense(
                            &Format::parse("Dense(RunList(Element(0.0)))").unwrap(),
                            &a,
                        )
                        .unwrap(),
                    ),
                    (
                        "x".to_string(),
                        Tensor::from_dense(&Format::parse("SparseBand(Element(0.0))").unwrap(), &x)
                            .unwrap(),
                    ),
                ]);
                let got = p.compile(engine).unwrap().run(&mut t, &HashMap::new());
                assert_eq!(got.is_ok(), fits, "{engine:?}, {out}, {fiber2:?}: {got:?}");
                if fits {
                    assert_eq!(&t["y"].to_dense().unwrap(), y, "{engine:?}, {out}");
                }
            }
        }
    }
}

/// A single-entry output written at a second index with its fill (`r[j] <<max>>= A[i, j]`
/// over a column of negative values writes 0) holds what the reference stores: the kernel
/// flags the second index, and the program runs again with the output recorded as
/// entries, stored without its fill values. A result that does not fit is refused by every
/// engine, by name. (Found by a differential fuzz of nested loops against the reference.)
#[test]
fn written_fill_values_take_no_single_entry_place() {
    let matrix = |cols: [[f64; 2]; 3]| DenseArray::from_f64(&[2, 3], &cols.concat()).unwrap();
    // Columns 1 and 2 negative (r = [0, 0, 4]: fits), or column 1 positive (two entries).
    let fits = matrix([[-1.0, 0.0], [-2.0, 0.0], [0.0, 4.0]]);
    let overflows = matrix([[1.0, 0.0], [-2.0, 0.0], [0.0, 4.0]]);
    for out in ["SparsePoint", "SparseInterval"] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput r :: {out}(Element(0.0))\nr .= 0\nfor j = _, i = _\n  r[j] <<max>>= A[i, j]\nend\n");
        let p = Program::parse(&text).unwrap();
        engines_match_reference(&p, &[("A", &fits)], &[], &text);
        let mut reference = Bindings::new();
        reference.insert("A", overflows.clone());
        p.run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        let format = Format::parse(&format!("{out}(Element(0.0))")).unwrap();
        assert!(Tensor::from_dense(&format, reference.get("r").unwrap()).is_err());
        let a = Format::parse("Dense(SparseList(Element(0.0)))").unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t =
                HashMap::from([("A".to_string(), Tensor::from_dense(&a, &overflows).unwrap())]);
            let e = p
                .compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .unwrap_err();
            assert!(
                e.to_string().contains("cannot store the result in `r`"),
                "{engine:?}: {e}"
            );
            assert!(!t.contains_key("r"), "{engine:?}");
        }
    }
    // A temporary is not stored: a SparsePoint one given two entries (written in order,
    // so the kernel flags the second) holds them in every engine, as in the reference.
    let text = "input A :: Dense(SparseList(Element(0.0)))\noutput y :: Dense(Element(0.0))\ntemp v :: SparsePoint(Element(0.0))\nv .= 0\nfor j = _, i = _\n  v[j] += A[i, j]\nend\ny .= 0\nfor j = _\n  y[j] = v[j]\nend\n";
    engines_match_reference(
        &Program::parse(text).unwrap(),
        &[("A", &overflows)],
        &[],
        text,
    );
}

/// A user's `let` named like the compiler's own bindings of repeated reads (`read0`) is a
/// different variable: the reads bound around the statement are not replaced by it.
#[test]
fn a_let_named_like_a_bound_read_stays_apart() {
    let text = "input x :: SparseList(Element(0.0))\ninput z :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  let read0 = z[i] + 100.0\n    s[] += x[i] * x[i] + read0\n  end\n  let read1 = x[i]\n    s[] += read1 * z[i]\n  end\nend\n";
    let x = DenseArray::from_f64(&[5], &[0.0, 3.0, -4.0, 0.0, 2.0]).unwrap();
    let z = DenseArray::from_f64(&[5], &[2.0, 0.0, 5.0, 0.0, -1.0]).unwrap();
    engines_match_reference(
        &Program::parse(text).unwrap(),
        &[("x", &x), ("z", &z)],
        &[],
        text,
    );
}

/// The paper programs the compiler takes reproduce the digest's vectors on both engines.
#[test]
fn compiled_paper_examples() {
    let example = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(name);
        Program::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let stored = |p: &Program, name: &str, a: DenseArray| {
        let f = p.decl(name).unwrap().format.clone();
        (name.to_string(), Tensor::from_dense(&f, &a).unwrap())
    };
    let imat = |rows: &[&[i64]]| {
        let (m, n) = (rows.len(), rows[0].len());
        let mut a =
            DenseArray::filled(finch::ScalarType::I64, &[m, n], finch::Value::I64(0)).unwrap();
        for (i, r) in rows.iter().enumerate() {
            for (j, &x) in r.iter().enumerate() {
                a.set(&[i, j], finch::Value::I64(x)).unwrap();
            }
        }
        a
    };
    let out = |t: &HashMap<String, Tensor>, n: &str| -> Vec<f64> {
        t[n].to_dense()
            .unwrap()
            .data
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    for engine in [Engine::Interp, Engine::C] {
        let p = example("fig02_even_1.fin");
        let mut t = HashMap::from([
            stored(&p, "a", ints(&[1, 0, 2, 3, 0, 4, 5, 6], 0)),
            stored(&p, "b", ints(&[0, 7, 8, 9, 1, 2, 0, 3], 0)),
        ]);
        let compiled = p.compile(engine).unwrap();
        if finch::backend::c::available() {
            assert_eq!(compiled.engine(), engine, "{:?}", compiled.warnings());
        }
        compiled.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(out(&t, "c"), vec![0.0, 0.0, 0.0, 27.0, 0.0, 8.0, 0.0, 18.0]);

        let p = example("fig07_product_early_exit.fin");
        let mut t = HashMap::from([stored(&p, "A", ints(&[2, 3, 0, 5], 0))]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "p"), vec![0.0]);

        let p = example("fig19_spmv_symmetric.fin");
        let upper =
            DenseArray::from_rows_f64(&[&[0.0, 1.0, 0.0], &[0.0, 0.0, 4.0], &[0.0, 0.0, 0.0]])
                .unwrap();
        let mut t = HashMap::from([
            stored(&p, "A", upper),
            stored(
                &p,
                "D",
                DenseArray::from_f64(&[3], &[2.0, 3.0, 5.0]).unwrap(),
            ),
            stored(
                &p,
                "x",
                DenseArray::from_f64(&[3], &[1.0, 2.0, 3.0]).unwrap(),
            ),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "y"), vec![4.0, 19.0, 23.0]);

        let p = example("fig16_unfurl.fin");
        let mut t = HashMap::from([
            stored(&p, "B", imat(&[&[1, 0], &[0, 2], &[3, 0]])),
            stored(&p, "D", ints(&[0, 5], 0)),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "C"), vec![4.0, 0.0, 36.0, 5.0, 21.0, 5.0]);

        let p = example("fig21_spgemm_inner.fin");
        let mut t = HashMap::from([
            stored(&p, "AT", imat(&[&[1, 0], &[0, 3], &[2, 0]])),
            stored(&p, "B", imat(&[&[1, 0], &[0, 1], &[4, 0]])),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "C"), vec![9.0, 0.0, 0.0, 3.0]);
        assert_eq!(
            t["C"].countstored(),
            2,
            "the sparse result stores only the two nonzeros"
        );

        // Outer product: rank-one updates into a SparseHash(SparseHash) workspace.
        let p = example("fig21_spgemm_outer.fin");
        let mut t = HashMap::from([
            stored(&p, "A", imat(&[&[1, 0, 2], &[0, 3, 0]])),
            stored(&p, "BT", imat(&[&[1, 0, 4], &[0, 1, 0]])),
        ]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(out(&t, "C"), vec![9.0, 0.0, 0.0, 3.0]);
        assert_eq!(t["C"].countstored(), 2);
    }
}

/// A value a kernel writes that ends up the fill (here `0.0` and `-0.0` copied from a
/// dense input) is not stored, in every output level, as the reference stores its
/// result: the stored entries equal the reference's, bit for bit. Copying a RunList
/// vector of one entry into a SparseList stores one entry, not one per position.
#[test]
fn computed_fills_are_not_stored() {
    let x = [0.0, 1.5, 2.0, 0.0, -1.0, -0.0, 0.0, 4.0, 0.0];
    let x = DenseArray::from_f64(&[x.len()], &x).unwrap();
    let stored = |t: &Tensor| {
        let coo = t.to_coo();
        let bits: Vec<_> = coo
            .vals
            .iter()
            .map(|v| v.as_f64().map(f64::to_bits))
            .collect();
        (coo.coords, bits)
    };
    for out in [
        "SparseList",
        "SparseCOO{1}",
        "SparseBand",
        "SparseBlockList",
        "SparseByteMap",
        "SparseHash",
        "RunList",
        "SparseRunList",
    ] {
        let text = format!("input x :: Dense(Element(0.0))\noutput w :: {out}(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i]\nend\n");
        let p = Program::parse(&text).unwrap();
        let mut reference = Bindings::new();
        reference.insert("x", x.clone());
        p.run_reference(&mut reference, &RunOptions::default())
            .unwrap();
        let format = p.decl("w").unwrap().format.clone();
        let want = Tensor::from_dense(&format, reference.get("w").unwrap()).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            // (From coordinates, so that the dense input keeps its `-0.0`.)
            let mut coo = finch::tensor::Coo::new(ScalarType::F64, &[x.data.len()]);
            for (i, v) in x.data.iter().enumerate() {
                coo.push(&[i], *v).unwrap();
            }
            let f = p.decl("x").unwrap().format.clone();
            let mut t = HashMap::from([("x".to_string(), Tensor::from_coo(&f, &coo).unwrap())]);
            p.compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .unwrap();
            assert_eq!(stored(&t["w"]), stored(&want), "{out} {engine:?}");
        }
    }
    let n = 100_000;
    let mut one = vec![0.0; n];
    one[1] = 1.0;
    let one = DenseArray::from_f64(&[n], &one).unwrap();
    let text = "input x :: RunList(Element(0.0))\noutput w :: SparseList(Element(0.0))\nw .= 0\nfor i = _\n  w[i] = x[i]\nend\n";
    let p = Program::parse(text).unwrap();
    let f = p.decl("x").unwrap().format.clone();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&f, &one).unwrap())]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(t["w"].countstored(), 1, "{engine:?}");
    }
}

/// A RunList output's runs tile every fiber, also a fiber the kernel never reaches (its
/// loop under a condition that does not hold there): such a fiber is one run of fill.
#[test]
fn run_list_fibers_the_kernel_never_reaches_are_one_fill_run() {
    let text = "input x :: Dense(Element(0.0))\ninput y :: Dense(Element(0.0))\noutput w :: Dense(RunList(Element(0.0)))\nw .= 0\nfor j = _\n  if y[j] > 0.0\n    for i = _\n      w[i, j] = x[i]\n    end\n  end\nend\n";
    let p = Program::parse(text).unwrap();
    let x = DenseArray::from_f64(&[3], &[1.0, 1.0, 2.0]).unwrap();
    for y in [[0.0, 1.0, 1.0, 0.0], [0.0; 4]] {
        let y = DenseArray::from_f64(&[4], &y).unwrap();
        engines_match_reference(&p, &[("x", &x), ("y", &y)], &[], "RunList fibers");
    }
}

#[test]
fn let_variables_keep_their_type() {
    // A `let` variable has its value's type in the simplifier. It was taken for an `i64`
    // (a loop index), which is exact to reorder: the sum of three `f64` variables below
    // was sorted and gave 0.0 where the program's order gives 1.0 (both engines), and
    // `(x[i] | true) | x[i]` over `bool` folded `true` into the integer 1, a compile error.
    let f = |v: f64| DenseArray::from_f64(&[1], &[v]).unwrap();
    let sum = Program::parse(
        "input x :: Dense(Element(0.0))\ninput y :: Dense(Element(0.0))\ninput z :: Dense(Element(0.0))\noutput o :: Dense(Element(0.0))\no .= 0\nfor i = _\n  let a = x[i], b = y[i], c = z[i]\n    o[i] = c + b + a\n  end\nend\n",
    )
    .unwrap();
    let (x, y, z) = (f(1.0), f(-1e16), f(1e16));
    engines_match_reference(&sum, &[("x", &x), ("y", &y), ("z", &z)], &[], "c + b + a");
    let bits = DenseArray::from_data(
        ScalarType::Bool,
        &[70],
        (0..70).map(|k| Value::Bool(k % 3 == 0)).collect(),
        Value::Bool(false),
    )
    .unwrap();
    let bytes = DenseArray::from_data(
        ScalarType::U8,
        &[70],
        (0..70u8).map(|k| Value::U8(k.wrapping_mul(37))).collect(),
        Value::U8(0),
    )
    .unwrap();
    for (text, input) in [
        ("input x :: Dense(Element(false))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = (x[i] | true) | x[i]\nend\n", &bits),
        ("input x :: Dense(Element(false))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = x[i] | coalesce(x[~(i + 1)], true) | x[i]\nend\n", &bits),
        ("input x :: Dense(Element(0u8))\noutput o :: Dense(Element(0u8))\no .= 0u8\nfor i = _\n  o[i] = max(max(x[i], coalesce(x[~(i + 2)], 255u8)), x[i])\nend\n", &bytes),
    ] {
        engines_match_reference(&Program::parse(text).unwrap(), &[("x", input)], &[], text);
    }
}

#[test]
fn narrow_element_types_and_missing_values_compile_like_the_reference() {
    // Found by a differential fuzz of integer element types:
    // * a shifted read's first phase is `missing` (outside the vector), which has no type;
    //   it was taken for `f64`, so `max(s, 0)` became an `f64` and a `u8` program failed;
    // * `*=` over a run of n equal values is one `*= v ^ n`, and an integer power has its
    //   base's type (`i8` here), where it was computed in `i64` and failed to store;
    // * assigning `missing` does nothing (digest §5.3): the reference engine refused it.
    let vector = |ty: ScalarType, vals: &[i64], fill: Value| {
        DenseArray::from_data(
            ty,
            &[vals.len()],
            vals.iter()
                .map(|&v| Value::I64(v).convert_wrapping(ty).unwrap())
                .collect(),
            fill,
        )
        .unwrap()
    };
    let u8s = vector(ScalarType::U8, &[5, 7, 0, 0, 9, 3], Value::U8(0));
    let f64s = DenseArray::from_f64(&[6], &[5.0, 7.0, 0.0, 0.0, 9.0, -3.0]).unwrap();
    let i8s = vector(ScalarType::I8, &[5, 7, 7, 7, 1, 1, 3, 3], Value::I8(1));
    for (text, x) in [
        ("input x :: SparseList(Element(0u8))\noutput s :: Scalar(0u8)\ns .= 0u8\nfor i = _\n  s[] <<max>>= x[~(i - 1)] * x[i]\nend\n", &u8s),
        ("input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[~(i - 1)] * x[i]\nend\n", &f64s),
        ("input x :: RunList(Element(1i8))\noutput s :: Scalar(1i8)\ns .= 1i8\nfor i = _\n  s[] *= x[i]\nend\n", &i8s),
        ("input x :: SparseRunList(Element(1i8))\noutput s :: Scalar(1i8)\ns .= 1i8\nfor i = _\n  s[] *= x[i] | 2i8\nend\n", &i8s),
    ] {
        engines_match_reference(&Program::parse(text).unwrap(), &[("x", x)], &[], text);
    }
}

#[test]
fn nested_indirect_reads_through_a_sparse_index_vector() {
    // Found by a differential fuzz of indirect indexing: in `x[p[q[i]]]` with `p` sparse,
    // `p[q[i]]` is a Switch (stored or fill) until it is resolved, and `x` was concordized
    // at that unresolved index ("internal: an unresolved switch at a leaf").
    let q = ints(&[3, 1, 1, 4, 2], 1);
    let p = ints(&[1, 2, 1, 3], 1);
    let x = DenseArray::from_f64(&[3], &[10.0, -2.0, 0.5]).unwrap();
    for (p_format, q_format) in [
        ("SparseList", "Dense"),
        ("RunList", "SparseList"),
        ("SparseHash", "SparseRunList"),
    ] {
        let text = format!(
            "input p :: {p_format}(Element(1))\ninput q :: {q_format}(Element(1))\ninput x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput o :: Dense(Element(0.0))\ns .= 0\no .= 0\nfor i = _\n  s[] += x[p[q[i]]] * i\n  o[i] = x[p[q[i]]]\nend\n"
        );
        engines_match_reference(
            &Program::parse(&text).unwrap(),
            &[("p", &p), ("q", &q), ("x", &x)],
            &[],
            &text,
        );
    }
}

#[test]
fn statements_after_a_return_do_not_run() {
    // The compiled engines ran the statements after a top-level `return` (y = x + 1 where
    // the reference, as Finch, returns y = x): found by a differential fuzz of the
    // language's statements, as was an output never made.
    let x = DenseArray::from_f64(&[3], &[1.0, 2.0, 3.0]).unwrap();
    let head = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i]\nend\n";
    let tail = "for i = _\n  y[i] += 1.0\nend\n";
    for text in [
        format!("{head}return y\n{tail}"),
        format!("{head}begin\n  return y\nend\n{tail}"),
    ] {
        let p = Program::parse(&text).unwrap();
        engines_match_reference(&p, &[("x", &x)], &[], &text);
        let mut t = HashMap::from([(
            "x".to_string(),
            Tensor::from_dense(&Format::parse("Dense(Element(0.0))").unwrap(), &x).unwrap(),
        )]);
        p.compile(Engine::Interp)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(t["y"].to_dense().unwrap(), x, "{text}");
    }
    // An output the program never makes (declared only after the return) is an error in
    // every engine; the compiled ones gave it its fill value.
    let text = format!("input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\n{}return y\ns .= 1\n", &head[head.find("y .= 0").unwrap()..]);
    let e = Program::parse(&text).unwrap_err();
    assert!(
        e.to_string().contains("the output `s` is never declared"),
        "{e}"
    );
}

#[test]
fn ifelse_runs_only_the_branch_taken() {
    // `ifelse(d != 0, div(n, d), 0)` guards a division: the reference evaluated both
    // branches and refused the program at d = 0, where the compiled engines (and the
    // branch the program takes) divide only by non-zeros. Found by a differential fuzz of
    // the operators.
    let x = ints(&[4, 0, -3, 0, 7], 0);
    for format in ["Dense", "SparseList", "RunList"] {
        let text = format!("input x :: {format}(Element(0))\noutput o :: Dense(Element(0))\noutput s :: Scalar(0)\no .= 0\ns .= 0\nfor i = _\n  o[i] = ifelse(x[i] != 0, div(12, x[i]), -1)\n  s[] += ifelse(x[i] == 0, 5, rem(7, x[i]))\nend\n");
        engines_match_reference(&Program::parse(&text).unwrap(), &[("x", &x)], &[], &text);
    }
}

#[test]
fn and_and_or_short_circuit_in_every_engine() {
    // `x > 7 && 3 != rem(x, x - x)`: the right operand runs only where the left does not
    // decide, as in the reference engine (Julia's `&&`); the kernels evaluated both sides
    // (C's branch-free `&`) and failed on the division. Found by a differential fuzz of
    // the operators. A failing left operand still fails everywhere.
    let x = ints(&[1, 2, 3, 0], 0);
    for rhs in [
        "x[i] > 7 && 3 != rem(x[i], x[i] - x[i])",
        "x[i] < 7 || 3 != rem(x[i], x[i] - x[i])",
        "x[i] != 0 && rem(12, x[i]) == 0",
    ] {
        let text = format!("input x :: Dense(Element(0))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = {rhs}\nend\n");
        engines_match_reference(&Program::parse(&text).unwrap(), &[("x", &x)], &[], &text);
    }
    let text = "input x :: Dense(Element(0))\noutput o :: Dense(Element(false))\no .= false\nfor i = _\n  o[i] = 3 != rem(x[i], x[i] - x[i]) || x[i] < 7\nend\n";
    let p = Program::parse(text).unwrap();
    let mut reference = Bindings::new();
    reference.insert("x", x.clone());
    assert!(p
        .run_reference(&mut reference, &RunOptions::default())
        .is_err());
    let format = Format::parse("Dense(Element(0))").unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&format, &x).unwrap())]);
        assert!(
            p.compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .is_err(),
            "{engine:?}"
        );
    }
}

#[test]
fn a_read_at_a_computed_index_in_a_branch_not_taken_is_not_checked() {
    // `ifelse(c, x[I[i]], 0.0)` with `I[i]` past `x` where `c` is false: the reference runs
    // only the branch taken, but the compiled engines range-checked the read before the
    // statement and stopped ("an index ... is outside `x`"). Found by the fuzzer
    // (program_run). Also under `&&`, `||`, an `if` condition and a `let`; where the branch
    // is taken, every engine refuses the index.
    let bools = |v: &[bool]| {
        let data = v.iter().map(|&b| Value::Bool(b)).collect();
        DenseArray::from_data(ScalarType::Bool, &[v.len()], data, Value::Bool(false)).unwrap()
    };
    let c = bools(&[true, true, false, true, false]);
    let idx = ints(&[1, 4, 9, 2, 7], 1);
    let x = DenseArray::from_f64(&[5], &[1.5, -2.0, 4.0, 8.0, 0.25]).unwrap();
    let head = "input c :: Dense(Element(false))\ninput I :: Dense(Element(1))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\noutput b :: SparseList(Element(false))\ny .= 0\nb .= false\nfor i = _\n";
    for body in [
        "  y[i] = ifelse(c[i], x[I[i]], 0.0)\n  b[i] = c[i] && x[I[i]] > 1.0\n",
        "  y[i] += 2.0 * ifelse(!c[i], -1.0, x[I[i]] + 1.0)\n  b[i] = !c[i] || x[I[i]] < 0.0\n",
        "  if c[i] && x[I[i]] > 0.0\n    y[i] = 1.0\n  end\n  let v = ifelse(c[i], x[I[i]], 3.0)\n    b[i] = v > 2.0\n  end\n",
    ] {
        let text = format!("{head}{body}end\n");
        let p = Program::parse(&text).unwrap();
        engines_match_reference(&p, &[("c", &c), ("I", &idx), ("x", &x)], &[], &text);
        // With every branch taken, the read at 9 is out of range in every engine.
        let all = bools(&[true; 5]);
        let mut reference = Bindings::new();
        for (name, a) in [("c", &all), ("I", &idx), ("x", &x)] {
            reference.insert(name, a.clone());
        }
        assert!(p.run_reference(&mut reference, &RunOptions::default()).is_err(), "{text}");
        for engine in [Engine::Interp, Engine::C] {
            let mut t = HashMap::new();
            for (name, format, a) in [
                ("c", "Dense(Element(false))", &all),
                ("I", "Dense(Element(1))", &idx),
                ("x", "Dense(Element(0.0))", &x),
            ] {
                let f = Format::parse(format).unwrap();
                t.insert(name.to_string(), Tensor::from_dense(&f, a).unwrap());
            }
            let run = p.compile(engine).unwrap().run(&mut t, &HashMap::new());
            assert!(run.is_err(), "{engine:?}: {text}");
        }
    }
}

#[test]
fn a_loop_that_skips_its_first_phase_still_walks_its_shifted_reads() {
    // `for i = 6:6` over `x5`'s mode of size 5: the loop's first phase (inside `x5`) is
    // empty, and the segments of the permissive reads `x4[~i]` (before, inside and past
    // `x4`) were entered at index 1 and sought only in that phase, so the second phase
    // never advanced and both compiled engines ran forever (this test with it: past a
    // minute, stopped). Found by the differential
    // tester (seed 114, case 2436); the segments now start at the loop's start.
    let bools = |n: usize, v: bool| {
        DenseArray::from_data(
            ScalarType::Bool,
            &[n],
            vec![Value::Bool(v); n],
            Value::Bool(v),
        )
        .unwrap()
    };
    let x4 = ints(&[0; 5], 0);
    let x5 = DenseArray::from_data(
        ScalarType::Bool,
        &[5, 5, 5],
        vec![Value::Bool(true); 125],
        Value::Bool(true),
    )
    .unwrap();
    let x6 = bools(5, false);
    let text = "input x4 :: Dense(Element(0))\ninput x5 :: SparseList(SparseList(Dense(Element(true))))\ninput x6 :: SparseList(Pattern())\noutput y1 :: SparseScalar(0)\noutput y2 :: SparseList(Pattern())\n\ny1 .= 0\ny2 .= false\nfor i = 6:6\n  for j = _\n    for k = _\n      if true\n        y1[] = ifelse(coalesce(x5[k, (1:5)(j), ~i], false), x4[~i], coalesce(x4[~i], -2))\n        y2[~i] = x6[~k]\n      end\n    end\n  end\nend\n";
    let p = Program::parse(text).unwrap();
    let shapes = HashMap::from([("y2".to_string(), vec![5])]);
    let mut reference = Bindings::new();
    for (name, a) in [("x4", &x4), ("x5", &x5), ("x6", &x6)] {
        reference.insert(name, a.clone());
    }
    let options = RunOptions {
        shapes: shapes.clone(),
        ..RunOptions::default()
    };
    p.run_reference(&mut reference, &options).unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let mut t = HashMap::new();
        for (name, a) in [("x4", &x4), ("x5", &x5), ("x6", &x6)] {
            let f = Format::parse(&p.decl(name).unwrap().format.to_string()).unwrap();
            t.insert(name.to_string(), Tensor::from_dense(&f, a).unwrap());
        }
        p.compile(engine).unwrap().run(&mut t, &shapes).unwrap();
        for out in ["y1", "y2"] {
            assert_eq!(
                &t[out].to_dense().unwrap(),
                reference.get(out).unwrap(),
                "{engine:?}: {out}"
            );
        }
    }
}
