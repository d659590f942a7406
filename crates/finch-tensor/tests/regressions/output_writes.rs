//! Writes into sparse outputs: what each index ends up holding, and that a value equal to
//! the fill is never stored (see `main.rs` for the harness).

use super::*;

/// The one-mode output levels over an Element leaf (`{}(Element(0.0))`).
const VECTOR_LEVELS: [&str; 11] = [
    "SparseList",
    "SparsePoint",
    "SparseInterval",
    "SparseBand",
    "SparseBlockList",
    "RunList",
    "SparseRunList",
    "SparseCOO{1}",
    "SparseByteMap",
    "SparseHash",
    "Dense",
];

/// The formats the matrix `X` of the tests is read in: sparse and dense columns.
const MATRIX_INPUTS: [&str; 2] = [
    "Dense(SparseList(Element(0.0)))",
    "Dense(Dense(Element(0.0)))",
];

/// Issue #27, reproducer 10: `y[i] *= x[i]` into a zero SparseInterval computes the fill
/// at every index, and a SparseInterval or SparsePoint output recorded it as an entry (an
/// interval of explicit zeros) where the reference stores nothing. So does a sum that
/// comes back to the fill (`5 + -5`).
#[test]
fn point_and_interval_outputs_do_not_store_a_computed_fill() {
    for level in ["SparseInterval", "SparsePoint"] {
        for input in ["Dense(Element(0.0))", "SparseList(Element(0.0))"] {
            let text = format!(
                "input x :: {input}\noutput y :: {level}(Element(0.0))\ny .= 0\nfor i = _\n  y[i] *= x[i]\nend\n"
            );
            let out = agree(&text, &[("x", array(&[4], &[1.0, 0.0, 2.0, 3.0]))]);
            assert_eq!(out["y"], array(&[4], &[0.0; 4]), "{text}");
        }
    }
    // Column 1 sums to 0 (the fill), column 2 to 7.
    let x = array(&[2, 2], &[5.0, -5.0, 0.0, 7.0]);
    for level in VECTOR_LEVELS {
        for input in MATRIX_INPUTS {
            let text = format!(
                "input X :: {input}\noutput w :: {level}(Element(0.0))\nw .= 0\nfor j = _, i = _\n  w[j] += X[i, j]\nend\n"
            );
            let out = agree(&text, &[("X", x.clone())]);
            assert_eq!(out["w"], array(&[2], &[0.0, 7.0]), "{text}");
        }
    }
}

/// Issue #27, reproducer 1: `w[j] = X[i, j]` inside a loop over `i` writes each `w[j]`
/// once per row, and the last write wins, also where it is the fill: over `X = [5 0; 0 7]`
/// that is `[0, 7]`. The compiled engines skipped the fill as a write that claims nothing
/// and kept 5; with a Dense input, SparsePoint and SparseInterval outputs skipped the 0
/// read at run time (over `[5 0; 0 0]`, where no second index of the fiber sends the
/// program to the run that records entries). Under an `if`, only the rows it takes write.
#[test]
fn the_last_write_of_an_index_wins_when_it_is_the_fill() {
    for level in VECTOR_LEVELS {
        for input in MATRIX_INPUTS {
            let text = format!(
                "input X :: {input}\noutput w :: {level}(Element(0.0))\nw .= 0\nfor j = _, i = _\n  w[j] = X[i, j]\nend\n"
            );
            let out = agree(&text, &[("X", array(&[2, 2], &[5.0, 0.0, 0.0, 7.0]))]);
            assert_eq!(out["w"], array(&[2], &[0.0, 7.0]), "{text}");
            let out = agree(&text, &[("X", array(&[2, 2], &[5.0, 0.0, 0.0, 0.0]))]);
            assert_eq!(out["w"], array(&[2], &[0.0, 0.0]), "{text}");
            // Rows 2 and 3 write: column 1 is 5 then 0, column 2 is 0 then 7.
            let text = format!(
                "input X :: {input}\noutput w :: {level}(Element(0.0))\nw .= 0\nfor j = _, i = _\n  if i >= 2\n    w[j] = X[i, j]\n  end\nend\n"
            );
            let x = array(&[3, 2], &[1.0, 5.0, 0.0, 1.0, 0.0, 7.0]);
            let out = agree(&text, &[("X", x)]);
            assert_eq!(out["w"], array(&[2], &[0.0, 7.0]), "{text}");
        }
    }
}

