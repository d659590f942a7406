//! Format strings: `Format::parse` and `Display` (canonical: no spaces, so
//! `Format::parse(&f.to_string()) == f`).
//!
//! Grammar: `Scalar(v)`, `SparseScalar(v)`, `ShortCircuitScalar(v)`,
//! `SparseShortCircuitScalar(v)`, or a level tree
//! `Name(child)` with `Name` one of the level kinds (`SparseCOO{N}(child)` for COO), down
//! to `Element(v)` or `Pattern()`. `v` is a literal in `Value` text form (`0.0`, `0`,
//! `false`, `0u8`, `0.0f32`, `NaN`).

use std::fmt;

use super::format::{Format, IndexWidth, LevelFormat, LevelKind, ScalarKind, MAX_MODES};
use crate::algebra::Value;
use crate::error::{Error, Result};

const SCALARS: [ScalarKind; 4] = [
    ScalarKind::Scalar,
    ScalarKind::SparseScalar,
    ScalarKind::ShortCircuitScalar,
    ScalarKind::SparseShortCircuitScalar,
];

impl Format {
    /// Parses a format string such as `Dense(SparseList(Element(0.0)))`.
    pub fn parse(text: &str) -> Result<Format> {
        let mut p = FormatParser {
            text,
            chars: text.char_indices().collect(),
            at: 0,
            modes: 0,
        };
        let f = p.format()?;
        p.skip_ws();
        if p.at < p.chars.len() {
            return Err(p.error("unexpected text after the format"));
        }
        Ok(f)
    }
}

impl std::str::FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Format> {
        Format::parse(s)
    }
}

struct FormatParser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    at: usize,
    /// Modes of the levels parsed so far, outermost first.
    modes: usize,
}

