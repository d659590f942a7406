//! The reference interpreter reproduces every test vector of the reference digest
//! (finch-language-and-levels.md §6), running the programs in `examples/`.

use std::path::Path;

use finch::algebra::{ScalarType, Value};
use finch::reference::{Bindings, RunOptions, RunStats};
use finch::{DenseArray, Program};

fn example(name: &str) -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Program::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn ints(v: &[i64]) -> DenseArray {
    DenseArray::from_data(
        ScalarType::I64,
        &[v.len()],
        v.iter().map(|&x| Value::I64(x)).collect(),
        Value::I64(0),
    )
    .unwrap()
}

fn floats(v: &[f64]) -> DenseArray {
    DenseArray::from_f64(&[v.len()], v).unwrap()
}

fn bools(n: usize, set: &[usize]) -> DenseArray {
    let mut a = DenseArray::filled(ScalarType::Bool, &[n], Value::Bool(false)).unwrap();
    for &i in set {
        a.set(&[i - 1], Value::Bool(true)).unwrap();
    }
    a
}

/// A matrix given by rows, as `ty`.
fn matrix(ty: ScalarType, rows: &[&[i64]]) -> DenseArray {
    let m = rows.len();
    let n = rows.first().map_or(0, |r| r.len());
    let mut a = DenseArray::filled(ty, &[m, n], Value::zero_of(ty)).unwrap();
    for (i, r) in rows.iter().enumerate() {
        for (j, &x) in r.iter().enumerate() {
            a.set(&[i, j], Value::I64(x).convert_exact(ty).unwrap())
                .unwrap();
        }
    }
    a
}

fn imat(rows: &[&[i64]]) -> DenseArray {
    matrix(ScalarType::I64, rows)
}

fn fmat(rows: &[&[i64]]) -> DenseArray {
    matrix(ScalarType::F64, rows)
}

fn run(p: &Program, inputs: Vec<(&str, DenseArray)>) -> (Bindings, RunStats) {
    run_with(p, inputs, RunOptions::default())
}

fn run_with(
    p: &Program,
    inputs: Vec<(&str, DenseArray)>,
    opts: RunOptions,
) -> (Bindings, RunStats) {
    let mut b = Bindings::new();
    for (n, a) in inputs {
        b.insert(n, a);
    }
    let stats = p
        .run_reference(&mut b, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    (b, stats)
}

fn get_i64(b: &Bindings, name: &str) -> Vec<i64> {
    b.get(name)
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_i128().unwrap() as i64)
        .collect()
}

