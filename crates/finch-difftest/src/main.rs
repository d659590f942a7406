//! `finch-difftest`: the differential tester's command line.
//!
//! ```text
//! finch-difftest run --seed S --count N [--duration 10m] [--jobs 2] [--out DIR] [--configs all|sample]
//! finch-difftest shrink DIR          (minimise DIR/case.txt again, into DIR/minimised)
//! finch-difftest replay --seed S --index K [--out DIR]
//! finch-difftest scan --seed S --count N [--start K] [--both] [--matching TEXT]
//! finch-difftest worker              (internal: serves cases on stdin/stdout)
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use finch_difftest::case::Case;
use finch_difftest::driver::{self, Configs};
use finch_difftest::gen::generate;
use finch_difftest::report::{describe, write_reproducer};
use finch_difftest::run::{refusal_category, CONFIGS};
use finch_difftest::shrink::{shrink, Budget, Failure};
use finch_difftest::worker::{serve, Worker, WorkerOptions};

/// Differential tester: random programs on the reference, interpreter and C engines.
#[derive(Parser)]
#[command(name = "finch-difftest", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct Common {
    /// Time limit of running one compiled kernel (past it: a hang). Generous: a run may
    /// compile the fallback kernel of an output that cannot hold what the kernel wrote.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// Time limit of the reference engine, or of compiling one configuration.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    compile_timeout: Duration,
    /// C compiler flags for the tester's kernels (FINCH_CFLAGS).
    #[arg(long, default_value = "-O1")]
    cflags: String,
    /// Compile kernels with AddressSanitizer (and preload its run time into the workers),
    /// so that a kernel reading or writing outside a buffer stops as a crash.
    #[arg(long)]
    sanitize: bool,
    /// Time limit of one minimisation.
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    shrink_time: Duration,
}

