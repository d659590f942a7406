//! Scanning for refusals: which generated cases a compiled engine refuses, and how long
//! compiling each case takes, without running any kernel. The run's summary counts
//! refusals by category; this names the cases (for `replay`) and times their lowering,
//! in this process and in the interpreter (lowering is the same for C, whose compiler a
//! refusal never reaches).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use finch::engine::{CompileOptions, Engine};
use finch::Program;

use crate::case::Case;
use crate::driver::{configs_for, Configs};
use crate::gen::generate;
use crate::run::{panic_text, refusal_category, run_reference};
use crate::worker::ATTEMPTS;

/// One case's compilation in one `compact` setting.
#[derive(Clone, Debug)]
pub struct Scanned {
    /// The case index.
    pub index: u64,
    /// Whether it was compiled compactly.
    pub compact: bool,
    /// How long compiling took.
    pub time: Duration,
    /// The refusal or error, if any (`None`: compiled).
    pub error: Option<String>,
}

impl Scanned {
    /// One line: index, setting, milliseconds, and `ok` or the error's category.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {}",
            self.index,
            if self.compact {
                "compact"
            } else {
                "specialized"
            },
            self.time.as_millis(),
            self.error
                .as_deref()
                .map_or_else(|| "ok".to_string(), refusal_category)
        )
    }
}

/// The first draw of case `index` the reference runs, if any.
pub fn valid_case(seed: u64, index: u64) -> Option<Case> {
    (0..ATTEMPTS).find_map(|attempt| {
        let case = generate(seed, index, attempt);
        let program = Program::parse(&case.program).ok()?;
        run_reference(&program, &case).ok().map(|_| case)
    })
}

/// Compiles case `index` of `seed` in the `compact` setting its sampled configurations
/// use (both settings if `both`); nothing for a case the reference refuses.
pub fn scan_case(seed: u64, index: u64, both: bool) -> Vec<Scanned> {
    let Some(case) = valid_case(seed, index) else {
        return Vec::new();
    };
    let Ok(program) = Program::parse(&case.program) else {
        return Vec::new();
    };
    let settings: Vec<bool> = if both {
        vec![false, true]
    } else {
        configs_for(seed, index, Configs::Sample)
            .first()
            .map(|c| c.compact)
            .into_iter()
            .collect()
    };
    settings
        .into_iter()
        .map(|compact| {
            let options = CompileOptions {
                compact,
                ..CompileOptions::default()
            };
            let start = Instant::now();
            let result = catch_unwind(AssertUnwindSafe(|| {
                program.compile_with(Engine::Interp, &options).map(|_| ())
            }));
            let error = match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(p) => Some(format!("panic: {}", panic_text(&p))),
            };
            Scanned {
                index,
                compact,
                time: start.elapsed(),
                error,
            }
        })
        .collect()
}

/// Shrinks a case while compiling it in the `compact` setting is still refused with
/// `category` (and the reference still runs it): what a refusal needs, at its smallest.
pub fn shrink_refusal(case: Case, compact: bool, category: &str, time: Duration) -> Case {
    let budget = crate::shrink::Budget { time, runs: 2000 };
    let mut refused = |c: &Case| {
        let Ok(program) = Program::parse(&c.program) else {
            return false;
        };
        if run_reference(&program, c).is_err() {
            return false;
        }
        let options = CompileOptions {
            compact,
            ..CompileOptions::default()
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            program.compile_with(Engine::Interp, &options).map(|_| ())
        }));
        matches!(result, Ok(Err(e)) if refusal_category(&e.to_string()) == category)
    };
    crate::shrink::shrink_with(case, budget, &mut refused).0
}