impl FormatParser<'_> {
    fn error(&self, message: impl Into<String>) -> Error {
        Error::Format {
            text: self.text.to_string(),
            pos: self.at + 1,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self.at < self.chars.len() && self.chars[self.at].1.is_whitespace() {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).map(|&(_, c)| c)
    }

    fn expect(&mut self, c: char, context: &str) -> Result<()> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            let found = match self.peek() {
                Some(f) => format!("`{f}`"),
                None => "the end".to_string(),
            };
            Err(self.error(format!("expected `{c}` {context}, found {found}")))
        }
    }

    fn ident(&mut self) -> String {
        self.skip_ws();
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.at += 1;
        }
        self.chars[start..self.at].iter().map(|&(_, c)| c).collect()
    }

    /// The text up to the matching `)` (not consumed), for a literal argument.
    fn literal_text(&mut self) -> String {
        self.skip_ws();
        let start = self.at;
        while self.peek().is_some_and(|c| c != ')') {
            self.at += 1;
        }
        self.chars[start..self.at]
            .iter()
            .map(|&(_, c)| c)
            .collect::<String>()
            .trim()
            .to_string()
    }

    fn value(&mut self, owner: &str) -> Result<Value> {
        let start = self.at;
        let text = self.literal_text();
        if text.is_empty() {
            return Err(self.error(format!("`{owner}` needs a fill value, e.g. `{owner}(0.0)`")));
        }
        match Value::parse_literal(&text) {
            Some(Value::Missing) => {
                self.at = start;
                Err(self.error(format!("`{owner}` cannot have the fill value `missing`")))
            }
            Some(v) => Ok(v),
            None => {
                self.at = start;
                Err(self.error(format!(
                    "`{text}` is not a literal (examples: 0.0, 0, false, 0u8, 0.0f32)"
                )))
            }
        }
    }

    fn format(&mut self) -> Result<Format> {
        self.skip_ws();
        let save = self.at;
        let name = self.ident();
        if let Some(kind) = SCALARS.iter().find(|k| k.name() == name) {
            self.expect('(', &format!("after `{name}`"))?;
            let v = self.value(name.as_str())?;
            self.expect(')', &format!("to close `{name}(`"))?;
            return Ok(Format::Scalar(*kind, v));
        }
        self.at = save;
        Ok(Format::Levels(self.level()?))
    }

    fn level(&mut self) -> Result<LevelFormat> {
        self.skip_ws();
        let start = self.at;
        let name = self.ident();
        if name.is_empty() {
            return Err(self.error("expected a level name (e.g. `Dense`, `SparseList`, `Element`)"));
        }
        match name.as_str() {
            "Element" => {
                self.expect('(', "after `Element`")?;
                let v = self.value("Element")?;
                self.expect(')', "to close `Element(`")?;
                return Ok(LevelFormat::Element(v));
            }
            "Pattern" => {
                self.expect('(', "after `Pattern`")?;
                self.expect(')', "in `Pattern()` (it takes no arguments)")?;
                return Ok(LevelFormat::Pattern);
            }
            _ => {}
        }
        let registered = LevelKind::ALL.iter().copied().find(|k| k.name() == name);
        let kind = if let Some(k) = registered.filter(|k| k.mode_count_param().is_some()) {
            self.skip_ws();
            if self.peek() != Some('{') {
                return Err(self.error(format!("`{name}` needs a mode count: `{name}{{2}}(...)`")));
            }
            self.at += 1;
            let digits = self.ident();
            let n: usize = digits
                .parse()
                .map_err(|_| self.error(format!("`{digits}` is not a mode count")))?;
            if n == 0 {
                return Err(self.error(format!("`{name}{{0}}` spans no modes; use N >= 1")));
            }
            self.expect('}', "after the mode count")?;
            k.with_modes(n)
                .ok_or_else(|| self.error(format!("`{name}` takes no mode count")))?
        } else if let Some(k) = registered {
            k
        } else {
            self.at = start;
            let all: Vec<&str> = LevelKind::ALL
                .iter()
                .map(|k| k.name())
                .chain(["Element", "Pattern"])
                .chain(SCALARS.iter().map(|k| k.name()))
                .collect();
            let hint = all
                .iter()
                .find(|c| c.eq_ignore_ascii_case(&name))
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_else(|| format!(" (known: {})", all.join(", ")));
            if SCALARS.iter().any(|k| k.name() == name) {
                return Err(self.error(format!(
                    "`{name}` is a 0-d format and cannot be nested inside a level"
                )));
            }
            return Err(self.error(format!("unknown level `{name}`{hint}")));
        };
        // Parsing recurses once per level, and every tensor of the format holds a size
        // per mode: both stay small.
        self.modes = self.modes.saturating_add(kind.modes());
        if self.modes > MAX_MODES {
            self.at = start;
            return Err(self.error(format!(
                "a format of more than {MAX_MODES} modes (this level reaches {})",
                self.modes
            )));
        }
        let index = self.index_width(kind)?;
        self.expect('(', &format!("after `{name}`"))?;
        self.skip_ws();
        if self.peek() == Some(')') {
            return Err(self.error(format!(
                "`{name}` needs a child level, e.g. `{name}(Element(0.0))`"
            )));
        }
        let child = self.level()?;
        self.expect(')', &format!("to close `{name}(`"))?;
        Ok(LevelFormat::Inner {
            kind,
            index,
            child: Box::new(child),
        })
    }

    /// An optional `{UInt32}` / `{UInt64}` after a level name: the width of its stored
    /// indices and positions.
    fn index_width(&mut self, kind: LevelKind) -> Result<IndexWidth> {
        self.skip_ws();
        if self.peek() != Some('{') {
            return Ok(IndexWidth::U64);
        }
        let open = self.at;
        self.at += 1;
        self.skip_ws();
        let start = self.at;
        let name = self.ident();
        let width = match name.as_str() {
            "UInt64" => IndexWidth::U64,
            "UInt32" => IndexWidth::U32,
            _ => {
                self.at = start;
                let hint = match name.as_str() {
                    "Int32" => " (indices are unsigned: did you mean `UInt32`?)",
                    "Int64" => " (indices are unsigned: did you mean `UInt64`?)",
                    _ => "",
                };
                return Err(self.error(format!(
                    "`{name}` is not an index width: use `{{UInt32}}` or `{{UInt64}}`{hint}"
                )));
            }
        };
        self.expect('}', "after the index width")?;
        if width != IndexWidth::U64 && !kind.takes_narrow_indices() {
            self.at = open;
            return Err(self.error(format!(
                "`{}{{{}}}`: this release stores 32-bit indices in SparseList levels only",
                kind.name(),
                width.name()
            )));
        }
        Ok(width)
    }
}

