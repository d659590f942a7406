//! SpMV benchmark: compiled Finch kernels (column-major over CSC, row-major over CSR) against
//! hand-written Rust loops over the same buffers and SciPy (`bench/.venv`, if present), on
//! shared-data matrices and generated ones, in one run; plus a STREAM-like read bandwidth,
//! compile latency (cold, disk cache, memory cache) and call overhead.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use finch::engine::Engine;
use finch::formats::Format;
use finch::tensor::{Buffer, Tensor};
use finch::Program;

const COL: &str = "input A :: Dense(SparseList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor j = _, i = _\n  y[i] += A[i, j] * x[j]\nend\n";
const ROW: &str = "input AT :: Dense(SparseList(Element(0.0)))\ninput x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _, j = _\n  y[i] += AT[j, i] * x[j]\nend\n";

/// The four compiled SpMV kernels: column- and row-major, 64- and 32-bit indices.
pub struct Kernels {
    col: finch::engine::CompiledProgram,
    row: finch::engine::CompiledProgram,
    col32: finch::engine::CompiledProgram,
    row32: finch::engine::CompiledProgram,
    /// `col32` and `row32` compiled with `reassociate`.
    col32r: finch::engine::CompiledProgram,
    row32r: finch::engine::CompiledProgram,
}

/// A matrix as CSR arrays (row pointers, column indices, values).
pub struct Csr {
    name: String,
    m: usize,
    n: usize,
    ptr: Vec<usize>,
    idx: Vec<usize>,
    val: Vec<f64>,
}

fn time<F: FnMut() -> Result<()>>(repeat: usize, mut f: F) -> Result<(Duration, Duration)> {
    let mut t = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed());
    }
    t.sort();
    Ok((t[0], t[t.len() / 2]))
}

fn from_mtx(path: &Path) -> Result<Csr> {
    let mm = finch::io::read_matrix_market_file(path)?;
    let coo = mm.coo.convert_to(finch::ScalarType::F64)?;
    let (m, n) = (coo.shape[0], coo.shape[1]);
    // Row-major CSR via counting sort (duplicates are not present in the shared matrices).
    let mut ptr = vec![0usize; m + 1];
    for &i in &coo.coords[0] {
        ptr[i + 1] += 1;
    }
    for i in 0..m {
        ptr[i + 1] += ptr[i];
    }
    let mut next = ptr.clone();
    let mut order = vec![0usize; coo.len()];
    for k in 0..coo.len() {
        let i = coo.coords[0][k];
        order[next[i]] = k;
        next[i] += 1;
    }
    for i in 0..m {
        order[ptr[i]..ptr[i + 1]].sort_by_key(|&k| coo.coords[1][k]);
    }
    let idx = order.iter().map(|&k| coo.coords[1][k]).collect();
    let val = order
        .iter()
        .map(|&k| coo.vals[k].as_f64().unwrap_or(0.0))
        .collect();
    Ok(Csr {
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        m,
        n,
        ptr,
        idx,
        val,
    })
}

/// A random n×n matrix with `nnz` entries (distinct per row, sorted), reproducible.
fn random(n: usize, nnz: usize) -> Csr {
    let mut s: u64 = 0x9e3779b97f4a7c15;
    let mut rnd = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let per_row = nnz / n.max(1);
    let mut ptr = vec![0usize];
    let mut idx = Vec::with_capacity(nnz);
    for _ in 0..n {
        let mut row: Vec<usize> = (0..per_row).map(|_| (rnd() % n as u64) as usize).collect();
        row.sort_unstable();
        row.dedup();
        idx.extend(row);
        ptr.push(idx.len());
    }
    let val = (0..idx.len()).map(|k| ((k % 17) as f64) - 8.0).collect();
    Csr {
        name: format!("random_{n}x{n}_{}nnz", idx.len()),
        m: n,
        n,
        ptr,
        idx,
        val,
    }
}

