//! Writes every target's seed corpus into `DIR/TARGET/` (where libFuzzer starts):
//! `finch-fuzz-seeds DIR [REPO [DATA]]`, REPO defaulting to the current directory and
//! DATA to `REPO/../shared/data`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: finch-fuzz-seeds DIR [REPO [DATA]]");
        return ExitCode::from(2);
    };
    let root = args
        .get(1)
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let data = args.get(2).map_or_else(
        || root.join("..").join("shared").join("data"),
        PathBuf::from,
    );
    for target in finch_fuzz::TARGETS {
        let out = dir.join(target.name);
        if let Err(e) = std::fs::create_dir_all(&out) {
            eprintln!("finch-fuzz-seeds: cannot create {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
        let seeds = finch_fuzz::seeds::seeds(target.name, &root, &data);
        for (k, seed) in seeds.iter().enumerate() {
            let path = out.join(format!("seed-{k:04}"));
            if let Err(e) = std::fs::write(&path, &seed.data) {
                eprintln!("finch-fuzz-seeds: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
        println!("{}: {} seeds", target.name, seeds.len());
    }
    ExitCode::SUCCESS
}
