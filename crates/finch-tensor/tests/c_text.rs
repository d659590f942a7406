//! The code generated for loops over rows: the C of reassociated kernels (AVX-512 and AVX2
//! copies, contiguous vector loads), rows run four at a time in order, prefetches and
//! strips, and the clamps and clipping of band and block rows in the kernel IR. Where the
//! kernels run, their results are checked against the reference.

mod common;

use std::collections::HashMap;

use finch::engine::{CompileOptions, Engine};
use finch::formats::Format;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::{DenseArray, Program};

use common::*;

#[test]
fn reassociated_spmv_runs_eight_positions_at_a_time() {
    // Row-major SpMV over 32- and 64-bit indices: with `reassociate` the walk over a row's
    // entries becomes masked AVX-512 loads and gathers (chosen at run time where the CPU
    // has AVX-512); without it, the C keeps the scalar loop. Both match the reference
    // (integer-valued data: every summation order is exact).
    for format in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseList{UInt32}(Element(0.0)))",
    ] {
        let text = format!("input A :: {format}\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n");
        let p = Program::parse(&text).unwrap();
        let strict = p.compile(Engine::C).unwrap();
        let fast = p
            .compile_with(
                Engine::C,
                &CompileOptions {
                    reassociate: true,
                    ..Default::default()
                },
            )
            .unwrap();
        if fast.engine() != Engine::C {
            return; // no C compiler: nothing to look at
        }
        let mode = finch::backend::c::CheckMode::Trusted;
        assert!(!strict.c_source(mode).unwrap().contains("_mm512"));
        let c = fast.c_source(mode).unwrap();
        assert!(
            c.contains("_mm512_mask_i64gather_pd") && c.contains("__builtin_cpu_supports"),
            "{c}"
        );
        let (m, n) = (157, 203);
        let a = DenseArray::from_f64(&[m, n], &data(m * n, 0.07, 11)).unwrap();
        let x = DenseArray::from_f64(&[m], &data(m, 0.9, 12)).unwrap();
        let mut dense = Bindings::new();
        dense.insert("A", a.clone());
        dense.insert("x", x.clone());
        p.run_reference(&mut dense, &RunOptions::default()).unwrap();
        let mut t = HashMap::from([
            (
                "A".to_string(),
                Tensor::from_dense(&Format::parse(format).unwrap(), &a).unwrap(),
            ),
            (
                "x".to_string(),
                Tensor::from_dense(&Format::parse("Dense(Element(0.0))").unwrap(), &x).unwrap(),
            ),
        ]);
        fast.run(&mut t, &HashMap::new()).unwrap();
        assert_eq!(&t["y"].to_dense().unwrap(), dense.get("y").unwrap());
    }
}

/// The C of row-major SpMV over `Dense(<level>(Element))` compiled with `reassociate`
/// (`None` where no C compiler is available).
fn reassociated_row_spmv_c(level: &str) -> Option<String> {
    row_spmv_c(level, true)
}

fn row_spmv_c(level: &str, reassociate: bool) -> Option<String> {
    let text = format!("input A :: Dense({level}(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n");
    let k = Program::parse(&text)
        .unwrap()
        .compile_with(
            Engine::C,
            &CompileOptions {
                reassociate,
                ..Default::default()
            },
        )
        .unwrap();
    (k.engine() == Engine::C).then(|| k.c_source(finch::backend::c::CheckMode::Trusted).unwrap())
}

/// The lengths of the strips the strips pass made (`kernel/passes/strips.rs`) as the C
/// prints them, in order: a `for` loop from 0 over a local named `..._strip`.
fn strip_lengths(c: &str) -> Vec<i64> {
    c.lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once("{ int64_t lo_")?;
            let (n, rest) = rest.split_once(" = INT64_C(0); int64_t hi_")?;
            let decl = format!("int64_t v{n} = 0; /* ");
            let strip = c
                .lines()
                .any(|d| d.trim_start().starts_with(&decl) && d.trim_end().ends_with("_strip */"));
            let len = rest.split_once("= INT64_C(")?.1.split_once(')')?.0;
            strip.then(|| len.parse().ok()).flatten()
        })
        .collect()
}

/// The AVX-512 copy of a kernel in C (from its name to the end of its body), if it has one.
fn avx512_copy(c: &str) -> Option<&str> {
    vector_copy(c, "avx512")
}

