//! The library's error type. Every error says what went wrong and where: a source
//! `line:column` with the offending line, a file line number, a level path and the number
//! of the violated invariant, or the name of the tensor concerned.

use std::fmt;

/// A location in program text with the source line, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub message: String,
    /// The offending source line (without its newline).
    pub source_line: String,
}

/// The widest part of a source line an error shows (a generated program may put
/// thousands of characters on one line).
const SHOWN_COLUMNS: usize = 80;

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gutter = self.line.to_string();
        let pad = " ".repeat(gutter.len());
        let chars: Vec<char> = self.source_line.chars().collect();
        let at = self.col.saturating_sub(1).min(chars.len());
        // The part of the line around the column.
        let (start, end) = if chars.len() <= SHOWN_COLUMNS {
            (0, chars.len())
        } else {
            let start = at
                .saturating_sub(SHOWN_COLUMNS / 2)
                .min(chars.len() - SHOWN_COLUMNS);
            (start, start + SHOWN_COLUMNS)
        };
        let mut shown: String = chars[start..end].iter().collect();
        let mut caret_pad: String = chars[start..at.max(start)]
            .iter()
            .map(|&c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        if start > 0 {
            shown.insert(0, '…');
            caret_pad.insert(0, ' ');
        }
        if end < chars.len() {
            shown.push('…');
        }
        write!(
            f,
            "{}:{}: {}\n{pad} |\n{gutter} | {shown}\n{pad} | {caret_pad}^",
            self.line, self.col, self.message
        )
    }
}

/// Every error the library reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A malformed program text.
    #[error("parse error at {0}")]
    Parse(Box<SourceError>),
    /// A malformed format string.
    #[error("bad format string `{text}` at character {pos}: {message}")]
    Format {
        /// The format string.
        text: String,
        /// 1-based character position.
        pos: usize,
        /// What is wrong.
        message: String,
    },
    /// A malformed data file (Matrix Market, FROSTT).
    #[error("{path}:{line}: {message}")]
    Io {
        /// The file (or `<input>` for in-memory text).
        path: String,
        /// 1-based line number (0 when the problem is the whole file, e.g. too few lines).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A tensor whose storage breaks a level invariant (`verified-formats.md` §8).
    #[error("invalid tensor: level {depth} ({level}) breaks invariant {invariant}: {detail}")]
    Invalid {
        /// 1-based depth of the level (1 = root).
        depth: usize,
        /// The level's name (`SparseList`).
        level: &'static str,
        /// The invariant's number and name as listed in the level's docs (`I3 ptr monotone`).
        invariant: &'static str,
        /// The offending values.
        detail: String,
    },
    /// A well-formed program that cannot run as asked: an unknown or missing tensor, a
    /// shape mismatch, a type error.
    #[error("{0}")]
    Program(String),
    /// A run-time failure of the reference interpreter (division by zero, a `missing`
    /// condition, an out-of-bounds non-permissive access).
    #[error("evaluation error: {0}")]
    Eval(String),
    /// A compiled kernel computed an index outside a tensor (the engine names it).
    #[error("an index computed by the program is outside tensor #{tensor}")]
    IndexOutOfRange {
        /// The tensor's number in the program's declarations.
        tensor: usize,
    },
    /// A window computed from loop indices in a compiled kernel lies outside its mode, or
    /// its length differs from another range of its index (the engine names the tensor).
    #[error("a window computed by the program does not fit tensor #{tensor}")]
    WindowMismatch {
        /// The tensor's number in the program's declarations.
        tensor: usize,
    },
    /// An expression indexing a window of a tensor in a compiled kernel left the
    /// window's indices (the engine names the tensor).
    #[error("an index of a window of tensor #{tensor} is outside the window")]
    OutsideWindow {
        /// The tensor's number in the program's declarations.
        tensor: usize,
    },
    /// A feature that exists in the language but not yet in this implementation.
    #[error("not supported yet: {0}")]
    Unsupported(String),
    /// An operating-system I/O failure.
    // The cause is part of the message (not a `source`), so error chains print it once.
    #[error("{path}: {cause}")]
    Os {
        /// The file concerned.
        path: String,
        /// The underlying error.
        cause: std::io::Error,
    },
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
