//! Every fuzz target over its seed corpus and its saved crashes, on the stable toolchain:
//! the seeds pass, and a crash once found and fixed stays fixed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use finch_fuzz::seeds::seeds;
use finch_fuzz::TARGETS;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn replay(name: &str) {
    let Some(target) = finch_fuzz::target(name) else {
        panic!("no target {name}");
    };
    let root = root();
    let data = root.join("../shared/data");
    let all = seeds(name, &root, &data);
    assert!(!all.is_empty(), "no seeds for {name}");
    let start = Instant::now();
    for seed in &all {
        let outcome = std::panic::catch_unwind(|| (target.run)(&seed.data));
        assert!(outcome.is_ok(), "{name}: seed {} fails", seed.name);
    }
    eprintln!(
        "{name}: {} seeds in {:.1} s",
        all.len(),
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn every_target_has_a_test_here() {
    let names = [
        "program_text",
        "format_text",
        "matrix_market",
        "frostt",
        "raw_arrays",
        "program_run",
    ];
    assert_eq!(TARGETS.iter().map(|t| t.name).collect::<Vec<_>>(), names);
}

#[test]
fn program_text_seeds() {
    replay("program_text");
}

#[test]
fn format_text_seeds() {
    replay("format_text");
}

#[test]
fn matrix_market_seeds() {
    replay("matrix_market");
}

#[test]
fn frostt_seeds() {
    replay("frostt");
}

#[test]
fn raw_arrays_seeds() {
    replay("raw_arrays");
}

#[test]
fn program_run_seeds() {
    replay("program_run");
}
