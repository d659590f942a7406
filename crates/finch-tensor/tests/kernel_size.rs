//! The size of the code the compiler generates: kernels over many sparse operands, sums of
//! many terms, stencils and reads shared by statements lower to code that grows with their
//! number, not with their combinations (bytes of C, lines of kernel IR), and match the
//! reference; a kernel past the lowering budget is refused by name.

mod common;

use std::collections::HashMap;

use finch::engine::Engine;
use finch::formats::Format;
use finch::tensor::Tensor;
use finch::{DenseArray, Program};
use proptest::prelude::*;

use common::*;

/// Loops coiterating more sparse operands than the compiler specializes each step for
/// (four): five and six vectors, and five matrices; and galloping over four and five.
/// Three or four matrices whose rows are walked too (`{A}` in `SparseList(..)`): terms
/// of a sum share one loop over their rows, a factor keeps its own; a term searched
/// (`follow`, or read across the storage order) reads its fill where it has no entry.
/// Stencils: one vector read at seven shifts, one matrix at the nine of a 3x3 box.
const MANY_OPERANDS: [Kernel; 13] = [
    Kernel { name: "stencil_of_seven", text: "input a :: {a}\noutput w :: {w}\nw .= 0\nfor i = _\n  w[i] = coalesce(a[~(i - 3)], 0.0) + coalesce(a[~(i - 2)], 0.0) * 2.0 + coalesce(a[~(i - 1)], 1.0) + a[i] + coalesce(a[~(i + 1)], 0.0) + coalesce(a[~(i + 2)], 0.0) - coalesce(a[~(i + 3)], 0.0)\nend\n", inputs: &[("a", false, 0, 0)] },
    Kernel { name: "box_of_nine", text: "input a :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = coalesce(a[~(i - 1), ~(j - 1)], 0.0) + coalesce(a[~(i), ~(j - 1)], 0.0) + coalesce(a[~(i + 1), ~(j - 1)], 0.0) + coalesce(a[~(i - 1), j], 0.0) + a[i, j] * 2.0 + coalesce(a[~(i + 1), j], 0.0) + coalesce(a[~(i - 1), ~(j + 1)], 0.0) + coalesce(a[~(i), ~(j + 1)], 0.0) + coalesce(a[~(i + 1), ~(j + 1)], 0.0)\nend\n", inputs: &[("a", true, 0, 1)] },
    Kernel { name: "gallop_four", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[gallop(i)] * b[gallop(i)] * c[gallop(i)] * d[gallop(i)]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0)] },
    Kernel { name: "gallop_five", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[gallop(i)] * b[gallop(i)] * c[gallop(i)] * (d[gallop(i)] + 1.0) * e[gallop(i)]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "sum_of_five", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[i] + b[i] * 2.0 + c[i] + d[i] * e[i]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "max_of_five_into_format", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput w :: {w}\nw .= 0\nfor i = _\n  w[i] = max(a[i], b[i], c[i], d[i], e[i])\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "shifted_sum_of_five", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += e[i] + coalesce(a[~(i + 1)], 0.0) + coalesce(b[~(i - 1)], 0.0) * 2.0 + coalesce(c[~(i + 2)], 0.0) + coalesce(d[~(i + 3)], 1.0)\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0)] },
    Kernel { name: "sum_of_six_products", text: "input a :: {a}\ninput b :: {b}\ninput c :: {c}\ninput d :: {d}\ninput e :: {e}\ninput f :: {f}\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[i] * b[i] + c[i] * d[i] + e[i] * f[i]\nend\n", inputs: &[("a", false, 0, 0), ("b", false, 0, 0), ("c", false, 0, 0), ("d", false, 0, 0), ("e", false, 0, 0), ("f", false, 0, 0)] },
    Kernel { name: "three_matrices", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = a[i, j] + b[i, j] * 2.0 + c[i, j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1)] },
    Kernel { name: "sum_of_three_times_one", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\ninput d :: {A}\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += (a[i, j] + b[i, j] - c[i, j]) * d[i, j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1), ("d", true, 0, 1)] },
    Kernel { name: "three_matrices_two_searched", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = a[follow(i), j] + b[i, j] * 2.0 + c[follow(i), j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1)] },
    Kernel { name: "four_matrices_read_across", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\ninput d :: {A}\noutput C :: {W}\nC .= 0\nfor i = _, j = _\n  C[j, i] = a[i, j] + b[i, j] + c[i, j] - d[i, j]\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1), ("d", true, 0, 1)] },
    Kernel { name: "csr_sum_of_five", text: "input a :: {A}\ninput b :: {A}\ninput c :: {A}\ninput d :: {A}\ninput e :: {A}\noutput C :: {W}\nC .= 0\nfor j = _, i = _\n  C[i, j] = a[i, j] + b[i, j] - c[i, j] + max(d[i, j], e[i, j])\nend\n", inputs: &[("a", true, 0, 1), ("b", true, 0, 1), ("c", true, 0, 1), ("d", true, 0, 1), ("e", true, 0, 1)] },
];