#[test]
fn reassociated_block_rows_reduce_once_per_row() {
    // A SparseBlockList row is several blocks: with `reassociate`, each block's loop adds
    // into one vector of partial sums held across the row, reduced once after it.
    let Some(c) = reassociated_row_spmv_c("SparseBlockList") else {
        return;
    };
    let simd = avx512_copy(&c).expect("an AVX-512 copy");
    assert_eq!(simd.matches("_mm512_reduce_add_pd").count(), 1, "{simd}");
    // Each product adds into the partial sums in one fused multiply-add.
    assert!(simd.contains("_mm512_mask3_fmadd_pd("), "{simd}");
    assert!(!simd.contains("_mm512_mul_pd("), "{simd}");
    let held = simd.find("_mm512_setzero_pd").expect("a held vector");
    let walk = simd.find("while (1)").expect("the walk over blocks");
    assert!(
        held < walk,
        "the vector is declared before the walk over blocks:\n{simd}"
    );
}

/// The copy of a kernel in C named `_{isa}` (`avx512`, `avx2`, `scalar`; from its name to
/// the end of its body), if it has one.
fn vector_copy<'c>(c: &'c str, isa: &str) -> Option<&'c str> {
    let from = c.find(&format!("_{isa}("))?;
    let simd = &c[from..];
    Some(&simd[..simd.find("\n}\n").unwrap_or(simd.len())])
}

#[test]
fn avx2_copies_take_contiguous_rows_only() {
    // CPUs with AVX2 but not AVX-512 get a third copy: a block row adds its blocks' groups
    // of four into held partial sums (reduced once per row), a band row reads contiguous
    // runs; a SparseList row would need gathers, which AVX2 runs slower than scalar loads,
    // so CSR gets no AVX2 copy.
    let Some(blocks) = reassociated_row_spmv_c("SparseBlockList") else {
        return;
    };
    let simd = vector_copy(&blocks, "avx2").expect("an AVX2 copy");
    assert_eq!(simd.matches("finch_hsum4_pd(").count(), 1, "{simd}");
    assert!(simd.contains("_mm256_fmadd_pd("), "{simd}");
    assert!(!simd.contains("_mm512"), "{simd}");
    // The positions left after the groups run in the scalar loop that follows.
    let rest = &simd[simd.find("AVX2: 8, then 4").expect("a vectorized loop")..];
    assert!(rest.contains("for (; v"), "{simd}");
    assert!(
        blocks.contains("__builtin_cpu_supports(\"avx2\")"),
        "{blocks}"
    );
    let band = reassociated_row_spmv_c("SparseBand").expect("a C compiler");
    let simd = vector_copy(&band, "avx2").expect("an AVX2 copy");
    assert!(
        simd.contains("_mm256_loadu_pd(") && !simd.contains("gather"),
        "{simd}"
    );
    let csr = reassociated_row_spmv_c("SparseList").expect("a C compiler");
    assert!(vector_copy(&csr, "avx512").is_some(), "{csr}");
    assert!(vector_copy(&csr, "avx2").is_none(), "{csr}");
}

