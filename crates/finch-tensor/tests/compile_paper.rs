//! The paper's wrapperized programs through the compiler: Fig. 10 (an offset read over
//! the upper triangle) and Fig. 26 erosion (permissive reads padded with `true`) in its
//! run-length, dense and bitwise forms, against the reference interpreter, a direct
//! implementation, and each other, bit for bit.

use std::borrow::Borrow;
use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{Tensor, TensorStorage};
use finch::{DenseArray, Program, ScalarType, Value};

fn example(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../examples/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Runs `text` compiled with `engine` on `inputs`, returning the dense outputs.
fn compiled(
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
fn stored<A: Borrow<DenseArray>>(p: &Program, inputs: &[(&str, A)]) -> HashMap<String, Tensor> {
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
fn int_scalar(v: i64) -> DenseArray {
    DenseArray::from_data(ScalarType::I64, &[], vec![Value::I64(v)], Value::I64(0)).unwrap()
}

/// The inputs as dense bindings for the reference interpreter.
fn bindings<A: Borrow<DenseArray>>(inputs: &[(&str, A)]) -> Bindings {
    let mut b = Bindings::new();
    for (name, a) in inputs {
        b.insert(*name, a.borrow().clone());
    }
    b
}

fn reference(text: &str, inputs: &[(&str, &DenseArray)]) -> Bindings {
    let p = Program::parse(text).unwrap();
    let mut b = bindings(inputs);
    p.run_reference(&mut b, &RunOptions::default()).unwrap();
    b
}

#[test]
fn fig10_offset_triangle_compiles() {
    let text = example("fig10_offset_triangle.fin");
    let a = DenseArray::from_data(
        ScalarType::I64,
        &[3, 3],
        // Column-major A = [1 2 3; 4 5 6; 7 8 9].
        [1, 4, 7, 2, 5, 8, 3, 6, 9].map(Value::I64).to_vec(),
        Value::I64(0),
    )
    .unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let out = compiled(&text, engine, &[("A", &a)]);
        assert_eq!(out["s"].data, vec![Value::I64(11)], "{engine:?}");
    }
}

/// A binary image (`img[x, y]`, x fast) of blobs, deterministic.
fn blobs(w: usize, h: usize, seed: u64) -> Vec<bool> {
    let mut s = seed;
    let mut next = move |m: usize| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) as usize) % m.max(1)
    };
    let mut px = vec![false; w * h];
    for _ in 0..(w * h / 40).max(1) {
        let (x0, y0, rw, rh) = (next(w), next(h), 1 + next(9), 1 + next(6));
        for y in y0..(y0 + rh).min(h) {
            for x in x0..(x0 + rw).min(w) {
                px[y * w + x] = true;
            }
        }
    }
    px
}

/// Erosion with the 3x3 square (a vertical, then a horizontal pass), padding with `true`,
/// written directly.
fn erode(px: &[bool], w: usize, h: usize) -> Vec<bool> {
    let at = |x: isize, y: isize| {
        if x < 0 || y < 0 || x >= w as isize || y >= h as isize {
            true
        } else {
            px[y as usize * w + x as usize]
        }
    };
    let mut out = vec![false; w * h];
    for y in 0..h as isize {
        for x in 0..w as isize {
            // Vertical pass first (tmp), then horizontal over tmp, as the program does.
            let tmp = |x: isize| at(x, y - 1) & at(x, y) & at(x, y + 1);
            let t = |x: isize| {
                if x < 0 || x >= w as isize {
                    true
                } else {
                    tmp(x)
                }
            };
            out[y as usize * w + x as usize] = t(x - 1) & t(x) & t(x + 1);
        }
    }
    out
}

