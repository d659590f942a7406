//! See `main.rs`. Programs the reference engine runs and the compiled engines refused
//! with an "internal:" error, or ran wrongly once that error was gone (issue #27).

use super::*;

use finch::{ScalarType, Value};

/// The value of scalar output `name`.
fn scalar(out: &HashMap<String, DenseArray>, name: &str) -> f64 {
    out[name].data[0].as_f64().expect("an f64 scalar output")
}

/// The 3x4 matrix the tests read: its second column is empty, so a sparse level over
/// the columns lacks that fiber.
fn matrix_with_an_empty_column() -> DenseArray {
    DenseArray::from_rows_f64(&[
        &[1.0, 0.0, 4.0, 0.0],
        &[2.0, 0.0, 0.0, 6.0],
        &[3.0, 0.0, 5.0, 0.0],
    ])
    .expect("a well-formed test matrix")
}

/// Reproducer 5: a shifted read of the outer loop's index at the inner level of a
/// column-major matrix (across its storage order) is concordized like `A[i, j]` there;
/// it was left unlowered ("an access with 1 indices left at a leaf").
#[test]
fn a_shifted_read_across_storage_order_is_concordized() {
    let a = array(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let decls = "input A :: Dense(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\n";
    // `i` runs over 2:4, so every entry is read once.
    let text = format!("{decls}for i = _, j = _\n  s[] += A[i - 1, j]\nend\n");
    assert_eq!(scalar(&agree(&text, &[("A", a.clone())]), "s"), 21.0);
    // Permissive: row 0 is `missing`, padded with 10.
    let text = format!(
        "{decls}for i = _, j = _\n  s[] += A[i, j] * coalesce(A[~(i - 1), j], 10.0)\nend\n"
    );
    let want = (1.0 + 4.0) * 10.0 + (2.0 * 1.0 + 5.0 * 4.0) + (3.0 * 2.0 + 6.0 * 5.0);
    assert_eq!(scalar(&agree(&text, &[("A", a)]), "s"), want);
}

/// Reproducer 7: a SparseCOO{1} matrix read at `A[i, j - 1]` and permissively at
/// `A[~(i + 1), ~(j - 2)]` with `i` outer. The shifted inner index becomes a computed
/// permissive one; a column the level lacks must still read `missing` outside the
/// matrix (the padding 1.0), not the fill.
#[test]
fn a_permissive_read_across_storage_order_pads_absent_columns() {
    let a = DenseArray::from_rows_f64(&[&[1.0, 0.0, 4.0], &[2.0, 0.0, 0.0], &[3.0, 0.0, 5.0]])
        .expect("a well-formed test matrix");
    for order in ["i = _, j = _", "j = _, i = _"] {
        let text = format!(
            "input A :: SparseCOO{{1}}(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor {order}\n  s[] += A[i, j - 1] * coalesce(A[~(i + 1), ~(j - 2)], 1.0)\nend\n"
        );
        // j = 2: column 1 times the padding; j = 4: column 3 times A[i + 1, 2], which is
        // 0 inside the matrix (row 1) and the padding outside it (row 3).
        let want = (1.0 + 2.0 + 3.0) + (4.0 * 0.0 + 5.0 * 1.0);
        assert_eq!(
            scalar(&agree(&text, &[("A", a.clone())]), "s"),
            want,
            "{order}"
        );
    }
}

/// A permissive computed index (`~(I[i])`) into a column a sparse level lacks reads
/// `missing` outside the matrix (the padding), not the fill: the compiled engines gave
/// 16 where the reference gives 17.
#[test]
fn a_permissive_computed_index_pads_absent_columns() {
    let i = DenseArray::from_data(
        ScalarType::I64,
        &[3],
        vec![Value::I64(2), Value::I64(4), Value::I64(1)],
        Value::I64(0),
    )
    .expect("a well-formed index vector");
    let text = "input A :: SparseList(Dense(Element(0.0)))\ninput I :: Dense(Element(0))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += coalesce(A[~(I[i]), j], 1.0)\nend\n";
    let out = agree(text, &[("A", matrix_with_an_empty_column()), ("I", i)]);
    // Rows 2, 4 (outside: 1.0) and 1 of each column.
    let want = (2.0 + 1.0 + 1.0) + (0.0 + 1.0 + 0.0) + (0.0 + 1.0 + 4.0) + (6.0 + 1.0 + 0.0);
    assert_eq!(scalar(&out, "s"), want);
}

/// Reproducer 6: an output written, then read back (through a SparseHash group) at a
/// shifted permissive row in storage order; a column it lacks reached the group's second
/// mode without its run of entries.
#[test]
fn a_written_output_read_back_shifted_lacks_a_column() {
    for format in [
        "SparseList(Dense(Element(0.0)))",
        "RunList(Dense(Element(0.0)))",
        "SparseRunList(Dense(Element(0.0)))",
    ] {
        for write in ["j = _, i = _", "i = _, j = _"] {
            let text = format!(
                "input A :: Dense(Dense(Element(0.0)))\noutput z :: {format}\noutput s :: Scalar(0.0)\nz .= 0\nfor {write}\n  z[i, j] = A[i, j]\nend\ns .= 0\nfor j = _, i = _\n  s[] += z[i, j] * coalesce(z[~(i + 2), j], 1.0)\nend\n"
            );
            let out = agree(&text, &[("A", matrix_with_an_empty_column())]);
            // Row 1 times row 3, the other rows times the padding.
            let want = (1.0 * 3.0 + 2.0 + 3.0) + (4.0 * 5.0 + 0.0 + 5.0) + 6.0;
            assert_eq!(scalar(&out, "s"), want, "{format}, {write}");
        }
    }
}

/// A `let` of a permissive read: where it is `missing`, `coalesce` of the variable gives
/// the padding. The compiled engines dropped those positions (8 where the reference gives
/// 11), and, walked to the end with a `coalesce` of two shifted reads, failed with "the
/// fill missing of a f64 leaf".
#[test]
fn a_let_of_a_permissive_read_may_be_missing() {
    let x = array(&[3], &[1.0, 2.0, 3.0]);
    let text = "input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  let a = x[~(i + 1)]\n    s[] += x[i] * coalesce(a, 1.0)\n  end\nend\n";
    assert_eq!(
        scalar(&agree(text, &[("x", x)]), "s"),
        1.0 * 2.0 + 2.0 * 3.0 + 3.0
    );
    let text = "input A :: Dense(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  let a = coalesce(A[~(i + 1), j], A[~(i - 1), j])\n    s[] += A[i, j] * coalesce(a, 0.5)\n  end\nend\n";
    let out = agree(text, &[("A", matrix_with_an_empty_column())]);
    // Column 1: 1 * 2 + 2 * 3 + 3 * 2 (row 4 is outside: row 2 instead); the others 0.
    assert_eq!(scalar(&out, "s"), 14.0);
    // A `let` of a `coalesce` that is never `missing` stays a `let`.
    let text = "input A :: Dense(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  let a = coalesce(A[~(i + 1), j], 2.0)\n    s[] += A[i, j] * coalesce(a, 1.0)\n  end\nend\n";
    let out = agree(text, &[("A", matrix_with_an_empty_column())]);
    let want = (1.0 * 2.0 + 2.0 * 3.0 + 3.0 * 2.0) + (4.0 * 0.0 + 5.0 * 2.0) + 6.0 * 0.0;
    assert_eq!(scalar(&out, "s"), want);
    let compiled = Program::parse(text)
        .and_then(|p| p.compile_with(Engine::Interp, &CompileOptions::default()))
        .expect("a compiled program");
    let kernel = compiled.kernel().to_string();
    assert!(kernel.contains(": f64 a\n"), "no local `a`:\n{kernel}");
}

/// A SparseRunList level read at `j + 1` and walked to the end (the compact lowering)
/// runs `j` from 0: its walk sought index 1 first and skipped the run ending before it
/// (30 where the reference gives 42).
#[test]
fn a_shifted_walk_over_runs_starts_where_the_loop_does() {
    let text = "input A :: SparseRunList(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[i, j + 1] + A[i, j + 1]\nend\n";
    let out = agree(text, &[("A", matrix_with_an_empty_column())]);
    assert_eq!(scalar(&out, "s"), 2.0 * 21.0);
}

/// A `coalesce` of an expression of padded reads, walked to the end (the compact
/// lowering) where each read is `missing` outside a condition: the expression is read
/// where all of them hold, and the padding elsewhere. It was refused as "a `missing`
/// value reaching compiled code", though wrapped in `coalesce`.
#[test]
fn a_coalesce_of_padded_reads_walked_to_the_end_is_a_select() {
    let text = "input A :: Dense(Dense(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += A[i, j] * coalesce(A[~(i + 1), j] + A[~(i - 1), j], 0.5)\nend\n";
    let out = agree(text, &[("A", matrix_with_an_empty_column())]);
    // Rows 1 and 3 are next to a row outside the matrix: the padding.
    let want = (1.0 * 0.5 + 2.0 * (3.0 + 1.0) + 3.0 * 0.5) + (4.0 * 0.5 + 5.0 * 0.5);
    assert_eq!(scalar(&out, "s"), want);
}

/// An unchecked read shifted by an enclosing loop's index (`A[i + j - 1, j]`, Finch's
/// ToeplitzTensor without `~`) over a run where it would be outside the matrix: the run
/// is integrated into one update, which reached its out-of-range read ("internal: an
/// out-of-range read left in a value") instead of stopping the kernel there. The loop
/// range keeps every read inside.
#[test]
fn an_unchecked_shifted_read_integrated_over_a_run_lowers() {
    let a = array(&[4, 2], &[1.0, 2.0, 0.0, 4.0, 5.0, 0.0, 7.0, 8.0]);
    for format in [
        "Dense(Dense(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
    ] {
        for order in ["j = _, i = 1:2", "i = 1:2, j = _"] {
            let text = format!(
                "input A :: {format}\noutput s :: Scalar(0.0)\ns .= 0\nfor {order}\n  s[] += A[i + j - 1, j]\nend\n"
            );
            let out = agree(&text, &[("A", a.clone())]);
            // Rows 1 and 2 of column 1, rows 2 and 3 of column 2.
            assert_eq!(
                scalar(&out, "s"),
                (1.0 + 2.0) + (0.0 + 7.0),
                "{format}, {order}"
            );
        }
    }
}
