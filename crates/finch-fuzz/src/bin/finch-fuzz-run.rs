//! Runs one fuzz target on saved inputs on the stable toolchain, without libFuzzer: to
//! reproduce a crash or a slow input (`finch-fuzz-run TARGET FILE...`), printing each
//! input's time; a panic is reported as it happens, with the input's name.

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((name, files)) = args.split_first() else {
        eprintln!("usage: finch-fuzz-run TARGET FILE...");
        return ExitCode::from(2);
    };
    let Some(target) = finch_fuzz::target(name) else {
        let names: Vec<&str> = finch_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!(
            "finch-fuzz-run: no target `{name}` (targets: {})",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let mut failed = false;
    for file in files {
        let data = match std::fs::read(file) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("finch-fuzz-run: cannot read {file}: {e}");
                return ExitCode::from(2);
            }
        };
        let start = Instant::now();
        let outcome = std::panic::catch_unwind(|| (target.run)(&data));
        let seconds = start.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => println!("{file}: ok in {seconds:.2} s"),
            Err(_) => {
                println!("{file}: FAILED in {seconds:.2} s");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