#[test]
fn fig26_erosion_run_length_dense_and_bitwise_agree_bit_for_bit() {
    for (w, h, seed) in [(6usize, 4usize, 0u64), (64, 23, 7), (130, 9, 3)] {
        let px = if seed == 0 {
            // The digest's image.
            [
                [1, 1, 1, 0, 1, 1],
                [1, 1, 1, 1, 1, 1],
                [1, 1, 1, 1, 1, 0],
                [0, 1, 1, 1, 1, 1],
            ]
            .iter()
            .flatten()
            .map(|&v| v == 1)
            .collect()
        } else {
            blobs(w, h, seed)
        };
        let want = erode(&px, w, h);
        let img = DenseArray::from_data(
            ScalarType::Bool,
            &[w, h],
            px.iter().map(|&b| Value::Bool(b)).collect(),
            Value::Bool(false),
        )
        .unwrap();
        let want_dense = DenseArray::from_data(
            ScalarType::Bool,
            &[w, h],
            want.iter().map(|&b| Value::Bool(b)).collect(),
            Value::Bool(false),
        )
        .unwrap();
        for name in ["fig26_erosion.fin", "fig26_erosion_dense.fin"] {
            let text = example(name);
            assert_eq!(
                reference(&text, &[("img", &img)]).get("out").unwrap(),
                &want_dense,
                "{name} reference, {w}x{h}"
            );
            for engine in [Engine::Interp, Engine::C] {
                let out = compiled(&text, engine, &[("img", &img)]);
                assert_eq!(out["out"], want_dense, "{name} {engine:?}, {w}x{h}");
            }
        }
        // Bitwise: 64 pixels a word, LSB first, pad bits set.
        let words_per_row = w.div_ceil(64);
        let mut words = Vec::new();
        for y in 0..h {
            for k in 0..words_per_row {
                let mut word = !0u64;
                for b in 0..64 {
                    let x = k * 64 + b;
                    if x < w && !px[y * w + x] {
                        word &= !(1u64 << b);
                    }
                }
                words.push(Value::U64(word));
            }
        }
        let img_bits =
            DenseArray::from_data(ScalarType::U64, &[words_per_row, h], words, Value::U64(0))
                .unwrap();
        let out = compiled(
            &example("fig26_erosion_bitwise.fin"),
            Engine::C,
            &[("img", &img_bits)],
        );
        for y in 0..h {
            for x in 0..w {
                let word = out["out"].data[y * words_per_row + x / 64]
                    .as_i128()
                    .unwrap() as u64;
                assert_eq!(
                    word >> (x % 64) & 1 == 1,
                    want[y * w + x],
                    "bitwise pixel ({x}, {y}) of {w}x{h}"
                );
            }
        }
    }
}

/// Fig. 26's masked histogram: an indirect write (`bins[div(img[y, x], 16) + 1] += 1`) is
/// concordized into a scatter with a range check; an index outside `bins` is an error.
#[test]
fn fig26_masked_histogram_scatters_and_checks_its_index() {
    let text = example("fig26_histogram.fin");
    let (w, h) = (37usize, 11usize);
    let mut s = 12345u64;
    let mut px = Vec::new();
    let mut mask = Vec::new();
    for _ in 0..w * h {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
        px.push(Value::U8((s >> 40) as u8));
        mask.push(Value::Bool(!(s >> 20).is_multiple_of(3)));
    }
    // img[y, x] and mask[y, x] with y fast: shape [h, w].
    let img = DenseArray::from_data(ScalarType::U8, &[h, w], px, Value::U8(0)).unwrap();
    let mask = DenseArray::from_data(ScalarType::Bool, &[h, w], mask, Value::Bool(false)).unwrap();
    let p = Program::parse(&text).unwrap();
    let mut b = Bindings::new();
    b.insert("img", img.clone());
    b.insert("mask", mask.clone());
    let opts = RunOptions {
        shapes: HashMap::from([("bins".to_string(), vec![16])]),
        ..Default::default()
    };
    p.run_reference(&mut b, &opts).unwrap();
    let want = b.get("bins").unwrap().clone();
    for engine in [Engine::Interp, Engine::C] {
        let k = p.compile(engine).unwrap();
        let mut t = HashMap::new();
        for (name, a) in [("img", &img), ("mask", &mask)] {
            let f = Format::parse(&p.decl(name).unwrap().format.to_string()).unwrap();
            t.insert(name.to_string(), Tensor::from_dense(&f, a).unwrap());
        }
        let sixteen = HashMap::from([("bins".to_string(), vec![16])]);
        k.run(&mut t, &sixteen).unwrap();
        assert_eq!(t["bins"].to_dense().unwrap(), want, "{engine:?}");
        // Too few bins: the scatter's index check stops the kernel with an error.
        let eight = HashMap::from([("bins".to_string(), vec![8])]);
        let e = k.run(&mut t, &eight).unwrap_err();
        assert!(e.to_string().contains("is outside `bins`"), "{e}");
    }
}

