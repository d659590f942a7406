//! Golden tests per compiler stage, in the style of Cranelift's filetests. Each directory
//! `tests/filetests/<stage>/` holds `*.fin` files: a program (its tensors' formats come from
//! its declarations) followed by the exact text that stage makes of it, as lines starting
//! with `; ` (an empty line is a lone `;`). The stages, in the order the compiler runs them
//! (the first three are what `finch lower` prints, the last what `finch code` prints):
//!
//! * `parse/`: the program printed back in canonical form (`finch parse`).
//! * `normalize/`: the program in lowering IR, wrapperized (offsets, permissive reads,
//!   masks), dimensionalized (every loop's extent) and with the lifecycle statements the
//!   compiler inserts (`@freeze`), as `finch::lower::print_converted` prints it; then its
//!   warnings, as `# warning: ` lines. The library does these normalizations in one pass
//!   (`finch::lower::convert`), so they share one stage. Concordization (reads out of
//!   loop order, scatters) happens while lowering: it shows in `lower/`.
//! * `lower/`: the kernel IR it lowers to (`finch code --ir`).
//! * `jam/`: the kernel IR after the jam pass (`finch::kernel::passes::jam`): row loops
//!   four rows at a time.
//! * `strips/`: the kernel IR after the strips pass (`finch::kernel::passes::strips`):
//!   loops in prefetching strips. The kernel passes run in this order between lowering and
//!   the engines (`finch::kernel::passes::run`); each has a directory.
//! * `c/`: the C the C engine runs (`finch code`), without the helpers every kernel starts
//!   with (`finch::backend::c::PRELUDE`), which `prelude` keeps.
//!
//! A first line `# options: NAME NAME ...` (a comment, so the program still parses; names
//! separated by spaces or commas) compiles with options; a stage refuses the options it has
//! no use for:
//!
//! * `reassociate` (`lower`, `c`): `CompileOptions::reassociate` (the C gets its AVX-512 and
//!   AVX2 copies, chosen at run time, so the text does not depend on the host's CPU).
//! * `compact` (`lower`, `c`): `CompileOptions::compact`.
//! * `checked` (`c`): the bounds-checked C (`CheckMode::Checked`) instead of the trusted C.
//! * `prelude` (`c`): keep the prelude.
//!
//! Run with `FINCH_BLESS=1` to rewrite the expectations after an intended change (refused
//! when `CI=true`); review the diff like code. A new file needs only its program: blessing
//! appends the expectation.

use std::path::Path;

use finch::backend::c::{CheckMode, PRELUDE};
use finch::engine::{CompileOptions, Engine};
use finch::Program;

/// A file's program and expectation, with the file line of each expected line.
struct Golden {
    program: String,
    expected: Vec<String>,
    lines: Vec<usize>,
}

fn split(text: &str) -> Golden {
    let mut program = String::new();
    let mut expected = Vec::new();
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("; ") {
            expected.push(rest.to_string());
            lines.push(n + 1);
        } else if line == ";" {
            expected.push(String::new());
            lines.push(n + 1);
        } else {
            program.push_str(line);
            program.push('\n');
        }
    }
    Golden {
        program: program.trim_end().to_string() + "\n",
        expected,
        lines,
    }
}

/// The options of a file's first line `# options: ...`.
#[derive(Default)]
struct Options {
    reassociate: bool,
    compact: bool,
    checked: bool,
    prelude: bool,
}

impl Options {
    fn parse(program: &str, accepted: &[&str]) -> Result<Options, String> {
        let mut o = Options::default();
        let Some(list) = program
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# options:"))
        else {
            return Ok(o);
        };
        for name in list.split([' ', ',']).filter(|n| !n.is_empty()) {
            if !accepted.contains(&name) {
                return Err(format!(
                    "option `{name}` is not one this stage takes ({})",
                    if accepted.is_empty() {
                        "none".to_string()
                    } else {
                        accepted.join(", ")
                    }
                ));
            }
            match name {
                "reassociate" => o.reassociate = true,
                "compact" => o.compact = true,
                "checked" => o.checked = true,
                "prelude" => o.prelude = true,
                _ => unreachable!("an accepted option without a meaning: {name}"),
            }
        }
        Ok(o)
    }

    fn compile(&self, p: &Program) -> Result<finch::CompiledProgram, String> {
        let options = CompileOptions {
            reassociate: self.reassociate,
            compact: self.compact,
        };
        // The interpreter: the kernel and its C are the same for every engine, and no C
        // compiler is needed to print them.
        p.compile_with(Engine::Interp, &options)
            .map_err(|e| e.to_string())
    }
}

/// A stage: its directory under `tests/filetests`, what it makes (for messages), the
/// options it takes, and how it makes its text of a program.
struct Stage {
    dir: &'static str,
    what: &'static str,
    options: &'static [&'static str],
    text: fn(&Program, &Options) -> Result<String, String>,
}

