//! A run of many cases: workers in parallel, counts per class, refusal categories,
//! distinct faults, and the minimisation of one case per distinct fault.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::case::Case;
use crate::gen::generate;
use crate::report::{describe, write_reproducer};
use crate::rng::Rng;
use crate::run::{fault_key, refusal_category, Config, Kind, Verdict, CONFIGS};
use crate::shrink::{shrink, Budget, Failure};
use crate::worker::{Worker, WorkerOptions};

/// Which configurations each case runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Configs {
    /// All six.
    All,
    /// One C configuration drawn per case and the interpreter with the same `compact`
    /// (so every one is covered across cases at a third of the cost).
    Sample,
}

/// The configurations case `index` runs in.
pub fn configs_for(seed: u64, index: u64, choice: Configs) -> Vec<Config> {
    match choice {
        Configs::All => CONFIGS.to_vec(),
        Configs::Sample => {
            // The interpreter with the same `compact` as the C configuration drawn, so that
            // a fault of C alone shows as one.
            let mut rng = Rng::for_case(seed, index, u32::MAX);
            let c = CONFIGS[2 + rng.below(4)];
            vec![CONFIGS[usize::from(c.compact)], c]
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The seed.
    pub seed: u64,
    /// The first case index.
    pub start: u64,
    /// How many cases (unbounded when `None`: then `duration` ends the run).
    pub count: Option<u64>,
    /// How long.
    pub duration: Option<Duration>,
    /// Workers in parallel.
    pub jobs: usize,
    /// Configurations per case.
    pub configs: Configs,
    /// How workers start.
    pub worker: WorkerOptions,
    /// Where reproducers go.
    pub out: Option<PathBuf>,
    /// At most this many distinct faults are minimised.
    pub shrink: usize,
    /// The budget of one minimisation.
    pub budget: Budget,
    /// Print progress.
    pub progress: bool,
}

/// A distinct fault and its minimised reproducer.
#[derive(Clone, Debug)]
pub struct Found {
    /// The fault's signature.
    pub signature: String,
    /// The first case that showed it.
    pub index: u64,
    /// How many cases showed it.
    pub cases: u64,
    /// Its verdict.
    pub verdict: Verdict,
    /// The configurations it was seen in.
    pub configs: Vec<Config>,
    /// The minimised case, if minimised.
    pub minimised: Option<Case>,
    /// Where its reproducer was written.
    pub dir: Option<PathBuf>,
}

/// The counts of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Cases run.
    pub cases: u64,
    /// Cases the reference refused on every attempt.
    pub invalid: u64,
    /// Draws the reference refused before one it ran.
    pub redrawn: u64,
    /// Cases per worst outcome.
    pub by_kind: BTreeMap<Kind, u64>,
    /// Outcomes per configuration and kind.
    pub by_config: BTreeMap<(Config, Kind), u64>,
    /// Refusals per category (once per case and category).
    pub refusals: BTreeMap<String, u64>,
    /// Reasons the reference refused cases.
    pub invalid_reasons: BTreeMap<String, u64>,
    /// Faults found only in C while the interpreter agreed.
    pub c_only: u64,
    /// Distinct faults, by signature.
    pub found: Vec<Found>,
    /// Wall time.
    pub elapsed: Duration,
}

/// A fault's signature: its kind, the configurations with it, and (for errors) the
/// message's category or (for wrong values) whether values or stored entries differ.
pub fn signature(v: &Verdict) -> Option<String> {
    let worst = v.worst()?;
    if !worst.kind.is_fault() {
        return None;
    }
    let interp_ok = v
        .outcomes
        .iter()
        .any(|o| !o.config.c && o.config.compact == worst.config.compact && !o.kind.is_fault());
    let what = match worst.kind {
        Kind::Wrong if worst.message.contains("stored entries") => "stored entries".to_string(),
        Kind::Wrong => "values".to_string(),
        Kind::Crash | Kind::Hang if worst.message.contains("step run ") => {
            "running the kernel".to_string()
        }
        Kind::Crash | Kind::Hang => "compiling".to_string(),
        _ => fault_key(&worst.message),
    };
    let only = if interp_ok && worst.config.c {
        " (C only)"
    } else {
        ""
    };
    Some(format!("{}{only}: {what}", worst.kind.name()))
}

impl Summary {
    fn add(&mut self, index: u64, v: Verdict) {
        self.cases += 1;
        self.redrawn += u64::from(v.attempt);
        if let Some(m) = &v.invalid {
            self.invalid += 1;
            *self.invalid_reasons.entry(refusal_category(m)).or_default() += 1;
            return;
        }
        let mut cats: Vec<String> = Vec::new();
        for o in &v.outcomes {
            *self.by_config.entry((o.config, o.kind)).or_default() += 1;
            if o.kind == Kind::Refused {
                cats.push(refusal_category(&o.message));
            }
        }
        cats.sort();
        cats.dedup();
        for c in cats {
            *self.refusals.entry(c).or_default() += 1;
        }
        let worst = v.worst().map_or(Kind::Agree, |o| o.kind);
        *self.by_kind.entry(worst).or_default() += 1;
        if let Some(sig) = signature(&v) {
            if sig.contains("(C only)") {
                self.c_only += 1;
            }
            let failing: Vec<Config> = v
                .outcomes
                .iter()
                .filter(|o| o.kind.is_fault())
                .map(|o| o.config)
                .collect();
            match self.found.iter_mut().find(|f| f.signature == sig) {
                Some(f) => {
                    f.cases += 1;
                    f.configs.extend(failing);
                    f.configs.sort();
                    f.configs.dedup();
                }
                None => self.found.push(Found {
                    signature: sig,
                    index,
                    cases: 1,
                    configs: failing,
                    verdict: v,
                    minimised: None,
                    dir: None,
                }),
            }
        }
    }

    /// The summary as a table.
    pub fn table(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let mut s = format!(
            "cases: {} in {:.0} s ({:.2} cases/s); invalid (the reference refused {} draws): {}; redrawn: {}\n",
            self.cases,
            secs,
            self.cases as f64 / secs,
            crate::worker::ATTEMPTS,
            self.invalid,
            self.redrawn
        );
        s.push_str("\nworst outcome per case:\n");
        for k in Kind::ALL {
            let n = self.by_kind.get(&k).copied().unwrap_or(0);
            s.push_str(&format!(
                "  {:<9} {:>8}  {:5.1}%\n",
                k.name(),
                n,
                100.0 * n as f64 / self.cases.max(1) as f64
            ));
        }
        s.push_str("\noutcomes per configuration:\n  config              ");
        for k in Kind::ALL {
            s.push_str(&format!("{:>9}", k.name()));
        }
        s.push('\n');
        for c in CONFIGS {
            s.push_str(&format!("  {:<20}", c.name()));
            for k in Kind::ALL {
                s.push_str(&format!(
                    "{:>9}",
                    self.by_config.get(&(c, k)).copied().unwrap_or(0)
                ));
            }
            s.push('\n');
        }
        s.push_str("\nrefusals by category (cases):\n");
        let mut refusals: Vec<_> = self.refusals.iter().collect();
        refusals.sort_by(|a, b| b.1.cmp(a.1));
        for (cat, n) in refusals {
            s.push_str(&format!("  {n:>7}  {cat}\n"));
        }
        if !self.invalid_reasons.is_empty() {
            s.push_str("\ninvalid cases by the reference's error:\n");
            for (cat, n) in &self.invalid_reasons {
                s.push_str(&format!("  {n:>7}  {cat}\n"));
            }
        }
        s.push_str(&format!(
            "\ndistinct faults ({}; cases with a C-only fault: {}):\n",
            self.found.len(),
            self.c_only
        ));
        for f in &self.found {
            let configs: Vec<String> = f.configs.iter().map(Config::name).collect();
            s.push_str(&format!(
                "  {:>6} cases, first #{}: {}\n          in {}",
                f.cases,
                f.index,
                f.signature,
                configs.join(", ")
            ));
            if let Some(d) = &f.dir {
                s.push_str(&format!("\n          reproducer: {}", d.display()));
            }
            s.push('\n');
        }
        s
    }
}

/// Runs cases and minimises one per distinct fault.
pub fn run(opts: &Options) -> Summary {
    let start = Instant::now();
    let next = Arc::new(AtomicU64::new(opts.start));
    let (tx, rx) = channel();
    let mut handles = Vec::new();
    for _ in 0..opts.jobs.max(1) {
        let next = Arc::clone(&next);
        let tx = tx.clone();
        let opts = opts.clone();
        handles.push(std::thread::spawn(move || {
            let mut worker = Worker::new(opts.worker.clone());
            loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let past_count = opts.count.is_some_and(|n| index >= opts.start + n);
                let past_time = opts.duration.is_some_and(|d| start.elapsed() >= d);
                // `touch DIR/STOP` ends a run early, with its summary and minimisation.
                let stopped = opts.out.as_ref().is_some_and(|o| o.join("STOP").exists());
                if past_count || past_time || stopped {
                    break;
                }
                let configs = configs_for(opts.seed, index, opts.configs);
                let v = worker.generated(opts.seed, index, &configs);
                if tx.send((index, v)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut summary = Summary::default();
    let mut last = Instant::now();
    for (index, v) in rx {
        if let Some(sig) = signature(&v) {
            note_fault(opts, index, &sig);
        }
        summary.add(index, v);
        if opts.progress && last.elapsed() >= Duration::from_secs(10) {
            last = Instant::now();
            let faults: u64 = summary.found.iter().map(|f| f.cases).sum();
            eprintln!(
                "{} cases, {:.2}/s, {} with faults ({} distinct), {} refused, {} invalid",
                summary.cases,
                summary.cases as f64 / start.elapsed().as_secs_f64(),
                faults,
                summary.found.len(),
                summary.by_kind.get(&Kind::Refused).copied().unwrap_or(0),
                summary.invalid
            );
        }
    }
    for h in handles {
        let _ = h.join();
    }
    summary.elapsed = start.elapsed();
    minimise_all(opts, &mut summary);
    summary
}

/// Reports a faulty case as soon as it is seen (a run stopped before its summary, killed
/// or out of time, still names its faults): on standard error with the progress, and as
/// a line `index<TAB>signature` appended to `DIR/faults.txt`.
fn note_fault(opts: &Options, index: u64, signature: &str) {
    if opts.progress {
        eprintln!("fault at case #{index}: {signature}");
    }
    if let Some(dir) = &opts.out {
        let line = format!("{index}\t{signature}\n");
        let appended = std::fs::create_dir_all(dir).and_then(|()| {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("faults.txt"))?
                .write_all(line.as_bytes())
        });
        if let Err(e) = appended {
            eprintln!("cannot note the fault in {}: {e}", dir.display());
        }
    }
}

/// Minimises the first case of each distinct fault (up to `opts.shrink` of them), in
/// parallel, and writes the reproducers.
fn minimise_all(opts: &Options, summary: &mut Summary) {
    let jobs: Vec<(usize, Found)> = summary
        .found
        .iter()
        .cloned()
        .enumerate()
        .take(opts.shrink)
        .collect();
    let queue = Arc::new(std::sync::Mutex::new(jobs));
    let (tx, rx) = channel();
    let mut handles = Vec::new();
    for _ in 0..opts.jobs.max(1) {
        let queue = Arc::clone(&queue);
        let tx = tx.clone();
        let opts = opts.clone();
        handles.push(std::thread::spawn(move || {
            let mut worker = Worker::new(opts.worker.clone());
            loop {
                let job = queue.lock().ok().and_then(|mut q| q.pop());
                let Some((k, found)) = job else { break };
                let case = generate(opts.seed, found.index, found.verdict.attempt);
                let Some(failure) = Failure::of(&found.verdict) else {
                    continue;
                };
                let (small, runs) = shrink(&mut worker, case, &failure, opts.budget);
                if opts.progress {
                    eprintln!(
                        "minimised #{} ({}) in {runs} runs",
                        found.index, found.signature
                    );
                }
                let dir = opts.out.as_ref().map(|o| {
                    o.join(format!(
                        "{:02}-{}-{}-{}",
                        k,
                        failure.kind.name(),
                        failure.config.name(),
                        found.index
                    ))
                });
                if let Some(d) = &dir {
                    // The minimised case's own message (its values differ from the first's).
                    let message = failure
                        .message_in(&worker.given(&small, &[failure.config]))
                        .or_else(|| failure.message_in(&found.verdict))
                        .unwrap_or_default();
                    let origin = format!(
                        "case #{} of seed {} (minimised); signature: {}",
                        found.index, opts.seed, found.signature
                    );
                    let text = describe(failure.kind.name(), failure.config, &message, &origin);
                    if let Err(e) = write_reproducer(d, &small, &text) {
                        eprintln!("cannot write {}: {e:#}", d.display());
                    }
                }
                if tx.send((k, small, dir)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    for (k, small, dir) in rx {
        if let Some(f) = summary.found.get_mut(k) {
            f.minimised = Some(small);
            f.dir = dir;
        }
    }
    for h in handles {
        let _ = h.join();
    }
}