/// Fig. 2: the four ways to multiply two sparse vectors at even indices, compiled. The
/// strategies that write an intermediate sparse vector and read it in the next statement
/// freeze it in the kernel; every strategy gives the same `c`.
#[test]
fn fig02_four_strategies_compiled_agree() {
    let n = 57;
    let mut s = 99u64;
    let mut sparse = || {
        let v: Vec<Value> = (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                let r = (s >> 33) % 10;
                Value::I64(if r < 4 { (r + 1) as i64 } else { 0 })
            })
            .collect();
        DenseArray::from_data(ScalarType::I64, &[n], v, Value::I64(0)).unwrap()
    };
    let (a, b) = (sparse(), sparse());
    let want = {
        let mut b2 = reference(&example("fig02_even_1.fin"), &[("a", &a), ("b", &b)]);
        b2.remove("c").unwrap()
    };
    assert!(
        want.data.iter().any(|v| v.as_i128() != Some(0)),
        "a non-trivial case"
    );
    for k in 1..=4 {
        let text = example(&format!("fig02_even_{k}.fin"));
        for engine in [Engine::Interp, Engine::C] {
            let out = compiled(&text, engine, &[("a", &a), ("b", &b)]);
            assert_eq!(out["c"], want, "strategy {k}, {engine:?}");
        }
    }
}

/// Fig. 24 BFS, push and pull, compiled: each step's frontier (a SparseByteMap of
/// Pattern, written with `|=`) and the parents (an input updated in place) equal the
/// reference's, over a whole traversal of a random graph; the pull step stops searching a
/// vertex's in-neighbours at its first parent in the frontier.
#[test]
fn fig24_bfs_compiled_matches_the_reference() {
    let n = 60;
    let mut s = 7u64;
    let mut edges = vec![false; n * n]; // edges[i * n + j]: j -> i
    for _ in 0..3 * n {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
        let (i, j) = (((s >> 33) as usize) % n, ((s >> 13) as usize) % n);
        edges[i * n + j] = true;
    }
    let bools = |v: &[bool]| {
        DenseArray::from_data(
            ScalarType::Bool,
            &[v.len()],
            v.iter().map(|&b| Value::Bool(b)).collect(),
            Value::Bool(false),
        )
        .unwrap()
    };
    // A[k, j] (k fast) is true for an edge j -> k; AT is its transpose.
    let adjacency = |transpose: bool| {
        let mut data = Vec::with_capacity(n * n);
        for col in 0..n {
            for row in 0..n {
                let (k, j) = if transpose { (col, row) } else { (row, col) };
                data.push(Value::Bool(edges[k * n + j]));
            }
        }
        DenseArray::from_data(ScalarType::Bool, &[n, n], data, Value::Bool(false)).unwrap()
    };
    for (file, adj, transpose) in [
        ("fig24_bfs_push.fin", "A", false),
        ("fig24_bfs_pull.fin", "AT", true),
    ] {
        let text = example(file);
        let p = Program::parse(&text).unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let k = p.compile(engine).unwrap();
            let mut frontier = vec![false; n];
            frontier[0] = true;
            let mut visited = frontier.clone();
            let mut parents = vec![Value::I64(0); n];
            parents[0] = Value::I64(1);
            let mut steps = 0;
            while frontier.iter().any(|&b| b) && steps < n {
                steps += 1;
                let p_in =
                    DenseArray::from_data(ScalarType::I64, &[n], parents.clone(), Value::I64(0))
                        .unwrap();
                let inputs = [
                    ("F", bools(&frontier)),
                    (adj, adjacency(transpose)),
                    ("V", bools(&visited)),
                    ("P", p_in),
                ];
                // The reference step.
                let mut b = bindings(&inputs);
                p.run_reference(&mut b, &RunOptions::default()).unwrap();
                // The compiled step.
                let mut t = stored(&p, &inputs);
                k.run(&mut t, &HashMap::new()).unwrap();
                let next = t["_F"].to_dense().unwrap();
                let new_parents = t["P"].to_dense().unwrap();
                assert_eq!(
                    &next,
                    b.get("_F").unwrap(),
                    "{file} {engine:?} step {steps}"
                );
                assert_eq!(
                    &new_parents,
                    b.get("P").unwrap(),
                    "{file} {engine:?} step {steps}"
                );
                frontier = next
                    .data
                    .iter()
                    .map(|v| v.as_bool() == Some(true))
                    .collect();
                for (v, f) in visited.iter_mut().zip(&frontier) {
                    *v |= *f;
                }
                parents = new_parents.data;
            }
            assert!(steps > 1, "{file}: the traversal went beyond the source");
        }
    }
}

