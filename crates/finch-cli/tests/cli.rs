//! End-to-end tests of the `finch` binary: the README demo, output files, and the errors a
//! user meets (unknown name, missing input, shape mismatch, malformed file).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn finch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_finch"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("the finch binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A file in a temporary folder of its own, removed with the folder when dropped, so that
/// test runs leave nothing behind (a folder per file: tests run in parallel).
struct TempFile(PathBuf);

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn temp_path(name: &str) -> TempFile {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("finch-cli-test-{}-{k}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempFile(dir.join(name))
}

/// Reads the values of a Matrix Market coordinate n×1 vector with an independent minimal
/// parser (not the library's reader), as a dense vector.
fn read_vector_independently(path: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(path).expect("output file exists");
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('%') && !l.trim().is_empty());
    let size: Vec<usize> = lines
        .next()
        .expect("size line")
        .split_whitespace()
        .map(|t| t.parse().expect("size"))
        .collect();
    let mut y = vec![0.0; size[0]];
    for line in lines {
        let t: Vec<&str> = line.split_whitespace().collect();
        let i: usize = t[0].parse().expect("row");
        let j: usize = t[1].parse().expect("col");
        assert_eq!(j, 1, "a vector is written as an n×1 matrix");
        y[i - 1] = t[2].parse().expect("value");
    }
    y
}

#[test]
fn readme_demo_spmv_writes_the_right_y() {
    let out = temp_path("y.mtx");
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        "A=examples/data/A.mtx",
        "--input",
        "x=examples/data/x.mtx",
        "--output",
        &format!("y={}", out.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Computed by hand from examples/data/A.mtx and x = [1, 2, 3, 4, 5].
    assert_eq!(
        read_vector_independently(&out),
        vec![7.0, 6.0, 19.0, 31.0, 7.0]
    );
}

#[test]
fn readme_demo_prints_y_without_output_flag() {
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        "A=examples/data/A.mtx",
        "--input",
        "x=examples/data/x.mtx",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.starts_with("y = "), "{stdout}");
    for v in ["7.0", "6.0", "19.0", "31.0"] {
        assert!(stdout.contains(v), "missing {v} in {stdout}");
    }
}

#[test]
fn spmv_on_a_real_matrix_matches_an_independent_product() {
    let data = repo_root().join("../shared/data/matrices/west0067.mtx");
    if !data.exists() {
        eprintln!("note: {} not found; skipping", data.display());
        return;
    }
    // Independent dense product from the raw triples (west0067 is `real general`).
    let text = std::fs::read_to_string(&data).expect("read");
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('%') && !l.trim().is_empty());
    let size: Vec<usize> = lines
        .next()
        .expect("size")
        .split_whitespace()
        .map(|t| t.parse().expect("int"))
        .collect();
    let (m, n) = (size[0], size[1]);
    let x: Vec<f64> = (0..n).map(|j| (j % 7) as f64 - 2.5).collect();
    let mut y = vec![0.0; m];
    for line in lines {
        let t: Vec<&str> = line.split_whitespace().collect();
        let i: usize = t[0].parse().expect("row");
        let j: usize = t[1].parse().expect("col");
        let v: f64 = t[2].parse().expect("val");
        y[i - 1] += v * x[j - 1];
    }
    let xfile = temp_path("x_west.mtx");
    let mut xt = format!("%%MatrixMarket matrix array real general\n{n} 1\n");
    for v in &x {
        xt.push_str(&format!("{v:?}\n"));
    }
    std::fs::write(&xfile, xt).expect("write x");
    let yfile = temp_path("y_west.mtx");
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        &format!("A={}", data.display()),
        "--input",
        &format!("x={}", xfile.display()),
        "--output",
        &format!("y={}", yfile.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = read_vector_independently(&yfile);
    assert_eq!(got.len(), m);
    for (k, (a, b)) in got.iter().zip(&y).enumerate() {
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "y[{k}]: {a} vs {b}"
        );
    }
}

#[test]
fn unknown_input_name_is_a_clear_error() {
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        "B=examples/data/A.mtx",
        "--input",
        "x=examples/data/x.mtx",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("no tensor `B`"), "{e}");
}

#[test]
fn missing_input_is_a_clear_error() {
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        "A=examples/data/A.mtx",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("missing input: x"), "{e}");
}

#[test]
fn shape_mismatch_is_a_clear_error() {
    let xfile = temp_path("x_short.mtx");
    std::fs::write(
        &xfile,
        "%%MatrixMarket matrix array real general\n4 1\n1.0\n2.0\n3.0\n4.0\n",
    )
    .expect("write");
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        "A=examples/data/A.mtx",
        "--input",
        &format!("x={}", xfile.display()),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains('5') && e.contains('4'),
        "names both extents: {e}"
    );
}