const PARSE: Stage = Stage {
    dir: "parse",
    what: "the canonical program",
    options: &[],
    text: |p, _| Ok(p.to_string()),
};

const NORMALIZE: Stage = Stage {
    dir: "normalize",
    what: "the normalized program",
    options: &[],
    text: |p, _| {
        let c = finch::lower::convert(p, &Default::default()).map_err(|e| e.to_string())?;
        let mut out = finch::lower::print_converted(&c);
        for w in &c.warnings {
            out.push_str(&format!("# warning: {w}\n"));
        }
        Ok(out)
    },
};

const LOWER: Stage = Stage {
    dir: "lower",
    what: "the kernel IR",
    options: &["reassociate", "compact"],
    text: |p, o| Ok(o.compile(p)?.kernel().to_string()),
};

const JAM: Stage = Stage {
    dir: "jam",
    what: "the kernel IR after the jam pass",
    options: &["reassociate", "compact"],
    text: |p, o| Ok(finch::kernel::passes::jam(o.compile(p)?.kernel()).to_string()),
};

const STRIPS: Stage = Stage {
    dir: "strips",
    what: "the kernel IR after the strips pass",
    options: &["reassociate", "compact"],
    text: |p, o| Ok(finch::kernel::passes::strips(o.compile(p)?.kernel()).to_string()),
};

const C: Stage = Stage {
    dir: "c",
    what: "the C",
    options: &["reassociate", "compact", "checked", "prelude"],
    text: |p, o| {
        let mode = if o.checked {
            CheckMode::Checked
        } else {
            CheckMode::Trusted
        };
        let c = o.compile(p)?.c_source(mode).map_err(|e| e.to_string())?;
        if o.prelude {
            return Ok(c);
        }
        c.strip_prefix(PRELUDE)
            .map(str::to_string)
            .ok_or_else(|| "the C does not start with the prelude".to_string())
    },
};

/// Checks (or, with `FINCH_BLESS`, rewrites) every golden file of `stage`.
fn run_stage(stage: &Stage) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(stage.dir);
    let bless = std::env::var_os("FINCH_BLESS").is_some();
    if bless && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("FINCH_BLESS is refused when CI=true");
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fin"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no .fin files", dir.display());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let Golden {
            program,
            expected,
            lines,
        } = split(&text);
        let got = Options::parse(&program, stage.options)
            .and_then(|o| {
                let p = Program::parse(&program).map_err(|e| e.to_string())?;
                (stage.text)(&p, &o)
            })
            .unwrap_or_else(|e| panic!("{} ({} stage): {e}", path.display(), stage.dir));
        let got: Vec<String> = got.lines().map(String::from).collect();
        if got == expected {
            continue;
        }
        if bless {
            let mut out = program.clone();
            for l in &got {
                out.push_str(if l.is_empty() { ";" } else { "; " });
                out.push_str(l);
                out.push('\n');
            }
            std::fs::write(path, out).unwrap();
            eprintln!("blessed {}", path.display());
            continue;
        }
        // A line diff: the first differing line with context, at its line in the file.
        let first = got
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(expected.len()));
        let line = lines
            .get(first)
            .copied()
            .unwrap_or_else(|| lines.last().map_or(program.lines().count(), |&l| l) + 1);
        let mut msg = format!(
            "{}:{line}: {} differs from the expectation ({} stage; expected {} lines, got {})\n",
            path.display(),
            stage.what,
            stage.dir,
            expected.len(),
            got.len(),
        );
        // Three lines of context, then five of each side from the first difference on
        // (numbered within the stage's text).
        for (n, l) in expected
            .iter()
            .enumerate()
            .take(first)
            .skip(first.saturating_sub(3))
        {
            msg.push_str(&format!(" {:4} {l}\n", n + 1));
        }
        for (n, l) in expected.iter().enumerate().skip(first).take(5) {
            msg.push_str(&format!("-{:4} {l}\n", n + 1));
        }
        for (n, l) in got.iter().enumerate().skip(first).take(5) {
            msg.push_str(&format!("+{:4} {l}\n", n + 1));
        }
        msg.push_str(&format!(
            "re-run with FINCH_BLESS=1 to accept {} as it is now\n",
            stage.what
        ));
        failures.push(msg);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn parse_filetests() {
    run_stage(&PARSE);
}

#[test]
fn normalize_filetests() {
    run_stage(&NORMALIZE);
}

#[test]
fn lowering_filetests() {
    run_stage(&LOWER);
}

#[test]
fn jam_filetests() {
    run_stage(&JAM);
}

#[test]
fn strips_filetests() {
    run_stage(&STRIPS);
}

#[test]
fn c_filetests() {
    run_stage(&C);
}
