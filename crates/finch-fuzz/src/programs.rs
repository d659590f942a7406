//! Whole programs with their inputs: the differential tester's case text (a program,
//! its input data and the shapes of outputs no write sizes), run on the reference and on
//! the compiled engines, which must agree.

use finch_difftest::case::Case;
use finch_difftest::run::{run_case, Config};

/// Cases larger than these are skipped: the target looks for wrong results, not for
/// programs that are merely long to run.
const MAX_ELEMENTS: usize = 4096;
const MAX_LITERAL: i64 = 64;

/// Whether a case is small enough to run quickly on every engine.
fn small(case: &Case) -> bool {
    let elements = |dims: &[usize]| {
        dims.iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .is_some_and(|n| n <= MAX_ELEMENTS)
    };
    // Integer literals bound explicit loop ranges and offsets.
    let literals_small = case
        .program
        .split(|c: char| !c.is_ascii_digit())
        .filter(|t| !t.is_empty())
        .all(|t| t.parse::<i64>().is_ok_and(|n| n <= MAX_LITERAL));
    literals_small
        && case.program.len() <= 4096
        && case.shapes.values().all(|d| elements(d))
        && case.inputs.iter().all(|(_, a)| elements(&a.shape))
}

/// The `program_run` target: the input is a case's text; the interpreter (specialized
/// and compact) and, where a C compiler is present, generated C must agree with the
/// reference in values and stored entries, or refuse by name.
pub fn program_run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(case) = Case::from_text(text) else {
        return;
    };
    if !small(&case) {
        return;
    }
    let mut configs: Vec<Config> = ["interp", "interp-compact"]
        .iter()
        .filter_map(|n| Config::from_name(n))
        .collect();
    if finch::backend::c::available() {
        configs.extend(Config::from_name("c"));
    }
    let verdict = run_case(&case, &configs, &mut |_| {});
    let faults: Vec<String> = verdict
        .outcomes
        .iter()
        .filter(|o| o.kind.is_fault())
        .map(|o| format!("{}: {}: {}", o.config.name(), o.kind.name(), o.message))
        .collect();
    assert!(
        faults.is_empty(),
        "the compiled engines disagree with the reference\n{}\n--- case\n{}",
        faults.join("\n"),
        case.to_text()
    );
}