/// Fig. 24 Bellman-Ford, compiled: rounds of relaxation from the active set (a bytemap of
/// Pattern) over an adjacency matrix whose fill is `Inf`, with `D` updated in place by
/// `<<min>>=`, equal the reference's until no vertex changes.
#[test]
fn fig24_bellman_ford_compiled_matches_the_reference() {
    let n = 40;
    let inf = f64::INFINITY;
    let mut s = 3u64;
    let mut weights = vec![inf; n * n]; // A[i, j] (i fast): edge j -> i
    for _ in 0..3 * n {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
        let (i, j) = (((s >> 33) as usize) % n, ((s >> 13) as usize) % n);
        weights[j * n + i] = ((s >> 50) % 9 + 1) as f64;
    }
    let a = DenseArray::from_data(
        ScalarType::F64,
        &[n, n],
        weights.into_iter().map(Value::F64).collect(),
        Value::F64(inf),
    )
    .unwrap();
    let text = example("fig24_bellman_ford.fin");
    let p = Program::parse(&text).unwrap();
    for engine in [Engine::Interp, Engine::C] {
        let k = p.compile(engine).unwrap();
        let mut d = vec![inf; n];
        d[0] = 0.0;
        let mut active = vec![false; n];
        active[0] = true;
        let mut rounds = 0;
        while active.iter().any(|&b| b) && rounds < n {
            rounds += 1;
            let dist = DenseArray::from_f64(&[n], &d).unwrap();
            let act = DenseArray::from_data(
                ScalarType::Bool,
                &[n],
                active.iter().map(|&b| Value::Bool(b)).collect(),
                Value::Bool(false),
            )
            .unwrap();
            let inputs = [("_D", &dist), ("_F", &act), ("A", &a), ("D", &dist)];
            let mut b = bindings(&inputs);
            p.run_reference(&mut b, &RunOptions::default()).unwrap();
            let mut t = stored(&p, &inputs);
            k.run(&mut t, &HashMap::new()).unwrap();
            let (new_d, new_f) = (t["D"].to_dense().unwrap(), t["F"].to_dense().unwrap());
            assert_eq!(&new_d, b.get("D").unwrap(), "{engine:?} round {rounds}");
            assert_eq!(&new_f, b.get("F").unwrap(), "{engine:?} round {rounds}");
            d = new_d.data.iter().map(|v| v.as_f64().unwrap()).collect();
            active = new_f
                .data
                .iter()
                .map(|v| v.as_bool() == Some(true))
                .collect();
        }
        assert!(rounds > 1);
    }
}

