//! The paper's programs through the compiler: Fig. 10 (an offset read over the upper
//! triangle), Fig. 26 erosion (permissive reads padded with `true`) in its run-length,
//! dense and bitwise forms and its masked histogram, Fig. 2's four strategies, Fig. 24's
//! graph kernels, Fig. 13's lifecycles, and the Looplets paper's concatenation,
//! convolutions and box blur, against the reference interpreter, direct
//! implementations, and each other, bit for bit.

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program, ScalarType, Value};

mod common;
use common::programs::*;

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
