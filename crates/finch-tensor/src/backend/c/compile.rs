//! Compiling C to a shared library with the system compiler, with a disk cache.
//!
//! Compiler: `$CC`, else `cc`, found on `PATH`. Flags: `$FINCH_CFLAGS` (split on
//! whitespace), else a portable `-O3`, plus `-std=c99 -fPIC -shared -lm` always. Cache key:
//! the SHA-256 of (C source, compiler path and `--version` output, flags, crate version).
//! The `--version` text is itself cached on disk under the compiler's resolved path, size
//! and modification time, so a warm start from the disk cache spawns no process; replacing
//! the compiler binary changes that identity and the version is asked again.
//! Cache directory: `$FINCH_CACHE_DIR`, else the user cache dir + `finch-rs`. Libraries
//! are written to a temporary file and renamed into place, so a concurrent reader never
//! sees a partial library; each has a record of its length and checksum, checked before
//! it is used (`cache`). The cache's size is bounded (`cache`). A cache directory that
//! cannot be written costs only the caching: kernels are then compiled in the system's
//! temporary directory, for this process, with a warning.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The C compiler to use and what identifies it.
#[derive(Clone, Debug)]
pub struct Compiler {
    /// Program name or path.
    pub program: String,
    /// Its `--version` output (part of the cache key).
    pub version: String,
    /// Optimization and target flags.
    pub flags: Vec<String>,
}

/// The system C compiler, or `None` when none runs (then the interpreter is used).
pub fn compiler() -> Option<&'static Compiler> {
    static CC: OnceLock<Option<Compiler>> = OnceLock::new();
    CC.get_or_init(|| {
        let program = std::env::var("CC")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "cc".to_string());
        let version = compiler_version(&program)?;
        let flags = match std::env::var("FINCH_CFLAGS") {
            Ok(f) if !f.trim().is_empty() => f.split_whitespace().map(String::from).collect(),
            _ => vec!["-O3".to_string()],
        };
        Some(Compiler {
            program,
            version,
            flags,
        })
    })
    .as_ref()
}