/// Fig. 13 lifecycles, compiled: an input updated in place across three loops.
#[test]
fn fig13_lifecycles_compiled_matches_the_reference() {
    let text = example("fig13_lifecycles.fin");
    let x = DenseArray::from_data(
        ScalarType::I64,
        &[5],
        [3, 0, 7, 1, 2].map(Value::I64).to_vec(),
        Value::I64(0),
    )
    .unwrap();
    let b = reference(&text, &[("x", &x)]);
    for engine in [Engine::Interp, Engine::C] {
        let p = Program::parse(&text).unwrap();
        let mut t = HashMap::from([(
            "x".to_string(),
            Tensor::from_dense(&Format::parse("Dense(Element(0))").unwrap(), &x).unwrap(),
        )]);
        p.compile(engine)
            .unwrap()
            .run(&mut t, &HashMap::new())
            .unwrap();
        assert_eq!(
            &t["y"].to_dense().unwrap(),
            b.get("y").unwrap(),
            "{engine:?}"
        );
        assert_eq!(
            &t["x"].to_dense().unwrap(),
            b.get("x").unwrap(),
            "{engine:?}"
        );
    }
}

/// Looplets §8: concatenation and 1-D convolution by permissive reads, compiled, against
/// the reference.
#[test]
fn concatenation_and_convolution_by_padding_compile() {
    let f = |v: &[f64]| DenseArray::from_f64(&[v.len()], v).unwrap();
    let (a, b) = (f(&[1.0, 0.0, 3.0, 4.0]), f(&[7.0, 0.0, 9.0]));
    let n = int_scalar(4);
    let cases = [
        (
            "concatenate.fin",
            vec![("A", &a), ("B", &b), ("n", &n)],
            ("C", 7usize),
            vec![1.0, 0.0, 3.0, 4.0, 7.0, 0.0, 9.0],
        ),
        (
            "convolution.fin",
            vec![("x", &a), ("w", &b)],
            ("y", 4usize),
            // y[i] = sum_j x[i + j - 2] * w[j], x padded with 0.
            vec![0.0, 7.0 + 27.0, 36.0, 21.0],
        ),
    ];
    for (file, inputs, (out, size), want) in cases {
        let text = example(file);
        let p = Program::parse(&text).unwrap();
        let shapes = HashMap::from([(out.to_string(), vec![size])]);
        let mut bind = bindings(&inputs);
        p.run_reference(
            &mut bind,
            &RunOptions {
                shapes: shapes.clone(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(bind.get(out).unwrap(), &f(&want), "{file} reference");
        for engine in [Engine::Interp, Engine::C] {
            let mut t = stored(&p, &inputs);
            p.compile(engine).unwrap().run(&mut t, &shapes).unwrap();
            assert_eq!(t[out].to_dense().unwrap(), f(&want), "{file} {engine:?}");
        }
    }
}

/// An offset read of a sparse vector walks its stored entries (the level's looplets are
/// shifted), it does not search or visit every index: the work follows the entries.
#[test]
fn an_offset_read_of_a_sparse_level_walks_its_entries() {
    let text = "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i - 1] * 2.0\nend\n";
    let p = Program::parse(text).unwrap();
    let k = p.compile(Engine::Interp).unwrap();
    let ir = k.kernel().to_string();
    assert!(!ir.contains("search("), "no random access: {ir}");
    let n = 10_000;
    let mut v = vec![0.0; n];
    for (k, i) in [3usize, 70, 500, 4_000, 9_999].iter().enumerate() {
        v[*i] = k as f64 + 1.0;
    }
    let x = DenseArray::from_f64(&[n], &v).unwrap();
    let mut t = HashMap::from([(
        "x".to_string(),
        Tensor::from_dense(&Format::parse("SparseList(Element(0.0))").unwrap(), &x).unwrap(),
    )]);
    let stats = k.run(&mut t, &HashMap::new()).unwrap().stats.unwrap();
    assert_eq!(t["s"].get(&[]).unwrap(), Value::F64(30.0));
    assert!(
        stats.iterations < 20,
        "{} iterations for 5 entries",
        stats.iterations
    );
}

/// 2-D convolution with a zero-padded image (both image indices computed and
/// permissive), compiled, against the reference, with a sparse image as well.
#[test]
fn convolution_2d_with_padding_compiles() {
    let text = example("convolution_2d.fin");
    let (h, w) = (7usize, 5usize);
    let img: Vec<f64> = (0..h * w)
        .map(|k| {
            if k % 3 == 0 {
                0.0
            } else {
                (k % 7) as f64 - 2.0
            }
        })
        .collect();
    let img = DenseArray::from_f64(&[h, w], &img).unwrap();
    let filt =
        DenseArray::from_f64(&[3, 3], &[1.0, 2.0, 0.0, -1.0, 4.0, 0.5, 0.0, 1.0, 3.0]).unwrap();
    let p = Program::parse(&text).unwrap();
    let shapes = HashMap::from([("y".to_string(), vec![h, w])]);
    let mut b = Bindings::new();
    b.insert("img", img.clone());
    b.insert("f", filt.clone());
    p.run_reference(
        &mut b,
        &RunOptions {
            shapes: shapes.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    let want = b.get("y").unwrap().clone();
    for image_format in [
        "Dense(Dense(Element(0.0)))",
        "Dense(SparseList(Element(0.0)))",
    ] {
        let q = Program::parse(&text.replace(
            "input  img :: Dense(Dense(Element(0.0)))",
            &format!("input  img :: {image_format}"),
        ))
        .unwrap();
        for engine in [Engine::Interp, Engine::C] {
            let mut t = HashMap::from([
                (
                    "img".to_string(),
                    Tensor::from_dense(&Format::parse(image_format).unwrap(), &img).unwrap(),
                ),
                (
                    "f".to_string(),
                    Tensor::from_dense(
                        &Format::parse("Dense(Dense(Element(0.0)))").unwrap(),
                        &filt,
                    )
                    .unwrap(),
                ),
            ]);
            q.compile(engine).unwrap().run(&mut t, &shapes).unwrap();
            assert_eq!(
                t["y"].to_dense().unwrap(),
                want,
                "{image_format} {engine:?}"
            );
        }
    }
}

/// A 3x3 box blur written out as nine shifted reads (`stencil_box_blur.fin`) equals the
/// 2-D convolution with a filter of ones, compiled, on images of one pixel up; and its C
/// stays small (refused before: each padded read split the loop, 3^9 loops per level).
#[test]
fn box_blur_of_nine_shifted_reads_is_a_convolution_with_ones() {
    let blur = Program::parse(&example("stencil_box_blur.fin")).unwrap();
    let convolution = Program::parse(&example("convolution_2d.fin")).unwrap();
    let dense = Format::parse("Dense(Dense(Element(0.0)))").unwrap();
    let ones = DenseArray::from_f64(&[3, 3], &[1.0; 9]).unwrap();
    let c = finch::backend::c::available();
    let source = blur.compile(Engine::Interp).unwrap();
    let bytes = source
        .c_source(finch::backend::c::CheckMode::Trusted)
        .unwrap()
        .len();
    assert!(bytes < 200_000, "{bytes} B of C");
    for (h, w) in [(1usize, 1usize), (2, 3), (7, 5), (4, 9)] {
        let values: Vec<f64> = (0..h * w).map(|k| ((k * 7) % 11) as f64 - 3.0).collect();
        let img = DenseArray::from_f64(&[h, w], &values).unwrap();
        let shapes = HashMap::from([("y".to_string(), vec![h, w])]);
        let mut want = HashMap::from([
            ("img".to_string(), Tensor::from_dense(&dense, &img).unwrap()),
            ("f".to_string(), Tensor::from_dense(&dense, &ones).unwrap()),
        ]);
        convolution
            .compile(Engine::Interp)
            .unwrap()
            .run(&mut want, &shapes)
            .unwrap();
        let want = want["y"].to_dense().unwrap();
        let engines = if c {
            vec![Engine::Interp, Engine::C]
        } else {
            vec![Engine::Interp]
        };
        for engine in engines {
            let mut t =
                HashMap::from([("img".to_string(), Tensor::from_dense(&dense, &img).unwrap())]);
            blur.compile(engine)
                .unwrap()
                .run(&mut t, &HashMap::new())
                .unwrap();
            assert_eq!(t["y"].to_dense().unwrap(), want, "{h}x{w} {engine:?}");
        }
    }
}

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
