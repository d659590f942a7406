//! Every program in `examples/` parses, checks, prints back to the same program, and
//! compiles.

use std::path::Path;

#[test]
fn every_example_parses_and_round_trips() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut count = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "fin"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        let p = finch::Program::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let printed = p.to_string();
        let q = finch::notation::parse_program(&printed)
            .unwrap_or_else(|e| panic!("{}: {e}\n{printed}", path.display()));
        assert_eq!(&q, p.ast(), "{}", path.display());
        count += 1;
    }
    assert!(count >= 24, "found only {count} examples");
}

#[test]
fn every_example_compiles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "fin") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let p = finch::Program::parse(&text).unwrap();
        if let Err(e) = p.compile(finch::engine::Engine::Interp) {
            panic!("{}: {e}", path.display());
        }
        count += 1;
    }
    assert!(count >= 30, "found only {count} examples");
}