/// An n×n banded matrix with half-bandwidth `w`.
fn banded(n: usize, w: usize) -> Csr {
    let mut ptr = vec![0usize];
    let mut idx = Vec::with_capacity(n * (2 * w + 1));
    for i in 0..n {
        let lo = i.saturating_sub(w);
        let hi = (i + w).min(n - 1);
        idx.extend(lo..=hi);
        ptr.push(idx.len());
    }
    let val = (0..idx.len())
        .map(|k| ((k % 13) as f64) * 0.5 - 3.0)
        .collect();
    Csr {
        name: format!("banded_{n}x{n}_w{w}"),
        m: n,
        n,
        ptr,
        idx,
        val,
    }
}

/// CSC of the same matrix (transpose of the CSR arrays).
fn csc(a: &Csr) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
    let mut ptr = vec![0usize; a.n + 1];
    for &j in &a.idx {
        ptr[j + 1] += 1;
    }
    for j in 0..a.n {
        ptr[j + 1] += ptr[j];
    }
    let mut next = ptr.clone();
    let mut idx = vec![0usize; a.idx.len()];
    let mut val = vec![0.0; a.idx.len()];
    for i in 0..a.m {
        for q in a.ptr[i]..a.ptr[i + 1] {
            let j = a.idx[q];
            idx[next[j]] = i;
            val[next[j]] = a.val[q];
            next[j] += 1;
        }
    }
    (ptr, idx, val)
}

fn stream_gbs() -> f64 {
    let v = vec![1.0f64; 1 << 25]; // 256 MiB
                                   // An integer reduction over the bits vectorizes freely (a sequential float sum would
                                   // measure the adder's latency, not memory).
    let (min, _) = time(5, || {
        std::hint::black_box(v.iter().fold(0u64, |a, x| a.wrapping_add(x.to_bits())));
        Ok(())
    })
    .unwrap_or((Duration::from_secs(1), Duration::from_secs(1)));
    (v.len() * 8) as f64 / min.as_secs_f64() / 1e9
}

/// One baseline's timing: name, minimum, median, checksum of `y`.
struct Baseline {
    name: String,
    min: Duration,
    checksum: f64,
}