#[test]
fn pattern_rows_vectorize_like_valued_ones() {
    // A Pattern leaf reads `true`: `f64(true) * x[i]` folds to `x[i]` (exact), so the
    // row's loop has no cast left and runs as AVX-512 gathers like a valued one.
    let text = "input A :: Dense(SparseList(Pattern()))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[j] += A[i, j] * x[i]\nend\n";
    let k = Program::parse(text)
        .unwrap()
        .compile_with(
            Engine::C,
            &CompileOptions {
                reassociate: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(!k.kernel().to_string().contains("true"), "{}", k.kernel());
    if k.engine() != Engine::C {
        return;
    }
    let c = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
    assert!(c.contains("_mm512_mask_i64gather_pd"), "{c}");
}

#[test]
fn reassociated_band_rows_are_contiguous_vector_loads() {
    // A SparseBand row is a dense run: with `reassociate`, its `for` loop reads the values
    // and `x` with masked vector loads, no gathers.
    let Some(c) = reassociated_row_spmv_c("SparseBand") else {
        return;
    };
    let vector = &c[c.find("AVX-512: 8 positions").expect("a vectorized loop")..];
    assert!(vector.contains("_mm512_maskz_loadu_pd"), "{c}");
    assert!(!vector.contains("gather"), "{c}");
}

/// A SparseBand row over the whole level runs from the index before its block to its
/// last index with no clamping to the level's size: invariants I3-I4 and one clamp of
/// `last` keep both inside. The fill around the block is still visited exactly, for empty
/// rows whose `idx` is any value I4 allows and for a level of size 0.
#[test]
fn band_rows_need_no_clamps_and_their_fill_stays_inside() {
    let text = "input A :: Dense(SparseBand(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] + x[j]\nend\n";
    let p = Program::parse(text).unwrap();
    let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
    assert_eq!(ir.matches("min(").count(), 1, "{ir}");
    assert_eq!(ir.matches("max(").count(), 0, "{ir}");
    let band = Format::parse("Dense(SparseBand(Element(0.0)))").unwrap();
    // Columns (rows of the loop): a band, an empty row, a full row, an empty row.
    let rows = DenseArray::from_f64(
        &[5, 4],
        &[
            0.0, 1.0, 2.0, 0.0, 0.0, //
            0.0, 0.0, 0.0, 0.0, 0.0, //
            3.0, 4.0, 5.0, 6.0, 7.0, //
            0.0, 0.0, 0.0, 0.0, 0.0,
        ],
    )
    .unwrap();
    let x = DenseArray::from_f64(&[5], &[1.0, 10.0, 100.0, 1000.0, 10000.0]).unwrap();
    let empty = DenseArray::from_f64(&[0, 3], &[]).unwrap();
    let none = DenseArray::from_f64(&[0], &[]).unwrap();
    for (a, x, empty_idx) in [
        (&rows, &x, 5),
        (&rows, &x, 0),
        (&rows, &x, 3),
        (&empty, &none, 0),
    ] {
        // Every empty row's `idx` set to `empty_idx` (I4: at most the size).
        let (f, shape, storage) = Tensor::from_dense(&band, a).unwrap().into_parts();
        let finch::tensor::TensorStorage::Levels(finch::formats::LevelStorage::Dense(mut root)) =
            storage
        else {
            panic!("a Dense root")
        };
        let finch::formats::LevelStorage::SparseBand(b) = root.child.as_mut() else {
            panic!("a SparseBand level")
        };
        for r in 0..b.idx.len() {
            if b.ofs[r] == b.ofs[r + 1] {
                b.idx[r] = empty_idx;
            }
        }
        let storage =
            finch::tensor::TensorStorage::Levels(finch::formats::LevelStorage::Dense(root));
        let stored = Tensor::from_parts(f, shape, storage).unwrap();
        let what = format!("empty rows at {empty_idx}");
        engines_match_reference(&p, &[("A", a), ("x", x)], &[("A", stored)], &what);
    }
}

/// A walk over a SparseBlockList row from index 1 starts each block's loop at the block's
/// first index with no clipping and no test (blocks are sorted, disjoint and never empty);
/// a walk that starts inside a block (a window or a mask from 3, a shifted read) still
/// clips it.
#[test]
fn block_rows_from_the_start_need_no_clipping_and_ranges_inside_blocks_still_clip() {
    let programs = [
        ("for i = _, j = _\n  y[i] += A[j, i] * x[j]\nend", true),
        (
            "for i = _, j = _\n  y[i] += A[(3:6)(j), i] * x[(3:6)(j)]\nend",
            false,
        ),
        (
            "for i = _, j = _\n  if j >= 3\n    y[i] += A[j, i] * x[j]\n  end\nend",
            false,
        ),
        (
            "for i = _, j = _\n  y[i] += coalesce(A[~(j + 2), i], 0.0) * x[j]\nend",
            false,
        ),
    ];
    // Rows (loop `i`) of length 7 with blocks 2..=5, 1..=2 and 4..=7, 3..=3, none.
    let rows = DenseArray::from_f64(
        &[7, 4],
        &[
            0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0, //
            5.0, 6.0, 0.0, 7.0, 8.0, 9.0, 10.0, //
            0.0, 0.0, 11.0, 0.0, 0.0, 0.0, 0.0, //
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ],
    )
    .unwrap();
    let x = DenseArray::from_f64(&[7], &[1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]).unwrap();
    for (body, whole) in programs {
        let text = format!("input A :: Dense(SparseBlockList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\n{body}\n");
        let p = Program::parse(&text).unwrap();
        let ir = p.compile(Engine::Interp).unwrap().kernel().to_string();
        assert_eq!(!ir.contains("max("), whole, "{ir}");
        engines_match_reference(&p, &[("A", &rows), ("x", &x)], &[], &text);
    }
}

/// A strict row loop over long rows runs four rows at a time, and each row still adds its
/// terms one at a time in order: the compiled result equals the reference's and the
/// interpreter's exactly, on rows long and short, empty rows, and a number of rows that
/// leaves none, one, two or three to run alone at the end. The first, middle and last rows
/// decide between the plain loop (all three shorter than 8), the joint loop (one of 8 to
/// 15 at most) and the joint loop in strips with prefetch (one of 16 or more). The rows of
/// a band (whose inner loop runs under a test for an empty row) and of a dense matrix (no
/// test; 12 columns: the joint loop, 40: in strips).
#[test]
fn long_rows_run_four_at_a_time_in_order() {
    for (level, n) in [("SparseBand", 90), ("Dense", 12), ("Dense", 40)] {
        rows_run_four_at_a_time_in_order(level, n);
    }
}

fn rows_run_four_at_a_time_in_order(level: &str, n: usize) {
    let text = format!("input A :: Dense({level}(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n");
    let p = Program::parse(&text).unwrap();
    let k = p.compile(Engine::C).unwrap();
    if k.engine() == Engine::C {
        // The jam pass's rows (`kernel/passes/jam.rs`): a fourth row's own copies, and
        // the joint loop twice, with strips (kept a loop in C) and without.
        let ir = finch::kernel::passes::run(k.kernel()).to_string();
        assert!(ir.contains(" i_row3\n"), "{ir}");
        let joint = ir
            .lines()
            .filter(|l| l.trim_start().starts_with("while ") && l.ends_with(" >= 4)"))
            .count();
        assert_eq!(joint, 2, "{ir}");
        assert_eq!(ir.matches("hint no_unroll").count(), 1, "{ir}");
        let c = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
        assert!(c.contains("_Pragma(\"GCC unroll 1\")\n"), "{c}");
        // Each row loads its matrix values and `x` through a pointer of its own (hinted at
        // both joint loops).
        assert_eq!(ir.matches("hint row_pointer").count(), 16, "{ir}");
        let pointers: Vec<&str> = c
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("const double *r"))
            .filter(|l| !l.starts_with("estrict"))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert_eq!(pointers.len(), 8, "{c}");
        for r in pointers {
            assert!(c.contains(&format!("r{r}[")), "{c}");
        }
    }
    let mut value = order_sensitive_values();
    // Widths of the first, middle (`m / 2`) and last rows, over `m` rows.
    for (m, (first, middle, last)) in [41usize, 42, 43, 44].into_iter().flat_map(|m| {
        [
            (70usize, 1, 33),
            (3, 1, 33),
            (3, 70, 3),
            (3, 1, 3),
            (3, 12, 3),
            (9, 1, 15),
        ]
        .map(|w| (m, w))
    }) {
        let mut data = vec![0.0; n * m];
        for r in 0..m {
            let width = match r {
                0 => first,
                _ if r == m / 2 => middle,
                _ if r == m - 1 => last,
                // Groups of four rows all long (strips, then a rest), mixed, and of 8 to
                // 15 entries.
                _ => [
                    40, 70, 33, 50, 0, 3, 70, 1, 45, 60, 38, 29, 11, 9, 15, 8, 11, 0, 12, 10,
                ][r % 20],
            };
            let start = (r * 7) % (n - width.min(n - 1));
            for j in start..(start + width).min(n) {
                data[r * n + j] = value();
            }
        }
        spmv_matches_reference(
            &p,
            (n, m, &data),
            &format!(
                "{level}, {m} rows of {n}; first, middle, last rows {first}, {middle}, {last}"
            ),
        );
    }
}

/// `p`, an SpMV over `A` (`n` x `m`, dense values `data`) and `x`, gives the reference's
/// `y` on both engines.
fn spmv_matches_reference(p: &Program, (n, m, data): (usize, usize, &[f64]), what: &str) {
    let a = DenseArray::from_f64(&[n, m], data).unwrap();
    let xs: Vec<f64> = (0..n).map(|j| 1.0 + (j % 13) as f64 / 7.0).collect();
    let x = DenseArray::from_f64(&[n], &xs).unwrap();
    engines_match_reference(p, &[("A", &a), ("x", &x)], &[], what);
}

/// Pseudo-random values of magnitudes from 1e-8 to 1e8 and both signs: a sum of them in
/// another order than the reference's differs.
fn order_sensitive_values() -> impl FnMut() -> f64 {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 11
    };
    move || {
        let mag = 10f64.powi((next() % 17) as i32 - 8);
        let sign = if next() % 2 == 0 { 1.0 } else { -1.0 };
        sign * mag * (1.0 + (next() % 1000) as f64 / 1000.0)
    }
}