#[derive(Subcommand)]
enum Command {
    /// Run random cases and minimise one per distinct fault.
    Run {
        /// The seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many cases.
        #[arg(long)]
        count: Option<u64>,
        /// How long (`90s`, `10m`, `2h`).
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
        /// The first case index.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Workers in parallel.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Where to write reproducers.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Which configurations each case runs in.
        #[arg(long, value_enum, default_value_t = ConfigChoice::Sample)]
        configs: ConfigChoice,
        /// Minimise at most this many distinct faults.
        #[arg(long, default_value_t = 20)]
        shrink: usize,
        #[command(flatten)]
        common: Common,
    },
    /// Minimise a saved case again (DIR/case.txt), writing DIR/minimised.
    Shrink {
        /// A reproducer directory.
        dir: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Regenerate one case and run it in every configuration.
    Replay {
        /// The seed.
        #[arg(long)]
        seed: u64,
        /// The case index.
        #[arg(long)]
        index: u64,
        /// Write the case (not minimised) as a reproducer here.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Compile cases without running them: one line per case and setting (index,
    /// `specialized` or `compact`, milliseconds, `ok` or the refusal's category), then
    /// the counts by category.
    Scan {
        /// The seed.
        #[arg(long)]
        seed: u64,
        /// How many cases.
        #[arg(long)]
        count: u64,
        /// The first case index.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Compile in both settings (else in the one the run's sampled configurations use).
        #[arg(long)]
        both: bool,
        /// List only the cases whose category contains this text.
        #[arg(long)]
        matching: Option<String>,
        /// Print each listed case's program under its line.
        #[arg(long)]
        programs: bool,
        /// Print each listed refused case minimised (while its refusal stays), under its
        /// line; each for at most this long.
        #[arg(long, value_parser = parse_duration)]
        shrink: Option<Duration>,
    },
    /// Serve cases on standard input and output (started by the tester itself).
    Worker,
}

#[derive(Clone, Copy, ValueEnum)]
enum ConfigChoice {
    /// Every configuration for every case.
    All,
    /// One interpreter and one C configuration per case, drawn.
    Sample,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (num, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(text.len()),
    );
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 90s, 10m, 2h)"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("`{text}`: the unit is s, m or h")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// A private kernel cache, removed when dropped: random programs never hit a cache.
struct PrivateCache(PathBuf);

impl PrivateCache {
    fn new() -> PrivateCache {
        let base =
            std::env::var_os("FINCH_CACHE_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        PrivateCache(base.join(format!("difftest-{}", std::process::id())))
    }
}

impl Drop for PrivateCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn worker_options(common: &Common, cache: &Path) -> Result<WorkerOptions> {
    let mut cflags = common.cflags.clone();
    let mut sanitizer = Vec::new();
    if common.sanitize {
        cflags.push_str(" -fsanitize=address -fno-omit-frame-pointer");
        let runtime = std::process::Command::new("cc")
            .arg("-print-file-name=libasan.so")
            .output()
            .context("asking cc where libasan.so is")?;
        let path = String::from_utf8_lossy(&runtime.stdout).trim().to_string();
        if !Path::new(&path).exists() {
            bail!("--sanitize needs AddressSanitizer's run time (cc -print-file-name=libasan.so gave `{path}`)");
        }
        sanitizer.push(("LD_PRELOAD".to_string(), path));
        sanitizer.push((
            "ASAN_OPTIONS".to_string(),
            "abort_on_error=1:detect_leaks=0:halt_on_error=1".to_string(),
        ));
    }
    Ok(WorkerOptions {
        exe: std::env::current_exe().context("finding the tester's executable")?,
        timeout: common.timeout,
        compile_timeout: common.compile_timeout,
        env: vec![
            ("FINCH_CACHE_DIR".into(), cache.display().to_string()),
            ("FINCH_CACHE_MAX_MB".into(), "256".into()),
            ("FINCH_CFLAGS".into(), cflags),
        ]
        .into_iter()
        .chain(sanitizer)
        .collect(),
        recycle_after: 300,
    })
}

fn budget(common: &Common) -> Budget {
    Budget {
        time: common.shrink_time,
        runs: 2000,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Worker => serve(std::io::stdin().lock(), std::io::stdout().lock())
            .map(|()| true)
            .map_err(Into::into),
        Command::Run {
            seed,
            count,
            duration,
            start,
            jobs,
            out,
            configs,
            shrink,
            common,
        } => run(
            seed, count, duration, start, jobs, out, configs, shrink, &common,
        ),
        Command::Shrink { dir, common } => shrink_dir(&dir, &common),
        Command::Replay {
            seed,
            index,
            out,
            common,
        } => replay(seed, index, out, &common),
        Command::Scan {
            seed,
            count,
            start,
            both,
            matching,
            programs,
            shrink,
        } => {
            let show = Show { programs, shrink };
            scan(seed, start, count, both, matching.as_deref(), show);
            Ok(true)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    seed: u64,
    count: Option<u64>,
    duration: Option<Duration>,
    start: u64,
    jobs: usize,
    out: Option<PathBuf>,
    configs: ConfigChoice,
    shrink: usize,
    common: &Common,
) -> Result<bool> {
    if count.is_none() && duration.is_none() {
        bail!("give --count or --duration");
    }
    let cache = PrivateCache::new();
    let opts = driver::Options {
        seed,
        start,
        count,
        duration,
        jobs,
        configs: match configs {
            ConfigChoice::All => Configs::All,
            ConfigChoice::Sample => Configs::Sample,
        },
        worker: worker_options(common, &cache.0)?,
        out: out.clone(),
        shrink,
        budget: budget(common),
        progress: true,
    };
    let summary = driver::run(&opts);
    let table = summary.table();
    println!("{table}");
    if let Some(o) = &out {
        std::fs::create_dir_all(o)?;
        std::fs::write(o.join("summary.txt"), &table)?;
    }
    Ok(summary.found.is_empty())
}

fn shrink_dir(dir: &Path, common: &Common) -> Result<bool> {
    let text = std::fs::read_to_string(dir.join("case.txt"))
        .with_context(|| format!("reading {}/case.txt", dir.display()))?;
    let case = Case::from_text(&text)?;
    let cache = PrivateCache::new();
    let mut worker = Worker::new(worker_options(common, &cache.0)?);
    let verdict = worker.given(&case, &CONFIGS);
    let Some(failure) = Failure::of(&verdict) else {
        if let Some(m) = &verdict.invalid {
            println!("the reference refuses the case: {m}");
        }
        for o in &verdict.outcomes {
            println!("{:<20} {:<9} {}", o.config.name(), o.kind.name(), o.message);
        }
        println!("the case does not fail");
        return Ok(true);
    };
    let (small, runs) = shrink(&mut worker, case, &failure, budget(common));
    let message = failure
        .message_in(&worker.given(&small, &[failure.config]))
        .or_else(|| failure.message_in(&verdict))
        .unwrap_or_default();
    let target = dir.join("minimised");
    write_reproducer(
        &target,
        &small,
        &describe(
            failure.kind.name(),
            failure.config,
            &message,
            "minimised again",
        ),
    )?;
    println!(
        "{runs} candidates run; wrote {}\n{}",
        target.display(),
        small.program
    );
    Ok(false)
}

/// What `scan` prints of each case it lists.
struct Show {
    programs: bool,
    shrink: Option<Duration>,
}

fn scan(seed: u64, start: u64, count: u64, both: bool, matching: Option<&str>, show: Show) {
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    let mut slowest = std::time::Duration::ZERO;
    for index in start..start + count {
        for s in finch_difftest::scan::scan_case(seed, index, both) {
            let category = s
                .error
                .as_deref()
                .map_or("ok".to_string(), refusal_category);
            if matching.is_none_or(|m| category.contains(m)) {
                println!("{}", s.line());
                let case = (show.programs || show.shrink.is_some())
                    .then(|| finch_difftest::scan::valid_case(seed, index))
                    .flatten();
                if let Some(case) = case.as_ref().filter(|_| show.programs) {
                    println!("{}", case.program);
                }
                if let (Some(case), Some(time), Some(_)) = (case, show.shrink, &s.error) {
                    let small =
                        finch_difftest::scan::shrink_refusal(case, s.compact, &category, time);
                    println!("minimised:\n{}", small.program);
                }
            }
            slowest = slowest.max(s.time);
            *counts.entry(category).or_default() += 1;
        }
    }
    println!("slowest compilation: {} ms", slowest.as_millis());
    for (category, n) in counts {
        println!("{n:>6}  {category}");
    }
}

fn replay(seed: u64, index: u64, out: Option<PathBuf>, common: &Common) -> Result<bool> {
    let cache = PrivateCache::new();
    let mut worker = Worker::new(worker_options(common, &cache.0)?);
    let verdict = worker.generated(seed, index, &CONFIGS);
    let case = generate(seed, index, verdict.attempt);
    println!("{}", case.to_text());
    if let Some(m) = &verdict.invalid {
        println!("invalid: {m}");
    }
    for o in &verdict.outcomes {
        println!("{:<20} {:<9} {}", o.config.name(), o.kind.name(), o.message);
    }
    if let Some(dir) = out {
        let what = driver::signature(&verdict).unwrap_or_else(|| "no fault".into());
        write_reproducer(
            &dir,
            &case,
            &format!("case #{index} of seed {seed}: {what}"),
        )?;
    }
    Ok(Failure::of(&verdict).is_none())
}
