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
//! it again, and a library already loaded was loaded from a private copy (`super::load`).
//!
//! Integrity: beside each library `finch-KEY.so` lies `finch-KEY.so.sum`, its length and
//! SHA-256 recorded when it was compiled (written before the library is renamed into
//! place). A library is loaded only after its bytes match the record ([`check`]): a
//! truncated, corrupted or foreign file, or one without a record (an older version's), is
//! compiled again with a warning instead of being mapped into the process, where a
//! truncated library dies with a bus error. Two processes compiling the same kernel at
//! once each write a record and a library; if the compiler's output differs between them
//! a later process finds the pair mismatched and compiles once more (never a wrong load).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

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
        let leftover = (name.starts_with(".finch-") && name.ends_with(".tmp"))
            || (name.starts_with("finch-") && name.ends_with(".c"))
            || (name.starts_with("finch-")
                && name.ends_with(".so.sum")
                && !dir.join(name.trim_end_matches(".sum")).exists());
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
            let _ = std::fs::remove_file(record_path(&path));
            total -= len;
            pruned.libraries += 1;
            pruned.bytes += len;
        }
    }
    Ok(pruned)
}

/// The first line of a library's record.
const RECORD_HEADER: &str = "finch-rs kernel library";

/// Where the record of library `lib` (its length and SHA-256) lives.
pub fn record_path(lib: &Path) -> PathBuf {
    let mut name = lib.as_os_str().to_owned();
    name.push(".sum");
    PathBuf::from(name)
}

/// The record of a library's bytes: a header line, the length, the SHA-256 in hex.
pub fn record(bytes: &[u8]) -> String {
    format!("{RECORD_HEADER}\n{}\n{}\n", bytes.len(), hex_digest(bytes))
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a cached library is not loaded.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    /// The library or its record cannot be read.
    #[error("cannot read {path}: {cause}")]
    Unreadable {
        /// The file.
        path: String,
        /// The system's error.
        cause: std::io::Error,
    },
    /// The record is missing or not one this version writes.
    #[error("it has no record of its length and checksum (`{0}`)")]
    NoRecord(String),
    /// The library is shorter or longer than recorded.
    #[error("it holds {got} bytes where {recorded} were written (truncated or overwritten)")]
    Length {
        /// Bytes on disk.
        got: usize,
        /// Bytes recorded.
        recorded: usize,
    },
    /// The bytes differ from those recorded.
    #[error("its SHA-256 differs from the one recorded (corrupted or replaced)")]
    Checksum,
}

/// The bytes of the cached library `lib`, if they are the ones its record describes.
pub fn check(lib: &Path) -> std::result::Result<Vec<u8>, Damage> {
    let unreadable = |path: &Path, cause| Damage::Unreadable {
        path: path.display().to_string(),
        cause,
    };
    let record_file = record_path(lib);
    let text = match std::fs::read_to_string(&record_file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Damage::NoRecord(record_file.display().to_string()))
        }
        Err(e) => return Err(unreadable(&record_file, e)),
    };
    let mut lines = text.lines();
    let (Some(RECORD_HEADER), Some(len), Some(digest), None) =
        (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return Err(Damage::NoRecord(record_file.display().to_string()));
    };
    let Ok(recorded) = len.parse::<usize>() else {
        return Err(Damage::NoRecord(record_file.display().to_string()));
    };
    let bytes = std::fs::read(lib).map_err(|e| unreadable(lib, e))?;
    if bytes.len() != recorded {
        return Err(Damage::Length {
            got: bytes.len(),
            recorded,
        });
    }
    if hex_digest(&bytes) != digest {
        return Err(Damage::Checksum);
    }
    Ok(bytes)
}

/// Removes a damaged library and its record (best effort: another process may have
/// removed or replaced them).
pub fn discard(lib: &Path) {
    let _ = std::fs::remove_file(lib);
    let _ = std::fs::remove_file(record_path(lib));
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
        file(&dir, "finch-0.so.sum", 10, 7200, now);
        file(&dir, "finch-7.so.sum", 10, 7200, now);
        file(&dir, ".finch-load-1-0.so.tmp", 10, 7200, now);
        // Under the bound: only the stale leftovers go.
        let p = prune(&dir, 5000, now).unwrap();
        assert_eq!(
            p,
            Pruned {
                libraries: 0,
                bytes: 0,
                leftovers: 4
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

    #[test]
    fn a_library_is_used_only_when_it_matches_its_record() {
        let dir = std::env::temp_dir().join(format!("finch-cache-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("finch-0.so");
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&lib, &bytes).unwrap();
        // An older version's library: no record.
        assert!(matches!(check(&lib), Err(Damage::NoRecord(_))));
        std::fs::write(record_path(&lib), record(&bytes)).unwrap();
        assert_eq!(check(&lib).unwrap(), bytes);
        // Truncated, extended, altered in place, replaced by a foreign file.
        std::fs::write(&lib, &bytes[..1234]).unwrap();
        let damage = check(&lib).unwrap_err();
        assert!(matches!(
            damage,
            Damage::Length {
                got: 1234,
                recorded: 5000
            }
        ));
        assert!(damage.to_string().contains("truncated"), "{damage}");
        std::fs::write(&lib, [&bytes[..], b"x"].concat()).unwrap();
        assert!(matches!(check(&lib), Err(Damage::Length { got: 5001, .. })));
        let mut altered = bytes.clone();
        altered[2500] ^= 1;
        std::fs::write(&lib, &altered).unwrap();
        assert!(matches!(check(&lib), Err(Damage::Checksum)));
        std::fs::write(&lib, b"#!/bin/sh\necho not a library\n").unwrap();
        assert!(check(&lib).is_err());
        // A record that is not one (truncated to nothing, or another file's text).
        std::fs::write(&lib, &bytes).unwrap();
        std::fs::write(record_path(&lib), b"").unwrap();
        assert!(matches!(check(&lib), Err(Damage::NoRecord(_))));
        std::fs::write(record_path(&lib), "finch-rs kernel library\nfive\nab\n").unwrap();
        assert!(matches!(check(&lib), Err(Damage::NoRecord(_))));
        // A library that cannot be read (a directory in its place).
        discard(&lib);
        assert!(!lib.exists() && !record_path(&lib).exists());
        std::fs::create_dir(&lib).unwrap();
        std::fs::write(record_path(&lib), record(&bytes)).unwrap();
        assert!(matches!(check(&lib), Err(Damage::Unreadable { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
