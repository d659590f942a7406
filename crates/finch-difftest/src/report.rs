//! Writing a reproducer: a directory with `program.fin`, the inputs as files the `finch`
//! command line reads (`.mtx` for vectors as `n×1` and matrices, `.tns` for three modes,
//! scalars as literals), `run.sh` with a `finch run` line per engine, `expected.txt` with
//! the reference's outputs as `finch run` prints them, `failure.txt` saying what failed,
//! and `case.txt`, the case in the tester's own form (`finch-difftest shrink DIR` reads it).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use finch::io::{self, MtxWriteOptions};
use finch::reference::{Bindings, RunOptions};
use finch::tensor::{DenseArray, Tensor};
use finch::Program;

use crate::case::Case;
use crate::run::{compared_tensors, Config, CONFIGS};

/// Writes `case` to `dir` with a description of its failure.
pub fn write_reproducer(dir: &Path, case: &Case, description: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let program = Program::parse(&case.program).context("the case's program")?;
    std::fs::write(dir.join("program.fin"), &case.program)?;
    std::fs::write(dir.join("case.txt"), case.to_text())?;
    let mut args = String::new();
    let mut notes = String::new();
    for (name, a) in &case.inputs {
        let format = &program.decl(name).context("a declared input")?.format;
        match a.shape.len() {
            0 => {
                let _ = write!(
                    args,
                    " --input {name}={}",
                    a.data.first().map_or(String::new(), |v| v.to_string())
                );
            }
            n => {
                let file = format!("{name}.{}", if n <= 2 { "mtx" } else { "tns" });
                let path = dir.join(&file);
                write_input(&path, format, a)?;
                if !reads_back(&path, format, a) {
                    let _ = writeln!(
                        notes,
                        "note: {file} does not read back as the tested data (a .tns file gives each mode the largest index it lists); case.txt holds it exactly"
                    );
                }
                let _ = write!(args, " --input {name}={file}");
            }
        }
    }
    for (name, dims) in &case.shapes {
        let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
        let _ = write!(args, " --shape {name}={}", dims.join(","));
    }
    let mut script = String::from(
        "#!/bin/sh\n# Runs the program on every engine; compare with expected.txt.\ncd \"$(dirname \"$0\")\"\nFINCH=${FINCH:-finch}\n",
    );
    let _ = writeln!(
        script,
        "echo '== reference'\n$FINCH run program.fin{args} --engine reference"
    );
    for c in CONFIGS {
        let _ = writeln!(
            script,
            "echo '== {}'\n$FINCH run program.fin{args} {}",
            c.name(),
            c.cli_flags()
        );
    }
    std::fs::write(dir.join("run.sh"), script)?;
    std::fs::write(dir.join("expected.txt"), expected(&program, case)?)?;
    std::fs::write(dir.join("failure.txt"), format!("{description}\n{notes}"))?;
    Ok(())
}

fn write_input(path: &Path, format: &finch::formats::Format, a: &DenseArray) -> Result<()> {
    let t = Tensor::from_dense(format, a)?;
    let coo = t.to_coo();
    if a.shape.len() > 2 {
        io::write_tns_file(path, &coo)?;
        return Ok(());
    }
    let coo = if a.shape.len() == 1 {
        coo.reshape_unit_modes(&[a.shape[0], 1])?
    } else {
        coo
    };
    let fill = t.fill_value();
    let options = MtxWriteOptions {
        comment: (!fill.is_zero())
            .then(|| format!(" fill {fill}: every position not listed holds {fill}")),
        ..MtxWriteOptions::default()
    };
    io::write_matrix_market_file(path, &coo, &options)?;
    Ok(())
}

/// Whether the file reads back (as `finch run` reads it) as the array.
fn reads_back(path: &Path, format: &finch::formats::Format, a: &DenseArray) -> bool {
    let coo = match path.extension().and_then(|e| e.to_str()) {
        Some("tns") => io::read_tns_file(path, None),
        _ => io::read_matrix_market_file(path).map(|m| m.coo),
    };
    let Ok(coo) = coo.and_then(|c| c.convert_to(format.element_type())) else {
        return false;
    };
    let coo = if coo.shape.len() == a.shape.len() {
        Ok(coo)
    } else {
        coo.reshape_unit_modes(&a.shape)
    };
    coo.and_then(|c| Tensor::from_coo(format, &c))
        .and_then(|t| t.to_dense())
        .is_ok_and(|d| d.shape == a.shape && d.data == a.data)
}

/// The reference's outputs, printed as `finch run` prints them.
fn expected(program: &Program, case: &Case) -> Result<String> {
    let mut b = Bindings::new();
    for (name, a) in &case.inputs {
        b.insert(name.clone(), a.clone());
    }
    let opts = RunOptions {
        shapes: case
            .shapes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ..RunOptions::default()
    };
    let mut out = String::new();
    match program.run_reference(&mut b, &opts) {
        Ok(_) => {
            for (name, format) in compared_tensors(program) {
                if let Some(a) = b.get(&name) {
                    match Tensor::from_dense(&format, a) {
                        Ok(t) => {
                            let _ = writeln!(out, "{name} = {t}");
                        }
                        Err(e) => {
                            let _ = writeln!(out, "{name}: the result does not fit {format}: {e}");
                        }
                    }
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "the reference engine refuses the case: {e}");
        }
    }
    Ok(out)
}

/// A one-paragraph description of a failure, for `failure.txt` and the summary.
pub fn describe(kind: &str, config: Config, message: &str, origin: &str) -> String {
    format!(
        "{kind} in {} ({}), {origin}\n{message}",
        config.name(),
        config.cli_flags()
    )
}
