//! The memory budget. A size that comes from outside (a file's header, a format's shape,
//! an output sized by inference, `--shape`) can ask for more memory than the machine has;
//! on Linux such an allocation often succeeds (memory is overcommitted) and the process
//! is killed later, when the pages are touched. So every large buffer is checked, before
//! it is allocated, against the memory available: `FINCH_MEMORY_LIMIT` (bytes, or with a
//! `K`, `M`, `G` or `T` suffix) or [`set_limit`] if given, else what the system reports
//! as available (`MemAvailable` and free swap in `/proc/meminfo`).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// Buffers smaller than this are not checked (reading the system's figures costs more
/// than they do, and none of them alone exhausts a machine).
const CHECKED_FROM: usize = 16 << 20;

/// A limit set by [`set_limit`] (`usize::MAX`: none set).
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Sets the memory budget of this process in bytes (`None`: back to
/// `FINCH_MEMORY_LIMIT` or the system's figure).
pub fn set_limit(bytes: Option<usize>) {
    LIMIT.store(bytes.unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// Where a budget comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// [`set_limit`].
    Set,
    /// The `FINCH_MEMORY_LIMIT` environment variable.
    Environment,
    /// The memory the system reports as available.
    System,
}

/// The memory budget in bytes and where it comes from, or `None` where the system does
/// not say (every allocation is then left to the allocator).
pub fn limit() -> Option<(usize, LimitSource)> {
    let set = LIMIT.load(Ordering::Relaxed);
    if set != usize::MAX {
        return Some((set, LimitSource::Set));
    }
    if let Some(bytes) = std::env::var("FINCH_MEMORY_LIMIT")
        .ok()
        .and_then(|v| parse_size(&v))
    {
        return Some((bytes, LimitSource::Environment));
    }
    system_available().map(|b| (b, LimitSource::System))
}

/// `123`, `64K`, `512M`, `2G`, `1T` (powers of 1024; `B` or `iB` after the letter
/// allowed).
pub fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last()? {
        (k, 'K' | 'k') => (&t[..k], 10),
        (k, 'M' | 'm') => (&t[..k], 20),
        (k, 'G' | 'g') => (&t[..k], 30),
        (k, 'T' | 't') => (&t[..k], 40),
        _ => (t, 0),
    };
    let n: usize = digits.trim().parse().ok()?;
    n.checked_mul(1usize << shift)
}

/// `MemAvailable + SwapFree` from `/proc/meminfo`, in bytes.
fn system_available() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<usize> {
        let line = info.lines().find(|l| l.starts_with(name))?;
        let kb: usize = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        kb.checked_mul(1024)
    };
    let available = field("MemAvailable:")?;
    Some(available.saturating_add(field("SwapFree:").unwrap_or(0)))
}

/// A byte count for people: `1.5 GiB`.
pub fn human(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut x = bytes as f64;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{x:.1} {}", UNITS[unit])
    }
}

/// Checks that `count` elements of `width` bytes fit the memory budget; `what` names
/// the buffer for the error.
pub fn check(count: usize, width: usize, what: impl FnOnce() -> String) -> Result<()> {
    let bytes = count.checked_mul(width);
    if bytes.is_some_and(|b| b < CHECKED_FROM) {
        return Ok(());
    }
    let Some((limit, source)) = limit() else {
        return match bytes {
            Some(_) => Ok(()),
            None => Err(too_large(what(), count, width, None)),
        };
    };
    match bytes {
        Some(b) if b <= limit => Ok(()),
        _ => Err(too_large(what(), count, width, Some((limit, source)))),
    }
}

fn too_large(
    what: String,
    count: usize,
    width: usize,
    limit: Option<(usize, LimitSource)>,
) -> Error {
    let size = count
        .checked_mul(width)
        .map_or_else(|| "more bytes than an address holds".to_string(), human);
    let budget = match limit {
        Some((l, LimitSource::Set)) => format!(", more than the budget of {} set", human(l)),
        Some((l, LimitSource::Environment)) => {
            format!(", more than FINCH_MEMORY_LIMIT ({})", human(l))
        }
        Some((l, LimitSource::System)) => {
            format!(", more than the {} of memory available", human(l))
        }
        None => String::new(),
    };
    Error::Program(format!(
        "{what} of {count} elements would take {size}{budget}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size(" 2G "), Some(2 << 30));
        assert_eq!(parse_size("1tb"), None);
        assert_eq!(parse_size("1TB"), Some(1 << 40));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("99999999999T"), None);
        assert_eq!(human(1536 << 20), "1.5 GiB");
        assert_eq!(human(12), "12 bytes");
    }

    #[test]
    fn small_buffers_pass_and_overflowing_ones_do_not() {
        assert!(check(1000, 8, || "x".into()).is_ok());
        let e = check(usize::MAX, 8, || "a Dense level".into()).unwrap_err();
        assert!(e.to_string().starts_with("a Dense level of"), "{e}");
    }
}
