//! `finch`: run, parse and inspect Finch programs and tensor files.
//!
//! ```text
//! finch run PROGRAM.fin --input A=a.mtx --input x=x.mtx [--output y=y.mtx] [--shape y=5]
//!           [--engine c|interp|reference] [--repeat N]
//! finch code PROGRAM.fin [--format A=Dense(SparseList(Element(0.0)))] [--ir | --checked]
//! finch lower PROGRAM.fin [--format A=...]
//! finch parse PROGRAM.fin
//! finch info FILE.mtx|FILE.tns
//! ```

mod files;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use finch::notation::DeclKind;
use finch::reference::{Bindings, RunOptions};
use finch::tensor::Tensor;
use finch::Program;

/// Finch: a sparse and structured tensor compiler.
#[derive(Parser)]
#[command(name = "finch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program on tensors read from files; print or write its outputs.
    Run {
        /// The program (`.fin`).
        program: PathBuf,
        /// Bind an input: `NAME=FILE` (`.mtx` or `.tns`), or `NAME=VALUE` for a scalar.
        #[arg(long = "input", short = 'i', value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Write an output to a file: `NAME=FILE` (`.mtx` or `.tns`). Outputs without a
        /// file are printed.
        #[arg(long = "output", short = 'o', value_name = "NAME=FILE")]
        outputs: Vec<String>,
        /// Give an output or temporary its dimensions where no write determines them:
        /// `NAME=16` or `NAME=3,5`.
        #[arg(long = "shape", value_name = "NAME=DIMS")]
        shapes: Vec<String>,
        /// Which engine runs the program.
        #[arg(long, value_enum, default_value_t = Engine::C)]
        engine: Engine,
        /// Run the kernel N times and print the minimum and median kernel time.
        #[arg(long, default_value_t = 1, value_name = "N")]
        repeat: usize,
        /// Let the C compiler reassociate floating-point arithmetic (faster reductions;
        /// results may differ in rounding and in the sign of a zero).
        #[arg(long)]
        reassociate: bool,
        /// Lower compactly: every term of a sum in one loop shared with the others, rather
        /// than loops specialized for each combination of a few (smaller code, quicker to
        /// compile, possibly slower; chosen anyway where the specialized code is large).
        #[arg(long)]
        compact: bool,
    },
    /// Print the generated C (or, with --ir, the kernel IR) of a program.
    Code {
        /// The program (`.fin`).
        program: PathBuf,
        /// Override a declared format: `NAME=FORMAT`.
        #[arg(long = "format", value_name = "NAME=FORMAT")]
        formats: Vec<String>,
        /// Print the kernel IR instead of C.
        #[arg(long)]
        ir: bool,
        /// Print the bounds-checked C instead of the C the engine runs.
        #[arg(long, conflicts_with = "ir")]
        checked: bool,
        /// Generate the C of `run --reassociate`.
        #[arg(long)]
        reassociate: bool,
        /// Generate the C of `run --compact`.
        #[arg(long)]
        compact: bool,
    },
    /// Print the program after each normalization (parsed; wrapperized, dimensionalized
    /// and with lifecycles, in lowering IR; the kernel IR, where reads out of loop order
    /// are concordized).
    Lower {
        /// The program (`.fin`).
        program: PathBuf,
        /// Override a declared format: `NAME=FORMAT`.
        #[arg(long = "format", value_name = "NAME=FORMAT")]
        formats: Vec<String>,
    },
    /// Parse a program and print it back in canonical form.
    Parse {
        /// The program (`.fin`).
        program: PathBuf,
    },
    /// Print the shape, stored entries, symmetry and structure of a tensor file.
    Info {
        /// A Matrix Market (`.mtx`) or FROSTT (`.tns`) file.
        file: PathBuf,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Engine {
    /// Generated C, compiled with the system C compiler and cached (the interpreter is
    /// used when no C compiler is found).
    C,
    /// The kernel-IR interpreter.
    Interp,
    /// The dense reference interpreter (the test oracle; works on dense copies).
    Reference,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            program,
            inputs,
            outputs,
            shapes,
            engine,
            repeat,
            reassociate,
            compact,
        } => run(
            &program,
            &inputs,
            &outputs,
            &shapes,
            engine,
            repeat,
            finch::engine::CompileOptions {
                reassociate,
                compact,
            },
        ),
        Command::Code {
            program,
            formats,
            ir,
            checked,
            reassociate,
            compact,
        } => code(
            &program,
            &formats,
            ir,
            checked,
            finch::engine::CompileOptions {
                reassociate,
                compact,
            },
        ),
        Command::Parse { program } => parse(&program),
        Command::Lower { program, formats } => lower(&program, &formats),
        Command::Info { file } => info(&file),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_program(path: &Path) -> Result<Program> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read program {}", path.display()))?;
    Program::parse(&text).with_context(|| format!("in program {}", path.display()))
}

