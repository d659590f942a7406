//! Programs the compiled engines refused where the reference runs them (issue #27, item
//! 3): those Finch.jl compiles now compile; the rest are refused with a message that says
//! what to write instead.

use finch::algebra::{ScalarType, Value};

use super::*;

fn matrix() -> DenseArray {
    // Column-major 3x4: (1,1) = 3, (2,2) = 5, (3,2) = 1, (1,4) = 2, (3,4) = -1.
    let mut a = vec![0.0; 12];
    for (i, j, v) in [
        (0, 0, 3.0),
        (1, 1, 5.0),
        (2, 1, 1.0),
        (0, 3, 2.0),
        (2, 3, -1.0),
    ] {
        a[i + 3 * j] = v;
    }
    array(&[3, 4], &a)
}

/// A tensor declared inside a loop in any format: each declaration empties it (levels
/// that cannot be emptied in place are written as one SparseHash group below the leading
/// Dense levels), and an output keeps what the last iteration wrote, in its own format.
#[test]
fn tensors_of_any_format_are_declared_inside_loops() {
    for w in [
        "Dense(SparseList(Element(0.0)))",
        "Dense(SparseCOO{1}(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseCOO{2}(Element(0.0))",
    ] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput y :: Dense(Element(0.0))\ntemp w :: {w}\ny .= 0\nfor k = 1:3\n  w .= 0\n  if k != 2\n    for j = _, i = _\n      w[i, j] = A[i, j] * k\n    end\n  end\n  for j = _, i = _\n    y[k] += w[i, j] * j\n  end\nend\n");
        let out = agree(&text, &[("A", matrix())]);
        // sum of A[i, j] * j = 3 + 6 * 2 + 1 * 4 = 19, times k; nothing at k = 2.
        assert_eq!(out["y"], array(&[3], &[19.0, 0.0, 57.0]), "{w}");
    }
    for c in [
        "Dense(SparseList(Element(false)))",
        "Dense(SparseInterval(Element(false)))",
        "SparseList(SparseList(Pattern()))",
    ] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput C :: {c}\nfor k = 1:3\n  C .= false\n  if k != 1\n    for j = _, i = _\n      C[i, j] = A[i, j] * k > 2.0\n    end\n  end\nend\n");
        let out = agree(&text, &[("A", matrix())]);
        let set: Vec<bool> = out["C"]
            .data
            .iter()
            .map(|v| v.as_bool() == Some(true))
            .collect();
        // At k = 3: 9, 15 and 3 are over 2; 6 is too; -3 is not.
        let mut want = vec![false; 12];
        for p in [0, 4, 5, 9] {
            want[p] = true;
        }
        assert_eq!(set, want, "{c}");
    }
}

/// A sparse output declared with a value other than its fill is refused, as Finch.jl
/// refuses it, by a message that says what to write instead.
#[test]
fn a_sparse_output_declared_with_another_value_says_what_to_write() {
    let text = "input x :: Dense(Element(0.0))\noutput y :: SparseList(Element(0.0))\ny .= 1.0\nfor i = _\n  y[i] += x[i]\nend\n";
    let program = Program::parse(text).expect("a valid program");
    for engine in [Engine::Interp, Engine::C] {
        let Err(e) = program.compile(engine) else {
            panic!("{engine:?} compiled a sparse output declared with 1.0");
        };
        let e = e.to_string();
        assert!(
            e.contains("`y .= 0") && e.contains("Element(1") && e.contains("Dense"),
            "{e}"
        );
    }
}

/// A 2x2x4 tensor (column-major) with entries scattered over every mode.
fn cube() -> DenseArray {
    let mut a = vec![0.0; 16];
    for (i, j, k, v) in [
        (0, 0, 0, 1.0),
        (1, 1, 0, 2.0),
        (0, 1, 1, -3.0),
        (1, 0, 2, 4.0),
        (1, 1, 2, 0.5),
        (0, 0, 3, 6.0),
    ] {
        a[i + 2 * j + 4 * k] = v;
    }
    array(&[2, 2, 4], &a)
}