#[test]
fn block_rows_run_four_at_a_time_along_their_walks() {
    // Strict SpMV over SparseBlockList rows: where the probed rows' blocks hold 8 entries
    // or more on average, four rows run their blocks together, stretch by stretch, each
    // row moving on to its next block where its block ends; every row's additions stay in
    // order, so y is the reference's bit for bit.
    let text = "input A :: Dense(SparseBlockList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += A[j, i] * x[j]\nend\n";
    let p = Program::parse(text).unwrap();
    let k = p.compile(Engine::C).unwrap();
    if k.engine() == Engine::C {
        // The jam pass's walks (`kernel/passes/walks.rs`): a fourth row's own flag, the
        // joint loop four and two rows at a time, the latter in strips kept a loop in C.
        let ir = finch::kernel::passes::run(k.kernel()).to_string();
        assert!(ir.contains(" j_active3\n"), "{ir}");
        for group in [4, 2] {
            let joint = format!(" >= {group})");
            assert!(
                ir.lines()
                    .any(|l| l.trim_start().starts_with("while ") && l.ends_with(&joint)),
                "{ir}"
            );
        }
        assert_eq!(ir.matches("hint no_unroll").count(), 1, "{ir}");
        let c = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
        assert!(c.contains("_Pragma(\"GCC unroll 1\")\n"), "{c}");
    }
    let mut value = order_sensitive_values();
    // Each row's blocks (lengths), placed left to right with gaps of 1 to 3 columns: rows
    // without blocks, of one block, of many, of blocks of one entry, a full row, blocks
    // ending at the last column; in groups of four rows that end their walks together
    // and apart. Long blocks (the joint loop runs) and short ones (the plain loop runs).
    let long: &[&[usize]] = &[
        &[40],
        &[],
        &[10, 25, 12],
        &[1, 30, 2, 1],
        &[9],
        &[8, 20, 13, 17, 11],
        &[160],
        &[50, 3],
        &[12, 12, 12, 12],
        &[33, 1, 1, 1, 40],
        &[20, 20],
    ];
    let short: &[&[usize]] = &[&[1, 2, 1], &[3], &[], &[2, 2, 2, 2, 2], &[1]];
    // Over 524288 entries in all (estimated from 16 rows): two rows at a time, in strips.
    let far: &[&[usize]] = &[&[50, 50, 50, 50], &[45, 48, 47, 50], &[50, 1, 50, 49, 40]];
    for (blocks, what, n, counts) in [
        (long, "long blocks", 160, &[41usize, 42, 43, 44][..]),
        (short, "short blocks", 160, &[41, 42, 43, 44]),
        (far, "long blocks, many rows", 240, &[3301, 3302]),
    ] {
        for &m in counts {
            let mut data = vec![0.0; n * m];
            for r in 0..m {
                let mut j = r % 5;
                for len in blocks[(r * 7 + m) % blocks.len()] {
                    let start = j.min(n - 1);
                    let end = (start + len).min(n);
                    for c in start..end {
                        data[r * n + c] = value();
                    }
                    j = end + 1 + r % 3;
                }
            }
            spmv_matches_reference(&p, (n, m, &data), &format!("{m} rows of {n}, {what}"));
        }
    }
}