/// Splits `NAME=VALUE`.
fn split_binding<'a>(arg: &'a str, flag: &str) -> Result<(&'a str, &'a str)> {
    match arg.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() => Ok((name, value)),
        _ => bail!("--{flag} expects NAME=VALUE, got `{arg}`"),
    }
}

fn parse_dims(text: &str) -> Result<Vec<usize>> {
    text.split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| anyhow!("`{d}` is not a dimension (expected e.g. 16 or 3,5)"))
        })
        .collect()
}

fn run(
    program_path: &Path,
    inputs: &[String],
    outputs: &[String],
    shapes: &[String],
    engine: Engine,
    repeat: usize,
    options: finch::engine::CompileOptions,
) -> Result<()> {
    let program = load_program(program_path)?;
    let compiled = match engine {
        Engine::Reference => None,
        Engine::C | Engine::Interp => {
            let e = if engine == Engine::C {
                finch::engine::Engine::C
            } else {
                finch::engine::Engine::Interp
            };
            match program.compile_with(e, &options) {
                Ok(c) => {
                    for w in c.warnings() {
                        eprintln!("warning: {w}");
                    }
                    Some(c)
                }
                Err(err @ finch::Error::Unsupported(_)) => {
                    bail!("{err}\n(the dense reference engine runs every program: --engine reference)")
                }
                Err(err) => {
                    return Err(err)
                        .with_context(|| format!("compiling {}", program_path.display()))
                }
            }
        }
    };

    let mut bindings = Bindings::new();
    let mut stored: HashMap<String, Tensor> = HashMap::new();
    for arg in inputs {
        let (name, source) = split_binding(arg, "input")?;
        let decl = program.decl(name).ok_or_else(|| {
            anyhow!(
                "--input {name}: the program declares no tensor `{name}` (it declares: {})",
                declared_names(&program)
            )
        })?;
        if decl.kind != DeclKind::Input {
            bail!(
                "--input {name}: `{name}` is declared `{}`, not `input`",
                decl.kind.keyword()
            );
        }
        if stored.contains_key(name) {
            bail!("--input {name} is given twice");
        }
        let tensor = files::load_tensor(source, &decl.format)
            .with_context(|| format!("--input {name}={source}"))?;
        if compiled.is_none() {
            let dense = tensor
                .to_dense()
                .with_context(|| format!("--input {name}={source}"))?;
            bindings.insert(name, dense);
        }
        stored.insert(name.to_string(), tensor);
    }
    let missing: Vec<&str> = program
        .decls()
        .iter()
        .filter(|d| d.kind == DeclKind::Input && !stored.contains_key(&d.name))
        .map(|d| d.name.as_str())
        .collect();
    if !missing.is_empty() {
        bail!(
            "missing input{}: {} (bind with --input NAME=FILE)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        );
    }

    let mut opts = RunOptions::default();
    for arg in shapes {
        let (name, dims) = split_binding(arg, "shape")?;
        let decl = program
            .decl(name)
            .ok_or_else(|| anyhow!("--shape {name}: the program declares no tensor `{name}`"))?;
        let dims = parse_dims(dims).with_context(|| format!("--shape {arg}"))?;
        if dims.len() != decl.format.ndims() {
            bail!(
                "--shape {arg}: `{name}` has {} modes but {} dimensions were given",
                decl.format.ndims(),
                dims.len()
            );
        }
        opts.shapes.insert(name.to_string(), dims);
    }

    let mut targets: HashMap<&str, &str> = HashMap::new();
    for arg in outputs {
        let (name, path) = split_binding(arg, "output")?;
        match program.decl(name) {
            Some(d) if d.kind != DeclKind::Temp => {}
            Some(_) => bail!("--output {name}: `{name}` is a temporary, not an output"),
            None => bail!(
                "--output {name}: the program declares no tensor `{name}` (it declares: {})",
                declared_names(&program)
            ),
        }
        targets.insert(name, path);
    }

    let mut times = Vec::new();
    for _ in 0..repeat.max(1) {
        let start = std::time::Instant::now();
        match &compiled {
            Some(c) => {
                let report = c
                    .run(&mut stored, &opts.shapes)
                    .with_context(|| format!("running {}", program_path.display()))?;
                times.push(report.kernel_time);
            }
            None => {
                let mut b = bindings.clone();
                program
                    .run_reference(&mut b, &opts)
                    .with_context(|| format!("running {}", program_path.display()))?;
                times.push(start.elapsed());
                if times.len() == repeat.max(1) {
                    bindings = b;
                }
            }
        }
    }
    if repeat > 1 {
        times.sort();
        eprintln!(
            "{} runs ({}): min {:?}, median {:?}",
            times.len(),
            match &compiled {
                Some(c) => format!("{:?} engine", c.engine()).to_lowercase(),
                None => "reference engine".to_string(),
            },
            times[0],
            times[times.len() / 2]
        );
    }

    for decl in program.decls() {
        let written = decl.kind == DeclKind::Output || targets.contains_key(decl.name.as_str());
        if !written {
            continue;
        }
        let tensor = match stored.get(&decl.name).filter(|_| compiled.is_some()) {
            Some(t) => t.clone(),
            None => {
                let array = bindings
                    .get(&decl.name)
                    .ok_or_else(|| anyhow!("the program did not produce `{}`", decl.name))?;
                Tensor::from_dense(&decl.format, array)
                    .with_context(|| format!("storing `{}` as {}", decl.name, decl.format))?
            }
        };
        match targets.get(decl.name.as_str()) {
            Some(path) => {
                files::save_tensor(&tensor, Path::new(path))
                    .with_context(|| format!("--output {}={path}", decl.name))?;
                let fill = tensor.fill_value();
                if fill.is_zero() {
                    eprintln!("wrote {} to {path}", decl.name);
                } else {
                    // Another reader would take the positions not listed as 0.
                    eprintln!(
                        "wrote {} to {path}: its stored entries; every position not listed holds its fill {fill} (read it back into a format with that fill)",
                        decl.name
                    );
                }
            }
            None => outln(format_args!("{} = {}", decl.name, tensor))?,
        }
    }
    Ok(())
}

/// Writes to standard output; a closed pipe (`finch code ... | head`) ends the output
/// quietly instead of failing.
fn out(text: std::fmt::Arguments) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_fmt(text) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// [`out`] and a newline.
fn outln(text: std::fmt::Arguments) -> Result<()> {
    out(format_args!("{text}\n"))
}

fn declared_names(program: &Program) -> String {
    program
        .decls()
        .iter()
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Loads a program, applying `--format NAME=FORMAT` overrides.
fn program_with_formats(path: &Path, formats: &[String]) -> Result<Program> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read program {}", path.display()))?;
    let mut ast = finch::notation::parse_program(&text)
        .with_context(|| format!("in program {}", path.display()))?;
    for arg in formats {
        let (name, fmt) = split_binding(arg, "format")?;
        let format =
            finch::formats::Format::parse(fmt).with_context(|| format!("--format {arg}"))?;
        let decl = ast
            .decls
            .iter_mut()
            .find(|d| d.name == name)
            .ok_or_else(|| anyhow!("--format {name}: the program declares no tensor `{name}`"))?;
        decl.format = format.to_string();
    }
    Program::from_ast(ast, &text).with_context(|| format!("in program {}", path.display()))
}

fn code(
    path: &Path,
    formats: &[String],
    ir: bool,
    checked: bool,
    options: finch::engine::CompileOptions,
) -> Result<()> {
    let program = program_with_formats(path, formats)?;
    let compiled = program
        .compile_with(finch::engine::Engine::Interp, &options)
        .with_context(|| format!("compiling {}", path.display()))?;
    if ir {
        out(format_args!("{}", compiled.kernel()))?;
    } else {
        let mode = if checked {
            finch::backend::c::CheckMode::Checked
        } else {
            finch::backend::c::CheckMode::Trusted
        };
        out(format_args!("{}", compiled.c_source(mode)?))?;
    }
    Ok(())
}

fn lower(path: &Path, formats: &[String]) -> Result<()> {
    let program = program_with_formats(path, formats)?;
    outln(format_args!("# 1. parsed\n{program}"))?;
    let converted = finch::lower::convert(&program, &Default::default())
        .with_context(|| format!("normalizing {}", path.display()))?;
    outln(format_args!(
        "# 2. wrapperized (offsets, permissive reads, masks), dimensionalized (loop extents)\n#    and with lifecycles (@freeze), as the compiler lowers it (reads out of loop order\n#    are concordized in step 3)\n{}",
        finch::lower::print_converted(&converted)
    ))?;
    for w in &converted.warnings {
        outln(format_args!("# warning: {w}"))?;
    }
    let compiled = program
        .compile(finch::engine::Engine::Interp)
        .with_context(|| format!("compiling {}", path.display()))?;
    outln(format_args!("# 3. kernel IR\n{}", compiled.kernel()))?;
    Ok(())
}

fn parse(path: &Path) -> Result<()> {
    let program = load_program(path)?;
    out(format_args!("{program}"))?;
    Ok(())
}

fn info(path: &Path) -> Result<()> {
    files::print_info(path)
}
