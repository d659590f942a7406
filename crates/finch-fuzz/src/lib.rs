//! Fuzz targets of Finch-RS: one function per input surface, each taking arbitrary bytes
//! and panicking only on a bug (a crash of the library, a round trip that is not the
//! identity, a tensor the validator accepted that a kernel reads wrongly, an engine that
//! disagrees with the reference).
//!
//! The coverage-guided fuzzer (`fuzz/`, libFuzzer through `cargo fuzz`) calls these
//! functions; the tests replay the seed corpora and every saved crash on the stable
//! toolchain, so a fixed crash stays fixed. See `docs/fuzzing.md`.

pub mod bytes;
pub mod files;
pub mod programs;
pub mod seeds;
pub mod storage;
pub mod text;

/// A fuzz target: its name (the `fuzz/fuzz_targets/NAME.rs` file and the
/// `fuzz/seeds/NAME` corpus) and its entry point.
pub struct Target {
    /// The target's name.
    pub name: &'static str,
    /// What it checks.
    pub checks: &'static str,
    /// The entry point, given one fuzz input.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "program_text",
        checks: "the parser and checker never panic; parse, print, parse is the identity",
        run: text::program_text,
    },
    Target {
        name: "format_text",
        checks: "format strings: parse, print, parse is the identity; an empty tensor of \
                 every accepted format is built and validated",
        run: text::format_text,
    },
    Target {
        name: "matrix_market",
        checks: "the Matrix Market reader (values and structure) refuses cleanly or reads \
                 entries that write and read back unchanged",
        run: files::matrix_market,
    },
    Target {
        name: "frostt",
        checks: "the FROSTT reader refuses cleanly or reads entries that write and read \
                 back unchanged",
        run: files::frostt,
    },
    Target {
        name: "raw_arrays",
        checks: "tensors from raw arrays (from_csc, from_csr, from_coo, corrupted level \
                 storage) are refused by name or are read by kernels as the reference reads \
                 their meaning",
        run: storage::raw_arrays,
    },
    Target {
        name: "program_run",
        checks: "a program with its inputs (the differential tester's case text) runs on \
                 the compiled engines as on the reference",
        run: programs::program_run,
    },
];

/// The target of a name.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
