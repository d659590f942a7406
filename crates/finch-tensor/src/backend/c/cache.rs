//! Bounds on the disk cache of compiled kernels.
//!
//! Every distinct kernel leaves a library in the cache (15 KB to a few MB), so a cache
//! used for long grows without end. After a compile, at most once every ten minutes per
//! process, the cache is brought back under `$FINCH_CACHE_MAX_MB` megabytes of libraries
//! (default 1024; `0` for no bound): the least recently used libraries are removed until
//! 80 % of the bound remains. A library's modification time is its last use: a load from
//! the disk cache refreshes it. Leftovers of compiles that did not finish (a killed
//! process's source and partial library) are removed after an hour.
//!
//! Removing a library another process is about to load is harmless: the loader compiles
//! it again (`super::load`), and a library already loaded stays mapped.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// The bound when `$FINCH_CACHE_MAX_MB` is not set, in megabytes.
pub const DEFAULT_MAX_MB: u64 = 1024;

/// How much of the bound a pruning leaves.
const KEEP_PERCENT: u64 = 80;

/// How often one process looks at the cache's size.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Age past which a compile's leftovers are taken to be abandoned.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// The file whose modification time records the last pruning.
const MARKER: &str = ".last-prune";

/// The bound on the cache's libraries in bytes (`None`: unbounded), from
/// `$FINCH_CACHE_MAX_MB`.
pub fn max_bytes() -> Result<Option<u64>> {
    let mb = match std::env::var("FINCH_CACHE_MAX_MB") {
        Ok(v) if !v.trim().is_empty() => v.trim().parse::<u64>().map_err(|_| {
            Error::Program(format!(
                "FINCH_CACHE_MAX_MB must be a whole number of megabytes (0: no bound), not `{v}`"
            ))
        })?,
        _ => DEFAULT_MAX_MB,
    };
    Ok((mb > 0).then(|| mb.saturating_mul(1 << 20)))
}

/// Marks `lib` as used now (best effort: a cache on a read-only disk is still read).
pub fn touch(lib: &Path) {
    if let Ok(f) = std::fs::File::open(lib) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Prunes `dir` when this process has not looked at it for [`PRUNE_EVERY`] (by the
/// marker's time, shared with other processes). Best effort: errors are ignored.
pub fn prune_now_and_then(dir: &Path) {
    let Ok(Some(limit)) = max_bytes() else {
        return;
    };
    let marker = dir.join(MARKER);
    let now = SystemTime::now();
    let due = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .map_or(true, |t| {
            now.duration_since(t).unwrap_or_default() >= PRUNE_EVERY
        });
    if !due {
        return;
    }
    if std::fs::write(&marker, b"").is_ok() {
        let _ = prune(dir, limit, now);
    }
}

/// What a pruning removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Libraries removed (least recently used first).
    pub libraries: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Abandoned sources and partial libraries removed.
    pub leftovers: usize,
}

/// Removes the least recently used libraries of `dir` until at most [`KEEP_PERCENT`] of
/// `limit` bytes remain, if they exceed `limit`, and leftovers older than [`STALE_AFTER`]
/// at `now`.
pub fn prune(dir: &Path, limit: u64, now: SystemTime) -> std::io::Result<Pruned> {
    let mut pruned = Pruned::default();
    let mut libraries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(now);
        let leftover = (name.starts_with(".finch-") && name.ends_with(".so.tmp"))
            || (name.starts_with("finch-") && name.ends_with(".c"));
        if leftover {
            if now.duration_since(modified).unwrap_or_default() >= STALE_AFTER
                && std::fs::remove_file(entry.path()).is_ok()
            {
                pruned.leftovers += 1;
            }
        } else if name.starts_with("finch-") && name.ends_with(".so") {
            libraries.push((modified, meta.len(), entry.path()));
        }
    }
    let mut total: u64 = libraries.iter().map(|l| l.1).sum();
    if total <= limit {
        return Ok(pruned);
    }
    let keep = limit / 100 * KEEP_PERCENT;
    libraries.sort();
    for (_, len, path) in libraries {
        if total <= keep {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
            pruned.libraries += 1;
            pruned.bytes += len;
        }
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, len: usize, age_secs: u64, now: SystemTime) {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; len]).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(now - Duration::from_secs(age_secs)).unwrap();
    }

    #[test]
    fn prunes_least_recently_used_libraries_and_stale_leftovers() {
        let dir = std::env::temp_dir().join(format!("finch-cache-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let now = SystemTime::now();
        // Five libraries of 1000 bytes, `finch-4` used most recently.
        for k in 0..5u64 {
            file(&dir, &format!("finch-{k}.so"), 1000, 100 * (5 - k), now);
        }
        file(&dir, ".finch-9-1.so.tmp", 10, 7200, now);
        file(&dir, "finch-9-1.c", 10, 7200, now);
        file(&dir, ".finch-8-2.so.tmp", 10, 5, now);
        file(&dir, "cc-0.version", 10, 7200, now);
        // Under the bound: only the stale leftovers go.
        let p = prune(&dir, 5000, now).unwrap();
        assert_eq!(
            p,
            Pruned {
                libraries: 0,
                bytes: 0,
                leftovers: 2
            }
        );
        // Over the bound (3500): down to 80 % of it, 2800, oldest first.
        let p = prune(&dir, 3500, now).unwrap();
        assert_eq!((p.libraries, p.bytes, p.leftovers), (3, 3000, 0));
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".finch-8-2.so.tmp",
                "cc-0.version",
                "finch-3.so",
                "finch-4.so"
            ]
        );
        // Using a library makes it the most recent.
        touch(&dir.join("finch-3.so"));
        let p = prune(&dir, 1500, now + Duration::from_secs(1)).unwrap();
        assert_eq!(p.libraries, 1);
        assert!(dir.join("finch-3.so").exists() && !dir.join("finch-4.so").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
