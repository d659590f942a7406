//! The disk cache of compiled kernels never crashes the process: a damaged library is
//! compiled again with a warning, a cache that cannot be written costs only the caching,
//! concurrent processes share it, and a process whose kernels are loaded survives the
//! cache being pruned or truncated under it. Each test runs the `finch` binary with a
//! cache directory of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether the system has a C compiler the `finch` binary would use (else kernels run in
/// the interpreter and there is no cache to test).
fn have_cc() -> bool {
    let ok = finch::backend::c::available();
    if !ok {
        eprintln!("no C compiler: the kernel cache is not used, nothing to test");
    }
    ok
}

/// A cache directory of its own, removed when dropped.
struct Cache(PathBuf);

impl Cache {
    fn new(name: &str) -> Cache {
        let dir =
            std::env::temp_dir().join(format!("finch-cache-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Cache(dir)
    }

    /// The cached libraries (`finch-*.so`).
    fn libraries(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return Vec::new();
        };
        let mut libs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with("finch-") && name.ends_with(".so")
            })
            .collect();
        libs.sort();
        libs
    }

    /// The one cached library (the tests compile one kernel).
    fn library(&self) -> PathBuf {
        let libs = self.libraries();
        assert_eq!(libs.len(), 1, "{libs:?}");
        libs[0].clone()
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `finch run` of the README's SpMV demo with `cache` as its kernel cache.
fn spmv(cache: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_finch"));
    c.args([
        "run",
        "examples/spmv.fin",
        "--input",
        "A=examples/data/A.mtx",
        "--input",
        "x=examples/data/x.mtx",
    ])
    .args(extra)
    .current_dir(repo_root())
    .env("FINCH_CACHE_DIR", cache);
    c
}

fn run(cache: &Path) -> Output {
    spmv(cache, &[]).output().expect("the finch binary runs")
}

/// Asserts the demo ran (exit 0, not a signal) and printed the right `y`; returns stderr.
fn ran_right(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{:?}: {stderr}", o.status);
    let stdout = String::from_utf8_lossy(&o.stdout);
    for v in ["7.0", "6.0", "19.0", "31.0"] {
        assert!(stdout.contains(v), "missing {v} in {stdout}");
    }
    stderr
}

/// One way of damaging the cache.
type Damage<'a> = Box<dyn Fn() + 'a>;

/// Damages the cached library in each way a disk or another tool can, and checks that the
/// next run compiles it again with a warning naming the file, and the run after that uses
/// the repaired cache silently.
#[test]
fn a_damaged_library_is_compiled_again_with_a_warning() {
    if !have_cc() {
        return;
    }
    let cache = Cache::new("damaged");
    assert_eq!(ran_right(&run(&cache.0)), "");
    let lib = cache.library();
    let bytes = std::fs::read(&lib).expect("the library");
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x5a;
    let record = PathBuf::from(format!("{}.sum", lib.display()));
    let damages: [(&str, Damage); 6] = [
        (
            "truncated",
            Box::new(|| std::fs::write(&lib, &bytes[..bytes.len() / 3]).unwrap()),
        ),
        ("emptied", Box::new(|| std::fs::write(&lib, b"").unwrap())),
        (
            "one byte altered",
            Box::new(|| std::fs::write(&lib, &flipped).unwrap()),
        ),
        (
            "a foreign file",
            Box::new(|| std::fs::write(&lib, b"\x7fELF not really a library").unwrap()),
        ),
        (
            "its record removed",
            Box::new(|| std::fs::remove_file(&record).unwrap()),
        ),
        (
            "its record emptied",
            Box::new(|| std::fs::write(&record, b"").unwrap()),
        ),
    ];
    for (what, damage) in damages {
        damage();
        let warned = ran_right(&run(&cache.0));
        assert!(
            warned.contains("warning: the cached kernel library")
                && warned.contains(&*lib.to_string_lossy())
                && warned.contains("compiled again"),
            "{what}: {warned}"
        );
        assert_eq!(ran_right(&run(&cache.0)), "", "{what}: repaired");
        assert_eq!(cache.library(), lib);
    }
}

/// A removed library is compiled again without a word (a pruned cache is normal).
#[test]
fn a_removed_library_is_compiled_again() {
    if !have_cc() {
        return;
    }
    let cache = Cache::new("removed");
    ran_right(&run(&cache.0));
    std::fs::remove_dir_all(&cache.0).unwrap();
    assert_eq!(ran_right(&run(&cache.0)), "");
    assert_eq!(cache.libraries().len(), 1);
}

/// A cache directory that cannot be created (under a regular file; permissions would not
/// stop a root user) still runs the kernel, compiled for the process, with a warning.
#[test]
fn an_unwritable_cache_compiles_for_the_process() {
    if !have_cc() {
        return;
    }
    let cache = Cache::new("unwritable");
    std::fs::create_dir_all(&cache.0).unwrap();
    let file = cache.0.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let under_file = file.join("cache");
    let o = run(&under_file);
    let warned = ran_right(&o);
    assert!(
        warned.contains("cannot be written") && warned.contains("for this process only"),
        "{warned}"
    );
    assert!(
        !warned.contains("interpreter"),
        "still compiled C: {warned}"
    );
}

/// Several processes compiling the same kernel into an empty cache at once all run it,
/// and leave one library that the next run uses without a warning.
#[test]
fn concurrent_processes_share_the_cache() {
    if !have_cc() {
        return;
    }
    let cache = Cache::new("concurrent");
    let children: Vec<_> = (0..6)
        .map(|_| {
            spmv(&cache.0, &[])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the finch binary starts")
        })
        .collect();
    for child in children {
        let o = child.wait_with_output().expect("the finch binary runs");
        ran_right(&o);
    }
    assert_eq!(cache.libraries().len(), 1);
    assert_eq!(ran_right(&run(&cache.0)), "");
}

/// A process running a loaded kernel over and over survives its cache being truncated
/// and then removed under it: it runs a private copy of the library, where mapping the
/// cached file itself would die with a bus error once the file is truncated.
#[test]
fn a_running_process_survives_its_cache_being_truncated_and_pruned() {
    if !have_cc() {
        return;
    }
    let cache = Cache::new("running");
    let child = spmv(&cache.0, &["--repeat", "1000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the finch binary starts");
    let start = Instant::now();
    let lib = loop {
        if let Some(lib) = cache.libraries().into_iter().next() {
            break lib;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no library was cached"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let the process load it and start its runs.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::File::options()
        .write(true)
        .open(&lib)
        .and_then(|f| f.set_len(0))
        .expect("the library is truncated");
    std::thread::sleep(Duration::from_millis(200));
    std::fs::remove_dir_all(&cache.0).expect("the cache is removed");
    std::thread::sleep(Duration::from_millis(200));
    let mut child = child;
    if let Some(status) = child.try_wait().expect("the child's status") {
        // A bus error, or runs too few to outlast the damage.
        panic!("the process ended while its cache was damaged: {status}");
    }
    let o = child.wait_with_output().expect("the finch binary runs");
    let stderr = ran_right(&o);
    assert!(
        stderr.contains("1000000 runs"),
        "the runs finished: {stderr}"
    );
}

/// A C compiler that does not finish is stopped after `FINCH_CC_TIMEOUT` seconds, and the
/// kernel runs in the interpreter with a warning saying why.
#[test]
fn a_compiler_that_hangs_is_stopped_and_the_interpreter_runs_the_kernel() {
    if !have_cc() {
        return;
    }
    let cache = Cache::new("hanging-cc");
    std::fs::create_dir_all(&cache.0).unwrap();
    // Answers `--version` like the real compiler (the cache key asks), then hangs.
    let fake = cache.0.join("slow-cc");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then exec cc --version; fi\nexec sleep 60\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let o = spmv(&cache.0.join("kernels"), &[])
        .env("CC", &fake)
        .env("FINCH_CC_TIMEOUT", "1")
        .output()
        .unwrap();
    let warned = ran_right(&o);
    assert!(
        warned.contains("did not finish compiling a kernel within 1 s")
            && warned.contains("kernel interpreter"),
        "{warned}"
    );
}
