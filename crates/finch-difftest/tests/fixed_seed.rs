//! The CI slice of the differential tester: a fixed seed and count of random programs on
//! the reference, interpreter and C engines (one interpreter and one C configuration per
//! program, drawn so that all six are covered), in worker processes; any fault fails the
//! test and lists its minimised reproducers (written under the target directory).

use std::time::Duration;

use finch_difftest::driver::{self, Configs};
use finch_difftest::shrink::Budget;
use finch_difftest::worker::WorkerOptions;

/// The slice: 40 to 51 s on two shared cores under the test profile (2026-11-29).
const SEED: u64 = 27;
const COUNT: u64 = 150;

#[test]
fn a_fixed_seed_slice_finds_no_fault() {
    let cache = std::env::temp_dir().join(format!("finch-difftest-ci-{}", std::process::id()));
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("difftest-slice");
    let _ = std::fs::remove_dir_all(&out);
    let opts = driver::Options {
        seed: SEED,
        start: 0,
        count: Some(COUNT),
        duration: None,
        jobs: 2,
        configs: Configs::Sample,
        worker: WorkerOptions {
            exe: env!("CARGO_BIN_EXE_finch-difftest").into(),
            timeout: Duration::from_secs(60),
            compile_timeout: Duration::from_secs(120),
            env: vec![
                ("FINCH_CACHE_DIR".into(), cache.display().to_string()),
                ("FINCH_CACHE_MAX_MB".into(), "128".into()),
                ("FINCH_CFLAGS".into(), "-O1".into()),
            ],
            recycle_after: 300,
        },
        out: Some(out),
        shrink: 5,
        budget: Budget {
            time: Duration::from_secs(60),
            runs: 300,
        },
        progress: false,
    };
    let summary = driver::run(&opts);
    let _ = std::fs::remove_dir_all(&cache);
    let mut report = summary.table();
    for f in &summary.found {
        if let Some(c) = &f.minimised {
            report.push_str(&format!(
                "\n--- {} (case #{})\n{}",
                f.signature,
                f.index,
                c.to_text()
            ));
        }
    }
    assert!(summary.found.is_empty(), "{report}");
    assert!(summary.invalid * 20 <= summary.cases, "{report}");
}