#[test]
fn loops_prefetch_the_loads_that_move_on() {
    // A band row's values (positions in the level) are prefetched ahead; `x`, read at the
    // row's own coordinates and again by the next rows, is not. A walk over a SparseList
    // row prefetches its index and value streams; `x` is gathered (or loaded at `idx`).
    // Vectorized loops prefetch once per group of eight positions; the scalar loops of a
    // kernel that keeps its order, once per strip of eight iterations.
    // The buffers prefetched (each once, in order of first mention).
    let prefetched = |c: &str| -> Vec<String> {
        c.lines()
            .filter(|l| l.contains("__builtin_prefetch"))
            .map(|l| {
                let name = |p: &str| {
                    c.lines()
                        .find(|d| d.contains(&format!(" *restrict {p} = ")))
                        .and_then(|d| d.rsplit("/* ").next())
                        .map(|n| n.trim_end_matches(" */").to_string())
                };
                // Rows run together read (and prefetch) through pointers of their own,
                // `const T *b.. = pN + ...`.
                let buffer = |p: &str| {
                    c.lines()
                        .find_map(|d| d.trim().split_once(&format!(" *{p} = ")))
                        .and_then(|(_, rest)| rest.split(' ').next())
                        .map_or(p.to_string(), str::to_string)
                };
                let at = l.split("(uintptr_t)(").nth(1).expect("an address");
                name(&buffer(at.split(' ').next().unwrap_or(""))).expect("a buffer")
            })
            .fold(Vec::new(), |mut seen, b| {
                if !seen.contains(&b) {
                    seen.push(b);
                }
                seen
            })
    };
    for reassociate in [true, false] {
        let Some(band) = row_spmv_c("SparseBand", reassociate) else {
            return;
        };
        assert_eq!(prefetched(&band), ["A_lvl3_val"], "{band}");
        let list = row_spmv_c("SparseList", reassociate).expect("C");
        assert_eq!(prefetched(&list), ["A_lvl2_idx", "A_lvl3_val"], "{list}");
        if !reassociate {
            assert!(!list.contains("_mm512"), "{list}");
            // The walk's strips; the band's: those of its rows left alone (the plain copy,
            // the last rows after each of the jam pass's two joint loops) and the strip of
            // four rows in the joint loop that has them.
            assert_eq!(strip_lengths(&list), [8], "{list}");
            assert_eq!(strip_lengths(&band), [8, 8, 8, 8], "{band}");
        }
        // The last iterations of a band row, after its strips, run scalar: an empty asm
        // keeps cc from vectorizing a loop of at most seven iterations. A block's, in the
        // walk over a row's blocks, keep cc's vector pairs. A reassociating kernel's
        // AVX-512 copy has no strips (its loops run eight lanes at a time); its AVX2
        // copy's scalar rest after groups of four is kept scalar too.
        assert!(band.contains("__asm__(\"\");"), "{band}");
        assert!(
            !avx512_copy(&band).unwrap_or("").contains("__asm__"),
            "{band}"
        );
        let blocks = row_spmv_c("SparseBlockList", reassociate).expect("C");
        assert!(blocks.contains("__builtin_prefetch"), "{blocks}");
        let scalar = vector_copy(&blocks, "scalar").unwrap_or(&blocks);
        assert!(!scalar.contains("__asm__"), "{blocks}");
        if reassociate {
            let avx2 = vector_copy(&blocks, "avx2").expect("an AVX2 copy");
            assert!(avx2.contains("__asm__(\"\");"), "{blocks}");
        }
        // A loop no loop encloses prefetches every load that moves on with it: the
        // SparsePoint rows' `idx` and values, at the row's own position (`y` is written
        // and `x` is read at the stored index).
        let point = row_spmv_c("SparsePoint", reassociate).expect("C");
        assert_eq!(prefetched(&point), ["A_lvl2_idx", "A_lvl3_val"], "{point}");
    }
}