/// Reproducer 1 over Bool and Pattern outputs: `w[j] = j > i` for `i` in `1:2` is true
/// at `j = 2` for `i = 1` and false for `i = 2`, the last write. A Pattern level records
/// what is claimed, so writing `false` must take a claim back.
#[test]
fn bool_and_pattern_outputs_take_back_an_index_last_written_false() {
    let levels = [
        "SparseList(Element(false))",
        "SparseList(Pattern())",
        "SparseCOO{1}(Pattern())",
        "SparsePoint(Element(false))",
        "SparseInterval(Element(false))",
        "SparseBand(Element(false))",
        "SparseBlockList(Element(false))",
        "RunList(Element(false))",
        "SparseRunList(Element(false))",
        "SparseByteMap(Pattern())",
        "SparseHash(Pattern())",
    ];
    for level in levels {
        let text =
            format!("output w :: {level}\nw .= false\nfor j = 1:3, i = 1:2\n  w[j] = j > i\nend\n");
        let out = agree(&text, &[]);
        let want = [false, false, true].map(finch::Value::Bool);
        assert_eq!(out["w"].data, want, "{text}");
    }
}

/// Reproducer 1 two levels deep: `C[i, j] = T[k, i, j]` inside a loop over `k` keeps
/// `T[2, i, j]`, the fill at (1, 1) and (2, 2) after values other than the fill.
#[test]
fn matrix_outputs_keep_the_last_write_of_an_inner_loop() {
    let outputs = [
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparsePoint(Element(0.0)))",
        "Dense(SparseInterval(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "Dense(SparseBlockList(Element(0.0)))",
        "Dense(RunList(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
        "Dense(SparseHash(Element(0.0)))",
    ];
    // T[k, i, j], k fastest.
    let t = array(&[2, 2, 2], &[5.0, 0.0, 3.0, 4.0, 0.0, 6.0, 2.0, 0.0]);
    for output in outputs {
        for input in [
            "Dense(Dense(SparseList(Element(0.0))))",
            "Dense(Dense(Dense(Element(0.0))))",
        ] {
            let text = format!(
                "input T :: {input}\noutput C :: {output}\nC .= 0\nfor j = _, i = _, k = _\n  C[i, j] = T[k, i, j]\nend\n"
            );
            let out = agree(&text, &[("T", t.clone())]);
            assert_eq!(out["C"], array(&[2, 2], &[0.0, 4.0, 6.0, 0.0]), "{text}");
        }
    }
}

