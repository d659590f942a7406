//! Loading a compiled library into the process from a private copy of its bytes.
//!
//! The bytes were checked against the cache's record (or just compiled); they are written
//! to a file of this process's own, loaded, and the file is removed at once (the mapping
//! stays). So what runs is exactly what was checked, and nothing another process does to
//! the cache afterwards (pruning, truncating, replacing a library) can reach the pages
//! this process has mapped: a library truncated while mapped kills the process with a bus
//! error at its next page fault.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Loads the shared library `bytes`, writing its private copy in `dir` (the cache
/// directory) or, when that cannot be written, in the system's temporary directory.
pub fn load_private_copy(bytes: &[u8], dir: &Path) -> Result<libloading::Library> {
    let copy = write_copy(bytes, dir).or_else(|_| write_copy(bytes, &std::env::temp_dir()));
    let copy = copy.map_err(|(path, cause)| Error::Os {
        path: path.display().to_string(),
        cause,
    })?;
    // SAFETY: loading runs the library's initializers; the bytes are a library we
    // generated (plain C99 with no constructors), compiled by the system compiler, and
    // checked against the record written when it was compiled.
    let loaded = unsafe { libloading::Library::new(&copy) };
    // The loaded library stays mapped; its file is no longer needed.
    let _ = std::fs::remove_file(&copy);
    loaded.map_err(|e| {
        Error::Program(format!(
            "cannot load a compiled kernel (a private copy at {}): {e}",
            copy.display()
        ))
    })
}

/// Writes `bytes` to a new file in `dir` named for this process (the cache's pruning
/// removes such a file an hour after a crash left it).
fn write_copy(bytes: &[u8], dir: &Path) -> std::result::Result<PathBuf, (PathBuf, std::io::Error)> {
    static COPIES: AtomicU64 = AtomicU64::new(0);
    let n = COPIES.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!(".finch-load-{}-{n}.so.tmp", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, bytes))
        .map(|()| path.clone())
        .map_err(|e| {
            let _ = std::fs::remove_file(&path);
            (path, e)
        })
}