/// Reads at indices bound by outer loops (out of loop order, through windows) were
/// concordized one inside the other, each copying the statement with the reads still to
/// come for every case of its own (found or not, at each level, and the phases of its
/// walk): over 6000 statements for three reads of one tensor. Each now reads into a
/// local first (`Lowerer::hoist_bound_reads`), and a read over one index is searched.
#[test]
fn several_reads_out_of_loop_order_compile() {
    let text = "input A :: SparseList(SparseList(SparseList(Element(0.0))))\noutput y :: Dense(Element(1.0))\ny .= 1.0\nfor i = _\n  for j = _\n    for k = 1:4\n      y[i] = max(coalesce(A[i, j, ~k], 0.0) + coalesce(A[(1:2)(i), ~(j - 1), ~(j + 2)], 0.0), A[j, i, (1:2)(j)])\n    end\n  end\nend\n";
    agree(text, &[("A", cube())]);
}

/// One level read twice at one index (`A[~k, k]`, `A[~(1:5)(k), k]`) under a gather in
/// a condition (`x[I[i]]`), whose branch was copied for each case of the gather.
#[test]
fn a_level_read_twice_at_one_index_under_a_gather_compiles() {
    let text = "input A :: SparseList(Dense(Element(0.0)))\ninput x :: SparseList(Element(false))\ninput I :: SparseList(Element(1))\noutput y :: SparseList(SparseList(Element(0.0)))\ny .= 0.0\nfor i = _\n  if x[I[i]]\n    for k = _\n      y[k, i] = coalesce(A[~(1:5)(k), k], 1.0)\n      y[k, i] += coalesce(A[~k, k], 2.0)\n    end\n  end\nend\n";
    let x = DenseArray::from_data(
        ScalarType::Bool,
        &[3],
        vec![Value::Bool(true), Value::Bool(false), Value::Bool(true)],
        Value::Bool(false),
    )
    .expect("a bool vector");
    let i = DenseArray::from_data(
        ScalarType::I64,
        &[4],
        vec![Value::I64(1), Value::I64(2), Value::I64(3), Value::I64(1)],
        Value::I64(1),
    )
    .expect("an index vector");
    // Rows 4 and 5 lie outside `A`'s first mode: the permissive reads give `missing`.
    let a = array(
        &[3, 5],
        &[
            1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 4.0, 0.0, -1.0, 0.0, 3.0, 0.0, 0.0, 0.0, 5.0,
        ],
    );
    agree(text, &[("A", a), ("x", x), ("I", i)]);
}

/// Many sparse operands in one loop nest, one branch reading a constant index of a
/// sparse vector (`x2[1]`), another gathers through index vectors and a window.
#[test]
fn gathers_and_walks_under_a_branch_on_a_sparse_read_compile() {
    let text = "input x2 :: SparseList(Element(1.0))\ninput x3 :: Dense(SparseList(SparseList(Element(false))))\ninput I4 :: Dense(Element(1))\ninput x5 :: SparseList(Element(0.0))\ninput I6 :: SparseInterval(Element(0))\noutput y1 :: SparseList(Element(true))\ny1 .= true\nfor i = _\n  for j = _\n    if x2[1] == 1.0\n      y1[j] = x3[i, I4[j], j] < x5[~I6[j]]\n    else\n      y1[j] <<&&>>= x5[~(1:1)(j)] >= max(x5[i], x5[gallop(i)])\n    end\n  end\nend\n";
    // The window `(1:1)(j)` runs `j` over 1:1: one column of `x3`.
    let x3 = DenseArray::from_data(
        ScalarType::Bool,
        &[3, 2, 1],
        [true, false, true, false, true, true]
            .map(Value::Bool)
            .to_vec(),
        Value::Bool(false),
    )
    .expect("a bool tensor");
    let ints = |x: i64, fill: i64| {
        DenseArray::from_data(ScalarType::I64, &[1], vec![Value::I64(x)], Value::I64(fill))
            .expect("an index vector")
    };
    for first in [1.0, 0.0] {
        let x2 = array(&[2], &[first, 2.0]);
        let x5 = array(&[3], &[0.5, 0.0, -1.0]);
        agree(
            text,
            &[
                ("x2", x2),
                ("x3", x3.clone()),
                ("I4", ints(2, 1)),
                ("x5", x5),
                ("I6", ints(3, 0)),
            ],
        );
    }
}