/// The `--version` output of `program`, from the disk cache when the binary it resolves
/// to is unchanged, else by running it (and remembering the answer).
fn compiler_version(program: &str) -> Option<String> {
    let memo = resolve_program(program).and_then(|path| {
        let meta = std::fs::metadata(&path).ok()?;
        let mtime = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        let identity = format!(
            "{}\0{}\0{}.{:09}",
            path.display(),
            meta.len(),
            mtime.as_secs(),
            mtime.subsec_nanos()
        );
        let digest: String = Sha256::digest(identity.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        Some(cache_dir().join(format!("cc-{digest}.version")))
    });
    if let Some(text) = memo
        .as_ref()
        .and_then(|m| std::fs::read_to_string(m).ok())
        .filter(|t| !t.is_empty())
    {
        return Some(text);
    }
    let out = Command::new(program).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if let Some(memo) = memo {
        // Best effort: a cache that cannot be written only costs a process spawn next time.
        let _ = write_atomically(&memo, text.as_bytes());
    }
    Some(text)
}

/// The file `program` names: itself when it contains a path separator, else the first
/// match on `PATH`, with symbolic links resolved.
fn resolve_program(program: &str) -> Option<PathBuf> {
    let candidate = Path::new(program);
    let found = if candidate.components().count() > 1 {
        Some(candidate.to_path_buf())
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    }?;
    std::fs::canonicalize(found).ok()
}

fn write_atomically(dst: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = dst
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dst.with_file_name(format!(".finch-{name}-{}-{n}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dst).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The cache directory (created on demand).
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("FINCH_CACHE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("finch-rs"),
    }
}

/// The cache key of a source under a compiler.
pub fn cache_key(source: &str, cc: &Compiler) -> String {
    let mut h = Sha256::new();
    for part in [
        source,
        &cc.program,
        &cc.version,
        &cc.flags.join(" "),
        env!("CARGO_PKG_VERSION"),
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A compiled library's bytes, checked against their record when they came from the
/// disk cache.
pub struct Built {
    /// The shared library.
    pub bytes: Vec<u8>,
    /// Whether a compile happened (else the disk cache had it).
    pub fresh: bool,
    /// What went wrong with the cache on the way (a damaged library compiled again, a
    /// cache directory that cannot be written), for the user.
    pub warnings: Vec<String>,
}

/// The compiled library for `source`, from the disk cache when it holds an intact copy,
/// else compiled (and cached when the cache directory can be written).
pub fn compile(source: &str, cc: &Compiler) -> Result<Built> {
    // A bad bound is reported before any work, not ignored.
    super::cache::max_bytes()?;
    let dir = cache_dir();
    let key = cache_key(source, cc);
    let lib = dir.join(format!("finch-{key}.so"));
    let mut warnings = Vec::new();
    if lib.exists() {
        match super::cache::check(&lib) {
            Ok(bytes) => {
                super::cache::touch(&lib);
                return Ok(Built {
                    bytes,
                    fresh: false,
                    warnings,
                });
            }
            Err(damage) => {
                warnings.push(format!(
                    "the cached kernel library {} is not used: {damage}; it is compiled again",
                    lib.display()
                ));
                super::cache::discard(&lib);
            }
        }
    }
    let bytes = match compile_in(&dir, &key, source, cc)? {
        Ok(tmp_lib) => {
            let bytes = read_library(&tmp_lib)?;
            cache_library(&tmp_lib, &lib, &bytes, &mut warnings);
            super::cache::prune_now_and_then(&dir);
            bytes
        }
        Err(unwritable) => {
            let private = std::env::temp_dir();
            warnings.push(format!(
                "the kernel cache {} cannot be written ({unwritable}); kernels are compiled in {} for this process only (set FINCH_CACHE_DIR to a writable directory)",
                dir.display(),
                private.display()
            ));
            let tmp_lib = compile_in(&private, &key, source, cc)?.map_err(|cause| Error::Os {
                path: private.display().to_string(),
                cause,
            })?;
            let bytes = read_library(&tmp_lib);
            let _ = std::fs::remove_file(&tmp_lib);
            bytes?
        }
    };
    Ok(Built {
        bytes,
        fresh: true,
        warnings,
    })
}

/// Compiles `source` in `dir` into a temporary library, whose path it returns; the inner
/// error when `dir` cannot be created or written (the source is written there first).
fn compile_in(
    dir: &Path,
    key: &str,
    source: &str,
    cc: &Compiler,
) -> Result<std::result::Result<PathBuf, std::io::Error>> {
    if let Err(e) = std::fs::create_dir_all(dir) {
        return Ok(Err(e));
    }
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let src_path = dir.join(format!("finch-{key}-{tag}.c"));
    let tmp_lib = dir.join(format!(".finch-{key}-{tag}.so.tmp"));
    if let Err(e) = std::fs::write(&src_path, source) {
        let _ = std::fs::remove_file(&src_path);
        return Ok(Err(e));
    }
    let mut command = Command::new(&cc.program);
    command
        .args(&cc.flags)
        .args(["-std=c99", "-fPIC", "-shared", "-o"])
        .arg(&tmp_lib)
        .arg(&src_path)
        .arg("-lm");
    let out = output_within(&mut command, compile_timeout()).map_err(|source| Error::Os {
        path: cc.program.clone(),
        cause: source,
    });
    let _ = std::fs::remove_file(&src_path);
    let out = out?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp_lib);
        return Err(Error::Program(format!(
            "the C compiler `{}` failed on a generated kernel (a bug in Finch-RS; please report it):\n{}",
            cc.program,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(Ok(tmp_lib))
}

/// How long the C compiler may take on one kernel: `FINCH_CC_TIMEOUT` seconds, else
/// [`DEFAULT_COMPILE_TIMEOUT`]. The kernel budget keeps generated C to seconds of `cc`;
/// the bound is for a compiler that hangs or a machine far slower than expected.
fn compile_timeout() -> Duration {
    std::env::var("FINCH_CC_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_COMPILE_TIMEOUT, Duration::from_secs_f64)
}

/// The default of [`compile_timeout`].
const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs `command` to completion as `Command::output` does, but kills it past `limit` and
/// returns a `TimedOut` error (which makes the C engine run the kernel in the
/// interpreter, with a warning).
fn output_within(command: &mut Command, limit: Duration) -> std::io::Result<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Drain both pipes on threads, so a chatty compiler cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "did not finish compiling a kernel within {:.0} s (FINCH_CC_TIMEOUT)",
                    limit.as_secs_f64()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

fn read_library(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|cause| {
        let _ = std::fs::remove_file(path);
        Error::Os {
            path: path.display().to_string(),
            cause,
        }
    })
}

/// Puts a freshly compiled library (`tmp_lib`, holding `bytes`) into the cache as `lib`,
/// its record first. Best effort: the bytes in hand are loaded either way, and a failure
/// only means compiling again next time (with a warning now).
fn cache_library(tmp_lib: &Path, lib: &Path, bytes: &[u8], warnings: &mut Vec<String>) {
    let record = super::cache::record(bytes);
    let cached = write_atomically(&super::cache::record_path(lib), record.as_bytes())
        .and_then(|()| std::fs::rename(tmp_lib, lib));
    if let Err(e) = cached {
        let _ = std::fs::remove_file(tmp_lib);
        warnings.push(format!(
            "the compiled kernel could not be kept in the cache as {} ({e}); it is compiled again next time",
            lib.display()
        ));
    }
}
