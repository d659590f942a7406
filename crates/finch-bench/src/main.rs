//! `finch-bench`: benchmarks of Finch-RS, written as ratios against a baseline measured in
//! the same run on the same input, with the machine noted.
//!
//! `spmv` — compiled SpMV against hand-written Rust loops and SciPy, plus bandwidth,
//! compile latency and call overhead (`bench/results/spmv.md`; `bench/run.sh` creates the
//! SciPy environment). `io` — Matrix Market read throughput of `finch::io` on the largest
//! matrices of `../shared/data` (or `$FINCH_DATA_DIR`), against the bytes-per-second of
//! a plain line split of the same text (the floor any reader must pay). Results go to
//! `bench/results/io.md`. `structure` — structured levels (SparseBand, SparsePoint,
//! SparseBlockList, Pattern leaves, RunList/SparseRunList) against their SparseList or
//! dense counterparts (`bench/results/structure.md`). `morphology` — Fig. 26's erosion and
//! masked histogram over run-length, sparse, dense and bitwise images of the shared data
//! against OpenCV
//! (`bench/results/morphology.md`; `bench/run.sh morphology` installs OpenCV).
//!
//! ```text
//! bench/run.sh spmv                                     # with the SciPy baseline
//! cargo run --release -p finch-bench -- spmv [--repeat 20] [--quick] [--only MATRIX]
//! cargo run --release -p finch-bench -- structure [--repeat 10] [--quick]
//! bench/run.sh morphology [--repeat 10] [--quick]
//! cargo run --release -p finch-bench -- io [--repeat 5]
//! ```

mod morphology;
mod spmv;
mod structure;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

fn data_dir() -> PathBuf {
    spmv::data_dir()
}

/// The machine line printed with every result table.
pub(crate) fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cpu}, {cores} cores available, single-threaded measurement")
}

/// Minimum and median of `repeat` runs of `f`.
fn time<F: FnMut() -> Result<()>>(repeat: usize, mut f: F) -> Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok((times[0], times[times.len() / 2]))
}

fn bench_io(repeat: usize) -> Result<String> {
    let dir = data_dir().join("matrices");
    if !dir.is_dir() {
        bail!(
            "{} not found: set FINCH_DATA_DIR to the shared data folder",
            dir.display()
        );
    }
    let names = [
        "ego-Twitter_undirected",
        "metis_mdual",
        "soc-Slashdot0902",
        "metis_copter2",
        "bcsstk16",
    ];
    let mut out = String::new();
    out.push_str("# Matrix Market read throughput\n\n");
    out.push_str(&format!("Machine: {}\n\n", machine_line()));
    out.push_str(&format!(
        "Min and median of {repeat} runs. Baseline: splitting the same text into lines and \
         whitespace tokens without parsing numbers (a floor for any reader). \
         Ratio = baseline time / reader time (1.0 means parsing is free).\n\n"
    ));
    out.push_str("| matrix | MB | entries | read min (ms) | read median (ms) | MB/s | token split min (ms) | ratio |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for name in names {
        let path = dir.join(format!("{name}.mtx"));
        if !path.exists() {
            eprintln!("note: {} missing, skipped", path.display());
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mb = text.len() as f64 / 1e6;
        let mut entries = 0;
        let (rmin, rmed) = time(repeat, || {
            let mm = finch::io::read_matrix_market(&text, &path.display().to_string())?;
            entries = mm.coo.len();
            Ok(())
        })?;
        let mut tokens = 0usize;
        let (bmin, _) = time(repeat, || {
            tokens = text.lines().map(|l| l.split_whitespace().count()).sum();
            Ok(())
        })?;
        std::hint::black_box(tokens);
        out.push_str(&format!(
            "| {name} | {mb:.1} | {entries} | {:.1} | {:.1} | {:.0} | {:.1} | {:.2} |\n",
            rmin.as_secs_f64() * 1e3,
            rmed.as_secs_f64() * 1e3,
            mb / rmin.as_secs_f64(),
            bmin.as_secs_f64() * 1e3,
            bmin.as_secs_f64() / rmin.as_secs_f64()
        ));
    }
    Ok(out)
}

/// How the benchmark binary is run.
const USAGE: &str =
    "finch-bench spmv|structure|morphology|io|compile-latency [--repeat N] [--quick] [--only MATRIX (spmv)]";

/// Prints a benchmark's report and, when `write`, saves it as `bench/results/{name}.md`
/// (a quick or partial run is only printed).
fn report(name: &str, table: &str, write: bool) -> Result<()> {
    print!("{table}");
    if write {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
        std::fs::create_dir_all(&results)?;
        std::fs::write(results.join(format!("{name}.md")), table)?;
        eprintln!("wrote bench/results/{name}.md");
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut repeat = 5usize;
    let mut which = None;
    let mut quick = false;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repeat" => {
                repeat = it
                    .next()
                    .and_then(|r| r.parse().ok())
                    .context("--repeat needs a positive number")?;
            }
            "io" => which = Some("io"),
            "spmv" => which = Some("spmv"),
            "structure" => which = Some("structure"),
            "morphology" => which = Some("morphology"),
            "compile-latency" => which = Some("compile-latency"),
            "--quick" => quick = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--only" => {
                only = Some(
                    it.next()
                        .context("--only needs a matrix name (or part of one)")?
                        .clone(),
                );
            }
            other => bail!("unknown argument `{other}` (usage: {USAGE})"),
        }
    }
    // Only `spmv` picks matrices; elsewhere `--only` would be silently ignored (and a full
    // run would overwrite the results).
    if only.is_some() && which != Some("spmv") {
        bail!("--only applies to `spmv` only (usage: {USAGE})");
    }
    match which {
        Some("io") => report("io", &bench_io(repeat)?, true),
        Some("spmv") => {
            let table = spmv::run(repeat, &data_dir(), quick, only.as_deref())?;
            report("spmv", &table, !quick && only.is_none())
        }
        Some("structure") => report(
            "structure",
            &structure::run(repeat, &data_dir(), quick)?,
            !quick,
        ),
        Some("morphology") => report(
            "morphology",
            &morphology::run(repeat, &data_dir(), quick)?,
            !quick,
        ),
        Some("compile-latency") => {
            println!("{}", spmv::compile_latency()?);
            Ok(())
        }
        _ => bail!("usage: {USAGE}"),
    }
}