/// A read at an offset inside a loop with an explicit range (`for i = 2:6` over
/// `x[i - 1]`) was refused. As in Finch.jl, where `x[i + c]` is `OffsetArray(x, c)[i]`
/// whose extent `1 - c : n - c` must equal the loop's, and in the reference, the range
/// must be that extent; the loop then runs over it, reading `x` like `for i = _` does.
#[test]
fn offset_reads_inside_explicit_ranges_compile() {
    let x = array(&[5], &[1.0, 0.0, -2.0, 0.0, 4.0]);
    for f in [
        "Dense(Element(0.0))",
        "SparseList(Element(0.0))",
        "RunList(Element(0.0))",
        "SparseBand(Element(0.0))",
    ] {
        let text = format!("input x :: {f}\noutput s :: Scalar(0.0)\noutput y :: Dense(Element(0.0))\ns .= 0\nfor i = 2:6\n  s[] += x[i - 1] * i\nend\ny .= 0\nfor k = -1:3\n  y[k + 2] = x[k + 2] + 1.0\nend\n");
        let out = agree(&text, &[("x", x.clone())]);
        // 1 * 2 - 2 * 4 + 4 * 6 = 18; y is x + 1, sized by the loop.
        assert_eq!(out["s"].data, array(&[1], &[18.0]).data, "{f}");
        assert_eq!(out["y"], array(&[5], &[2.0, 1.0, -1.0, 1.0, 5.0]), "{f}");
    }
    // A matrix read at an offset in its rows beside a constant column, and a range of
    // input scalars.
    let text = "input A :: Dense(SparseList(Element(0.0)))\ninput n :: Scalar(0)\noutput s :: Scalar(0.0)\noutput t :: Scalar(0.0)\ns .= 0\nfor i = 0:2\n  s[] += A[i + 1, 4]\nend\nt .= 0\nfor i = 0:n[] - 1\n  t[] += A[i + 1, 2] * i\nend\n";
    let scalar = DenseArray::from_data(ScalarType::I64, &[], vec![Value::I64(3)], Value::I64(0))
        .expect("a scalar");
    let out = agree(text, &[("A", matrix()), ("n", scalar)]);
    // Column 4: 2 + 0 - 1; column 2: 5 * 1 + 1 * 2.
    assert_eq!(out["s"].data, array(&[1], &[1.0]).data);
    assert_eq!(out["t"].data, array(&[1], &[7.0]).data);
}

/// A range that is not the offset read's in-bounds range (it would read outside the
/// tensor) is an error in every engine before any kernel runs (the C kernels do not
/// check their reads), as in the reference and in Finch.jl (`DimensionMismatch`).
#[test]
fn an_offset_read_leaving_its_tensor_is_an_error_everywhere() {
    let x = array(&[5], &[1.0, 0.0, -2.0, 0.0, 4.0]);
    let scalar = |n: i64| {
        DenseArray::from_data(ScalarType::I64, &[], vec![Value::I64(n)], Value::I64(0))
            .expect("a scalar")
    };
    for (range, n) in [
        ("1:5", 5),
        ("0:5", 5),
        ("0:3", 5),
        ("0:n[]", 5),
        ("0:n[] - 1", 6),
    ] {
        let text = format!("input x :: SparseList(Element(0.0))\ninput n :: Scalar(0)\noutput s :: Scalar(0.0)\ns .= 0\nfor i = {range}\n  s[] += x[i + 1] * n[]\nend\n");
        let program = Program::parse(&text).expect("a valid program");
        let mut bindings = Bindings::new();
        bindings.insert("x", x.clone());
        bindings.insert("n", scalar(n));
        let e = program
            .run_reference(&mut bindings, &RunOptions::default())
            .expect_err("the reference reads outside `x`");
        assert!(e.to_string().contains("loop bounds must equal"), "{e}");
        for (engine, reassociate, compact) in CONFIGS {
            let options = CompileOptions {
                reassociate,
                compact,
            };
            let compiled = program
                .compile_with(engine, &options)
                .unwrap_or_else(|e| panic!("{engine:?}: {e}\n{text}"));
            let format = |name: &str| program.decl(name).expect("declared").format.clone();
            let mut tensors = HashMap::from([
                (
                    "x".to_string(),
                    Tensor::from_dense(&format("x"), &x).expect("x"),
                ),
                (
                    "n".to_string(),
                    Tensor::from_dense(&format("n"), &scalar(n)).expect("n"),
                ),
            ]);
            let e = compiled
                .run(&mut tensors, &HashMap::new())
                .expect_err("an engine read outside `x`");
            let e = e.to_string();
            assert!(
                e.contains("needs 0:4") && e.contains("`x[~(i + 1)]`"),
                "{engine:?} {range}: {e}"
            );
        }
    }
}

