//! Seed corpora: the inputs each target starts from, gathered from the repository's
//! examples, the shared data directory (`../shared/data`, when present: real, unusual and
//! malformed Matrix Market files, FROSTT tensors), the differential tester's generator,
//! and the saved crashes of `fuzz/regressions/TARGET/`. The tests replay them on the
//! stable toolchain; `finch-fuzz-seeds` writes them where libFuzzer starts.

use std::fs;
use std::path::{Path, PathBuf};

use finch_difftest::gen::generate;
use finch_difftest::rng::Rng;

use finch::formats::LevelKind;

/// One seed: a name (for messages and file names) and its bytes.
pub struct Seed {
    /// Where it came from.
    pub name: String,
    /// The input.
    pub data: Vec<u8>,
}

/// Bytes the `format_text` target reads as the tensor's shape after the format string.
const SHAPE_BYTES: &[u8] = &[2, 3, 1, 2];

/// At most this many bytes of a large file (a seed is a start, not a benchmark).
const MAX_SEED: usize = 4096;

/// The seeds of `target`; `root` is the repository, `data` the shared data directory.
pub fn seeds(target: &str, root: &Path, data: &Path) -> Vec<Seed> {
    let mut out = match target {
        "program_text" => {
            let mut s = files_in(&root.join("examples"), "fin");
            s.extend(programs_in_tests(root));
            s
        }
        "format_text" => format_seeds(root),
        "matrix_market" => {
            let m = data.join("matrices");
            let mut s = files_in(&m.join("malformed"), "mtx");
            s.extend(files_in(&m.join("edgecases"), "mtx"));
            s.extend(
                files_in(&m, "mtx")
                    .into_iter()
                    .filter(|s| s.data.len() <= MAX_SEED),
            );
            s
        }
        "frostt" => {
            let t = data.join("tensors");
            let mut s = files_in(&t.join("edgecases"), "tns");
            s.extend(files_in(&t, "tns").into_iter().map(|mut s| {
                s.data = first_lines(&s.data, 40);
                s
            }));
            s
        }
        "raw_arrays" => (0..256u64)
            .map(|k| {
                let mut r = Rng::new(k);
                let len = 8 + r.below(56);
                Seed {
                    name: format!("random-{k}"),
                    data: (0..len).map(|_| r.next_u64() as u8).collect(),
                }
            })
            .collect(),
        "program_run" => (0..24u64)
            .map(|k| Seed {
                name: format!("difftest-seed-31-case-{k}"),
                data: generate(31, k, 0).to_text().into_bytes(),
            })
            .collect(),
        _ => Vec::new(),
    };
    out.extend(regressions(target, root));
    out
}

/// The saved crashes of a target (`fuzz/regressions/TARGET/*`), each fixed and kept so
/// that it stays fixed.
pub fn regressions(target: &str, root: &Path) -> Vec<Seed> {
    files_in(&root.join("fuzz").join("regressions").join(target), "")
}

/// Files of a directory with an extension (any when empty), sorted by name; none when the
/// directory is absent.
fn files_in(dir: &Path, ext: &str) -> Vec<Seed> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| ext.is_empty() || p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let data = fs::read(&p).ok()?;
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some(Seed { name, data })
        })
        .collect()
}

/// Program texts written as string literals in the library's tests (those that declare
/// a tensor and have a statement): the constructs the tests care about.
fn programs_in_tests(root: &Path) -> Vec<Seed> {
    let tests = root.join("crates").join("finch-tensor").join("tests");
    let mut files = files_in(&tests, "rs");
    files.extend(files_in(&tests.join("regressions"), "rs"));
    let mut out = Vec::new();
    for file in files {
        let text = String::from_utf8_lossy(&file.data);
        for (k, literal) in string_literals(&text).into_iter().enumerate() {
            if literal.contains("::") && (literal.contains(".=") || literal.contains("for ")) {
                out.push(Seed {
                    name: format!("{}-{k}", file.name),
                    data: literal.into_bytes(),
                });
            }
        }
    }
    out
}

/// The ordinary string literals of Rust source, unescaped (`\n`, `\t`, `\"`, `\\`).
fn string_literals(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = source.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        // Skip char literals such as '"' and raw or byte prefixes' quotes stay ordinary.
        if c == '"' && prev != '\'' {
            let mut lit = String::new();
            while let Some(d) = chars.next() {
                match d {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => lit.push('\n'),
                        Some('t') => lit.push('\t'),
                        Some('\n') => {
                            // A line continuation: the next line's indentation is dropped.
                            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                                chars.next();
                            }
                        }
                        Some(e) => lit.push(e),
                        None => break,
                    },
                    d => lit.push(d),
                }
            }
            out.push(lit);
            prev = '"';
            continue;
        }
        prev = c;
    }
    out
}

/// The first `n` lines.
fn first_lines(data: &[u8], n: usize) -> Vec<u8> {
    let mut lines = 0;
    let end = data
        .iter()
        .position(|&b| {
            lines += usize::from(b == b'\n');
            lines == n
        })
        .map_or(data.len(), |k| k + 1);
    data[..end].to_vec()
}

/// Every level over an `Element` and a `Pattern` leaf, nested pairs, the scalars, and
/// every format the examples declare.
fn format_seeds(root: &Path) -> Vec<Seed> {
    let mut texts: Vec<String> = Vec::new();
    for l in LevelKind::registry() {
        texts.push(format!("{l}(Element(0.0))"));
        texts.push(format!("Dense({l}(Pattern()))"));
        texts.push(format!("{l}(SparseList(Element(1u8)))"));
    }
    for s in [
        "Scalar",
        "SparseScalar",
        "ShortCircuitScalar",
        "SparseShortCircuitScalar",
    ] {
        texts.push(format!("{s}(-Inf)"));
    }
    texts.extend([
        "SparseCOO{2}(Element(NaN))".into(),
        "Dense(Element(0.5f32))".into(),
    ]);
    for example in files_in(&root.join("examples"), "fin") {
        let text = String::from_utf8_lossy(&example.data);
        for decl in text.split("::").skip(1) {
            if let Some(f) = decl.split_whitespace().next() {
                texts.push(f.to_string());
            }
        }
    }
    texts.sort();
    texts.dedup();
    texts
        .into_iter()
        .map(|t| {
            let mut data = t.clone().into_bytes();
            data.extend_from_slice(SHAPE_BYTES);
            Seed { name: t, data }
        })
        .collect()
}