/// Issue #27, reproducer 2: `y[i] = A[i]` and `y[~(i + 2)] = 9.0` in one loop body. The
/// shifted write is concordized into a loop of its own inside the statements of index
/// `i`, and it shared the level's claim flag (and a hash table's entry) with the write
/// at `i`: it found index `i` claimed and wrote 9 into `y[i]` (SparseHash), or its record
/// took the flag of `i` (SparseByteMap: "I7 ... unset but stores a value"). Each write
/// at `i` comes after the shifted write that hit it, in either order, so `y` is `A`. The
/// same with loops: `w[i]` written inside the statements of index `j` of `w[j]` (a
/// SparseHash output added `w[j]`'s 1 into the entry of `w[i]`).
#[test]
fn a_write_nested_in_another_writes_index_claims_its_own_entry() {
    let outputs = [
        "SparseHash",
        "SparseByteMap",
        "SparseList",
        "SparseCOO{1}",
        "Dense",
    ];
    let bodies = [
        "  y[i] = A[i]\n  y[~(i + 2)] = 9.0\n",
        "  y[~(i + 2)] = 9.0\n  y[i] = A[i]\n",
    ];
    for output in outputs {
        for body in bodies {
            for (input, a) in [
                ("Dense(Element(0.0))", [1.0, 2.0, 3.0, 4.0]),
                ("SparseList(Element(0.0))", [1.0, 0.0, 3.0, 0.0]),
            ] {
                let text = format!(
                    "input A :: {input}\noutput y :: {output}(Element(0.0))\ny .= 0\nfor i = _\n{body}end\n"
                );
                let out = agree(&text, &[("A", array(&[4], &a))]);
                assert_eq!(out["y"], array(&[4], &a), "{text}");
            }
        }
    }
    // Row sums of X (12, 15, 18) plus 1 for each of the three rows at every column.
    let x = array(&[3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    for output in ["SparseHash", "SparseByteMap", "SparseList"] {
        for input in MATRIX_INPUTS {
            let text = format!(
                "input X :: {input}\noutput w :: {output}(Element(0.0))\nw .= 0\nfor j = _, i = _\n  w[j] += 1.0\n  w[i] += X[i, j]\nend\n"
            );
            let out = agree(&text, &[("X", x.clone())]);
            assert_eq!(out["w"], array(&[3], &[15.0, 18.0, 21.0]), "{text}");
        }
    }
}

/// A sibling of reproducer 2 in Dense outputs: in the loop over `i`, `w[j]` does not
/// depend on `i`, so it was kept in a local (scalar replacement) and stored after the
/// loop, over what `w[i]` wrote to the same element at `i = j` (the other access was a
/// looplet by then, which names no tensor, so it was not seen).
#[test]
fn an_element_kept_in_a_local_is_not_stored_over_other_writes_of_its_tensor() {
    let x = array(&[3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    let cases = [
        ("  w[i] += X[i, j]\n  w[j] *= 2.0\n", [19.0, 44.0, 90.0]),
        ("  w[j] += 1.0\n  w[i] += X[i, j]\n", [15.0, 18.0, 21.0]),
        ("  w[j] = X[i, j]\n  w[i] += 1.0\n", [5.0, 7.0, 10.0]),
    ];
    for (body, want) in cases {
        for input in MATRIX_INPUTS {
            let text = format!(
                "input X :: {input}\noutput w :: Dense(Element(0.0))\nw .= 0\nfor j = _, i = _\n{body}end\n"
            );
            let out = agree(&text, &[("X", x.clone())]);
            assert_eq!(out["w"], array(&[3], &want), "{text}");
        }
    }
}

/// A loop that stores a constant stores it once: `w[j] = X[i, j]` over the gaps of a
/// sparse column stores the fill where `w[j]` is claimed (reproducer 1), which must not
/// bring back a loop over every position of the gap (nor for a Dense output, which
/// looped there before).
#[test]
fn a_repeated_store_of_the_fill_keeps_no_loop_over_the_fill() {
    let n = 1_000_000;
    let mut x = vec![0.0; 2 * n];
    x[1] = 2.0;
    x[n / 2] = -1.0;
    x[n + 7] = 3.0;
    let x = array(&[n, 2], &x);
    for level in ["SparseList", "Dense"] {
        let text = format!(
            "input X :: Dense(SparseList(Element(0.0)))\noutput w :: {level}(Element(0.0))\nw .= 0\nfor j = _, i = _\n  w[j] = X[i, j]\nend\n"
        );
        let program = Program::parse(&text).expect("a valid program");
        let format = &program.decl("X").expect("declared").format;
        let input = Tensor::from_dense(format, &x).expect("a valid input");
        let mut tensors = HashMap::from([("X".to_string(), input)]);
        let compiled = program.compile(Engine::Interp).expect("compiles");
        let run = compiled.run(&mut tensors, &HashMap::new()).expect("runs");
        let stats = run.stats.expect("the interpreter counts");
        assert!(stats.iterations < 100, "{level}: {stats:?}");
        let w = tensors["w"].to_dense().expect("readable");
        assert_eq!(w, array(&[2], &[0.0, 0.0]), "{text}");
    }
}

/// Seed 107 #11510 of the differential tester: a SparsePoint output whose one written
/// index is updated back to the fill (`true`, xor-ed with `true` four times; the other
/// indices read `missing` and are left alone) kept the index, an entry the reference
/// does not store. Also under a Dense level, one fiber per column, and for every other
/// output level.
#[test]
fn a_point_output_updated_back_to_its_fill_stores_nothing() {
    let bools = |data: &[bool]| {
        let vals = data.iter().map(|&b| finch::Value::Bool(b)).collect();
        DenseArray::from_data(
            finch::ScalarType::Bool,
            &[data.len()],
            vals,
            finch::Value::Bool(false),
        )
        .unwrap()
    };
    let index = DenseArray::from_data(
        finch::ScalarType::I64,
        &[3],
        [0, 0, 3].iter().map(|&i| finch::Value::I64(i)).collect(),
        finch::Value::I64(0),
    )
    .unwrap();
    let vectors = VECTOR_LEVELS.map(|l| (format!("{l}(Element(true))"), "for j = 1:3\n    y[j]"));
    let matrix = (
        "Dense(SparsePoint(Element(true)))".to_string(),
        "for k = 1:2, j = 1:3\n    y[j, k]",
    );
    for (output, write) in vectors.into_iter().chain([matrix]) {
        let text = format!(
            "input x :: Dense(Element(false))\ninput I :: Dense(Element(0))\noutput y :: {output}\n\
             y .= true\nfor i = 1:4\n  {write} <<xor>>= !x[~I[j]]\n  end\nend\n"
        );
        let out = agree(&text, &[("x", bools(&[false; 3])), ("I", index.clone())]);
        assert!(
            out["y"].data.iter().all(|v| *v == finch::Value::Bool(true)),
            "{text}"
        );
    }
}