/// A 3x4 matrix whose columns hold 1, 2, 3 and 0 entries, positive and negative.
fn counted_columns() -> DenseArray {
    array(
        &[3, 4],
        &[2.0, 0.0, 0.0, 0.0, -1.0, 3.0, 1.0, -2.0, 4.0, 0.0, 0.0, 0.0],
    )
}

/// Updates of a `Pattern()` leaf other than `=` and `|=` were refused. As in Finch.jl,
/// where a written Pattern subfiber is a scalar over its level's `dirty` flag, `op= c`
/// sets whether the index is stored to `op(stored, c)`: `<<xor>>=` toggles it, `&=` may
/// take it back. Written in order once per column (the write repeated over the rows).
#[test]
fn every_update_of_a_pattern_leaf_compiles() {
    for (op, want) in [
        ("<<xor>>=", [true, false, true, false]),
        ("&=", [false; 4]),
        ("<<&&>>=", [false; 4]),
        ("<<choose(false)>>=", [true, true, true, false]),
        ("=", [false, true, true, false]),
    ] {
        for f in ["SparseList(Pattern())", "SparseByteMap(Pattern())"] {
            let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput y :: {f}\ny .= false\nfor j = _, i = _\n  y[j] {op} A[i, j] != 0.0\nend\n");
            let out = agree(&text, &[("A", counted_columns())]);
            let got: Vec<bool> = out["y"]
                .data
                .iter()
                .map(|v| v == &Value::Bool(true))
                .collect();
            assert_eq!(got, want, "{op} {f}");
        }
    }
    // The minimised programs of seed 101: `&=` of a fresh Pattern matrix stores nothing.
    let text = "input A :: Dense(SparseList(Element(0.0)))\noutput C :: SparseCOO{2}(Pattern())\ntemp w :: SparseList(Element(false))\nC .= false\nfor j = _\n  w .= false\n  for i = _\n    w[i] = A[follow(i), j] != 0.0\n  end\n  for i = _\n    C[i, j] &= w[i]\n  end\nend\n";
    agree(text, &[("A", counted_columns())]);
}

/// `&=` after `=` in another statement: the output is written in any order (a hash
/// table or a bytemap), whose Pattern leaf keeps a flag per entry, dropped where `false`.
#[test]
fn a_pattern_leaf_cleared_by_a_later_statement_drops_its_entries() {
    for f in [
        "SparseList(SparseList(Pattern()))",
        "Dense(SparseByteMap(Pattern()))",
        "SparseCOO{2}(Pattern())",
    ] {
        let text = format!("input A :: Dense(SparseList(Element(0.0)))\noutput C :: {f}\nC .= false\nfor j = _, i = _\n  C[i, j] = A[i, j] != 0.0\nend\nfor j = _, i = _\n  C[i, j] &= A[i, j] > 0.0\nend\n");
        let out = agree(&text, &[("A", counted_columns())]);
        let set: Vec<usize> = (0..12)
            .filter(|&p| out["C"].data[p] == Value::Bool(true))
            .collect();
        assert_eq!(set, vec![0, 5, 6, 8], "{f}");
    }
}
