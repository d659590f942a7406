//! Golden tests of lowering: each `tests/filetests/lower/*.fin` holds a program followed by
//! the exact kernel IR it lowers to, as lines starting with `; `. Run with `FINCH_BLESS=1`
//! to rewrite the expectations after an intended change (refused when `CI=true`); review
//! the diff like code.

use std::path::Path;

fn split(text: &str) -> (String, Vec<String>) {
    let mut program = String::new();
    let mut expected = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("; ") {
            expected.push(rest.to_string());
        } else if line == ";" {
            expected.push(String::new());
        } else {
            program.push_str(line);
            program.push('\n');
        }
    }
    (program.trim_end().to_string() + "\n", expected)
}

#[test]
fn lowering_filetests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests/lower");
    let bless = std::env::var_os("FINCH_BLESS").is_some();
    if bless && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("FINCH_BLESS is refused when CI=true");
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "fin"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        let (program, expected) = split(&text);
        let p =
            finch::Program::parse(&program).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let k = p
            .compile(finch::engine::Engine::Interp)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let got: Vec<String> = k.kernel().to_string().lines().map(String::from).collect();
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
        // A line diff: the first differing line with context.
        let first = got
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(expected.len()));
        let lo = first.saturating_sub(3);
        let mut msg = format!(
            "{}:{}: lowering differs from the expectation\n",
            path.display(),
            first + 1
        );
        for (n, l) in expected.iter().enumerate().skip(lo).take(8) {
            msg.push_str(&format!("-{:4} {l}\n", n + 1));
        }
        for (n, l) in got.iter().enumerate().skip(lo).take(8) {
            msg.push_str(&format!("+{:4} {l}\n", n + 1));
        }
        msg.push_str("re-run with FINCH_BLESS=1 to accept the new lowering\n");
        failures.push(msg);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