fn get_f64(b: &Bindings, name: &str) -> Vec<f64> {
    b.get(name)
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn true_set(b: &Bindings, name: &str) -> Vec<usize> {
    b.get(name)
        .unwrap()
        .data
        .iter()
        .enumerate()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .map(|(i, _)| i + 1)
        .collect()
}

/// Column-major data of a matrix written by rows.
fn by_rows(rows: &[&[i64]]) -> Vec<i64> {
    let n = rows[0].len();
    (0..n)
        .flat_map(|j| rows.iter().map(move |r| r[j]))
        .collect()
}

#[test]
fn fig02_four_strategies_agree() {
    let a = ints(&[1, 0, 2, 3, 0, 4, 5, 6]);
    let b = ints(&[0, 7, 8, 9, 1, 2, 0, 3]);
    let c = vec![0, 0, 0, 27, 0, 8, 0, 18];
    for (file, extra, expected) in [
        ("fig02_even_1.fin", None, None),
        (
            "fig02_even_2.fin",
            Some("ap"),
            Some(vec![0, 0, 0, 3, 0, 4, 0, 6]),
        ),
        (
            "fig02_even_3.fin",
            Some("cp"),
            Some(vec![0, 0, 16, 27, 0, 8, 0, 18]),
        ),
        (
            "fig02_even_4.fin",
            Some("f"),
            Some(vec![0, 1, 0, 1, 0, 1, 0, 1]),
        ),
    ] {
        let mut opts = RunOptions::default();
        opts.shapes.insert("f".into(), vec![8]);
        let (out, _) = run_with(
            &example(file),
            vec![("a", a.clone()), ("b", b.clone())],
            opts,
        );
        assert_eq!(get_i64(&out, "c"), c, "{file}");
        if let (Some(name), Some(v)) = (extra, expected) {
            assert_eq!(get_i64(&out, name), v, "{file}: {name}");
        }
    }
}

#[test]
fn fig07_product_exits_early() {
    let p = example("fig07_product_early_exit.fin");
    let (out, stats) = run(&p, vec![("A", ints(&[2, 3, 0, 5]))]);
    assert_eq!(get_i64(&out, "p"), vec![0]);
    assert_eq!(stats.iterations, 3, "stops right after the zero");
    assert_eq!(stats.early_exits, 1);
    let (out, stats) = run(&p, vec![("A", ints(&[2, 3, 4]))]);
    assert_eq!(get_i64(&out, "p"), vec![24]);
    assert_eq!(stats.iterations, 3);
}

#[test]
fn fig10_offset_over_the_upper_triangle() {
    let (out, _) = run(
        &example("fig10_offset_triangle.fin"),
        vec![("A", imat(&[&[1, 2, 3], &[4, 5, 6], &[7, 8, 9]]))],
    );
    assert_eq!(get_i64(&out, "s"), vec![11]);
}

#[test]
fn fig11_dimensions_are_inferred() {
    let a = imat(&[&[1, 2, 3, 4], &[5, 6, 7, 8], &[9, 10, 11, 12]]);
    let rows: Vec<Vec<i64>> = (1..=4)
        .map(|r| (1..=5).map(|c| 5 * (r - 1) + c).collect())
        .collect();
    let rows_ref: Vec<&[i64]> = rows.iter().map(|r| r.as_slice()).collect();
    let (out, _) = run(
        &example("fig11_dimensionalize.fin"),
        vec![("A", a), ("B", imat(&rows_ref))],
    );
    assert_eq!(out.get("C").unwrap().shape, vec![3, 5]);
    assert_eq!(
        get_i64(&out, "C"),
        by_rows(&[
            &[110, 120, 130, 140, 150],
            &[246, 272, 298, 324, 350],
            &[382, 424, 466, 508, 550]
        ])
    );
}

#[test]
fn fig12_concordization_examples() {
    let (out, _) = run(
        &example("fig12_concordize_sum.fin"),
        vec![("A", imat(&[&[1, 2], &[3, 4]]))],
    );
    assert_eq!(get_i64(&out, "s"), vec![10]);
    let mut opts = RunOptions::default();
    opts.shapes.insert("A".into(), vec![3]);
    let (out, _) = run_with(
        &example("fig12_histogram_scatter.fin"),
        vec![("I", ints(&[2, 1, 2, 3]))],
        opts,
    );
    assert_eq!(get_i64(&out, "A"), vec![1, 2, 1]);
    // Without a shape the indirect write cannot size A: a clear error.
    let mut b = Bindings::new();
    b.insert("I", ints(&[2, 1, 2, 3]));
    let e = example("fig12_histogram_scatter.fin")
        .run_reference(&mut b, &RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("mode 1 of `A`") && e.contains("--shape"), "{e}");
}

#[test]
fn fig13_lifecycles() {
    let (out, _) = run(
        &example("fig13_lifecycles.fin"),
        vec![("x", ints(&[1, 2, 3]))],
    );
    assert_eq!(get_i64(&out, "x"), vec![5, 7, 9]);
    assert_eq!(get_i64(&out, "y"), vec![3, 4, 5]);
}

#[test]
fn fig16_unfurl() {
    let (out, _) = run(
        &example("fig16_unfurl.fin"),
        vec![
            ("B", imat(&[&[1, 0], &[0, 2], &[3, 0]])),
            ("D", ints(&[0, 5])),
        ],
    );
    assert_eq!(get_i64(&out, "C"), by_rows(&[&[4, 5], &[0, 21], &[36, 5]]));
    assert!(out.get("A").is_none(), "temporaries are dropped");
}

#[test]
fn fig17_upper_triangle_sum() {
    let p = example("fig17_upper_triangle_sum.fin");
    for (rows, s) in [
        (vec![vec![1, 0, 2], vec![0, 3, 0], vec![4, 0, 5]], 11),
        (
            vec![vec![1, 0, 2], vec![0, 3, 0], vec![4, 0, 5], vec![6, 7, 8]],
            11,
        ),
        (vec![vec![0, 0, 2], vec![0, 0, 7], vec![4, 0, 5]], 14),
    ] {
        let r: Vec<&[i64]> = rows.iter().map(|r| r.as_slice()).collect();
        let (out, _) = run(&p, vec![("A", imat(&r))]);
        assert_eq!(get_i64(&out, "s"), vec![s]);
    }
}

#[test]
fn fig19_three_spmv_variants() {
    let a = fmat(&[&[1, 0, 2], &[0, 3, 0], &[4, 0, 5]]);
    let x = floats(&[1.0, 2.0, 3.0]);
    let (out, _) = run(
        &example("spmv.fin"),
        vec![("A", a.clone()), ("x", x.clone())],
    );
    assert_eq!(get_f64(&out, "y"), vec![7.0, 6.0, 19.0]);
    let (out, _) = run(
        &example("fig19_spmv_row.fin"),
        vec![("A", a), ("x", x.clone())],
    );
    assert_eq!(get_f64(&out, "y"), vec![13.0, 6.0, 17.0]);
    let upper = fmat(&[&[0, 1, 0], &[0, 0, 4], &[0, 0, 0]]);
    let (out, _) = run(
        &example("fig19_spmv_symmetric.fin"),
        vec![("A", upper), ("D", floats(&[2.0, 3.0, 5.0])), ("x", x)],
    );
    assert_eq!(get_f64(&out, "y"), vec![4.0, 19.0, 23.0]);
}

#[test]
fn fig21_three_spgemm_variants() {
    let a = [&[1, 0, 2][..], &[0, 3, 0]];
    let at = [&[1, 0][..], &[0, 3], &[2, 0]];
    let b = [&[1, 0][..], &[0, 1], &[4, 0]];
    let bt = [&[1, 0, 4][..], &[0, 1, 0]];
    let c = by_rows(&[&[9, 0], &[0, 3]]);
    let (out, _) = run(
        &example("fig21_spgemm_inner.fin"),
        vec![("AT", imat(&at)), ("B", imat(&b))],
    );
    assert_eq!(get_i64(&out, "C"), c);
    let (out, _) = run(
        &example("fig21_spgemm_gustavson.fin"),
        vec![("A", imat(&a)), ("B", imat(&b))],
    );
    assert_eq!(get_i64(&out, "C"), c);
    let (out, _) = run(
        &example("fig21_spgemm_outer.fin"),
        vec![("A", imat(&a)), ("BT", imat(&bt))],
    );
    assert_eq!(get_i64(&out, "C"), c);
}

/// The test graph: 1->2 (4), 1->3 (1), 2->4 (1), 3->4 (5), 4->5 (2).
const EDGES: [(usize, usize, f64); 5] = [
    (1, 2, 4.0),
    (1, 3, 1.0),
    (2, 4, 1.0),
    (3, 4, 5.0),
    (4, 5, 2.0),
];

/// `A[k, j]` true for an edge j -> k (`transpose`: `A[j, k]`).
fn adjacency(transpose: bool) -> DenseArray {
    let mut a = DenseArray::filled(ScalarType::Bool, &[5, 5], Value::Bool(false)).unwrap();
    for (j, k, _) in EDGES {
        let idx = if transpose {
            [j - 1, k - 1]
        } else {
            [k - 1, j - 1]
        };
        a.set(&idx, Value::Bool(true)).unwrap();
    }
    a
}

#[test]
fn fig24_bfs_push_and_pull() {
    for (file, adj_name, transpose) in [
        ("fig24_bfs_push.fin", "A", false),
        ("fig24_bfs_pull.fin", "AT", true),
    ] {
        let p = example(file);
        let mut frontier = vec![1usize];
        let mut visited = bools(5, &[1]);
        let mut parents = ints(&[1, 0, 0, 0, 0]);
        let mut frontiers = Vec::new();
        while !frontier.is_empty() {
            let (out, _) = run(
                &p,
                vec![
                    ("F", bools(5, &frontier)),
                    (adj_name, adjacency(transpose)),
                    ("V", visited.clone()),
                    ("P", parents.clone()),
                ],
            );
            frontier = true_set(&out, "_F");
            parents = out.get("P").unwrap().clone();
            for &k in &frontier {
                visited.set(&[k - 1], Value::Bool(true)).unwrap();
            }
            if frontiers.is_empty() {
                assert_eq!(frontier, vec![2, 3], "{file}: first step");
                assert_eq!(
                    get_i64(&out, "P"),
                    vec![1, 1, 1, 0, 0],
                    "{file}: first step"
                );
            }
            frontiers.push(frontier.clone());
        }
        assert_eq!(
            frontiers,
            vec![vec![2, 3], vec![4], vec![5], vec![]],
            "{file}"
        );
        let mut b = Bindings::new();
        b.insert("P", parents);
        assert_eq!(get_i64(&b, "P"), vec![1, 1, 1, 2, 4], "{file}");
    }
}

#[test]
fn fig24_bfs_pull_stops_at_the_first_parent() {
    // Vertex 4 has parents 2 and 3; with both in the frontier the pull search over j stops
    // at j = 2.
    let (out, stats) = run(
        &example("fig24_bfs_pull.fin"),
        vec![
            ("F", bools(5, &[2, 3])),
            ("AT", adjacency(true)),
            ("V", bools(5, &[1, 2, 3])),
            ("P", ints(&[1, 1, 1, 0, 0])),
        ],
    );
    assert_eq!(get_i64(&out, "P"), vec![1, 1, 1, 2, 0]);
    assert!(stats.early_exits >= 1, "{stats:?}");
}

#[test]
fn fig24_bellman_ford_rounds() {
    let p = example("fig24_bellman_ford.fin");
    let inf = f64::INFINITY;
    let mut a = DenseArray::filled(ScalarType::F64, &[5, 5], Value::F64(inf)).unwrap();
    for (j, i, w) in EDGES {
        a.set(&[i - 1, j - 1], Value::F64(w)).unwrap();
    }
    let a = DenseArray {
        fill: Value::F64(inf),
        ..a
    };
    let mut d = vec![0.0, inf, inf, inf, inf];
    let mut active = vec![1usize];
    let expected = [
        (vec![0.0, 4.0, 1.0, inf, inf], vec![2, 3]),
        (vec![0.0, 4.0, 1.0, 5.0, inf], vec![4]),
        (vec![0.0, 4.0, 1.0, 5.0, 7.0], vec![5]),
        (vec![0.0, 4.0, 1.0, 5.0, 7.0], vec![]),
    ];
    for (round, (want_d, want_f)) in expected.iter().enumerate() {
        let (out, _) = run(
            &p,
            vec![
                ("_D", floats(&d)),
                ("_F", bools(5, &active)),
                ("A", a.clone()),
                ("D", floats(&d)),
            ],
        );
        d = get_f64(&out, "D");
        active = true_set(&out, "F");
        assert_eq!(&d, want_d, "round {}", round + 1);
        assert_eq!(&active, want_f, "round {}", round + 1);
    }
}

fn image(rows: &[&[i64]]) -> DenseArray {
    // img[x, y] with x fast: rows are indexed by y.
    let h = rows.len();
    let w = rows[0].len();
    let mut a = DenseArray::filled(ScalarType::Bool, &[w, h], Value::Bool(false)).unwrap();
    for (y, r) in rows.iter().enumerate() {
        for (x, &v) in r.iter().enumerate() {
            a.set(&[x, y], Value::Bool(v != 0)).unwrap();
        }
    }
    a
}

const IMG: [&[i64]; 4] = [
    &[1, 1, 1, 0, 1, 1],
    &[1, 1, 1, 1, 1, 1],
    &[1, 1, 1, 1, 1, 0],
    &[0, 1, 1, 1, 1, 1],
];
const ERODED: [&[i64]; 4] = [
    &[1, 1, 0, 0, 0, 1],
    &[1, 1, 0, 0, 0, 0],
    &[0, 0, 1, 1, 0, 0],
    &[0, 0, 1, 1, 0, 0],
];

#[test]
fn fig26_erosion_dense_and_bitwise_agree() {
    let (out, _) = run(&example("fig26_erosion.fin"), vec![("img", image(&IMG))]);
    assert_eq!(out.get("out").unwrap(), &image(&ERODED));

    // Bitwise: one 64-bit word per row, LSB = first pixel, pad bits set.
    let word = |r: &[i64]| -> u64 {
        r.iter()
            .enumerate()
            .fold(!0u64 << r.len(), |w, (b, &v)| w | ((v as u64) << b))
    };
    let words: Vec<Value> = IMG.iter().map(|r| Value::U64(word(r))).collect();
    assert_eq!(
        words,
        [
            0xffff_ffff_ffff_fff7u64,
            !0,
            0xffff_ffff_ffff_ffdf,
            0xffff_ffff_ffff_fffe
        ]
        .map(Value::U64)
    );
    let img = DenseArray::from_data(ScalarType::U64, &[1, 4], words, Value::U64(0)).unwrap();
    let (out, _) = run(&example("fig26_erosion_bitwise.fin"), vec![("img", img)]);
    let got: Vec<u64> = out
        .get("out")
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_i128().unwrap() as u64)
        .collect();
    assert_eq!(
        got,
        vec![
            0xffff_ffff_ffff_ffe3,
            0xffff_ffff_ffff_ff83,
            0xffff_ffff_ffff_ff8c,
            0xffff_ffff_ffff_ff8c
        ]
    );
    // And bit for bit equal to the dense result (low 6 bits of each word).
    for (y, r) in ERODED.iter().enumerate() {
        assert_eq!(got[y] & 0x3f, word(r) & 0x3f, "row {}", y + 1);
    }
}

#[test]
fn fig26_masked_histogram() {
    let img = matrix(ScalarType::U8, &[&[0, 17, 255], &[16, 31, 200]]);
    let mask = matrix(ScalarType::Bool, &[&[1, 1, 0], &[0, 1, 1]]);
    let mut opts = RunOptions::default();
    opts.shapes.insert("bins".into(), vec![16]);
    let (out, _) = run_with(
        &example("fig26_histogram.fin"),
        vec![("img", img), ("mask", mask)],
        opts,
    );
    let mut want = vec![0i64; 16];
    want[0] = 1;
    want[1] = 2;
    want[12] = 1;
    assert_eq!(get_i64(&out, "bins"), want);
}