#[test]
fn strips_cover_a_cache_line_of_their_widest_stream() {
    // A strip covers one cache line of the widest stream it prefetches, and every stream is
    // prefetched two kilobytes ahead: Fig. 26's dense erosion reads bytes (`bool`), in
    // strips of 64 that cc runs as vectors, prefetching 2048 elements ahead (strips of
    // eight, 256 bytes ahead, made it four times slower). A row of SparseList{UInt32}
    // keeps strips of eight for its `f64` values and prefetches its `u32` indices 512
    // elements ahead.
    let k = Program::parse(include_str!("../../../examples/fig26_erosion_dense.fin"))
        .unwrap()
        .compile_with(Engine::C, &CompileOptions::default())
        .unwrap();
    if k.engine() != Engine::C {
        return;
    }
    let erosion = k.c_source(finch::backend::c::CheckMode::Trusted).unwrap();
    let strips = strip_lengths(&erosion);
    assert!(strips.contains(&64) && !strips.contains(&8), "{erosion}");
    assert!(erosion.contains(") + 2048u * sizeof(*"), "{erosion}");
    assert!(!erosion.contains(") + 256u * sizeof(*"), "{erosion}");
    let list = row_spmv_c("SparseList{UInt32}", false).expect("C");
    assert_eq!(strip_lengths(&list), [8], "{list}");
    let ahead = |c: &str, n: &str| {
        c.lines()
            .filter(|l| l.contains(&format!(") + {n}u * sizeof(*")))
            .count()
    };
    assert_eq!((ahead(&list, "512"), ahead(&list, "256")), (1, 1), "{list}");
}