#[test]
fn malformed_file_reports_its_line() {
    let bad = temp_path("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n3 1 2.0\n",
    )
    .expect("write");
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        &format!("A={}", bad.display()),
        "--input",
        "x=examples/data/x.mtx",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(":4:"), "names line 4: {e}");
}

#[test]
fn parse_prints_the_program_back() {
    let o = finch(&["parse", "examples/spmv.fin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("input A :: Dense(SparseList(Element(0.0)))"),
        "{s}"
    );
    assert!(s.contains("y[i] += A[i, j] * x[j]"), "{s}");
}

#[test]
fn parse_error_shows_line_and_column() {
    let bad = temp_path("bad.fin");
    std::fs::write(
        &bad,
        "output s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += \nend\n",
    )
    .expect("write");
    let o = finch(&["parse", bad.to_str().expect("utf8 path")]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("4:") || e.contains("5:"), "{e}");
}

#[test]
fn info_summarizes_a_matrix() {
    let o = finch(&["info", "examples/data/A.mtx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains('5') && s.contains("10"), "{s}");
}

#[test]
fn a_huge_sparse_input_is_refused_not_allocated() {
    let big = temp_path("big.mtx");
    std::fs::write(
        &big,
        "%%MatrixMarket matrix coordinate real general\n1000000 1000000 1\n1 1 1.0\n",
    )
    .expect("write");
    // The reference engine works on dense copies: it refuses.
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--engine",
        "reference",
        "--input",
        &format!("A={}", big.display()),
        "--input",
        "x=examples/data/x.mtx",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("dense copy") && e.contains("limit"), "{e}");
    // The compiled engine keeps the matrix sparse and reports the real problem.
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--input",
        &format!("A={}", big.display()),
        "--input",
        "x=examples/data/x.mtx",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("size 1000000") && e.contains("size 5"), "{e}");
}

#[test]
fn all_engines_agree_on_the_demo() {
    let mut results = Vec::new();
    for engine in ["c", "interp", "reference"] {
        let out = temp_path(&format!("y_{engine}.mtx"));
        let o = finch(&[
            "run",
            "examples/spmv.fin",
            "--engine",
            engine,
            "--input",
            "A=examples/data/A.mtx",
            "--input",
            "x=examples/data/x.mtx",
            "--output",
            &format!("y={}", out.display()),
        ]);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        results.push(read_vector_independently(&out));
    }
    assert!(
        results
            .iter()
            .all(|r| r == &vec![7.0, 6.0, 19.0, 31.0, 7.0]),
        "{results:?}"
    );
}

#[test]
fn repeat_prints_kernel_times() {
    let o = finch(&[
        "run",
        "examples/spmv.fin",
        "--repeat",
        "5",
        "--input",
        "A=examples/data/A.mtx",
        "--input",
        "x=examples/data/x.mtx",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("5 runs") && e.contains("min") && e.contains("median"),
        "{e}"
    );
}

#[test]
fn code_prints_c_and_ir() {
    let o = finch(&["code", "examples/spmv.fin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c = String::from_utf8_lossy(&o.stdout);
    assert!(
        c.contains("int finch_kernel(") && c.contains("while (1)"),
        "{c}"
    );
    let o = finch(&[
        "code",
        "examples/spmv.fin",
        "--ir",
        "--format",
        "A=Dense(Dense(Element(0.0)))",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ir = String::from_utf8_lossy(&o.stdout);
    assert!(
        ir.contains("kernel finch_program") && !ir.contains("while"),
        "{ir}"
    );
}

#[test]
fn programs_the_compiler_cannot_take_yet_point_to_the_reference_engine() {
    // Eight sparse vectors read at shifted indices, padded with a value other than their
    // fill, and added in one loop would lower to megabytes of C: not compiled (yet).
    let program = temp_path("eight_shifted_vectors.fin");
    let names = ["y", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"];
    let decls: String = (1..=8)
        .map(|k| format!("input x{k} :: SparseList(Element(0.0))\n"))
        .collect();
    let sum: String = (1..=8)
        .map(|k| format!(" + coalesce(x{k}[~(i + {k})], 1.0)"))
        .collect();
    std::fs::write(
        &program,
        format!("input y :: Dense(Element(0.0))\n{decls}output s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += y[i]{sum}\nend\n"),
    )
    .expect("write program");
    let mut args = vec![
        "run".to_string(),
        program.to_str().expect("utf-8 path").to_string(),
    ];
    for v in names {
        args.extend(["--input".to_string(), format!("{v}=examples/data/x.mtx")]);
    }
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = finch(&args);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("not supported yet") && e.contains("--engine reference"),
        "{e}"
    );
    // As the message says, the reference engine runs it: y = x = 1..5, and x shifted by
    // k = 1 to 8 with k pads of 1.0 (five past k = 5): 15 + (14 + 1) + (12 + 2) + (9 + 3)
    // + (5 + 4) + 5 + 5 + 5 + 5.
    args.extend(["--engine", "reference"]);
    let o = finch(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("85"), "{out}");
}

#[test]
fn lower_prints_each_normalization() {
    let o = finch(&["lower", "examples/fig10_offset_triangle.fin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // Parsed, then with the offset's extent (i runs over 2:m+1) and the mask, then the kernel.
    assert!(out.contains("# 1. parsed"), "{out}");
    assert!(
        out.contains("for i = 2:(A_lvl2_shape + 1)") && out.contains("s[] += A[i - 1, j]"),
        "{out}"
    );
    assert!(
        out.contains("# 3. kernel IR") && out.contains("kernel finch_program"),
        "{out}"
    );
    // A read out of loop order is concordized with a warning.
    let o = finch(&[
        "lower",
        "examples/spmv.fin",
        "--format",
        "A=Dense(SparseList(Element(0.0)))",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn compact_lowering_shares_one_loop_among_few_terms() {
    // Three band vectors summed: specialized, a loop per combination of their phases;
    // `--compact`, one loop walking the bands segment by segment, with the same result.
    let program = temp_path("three_bands.fin");
    std::fs::write(
        &program,
        "input a :: SparseBand(Element(0.0))\ninput b :: SparseBand(Element(0.0))\ninput c :: SparseBand(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += a[i] + b[i] * 2.0 + c[i]\nend\n",
    )
    .expect("write program");
    let path = program.to_str().expect("utf-8 path");
    let size = |compact: bool| {
        let mut args = vec!["code", path];
        if compact {
            args.push("--compact");
        }
        let o = finch(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        o.stdout.len()
    };
    let (specialized, compact) = (size(false), size(true));
    assert!(
        compact * 2 < specialized,
        "{compact} B compact, {specialized} B specialized"
    );
    let mut args = vec!["run", path, "-i", "a=examples/data/x.mtx"];
    args.extend(["-i", "b=examples/data/x.mtx", "-i", "c=examples/data/x.mtx"]);
    let plain = finch(&args);
    args.push("--compact");
    let shared = finch(&args);
    assert!(
        plain.status.success() && shared.status.success(),
        "{}",
        stderr(&shared)
    );
    assert_eq!(plain.stdout, shared.stdout);
    // x holds 1..5 (a band of five): 15 + 2 * 15 + 15.
    assert!(String::from_utf8_lossy(&shared.stdout).contains("60"));
}

/// An output whose fill is not zero is written as its stored entries, the fill named in a
/// comment and in the message, and read back into a format with that fill it holds the
/// same values: `y[i] = 1.5` where `x[i]` is stored as 0, else `x[i] + 1`.
#[test]
fn an_output_with_a_fill_other_than_zero_names_it_and_reads_back() {
    // The other files share `x`'s folder, removed with it.
    let x = temp_path("x.mtx");
    let dir = x.parent().expect("a folder");
    let (y, program, check) = (dir.join("y.mtx"), dir.join("fill.fin"), dir.join("sum.fin"));
    std::fs::write(
        &x,
        "%%MatrixMarket matrix coordinate real general\n4 1 2\n2 1 3.0\n4 1 -1.0\n",
    )
    .expect("write x");
    std::fs::write(
        &program,
        "input x :: SparseList(Element(0.0))\noutput y :: SparseList(Element(1.5))\ny .= 1.5\nfor i = _\n  if x[i] != 0\n    y[i] = x[i] + 1\n  end\nend\n",
    )
    .expect("write program");
    let o = finch(&[
        "run",
        &program.display().to_string(),
        "--input",
        &format!("x={}", x.display()),
        "--output",
        &format!("y={}", y.display()),
        "--shape",
        "y=4",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds its fill 1.5"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&y).expect("y written");
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("% fill 1.5")),
        "{text}"
    );
    // Read back with the same fill: 1.5 + 4 + 1.5 + 0 = 7.
    std::fs::write(
        &check,
        "input y :: SparseList(Element(1.5))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += y[i]\nend\n",
    )
    .expect("write check");
    let o = finch(&[
        "run",
        &check.display().to_string(),
        "--input",
        &format!("y={}", y.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("7.0"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