/// Matrices a 3x3 stencil (`box_of_nine`) is compiled over: Dense columns, sparse
/// columns under a Dense level (reads of one column at one shift share one segment walk,
/// and one branch where that column is outside the matrix), and a sparse list of sparse
/// columns (each read where its entry of the outer list is).
const BOX_FORMATS: [&str; 6] = [
    "Dense(Dense(Element(0.0)))",
    "Dense(SparseList(Element(0.0)))",
    "SparseList(Dense(Element(0.0)))",
    "SparseList(SparseList(Element(0.0)))",
    "Dense(SparseByteMap(Element(0.0)))",
    "Dense(SparseHash(Element(0.0)))",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Four to six sparse operands in one loop, in random formats (so any number of them
    /// are walked as lists of single entries, or gallop), lowered as specialized loops or
    /// compactly: the compiled result equals the reference's, or a level without the
    /// gallop protocol is refused by name.
    #[test]
    fn many_sparse_operands_match_the_reference(
        k in 0usize..MANY_OPERANDS.len(),
        v in prop::collection::vec(prop::sample::select(structured_vectors()), 7),
        out in prop::sample::select(vec!["Dense(Element(0.0))", "SparseList(Element(0.0))", "SparseByteMap(Element(0.0))", "SparseRunList(Element(0.0))"]),
        a in prop::sample::select(vec!["Dense(Dense(Element(0.0)))", "Dense(SparseList(Element(0.0)))", "Dense(SparseBlockList(Element(0.0)))", "Dense(RunList(Element(0.0)))", "SparseList(SparseList(Element(0.0)))", "SparseList(Dense(Element(0.0)))", "SparseList(SparseBand(Element(0.0)))", "SparseList(SparseList{UInt32}(Element(0.0)))", "SparseList(SparseBlockList(Element(0.0)))", "SparseList(SparsePoint(Element(0.0)))", "Dense(SparseInterval(Element(0.0)))", "SparseList(SparseRunList(Element(0.0)))"]),
        cw in prop::sample::select(vec!["Dense(SparseList(Element(0.0)))", "Dense(Dense(Element(0.0)))"]),
        n in sizes(), m in sizes(),
        structure in 0u8..4,
        seed in any::<u32>(),
        compact in any::<bool>(),
    ) {
        let k = &MANY_OPERANDS[k];
        // A 2-D stencil over sparse rows of sparse columns, or over structured rows,
        // still splits the loop for each combination of the shifted reads (megabytes of
        // C): over the formats it is made for.
        let a = match k.name {
            "box_of_nine" => BOX_FORMATS[seed as usize % BOX_FORMATS.len()],
            _ => a,
        };
        let mut text = k.text.replace("{w}", out).replace("{A}", a).replace("{W}", cw);
        for (name, f) in ["{a}", "{b}", "{c}", "{d}", "{e}", "{f}"].iter().zip(&v) {
            text = text.replace(name, f);
        }
        // (The interpreter runs the same kernel IR; C, whose kernels here take seconds to
        // compile, is checked on fixed formats below.)
        check_program(k, &text, [n, m, 1], 0.3, seed as u64, structure, &[Engine::Interp], false, compact)?;
    }
}

/// [`MANY_OPERANDS`] compiled to C, over SparseList vectors and CSR matrices, and the
/// matrix kernels over matrices with sparse rows too (`SparseList(SparseList)`); over
/// levels of consecutive indices walked segment by segment (SparseBand vectors, rows of
/// SparseBlockList blocks); and the stencils over Dense vectors and matrices.
#[test]
fn many_sparse_operands_compile_to_c() {
    let matrices = [
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "SparseList(SparseBlockList(Element(0.0)))",
    ];
    let vectors = ["SparseList(Element(0.0))", "SparseBand(Element(0.0))"];
    // Stencils (reads at shifted indices) over Dense operands too.
    let dense = ("Dense(Dense(Element(0.0)))", "Dense(Element(0.0))");
    let cases = MANY_OPERANDS.iter().flat_map(move |k| {
        let shifted = k.text.contains("[~(");
        let mut formats: Vec<(&str, &str)> = if k.text.contains("{A}") {
            matrices.iter().map(|a| (*a, vectors[0])).collect()
        } else {
            vectors.iter().map(|v| (matrices[0], *v)).collect()
        };
        if shifted {
            formats.push(dense);
        }
        if k.name == "box_of_nine" {
            formats = BOX_FORMATS.iter().map(|a| (*a, dense.1)).collect();
        }
        formats.into_iter().map(move |(a, v)| (k, a, v))
    });
    for (n, (k, a, v)) in cases.enumerate() {
        let text = k
            .text
            .replace("{w}", "SparseList(Element(0.0))")
            .replace("{A}", a)
            .replace("{W}", "Dense(SparseList(Element(0.0)))");
        let text = ["{a}", "{b}", "{c}", "{d}", "{e}", "{f}"]
            .iter()
            .fold(text, |t, x| t.replace(x, v));
        for structure in [0, 2] {
            check_program(
                k,
                &text,
                [9, 7, 1],
                0.3,
                n as u64 + 10 * structure as u64,
                structure,
                &[Engine::C],
                false,
                // Compactly lowered (every two terms share a loop) with the second data.
                structure == 2,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", k.name));
        }
    }
}

/// Terms of a sum walked together (sparse vectors, and matrices with sparse rows and
/// columns) share one loop, whose code grows with the number of terms rather than with
/// the combinations of them present at an index (`3^n` before: four `SparseList(SparseList)`
/// terms took 1.4 MB of C, five were refused). Levels of consecutive indices (bands,
/// intervals, points, blocks, sparse runs) are walked segment by segment past four terms,
/// rather than split into their phases (six `SparseBand` vectors took 2 MB, seven were
/// refused, as were six `SparseList(SparseBand)` matrices); a row of runs a term lacks is
/// one run of fill rather than a branch (ten `SparseList(RunList)` terms were refused).
#[test]
fn terms_of_a_sum_lower_to_code_linear_in_their_number() {
    let c_size = |format: &str, n: usize| {
        let (idx, order) = if format.matches('(').count() > 2 {
            ("i, j", "for j = _, i = _")
        } else {
            ("i", "for i = _")
        };
        let decls: String = (0..n)
            .map(|k| format!("input a{k} :: {format}\n"))
            .collect();
        let sum = (0..n)
            .map(|k| format!("a{k}[{idx}]"))
            .collect::<Vec<_>>()
            .join(" + ");
        let text =
            format!("{decls}output s :: Scalar(0.0)\ns .= 0\n{order}\n  s[] += {sum}\nend\n");
        c_bytes(&text)
    };
    let structured = [
        "SparseBand",
        "SparseInterval",
        "SparsePoint",
        "SparseBlockList",
        "SparseRunList",
    ]
    .iter()
    .flat_map(|l| {
        [
            format!("{l}(Element(0.0))"),
            format!("SparseList({l}(Element(0.0)))"),
        ]
    });
    let lists = [
        "SparseList(Element(0.0))",
        "Dense(SparseList(Element(0.0)))",
        "SparseList(SparseList(Element(0.0)))",
        "Dense(SparseBand(Element(0.0)))",
        "SparseList(SparseHash(Element(0.0)))",
        "SparseList(SparseByteMap(Element(0.0)))",
        "SparseList(RunList(Element(0.0)))",
    ];
    for format in lists.iter().map(|f| f.to_string()).chain(structured) {
        let (five, ten) = (c_size(&format, 5), c_size(&format, 10));
        assert!(
            ten < 3 * five && ten < 100_000,
            "{format}: {five} B of C for 5 terms, {ten} B for 10"
        );
    }
    // Six sparse vectors read at shifted indices (`coalesce` of their padding with their
    // fill): their walks share one loop too (refused before).
    let shifted = c_bytes(&shifted_sum("SparseList(Element(0.0))", 6, "0.0"));
    assert!(shifted < 100_000, "{shifted} B of C for six shifted terms");
    // Dense vectors read at shifted indices (a stencil) step from segment to segment
    // too, where each read is inside or outside its vector (refused before: each padded
    // read's phases split the loop, 3^n loops); one vector at nine shifts, and a 3x3 box
    // over a Dense matrix, at both levels (118 KB of C with a segment walk per read).
    let dense = c_bytes(&shifted_sum("Dense(Element(0.0))", 9, "0.0"));
    assert!(
        dense < 100_000,
        "{dense} B of C for nine shifted Dense terms"
    );
    let at = |c: i64| match c {
        0 => "~(i)".to_string(),
        c if c > 0 => format!("~(i + {c})"),
        c => format!("~(i - {})", -c),
    };
    let nine: Vec<String> = (-4..=4)
        .map(|c| format!("coalesce(x[{}], 0.0)", at(c)))
        .collect();
    let one = format!(
        "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i] + {}\nend\n",
        nine.join(" + ")
    );
    let one = c_bytes(&one);
    assert!(one < 100_000, "{one} B of C for one vector at nine shifts");
    let box_of_nine = MANY_OPERANDS
        .iter()
        .find(|k| k.name == "box_of_nine")
        .unwrap()
        .text
        .replace("{A}", "Dense(Dense(Element(0.0)))")
        .replace("{W}", "Dense(Dense(Element(0.0)))");
    let image = c_bytes(&box_of_nine);
    assert!(image < 100_000, "{image} B of C for a 3x3 box");
    // Over sparse columns: the reads of one column at one shift share one segment walk,
    // and one branch where that column is outside the matrix (1 MB of C with one each).
    let sparse = c_bytes(&box_of_nine.replacen(
        "input a :: Dense(Dense(Element(0.0)))",
        "input a :: Dense(SparseList(Element(0.0)))",
        1,
    ));
    assert!(
        sparse < 200_000,
        "{sparse} B of C for a 3x3 box over sparse columns"
    );
    // Over a sparse list of sparse columns: each column is read where its (shifted) entry
    // of the outer list is, with no branch (3.4 MB of C with a branch per read).
    let lists = c_bytes(&box_of_nine.replacen(
        "input a :: Dense(Dense(Element(0.0)))",
        "input a :: SparseList(SparseList(Element(0.0)))",
        1,
    ));
    assert!(
        lists < 100_000,
        "{lists} B of C for a 3x3 box over sparse lists"
    );
    // Two terms with sparse rows among six: the two rows share one loop too (each
    // combination of the two would copy the loop over the six terms' columns).
    let text = "input a :: SparseList(SparseList(Element(0.0)))\ninput b :: SparseList(SparseList(Element(0.0)))\ninput c :: Dense(SparseList(Element(0.0)))\ninput d :: Dense(SparseList(Element(0.0)))\ninput e :: Dense(SparseList(Element(0.0)))\ninput f :: Dense(SparseList(Element(0.0)))\noutput s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += a[i, j] + b[i, j] + c[i, j] + d[i, j] + e[i, j] + f[i, j]\nend\n";
    let two_rows = c_bytes(text);
    assert!(
        two_rows < 100_000,
        "{two_rows} B of C for two sparse rows among six terms"
    );
    // Four terms whose levels are all bands: loops specialized for each combination of
    // their phases, at both levels, would be 1.1 MB of C; the kernel is lowered compactly.
    let decls: String = (0..4)
        .map(|k| format!("input a{k} :: SparseBand(SparseBand(Element(0.0)))\n"))
        .collect();
    let text = format!("{decls}output s :: Scalar(0.0)\ns .= 0\nfor j = _, i = _\n  s[] += a0[i, j] + a1[i, j] + a2[i, j] + a3[i, j]\nend\n");
    let nested = c_bytes(&text);
    assert!(
        nested < 100_000,
        "{nested} B of C for four band-of-band terms"
    );
}

/// `s[] += y[i] + coalesce(x1[~(i + 1)], pad) + ... + coalesce(xn[~(i + n)], pad)`, the
/// `x`s in `format` (a stencil of sparse or dense vectors).
fn shifted_sum(format: &str, n: usize, pad: &str) -> String {
    let decls: String = (1..=n)
        .map(|k| format!("input x{k} :: {format}\n"))
        .collect();
    let sum: String = (1..=n)
        .map(|k| format!(" + coalesce(x{k}[~(i + {k})], {pad})"))
        .collect();
    format!("input y :: Dense(Element(0.0))\n{decls}output s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += y[i]{sum}\nend\n")
}

/// The size of the C the compiler generates for a program.
fn c_bytes(text: &str) -> usize {
    Program::parse(text)
        .and_then(|p| p.compile(Engine::Interp))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .c_source(finch::backend::c::CheckMode::Trusted)
        .unwrap()
        .len()
}

/// Eight sparse vectors read at shifted indices and padded with a value other than
/// their fill (`coalesce(x[~(i + k)], 1.0)`) would lower to megabytes of C (each padded
/// read's phases split the loop, for every combination of the operands, compactly or
/// not): refused by name, before the C compiler sees it.
#[test]
fn kernels_past_the_lowering_budget_are_refused() {
    let text = shifted_sum("SparseList(Element(0.0))", 8, "1.0");
    assert!(text.contains("coalesce(x8[~(i + 8)], 1.0)"), "{text}");
    let e = Program::parse(&text)
        .unwrap()
        .compile(Engine::Interp)
        .unwrap_err();
    assert!(
        matches!(e, finch::Error::Unsupported(_))
            && e.to_string().contains("a kernel this large")
            && e.to_string().contains("lowering passed"),
        "{e}"
    );
    // Six such reads: a lowering within its budget that leaves 2.7 MB of C. The
    // interpreter runs it; the C compiler is not given it (the C engine hands it to the
    // interpreter).
    let six = Program::parse(&shifted_sum("SparseList(Element(0.0))", 6, "1.0")).unwrap();
    assert!(six.compile(Engine::Interp).is_ok());
    if finch::backend::c::available() {
        // Too large for the C compiler: it runs in the interpreter, and says so.
        let compiled = six.compile(Engine::C).unwrap();
        assert_eq!(compiled.engine(), Engine::Interp);
        let w = compiled.warnings().join("\n");
        assert!(
            w.contains("a kernel this large in C") && w.contains("kernel interpreter"),
            "{w}"
        );
    }
    // Eight matrices in mixed formats read across their storage order (each row searched
    // at a bound index) lower within the budget: each read into a local of its own, their
    // code is the sum of theirs (it was 1.3 MB of C while each copied the others).
    let formats = [
        "SparseHash(SparseCOO{1}(Element(0.0)))",
        "SparseList(SparseInterval(Element(0.0)))",
        "SparseHash(SparsePoint(Element(0.0)))",
        "Dense(SparseHash(Element(0.0)))",
        "SparseHash(SparseCOO{1}(Element(0.0)))",
        "SparseList(SparseRunList(Element(0.0)))",
        "Dense(SparsePoint(Element(0.0)))",
        "Dense(SparseRunList(Element(0.0)))",
    ];
    let decls: String = formats
        .iter()
        .enumerate()
        .map(|(k, f)| format!("input a{k} :: {f}\n"))
        .collect();
    let sum = (0..8)
        .map(|k| format!("a{k}[i, j]"))
        .collect::<Vec<_>>()
        .join(" + ");
    let across = format!("{decls}output o :: Dense(Dense(Element(0.0)))\no .= 0\nfor i = _, j = _\n  o[j, i] = {sum}\nend\n");
    let program = Program::parse(&across).unwrap();
    assert!(program.compile(Engine::Interp).is_ok());
    assert!(c_bytes(&across) < 300_000, "{}", c_bytes(&across));
}

/// A loop whose statements share no written tensor, too large lowered together, is lowered
/// as one loop per statement: a sum and a difference of two pairs of galloped operands (a
/// block list with fill 1 and a list each) take about 1 500 statements apart, and past
/// what the C compiler is given together.
#[test]
fn independent_statements_too_large_together_run_in_loops_of_their_own() {
    let k = Kernel {
        name: "sum_and_difference_galloping",
        text: "input x :: SparseBlockList(Element(1.0))\ninput z :: SparseList(Element(0.0))\ninput u :: SparseBlockList(Element(1.0))\ninput v :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput w :: SparseCOO{1}(Element(0.0))\ns .= 0\nw .= 0.0\nfor i = _\n  s[] += x[gallop(i)] * z[gallop(i)]\n  w[i] = u[gallop(i)] - v[gallop(i)]\nend\n",
        inputs: &[
            ("x", false, 0, 0),
            ("z", false, 0, 0),
            ("u", false, 0, 0),
            ("v", false, 0, 0),
        ],
    };
    small_kernel_matches_reference(&k, 3000);
}

/// Reads several statements of a loop make are read once, around them: a running sum of a
/// product and a difference of the same two galloped operands (the second statement
/// reads the first's sum, so they stay in one loop) took 17 189 lines of kernel IR, four
/// walks coiterated, past what the C compiler is given; with each operand walked once,
/// about 1 300.
#[test]
fn reads_shared_by_statements_of_a_loop_are_walked_once() {
    let k = Kernel {
        name: "running_sum_and_difference_galloping",
        text: "input x :: SparseBlockList(Element(1.0))\ninput z :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\noutput w :: SparseCOO{1}(Element(0.0))\ns .= 0\nw .= 0.0\nfor i = _\n  s[] += x[gallop(i)] * z[gallop(i)]\n  w[i] = x[gallop(i)] - z[gallop(i)] + s[]\nend\n",
        inputs: &[("x", false, 0, 0), ("z", false, 0, 0)],
    };
    small_kernel_matches_reference(&k, 2000);
}

/// A read in a condition and in its branch (a masked copy), or in a condition and a loop
/// under it that does not change the read's indices (a column of a matrix scaled by the
/// entry of a sparse vector the condition tests), is read once, as with an explicit
/// `let`: the kernel is the same size, and walks `x` once rather than twice in lockstep
/// (89 and 95 lines of kernel IR before, 37 and 77 now).
#[test]
fn a_read_in_a_condition_and_under_it_is_walked_once() {
    let x = DenseArray::from_f64(&[6], &[0.0, 3.0, 0.25, 0.0, 1.0, -2.0]).unwrap();
    let head =
        "input x :: SparseList(Element(0.0))\noutput w :: Dense(Element(0.0))\nw .= 0\nfor i = _\n";
    let implicit = format!("{head}  if x[i] > 0.5\n    w[i] = x[i]\n  end\nend\n");
    let explicit =
        format!("{head}  let a = x[i]\n    if a > 0.5\n      w[i] = a\n    end\n  end\nend\n");
    assert_eq!(kernel_lines(&implicit), kernel_lines(&explicit));
    engines_match_reference(
        &Program::parse(&implicit).unwrap(),
        &[("x", &x)],
        &[],
        &implicit,
    );
    let head = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: SparseList(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _\n";
    let implicit = format!(
        "{head}  if x[j] != 0.0\n    for i = _\n      y[i] += A[i, j] * x[j]\n    end\n  end\nend\n"
    );
    let explicit = format!(
        "{head}  let a = x[j]\n    if a != 0.0\n      for i = _\n        y[i] += A[i, j] * a\n      end\n    end\n  end\nend\n"
    );
    assert_eq!(kernel_lines(&implicit), kernel_lines(&explicit));
    let a = DenseArray::from_f64(
        &[4, 6],
        &(0..24)
            .map(|k| {
                if k % 3 == 0 {
                    (k % 5) as f64 - 2.0
                } else {
                    0.0
                }
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    engines_match_reference(
        &Program::parse(&implicit).unwrap(),
        &[("A", &a), ("x", &x)],
        &[],
        &implicit,
    );
}

/// Lines of the kernel IR of a program.
fn kernel_lines(text: &str) -> usize {
    Program::parse(text)
        .unwrap()
        .compile(Engine::Interp)
        .unwrap()
        .kernel()
        .to_string()
        .lines()
        .count()
}

/// The kernel of `k` is under `lines` lines of kernel IR, and (in the interpreter and in
/// C, strict and reassociated, C running it) matches the reference on sizes 0, 1, 2, 9 and
/// 40 and two kinds of data.
fn small_kernel_matches_reference(k: &Kernel, lines: usize) {
    let n = kernel_lines(k.text);
    assert!(n < lines, "{n} lines");
    for (seed, n) in [0, 1, 2, 9, 40].into_iter().enumerate() {
        for structure in [0, 2] {
            check_program(
                k,
                k.text,
                [n, 1, 1],
                0.4,
                seed as u64,
                structure,
                &[Engine::Interp, Engine::C],
                false,
                false,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn a_repeated_read_is_read_once() {
    // `s[] += x[i] * x[i]` loads each stored value of `x` once (a `let`), like
    // `s[] += x[i] * 2.0`: the repeated read is not walked twice in lockstep.
    let x = DenseArray::from_f64(&[9], &[0.0, 3.0, 0.0, 0.0, -2.0, 0.0, 1.0, 0.0, 0.0]).unwrap();
    let f = Format::parse("SparseList(Element(0.0))").unwrap();
    let mut loads = Vec::new();
    for body in ["x[i] * x[i]", "x[i] * 2.0"] {
        let text = format!(
            "input x :: SparseList(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += {body}\nend\n"
        );
        let k = Program::parse(&text)
            .unwrap()
            .compile(Engine::Interp)
            .unwrap();
        let mut t = HashMap::from([("x".to_string(), Tensor::from_dense(&f, &x).unwrap())]);
        let r = k.run(&mut t, &HashMap::new()).unwrap();
        loads.push(r.stats.unwrap().loads);
        let want = if body.contains("2.0") { 4.0 } else { 14.0 };
        assert_eq!(t["s"].get(&[]).unwrap(), finch::Value::F64(want), "{body}");
    }
    assert_eq!(loads[0], loads[1], "loads of x[i] * x[i] vs x[i] * 2.0");
}