impl fmt::Display for LevelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LevelFormat::Inner { kind, index, child } => match (kind.mode_count_param(), index) {
                (Some(n), _) => write!(f, "{}{{{n}}}({child})", kind.name()),
                (None, IndexWidth::U64) => write!(f, "{}({child})", kind.name()),
                (None, w) => write!(f, "{}{{{}}}({child})", kind.name(), w.name()),
            },
            LevelFormat::Element(v) => write!(f, "Element({v})"),
            LevelFormat::Pattern => f.write_str("Pattern()"),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Scalar(k, v) => write!(f, "{}({v})", k.name()),
            Format::Levels(l) => l.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algebra::ScalarType;
    use proptest::prelude::*;

    #[test]
    fn format_strings_print_back_identically() {
        for s in [
            "Dense(SparseList(Element(0.0)))",
            "SparseCOO{2}(Element(0))",
            "Dense(SparseList(Pattern()))",
            "Scalar(0.0)",
            "ShortCircuitScalar(0)",
            "SparseScalar(0.0f32)",
            "SparseShortCircuitScalar(false)",
            "SparseByteMap(Element(false))",
            "Dense(Dense(Dense(Element(0u8))))",
            "Dense(SparseList{UInt32}(Element(0.0)))",
            "SparseList(Element(NaN))",
        ] {
            let f = Format::parse(s).unwrap();
            assert_eq!(f.to_string(), s);
        }
        let f = Format::parse(" Dense ( SparseList ( Element ( 1.5 ) ) ) ").unwrap();
        assert_eq!(f.to_string(), "Dense(SparseList(Element(1.5)))");
        assert_eq!(f.ndims(), 2);
        assert_eq!(Format::parse("SparseCOO{3}(Pattern())").unwrap().ndims(), 3);
    }

    #[test]
    fn format_errors_say_what_and_where() {
        let cases = [
            (
                "Dense(Sparselist(Element(0.0)))",
                "did you mean `SparseList`",
                7,
            ),
            ("SparseCOO(Element(0))", "mode count", 10),
            ("Dense(Element())", "needs a fill value", 15),
            ("Dense(Element(missing))", "missing", 15),
            ("Dense(SparseList(Element(0.0))", "expected `)`", 31),
            ("SparseCOO{0}(Element(0))", "no modes", 12),
            ("Dense()", "needs a child", 7),
            ("Dense(Element(abc))", "not a literal", 15),
            ("Dense(Scalar(0.0))", "0-d format", 7),
            ("Dense(Element(0.0)) x", "unexpected text", 21),
            ("", "level name", 1),
            ("SparseList{Int32}(Element(0))", "did you mean `UInt32`", 12),
            (
                "SparseBand{UInt32}(Element(0))",
                "SparseList levels only",
                11,
            ),
        ];
        for (text, msg, pos) in cases {
            match Format::parse(text) {
                Err(Error::Format {
                    pos: p, message, ..
                }) => {
                    assert!(message.contains(msg), "{text}: {message}");
                    assert_eq!(p, pos, "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    /// Found by the `format_text` fuzz target: `SparseCOO{4000000000}` was accepted, and
    /// a tensor of it asked for a size per mode (tens of gigabytes); a format nested
    /// 100,000 deep overflowed the parser's stack.
    #[test]
    fn formats_of_more_than_64_modes_are_refused() {
        for text in [
            "SparseCOO{4000000000}(Element(0.0))".to_string(),
            format!("SparseCOO{{{}}}(Element(0.0))", usize::MAX),
            format!("{}Element(0.0){}", "Dense(".repeat(65), ")".repeat(65)),
            format!(
                "{}Element(0.0){}",
                "Dense(".repeat(100_000),
                ")".repeat(100_000)
            ),
            "Dense(SparseCOO{64}(Element(0.0)))".to_string(),
        ] {
            let e = Format::parse(&text).unwrap_err().to_string();
            assert!(e.contains("more than 64 modes"), "{e}");
        }
        let deepest = format!("{}Element(0.0){}", "Dense(".repeat(64), ")".repeat(64));
        assert_eq!(Format::parse(&deepest).unwrap().ndims(), 64);
        assert_eq!(
            Format::parse("SparseCOO{64}(Element(0.0))")
                .unwrap()
                .ndims(),
            64
        );
    }

    fn leaf() -> impl Strategy<Value = LevelFormat> {
        prop_oneof![
            Just(LevelFormat::Pattern),
            (prop::sample::select(ScalarType::ALL.to_vec()), -5i64..5).prop_map(|(t, n)| {
                LevelFormat::Element(crate::algebra::Value::I64(n).convert_wrapping(t).unwrap())
            }),
        ]
    }

    fn level() -> impl Strategy<Value = LevelFormat> {
        leaf().prop_recursive(4, 8, 1, |inner| {
            let kinds: Vec<LevelKind> = LevelKind::ALL
                .iter()
                .copied()
                .chain([LevelKind::SparseCoo(3)])
                .collect();
            (prop::sample::select(kinds), any::<bool>(), inner).prop_map(|(kind, narrow, child)| {
                let index = if narrow && kind == LevelKind::SparseList {
                    IndexWidth::U32
                } else {
                    IndexWidth::U64
                };
                LevelFormat::Inner {
                    kind,
                    index,
                    child: Box::new(child),
                }
            })
        })
    }

    proptest! {
        #[test]
        fn random_formats_round_trip(l in level()) {
            let f = Format::Levels(l);
            prop_assert_eq!(Format::parse(&f.to_string()).unwrap(), f);
        }

        #[test]
        fn random_text_never_panics(s in "[A-Za-z(){}0-9., ]{0,40}") {
            let _ = Format::parse(&s);
        }
    }
}