/// The Python baselines (SciPy, MKL, GraphBLAS) on `a` and `x`, each that could run.
fn python_baselines(a: &Csr, x: &[f64], repeat: usize, dir: &Path) -> Vec<Baseline> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/.venv/bin/python");
    if !py.exists() {
        return vec![];
    }
    let write = |name: &str, bytes: Vec<u8>| std::fs::write(dir.join(name), bytes);
    let ok = write(
        "indptr.bin",
        a.ptr
            .iter()
            .flat_map(|&v| (v as i64).to_le_bytes())
            .collect(),
    )
    .is_ok()
        && write(
            "indices.bin",
            a.idx
                .iter()
                .flat_map(|&v| (v as i64).to_le_bytes())
                .collect(),
        )
        .is_ok()
        && write(
            "data.bin",
            a.val.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
        .is_ok()
        && write("x.bin", x.iter().flat_map(|v| v.to_le_bytes()).collect()).is_ok();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/spmv_baseline.py");
    let out = ok
        .then(|| {
            Command::new(py)
                .arg(script)
                .arg(dir)
                .arg(a.m.to_string())
                .arg(a.n.to_string())
                .arg(repeat.to_string())
                .output()
                .ok()
        })
        .flatten();
    for f in ["indptr.bin", "indices.bin", "data.bin", "x.bin"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let Some(out) = out else {
        return vec![];
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.trim().is_empty() {
        eprintln!("{}", stderr.trim());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [name, min, _median, sum] = parts[..] else {
                return None;
            };
            Some(Baseline {
                name: name.to_string(),
                min: Duration::from_secs_f64(min.parse().ok()?),
                checksum: sum.parse().ok()?,
            })
        })
        .collect()
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// Where a benchmark matrix comes from.
enum MatrixSource {
    /// A Matrix Market file.
    File(PathBuf),
    /// `random(n, nnz)`.
    Random(usize, usize),
    /// `banded(n, w)`.
    Banded(usize, usize),
}

impl MatrixSource {
    /// The matrix's name in the report.
    fn name(&self) -> String {
        match self {
            MatrixSource::File(p) => p
                .file_stem()
                .map_or(String::new(), |s| s.to_string_lossy().into_owned()),
            MatrixSource::Random(n, _) => format!("random_{n}"),
            MatrixSource::Banded(n, _) => format!("banded_{n}"),
        }
    }

    fn load(&self) -> Result<Csr> {
        Ok(match self {
            MatrixSource::File(p) => from_mtx(p).with_context(|| p.display().to_string())?,
            MatrixSource::Random(n, nnz) => random(*n, *nnz),
            MatrixSource::Banded(n, w) => banded(*n, *w),
        })
    }
}

/// The timings of one matrix.
struct Measured {
    name: String,
    m: usize,
    n: usize,
    nnz: usize,
    finch_row: Duration,
    finch_col: Duration,
    finch_row32: Duration,
    finch_col32: Duration,
    /// The faster of row and column major over 32-bit indices, reassociated.
    finch_reassoc: Duration,
    rust_csr: Duration,
    rust_csc: Duration,
    baselines: Vec<Baseline>,
}

impl Measured {
    fn best_finch(&self) -> Duration {
        self.finch_row
            .min(self.finch_col)
            .min(self.finch_row32)
            .min(self.finch_col32)
    }

    fn best_baseline(&self) -> Duration {
        self.baselines
            .iter()
            .map(|b| b.min)
            .fold(self.rust_csr.min(self.rust_csc), Duration::min)
    }
}

fn display_name(baseline: &str) -> &str {
    match baseline {
        "scipy" => "SciPy",
        "mkl" => "MKL",
        "graphblas" => "GraphBLAS",
        other => other,
    }
}

/// Times every variant on `a`, consuming it: its arrays move into the Finch tensors
/// rather than being copied.
fn measure(a: Csr, k: &Kernels, repeat: usize, tmp: &Path) -> Result<Measured> {
    let x: Vec<f64> = (0..a.n).map(|j| ((j % 7) as f64) * 0.25 + 1.0).collect();
    let xt = Tensor::from_dense(
        &Format::parse("Dense(Element(0.0))")?,
        &finch::DenseArray::from_f64(&[a.n], &x)?,
    )?;
    let baselines = python_baselines(&a, &x, repeat, tmp);
    // Hand-written Rust loops on the same buffers.
    let mut y = vec![0.0; a.m];
    let (rust_csr, _) = time(repeat, || {
        for (i, yi) in y.iter_mut().enumerate() {
            let mut s = 0.0;
            for q in a.ptr[i]..a.ptr[i + 1] {
                s += a.val[q] * x[a.idx[q]];
            }
            *yi = s;
        }
        std::hint::black_box(&y);
        Ok(())
    })?;
    let (cp, ci, cv) = csc(&a);
    let (rust_csc, _) = time(repeat, || {
        y.iter_mut().for_each(|v| *v = 0.0);
        for j in 0..a.n {
            let xj = x[j];
            for q in cp[j]..cp[j + 1] {
                y[ci[q]] += cv[q] * xj;
            }
        }
        std::hint::black_box(&y);
        Ok(())
    })?;
    // Column-major over CSC, with 64- then 32-bit indices (the values are shared).
    let (cp32, ci32) = (narrow(&cp)?, narrow(&ci)?);
    let a_csc = Tensor::from_csc(a.m, a.n, cp, ci, Buffer::F64(cv))?;
    let (finch_col, a_csc) = run_finch(&k.col, "A", a_csc, &xt, repeat)?;
    let (_, _, storage) = a_csc.into_parts();
    let cv = csc_values(storage)?;
    let a_csc32 = Tensor::from_csc(a.m, a.n, cp32, ci32, Buffer::F64(cv))?;
    let (finch_col32, a_csc32) = run_finch(&k.col32, "A", a_csc32, &xt, repeat)?;
    let (col32r, _) = run_finch(&k.col32r, "A", a_csc32, &xt, repeat)?;
    // Row-major: CSR of A is CSC of A^T, without a copy.
    let (name, m, n, nnz) = (a.name, a.m, a.n, a.idx.len());
    let (ptr32, idx32) = (narrow(&a.ptr)?, narrow(&a.idx)?);
    let at = Tensor::from_csr_transposed(m, n, a.ptr, a.idx, Buffer::F64(a.val))?;
    let (finch_row, at) = run_finch(&k.row, "AT", at, &xt, repeat)?;
    let (_, _, storage) = at.into_parts();
    let val = csc_values(storage)?;
    let at32 = Tensor::from_csr_transposed(m, n, ptr32, idx32, Buffer::F64(val))?;
    let (row32r, at32) = run_finch(&k.row32r, "AT", at32, &xt, repeat)?;
    let mut t_row: HashMap<String, Tensor> = HashMap::from([("AT".into(), at32), ("x".into(), xt)]);
    let mut times = Vec::new();
    for _ in 0..repeat.max(1) {
        times.push(k.row32.run(&mut t_row, &HashMap::new())?.kernel_time);
    }
    let finch_row32 = times.into_iter().min().unwrap_or_default();
    let checksum: f64 = t_row["y"]
        .to_coo()
        .vals
        .iter()
        .filter_map(|v| v.as_f64())
        .sum();
    for b in &baselines {
        if (b.checksum - checksum).abs() > 1e-6 * checksum.abs().max(1.0) {
            eprintln!(
                "warning: {name}: {} checksum {} differs from finch {checksum}",
                b.name, b.checksum
            );
        }
    }
    Ok(Measured {
        name,
        m,
        n,
        nnz,
        finch_row,
        finch_col,
        finch_row32,
        finch_col32,
        finch_reassoc: row32r.min(col32r),
        rust_csr,
        rust_csc,
        baselines,
    })
}

/// Indices as `u32` (every benchmark matrix has fewer than 2^32 entries).
fn narrow(v: &[usize]) -> Result<Vec<u32>> {
    v.iter()
        .map(|&x| u32::try_from(x).context("an index does not fit in 32 bits"))
        .collect()
}

/// The value buffer of a `Dense(SparseList(Element))` tensor's storage.
fn csc_values(storage: finch::tensor::TensorStorage) -> Result<Vec<f64>> {
    use finch::formats::LevelStorage;
    if let finch::tensor::TensorStorage::Levels(LevelStorage::Dense(d)) = storage {
        if let LevelStorage::SparseList(s) = *d.child {
            if let LevelStorage::Element(e) = *s.child {
                if let Buffer::F64(v) = e.val {
                    return Ok(v);
                }
            }
        }
    }
    bail!("internal: not a CSC tensor of f64")
}

/// The fastest of `repeat` runs of `kernel` on matrix `a` (bound to `name`) and `x`; gives
/// the matrix back.
fn run_finch(
    kernel: &finch::engine::CompiledProgram,
    name: &str,
    a: Tensor,
    x: &Tensor,
    repeat: usize,
) -> Result<(Duration, Tensor)> {
    let mut t: HashMap<String, Tensor> = HashMap::from([(name.into(), a), ("x".into(), x.clone())]);
    let mut times = Vec::new();
    for _ in 0..repeat.max(1) {
        times.push(kernel.run(&mut t, &HashMap::new())?.kernel_time);
    }
    let a = t.remove(name).context("internal: the matrix")?;
    Ok((times.into_iter().min().unwrap_or_default(), a))
}

/// Runs the SpMV benchmark and returns the Markdown report.
pub fn run(repeat: usize, data: &Path, quick: bool, only: Option<&str>) -> Result<String> {
    let cache = std::env::temp_dir().join(format!("finch-bench-cache-{}", std::process::id()));
    std::env::set_var("FINCH_CACHE_DIR", &cache);
    let (kernels, latency) = compile_kernels(&cache)?;
    let sources = matrix_sources(data, quick, only);
    let stream = stream_gbs();
    let results = measure_all(&sources, &kernels, repeat)?;
    let call = call_overhead()?;
    let _ = std::fs::remove_dir_all(&cache);

    let mut out = String::new();
    out.push_str("# SpMV\n\n");
    out.push_str(&format!("Machine: {}\n\n", crate::machine_line()));
    out.push_str(&format!(
        "Minimum of {repeat} runs, milliseconds, single thread. Finch row = `y[i] += AT[j, i] * x[j]` over CSR (the \
         transposed tensor, no copy); Finch col = `y[i] += A[i, j] * x[j]` over CSC; Rust = hand-written loops over the \
         same arrays; SciPy = `csr_matrix @ x`, MKL = `sparse_dot_mkl.dot_product_mkl` (mkl_sparse_d_mv), GraphBLAS = python-graphblas `A @ x` (SuiteSparse, nthreads = 1) ({}). Ratio = best baseline / best Finch with strict floating-point order (> 1: Finch faster); ratio reassoc = best baseline / Finch u32 reassoc (the u32 programs compiled with `reassociate`). Bandwidth = \
         bytes a u32 kernel must read and write (12 per entry) / the fastest u32 kernel's time, as a share of the STREAM-like read bandwidth measured in \
         this run ({stream:.1} GB/s). The u32 columns run the same programs over `SparseList{{UInt32}}`, the index width SciPy, MKL and GraphBLAS are given. Kernels are compiled with `cc -O3` (trusted mode, no bounds checks).\n\n",
        if Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/.venv/bin/python").exists() { "bench/.venv" } else { "not installed: run bench/run.sh" }
    ));
    out.push_str(&results_table(&results, stream));
    out.push_str(&format!(
        "\nGeomean ratio (best baseline / best Finch): **{:.2}** with the default \
         strict floating-point order (as SciPy and GraphBLAS), **{:.2}** with \
         `CompileOptions {{ reassociate: true }}` (`finch run --reassociate`: the C compiler may \
         reorder the sums, as MKL's kernels do).\n\n",
        results.geomean, results.geomean_reassoc
    ));
    out.push_str(
        "Index width: `SparseList` stores 64-bit indices and positions by default (16 bytes \
         per stored `f64` entry); `SparseList{UInt32}` stores 32-bit ones (12 bytes), as the \
         baselines do.\n\n",
    );
    out.push_str(&latency_table(&latency, call));
    Ok(out)
}

/// How long the column-major SpMV program takes to compile.
struct Latency {
    /// With an empty cache.
    cold: Duration,
    /// Again in the same process (the in-memory cache).
    memory: Duration,
    /// In a fresh process, from the disk cache (`None` if the child process failed).
    disk: Option<Duration>,
}

/// Compiles the SpMV kernels (with `cache` as the disk cache), measuring the compile
/// latency of the first on the way.
fn compile_kernels(cache: &Path) -> Result<(Kernels, Latency)> {
    let col = Program::parse(COL)?;
    let row = Program::parse(ROW)?;
    // Compile latency: cold (empty cache), memory (same process), disk (a child process).
    let t = Instant::now();
    let col_k = col.compile(Engine::C)?;
    let cold = t.elapsed();
    if col_k.engine() != Engine::C {
        bail!("no C compiler found: the SpMV benchmark measures compiled C");
    }
    let t = Instant::now();
    let _again = col.compile(Engine::C)?;
    let memory = t.elapsed();
    let disk = Command::new(std::env::current_exe()?)
        .arg("compile-latency")
        .env("FINCH_CACHE_DIR", cache)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map(Duration::from_secs_f64);
    let narrow_text = |t: &str| t.replace("SparseList(", "SparseList{UInt32}(");
    let reassociate = finch::engine::CompileOptions {
        reassociate: true,
        ..Default::default()
    };
    let (col32, row32) = (
        Program::parse(&narrow_text(COL))?,
        Program::parse(&narrow_text(ROW))?,
    );
    let kernels = Kernels {
        row: row.compile(Engine::C)?,
        col32: col32.compile(Engine::C)?,
        row32: row32.compile(Engine::C)?,
        col32r: col32.compile_with(Engine::C, &reassociate)?,
        row32r: row32.compile_with(Engine::C, &reassociate)?,
        col: col_k,
    };
    Ok((kernels, Latency { cold, memory, disk }))
}

/// The matrices to run on: the shared-data files present, then a random and a banded
/// one (small ones where `quick`); only those whose name contains `only`, if given.
fn matrix_sources(data: &Path, quick: bool, only: Option<&str>) -> Vec<MatrixSource> {
    // Matrices are loaded (or generated) one at a time, so the process holds one matrix
    // and its CSC copy at most (the 2M x 2M banded matrix alone is 4 GB as CSR).
    let mut sources: Vec<MatrixSource> = Vec::new();
    let names: &[&str] = if quick {
        &["bcsstk16"]
    } else {
        &[
            "metis_copter2",
            "metis_mdual",
            "bcsstk16",
            "soc-Slashdot0902",
            "ego-Twitter_undirected",
            "delaunay_n16",
        ]
    };
    for n in names {
        let p = data.join("matrices").join(format!("{n}.mtx"));
        if p.exists() {
            sources.push(MatrixSource::File(p));
        } else {
            eprintln!("note: {} missing", p.display());
        }
    }
    sources.push(if quick {
        MatrixSource::Random(10_000, 100_000)
    } else {
        MatrixSource::Random(100_000, 1_000_000)
    });
    sources.push(if quick {
        MatrixSource::Banded(20_000, 64)
    } else {
        MatrixSource::Banded(2_000_000, 64)
    });

    if let Some(only) = only {
        sources.retain(|s| s.name().contains(only));
    }
    sources
}

/// Every matrix measured, the baselines any of them ran, and the geometric means of
/// the ratios best baseline / best Finch (strict and reassociated).
struct Results {
    rows: Vec<Measured>,
    baseline_names: Vec<String>,
    geomean: f64,
    geomean_reassoc: f64,
}

/// Measures every source, loading one matrix at a time.
fn measure_all(sources: &[MatrixSource], kernels: &Kernels, repeat: usize) -> Result<Results> {
    let tmp = std::env::temp_dir().join(format!("finch-bench-spmv-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut rows = Vec::new();
    let mut ratios_best = Vec::new();
    let mut ratios_reassoc = Vec::new();
    let mut baseline_names: Vec<String> = Vec::new();
    for source in sources {
        let a = source.load()?;
        eprintln!("spmv: {} ({}x{}, {} nnz)", a.name, a.m, a.n, a.idx.len());
        let m = measure(a, kernels, repeat, &tmp)?;
        for b in &m.baselines {
            if !baseline_names.contains(&b.name) {
                baseline_names.push(b.name.clone());
            }
        }
        ratios_best.push(m.best_baseline().as_secs_f64() / m.best_finch().as_secs_f64());
        ratios_reassoc.push(m.best_baseline().as_secs_f64() / m.finch_reassoc.as_secs_f64());
        rows.push(m);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let geo = |r: &[f64]| (r.iter().map(|r| r.ln()).sum::<f64>() / r.len().max(1) as f64).exp();
    let (geomean, geomean_reassoc) = (geo(&ratios_best), geo(&ratios_reassoc));
    Ok(Results {
        rows,
        baseline_names,
        geomean,
        geomean_reassoc,
    })
}

/// The fastest and the median call of a tiny kernel (one element): the cost of a call.
fn call_overhead() -> Result<(Duration, Duration)> {
    let tiny = Program::parse("input x :: Dense(Element(0.0))\noutput s :: Scalar(0.0)\ns .= 0\nfor i = _\n  s[] += x[i]\nend\n")?;
    let tiny_k = tiny.compile(Engine::C)?;
    let one = Tensor::from_dense(
        &Format::parse("Dense(Element(0.0))")?,
        &finch::DenseArray::from_f64(&[1], &[1.0])?,
    )?;
    let mut tt: HashMap<String, Tensor> = HashMap::from([("x".into(), one)]);
    time(2000, || {
        tiny_k.run(&mut tt, &HashMap::new())?;
        Ok(())
    })
}

/// The Markdown table of the measurements, a row per matrix (`stream`: the read
/// bandwidth in GB/s the bandwidth column is a share of).
fn results_table(results: &Results, stream: f64) -> String {
    let Results {
        rows,
        baseline_names,
        ..
    } = results;
    let mut out = String::new();
    let mut header =
        String::from("| matrix | shape | nnz | Finch row | Finch col | Finch row u32 | Finch col u32 | Finch u32 reassoc | Rust CSR | Rust CSC |");
    for name in baseline_names {
        header.push_str(&format!(" {} |", display_name(name)));
    }
    header.push_str(" best baseline | ratio | ratio reassoc | bandwidth |\n");
    out.push_str(&header);
    out.push_str(&"|---".repeat(14 + baseline_names.len()));
    out.push_str("|\n");
    for m in rows {
        let mut line = format!(
            "| {} | {}x{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.name,
            m.m,
            m.n,
            m.nnz,
            ms(m.finch_row),
            ms(m.finch_col),
            ms(m.finch_row32),
            ms(m.finch_col32),
            ms(m.finch_reassoc),
            ms(m.rust_csr),
            ms(m.rust_csc)
        );
        for name in baseline_names {
            let cell = m
                .baselines
                .iter()
                .find(|b| &b.name == name)
                .map_or("–".to_string(), |b| ms(b.min));
            line.push_str(&format!(" {cell} |"));
        }
        let best = m.best_baseline();
        let bytes = (m.nnz * 12 + (m.m + 1) * 4 + m.n * 8 + m.m * 8) as f64;
        let bw = bytes / m.finch_row32.min(m.finch_reassoc).as_secs_f64() / 1e9;
        line.push_str(&format!(
            " {} | {:.2} | {:.2} | {:.0}% |\n",
            ms(best),
            best.as_secs_f64() / m.best_finch().as_secs_f64(),
            best.as_secs_f64() / m.finch_reassoc.as_secs_f64(),
            100.0 * bw / stream
        ));
        out.push_str(&line);
    }
    out
}

/// The Markdown section on compile latency and call overhead (`call`: the fastest and
/// the median call).
fn latency_table(latency: &Latency, (call, call_med): (Duration, Duration)) -> String {
    let Latency { cold, memory, disk } = *latency;
    let mut out = String::new();
    out.push_str("## Compile latency and call overhead\n\n| what | time |\n|---|---|\n");
    out.push_str(&format!(
        "| cold compile (lower + emit + cc + load) | {} ms |\n",
        ms(cold)
    ));
    out.push_str(&format!(
        "| warm, from the disk cache (a fresh process) | {} |\n",
        disk.map_or("–".into(), |d| format!("{} ms", ms(d)))
    ));
    out.push_str(&format!(
        "| warm, in memory (same process) | {} ms |\n",
        ms(memory)
    ));
    out.push_str(&format!("| call overhead, 1-element kernel via `CompiledProgram::run` (min / median) | {:.2} µs / {:.2} µs |\n", call.as_secs_f64() * 1e6, call_med.as_secs_f64() * 1e6));
    out
}

/// Child-process helper: the latency of compiling the SpMV program with a warm disk cache.
pub fn compile_latency() -> Result<f64> {
    let p = Program::parse(COL)?;
    let t = Instant::now();
    p.compile(Engine::C)?;
    let total = t.elapsed().as_secs_f64();
    if std::env::var_os("FINCH_BENCH_BREAKDOWN").is_some() {
        let t = Instant::now();
        let lowered = finch::lower::lower_program(&p, false)?;
        let lower = t.elapsed();
        let t = Instant::now();
        let src = finch::backend::c::emit(
            &lowered.kernel,
            "finch_kernel",
            finch::backend::c::CheckMode::Trusted,
        )?;
        let emit = t.elapsed();
        eprintln!(
            "breakdown: lower {lower:?}, emit {emit:?} ({} bytes), total first compile {total:.6}s",
            src.len()
        );
    }
    Ok(total)
}

/// Where the shared data lives.
pub fn data_dir() -> PathBuf {
    match std::env::var_os("FINCH_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    }
}
