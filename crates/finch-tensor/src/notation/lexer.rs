//! The lexer: program text to tokens with 1-based line and column.
//!
//! Newlines are tokens (they separate statements) except inside `()` and `[]`, where they
//! are skipped. `#` starts a comment to the end of the line. Number literals keep their
//! text (with an optional type suffix such as `u8` or `f32`) and are decoded by
//! `Value::parse_literal`; `true`, `false`, `missing`, `Inf` and `NaN` (optionally with a
//! float suffix) are literal tokens too.

use crate::error::{Error, Result, SourceError};

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A name (`A`, `for`, `min`, `_`).
    Ident(String),
    /// A literal's text (`1`, `0.5`, `3u8`, `true`, `missing`, `Inf`).
    Literal(String),
    /// `@freeze` / `@thaw` (the name after `@`).
    Macro(String),
    /// Punctuation or an operator (`(`, `+=`, `<<`, `.=`, `>>=`, `::`).
    Sym(&'static str),
    /// A statement-separating newline.
    Newline,
    /// End of input.
    Eof,
}

/// A token with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

/// Symbols, longest first so that maximal munch picks `<<=`-free `<<`, `>>=`, `.=`, ...
const SYMBOLS: [&str; 36] = [
    ">>=", "::", ".=", "+=", "-=", "*=", "|=", "&=", "==", "!=", "<=", ">=", "&&", "||", "<<",
    ">>", "(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "+", "-", "*", "/", "%", "^", "<", ">",
    "!", "~",
];
const MORE_SYMBOLS: [&str; 2] = ["&", "|"];

/// Builds a positioned parse error; `text` supplies the source line.
pub fn error_at(text: &str, line: usize, col: usize, message: impl Into<String>) -> Error {
    Error::Parse(Box::new(SourceError {
        line,
        col,
        message: message.into(),
        source_line: text
            .lines()
            .nth(line.saturating_sub(1))
            .unwrap_or("")
            .to_string(),
    }))
}

/// Splits `text` (starting at `line`, column 1) into tokens.
pub fn lex(text: &str, first_line: usize) -> Result<Vec<Token>> {
    let full = text;
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0usize, first_line, 1usize);
    let mut depth: Vec<char> = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        let here = |message: String| error_at(full, tl - first_line + 1, tc, message);
        if c == '\n' {
            if depth.is_empty() {
                toks.push(Token {
                    tok: Tok::Newline,
                    line,
                    col,
                });
            }
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        let tok = if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_digit()) {
                i += 1;
            }
            if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            // A type suffix (u8, i32, f64, ...).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Tok::Literal(chars[start..i].iter().collect())
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let is_literal = matches!(word.as_str(), "true" | "false" | "missing")
                || ["Inf", "NaN"]
                    .iter()
                    .any(|s| word == *s || word == format!("{s}f32") || word == format!("{s}f64"));
            if is_literal {
                Tok::Literal(word)
            } else {
                Tok::Ident(word)
            }
        } else if c == '@' {
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start + 1..i].iter().collect();
            if name.is_empty() {
                return Err(here(
                    "expected a name after `@` (`@freeze` or `@thaw`)".into(),
                ));
            }
            Tok::Macro(name)
        } else {
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            let sym = SYMBOLS
                .iter()
                .chain(MORE_SYMBOLS.iter())
                .find(|s| rest.starts_with(**s))
                .copied();
            match sym {
                Some(s) => {
                    i += s.chars().count();
                    match s {
                        "(" | "[" | "{" => depth.push(c),
                        ")" | "]" | "}" => {
                            let open = match s {
                                ")" => '(',
                                "]" => '[',
                                _ => '{',
                            };
                            if depth.pop() != Some(open) {
                                return Err(here(format!("unmatched `{s}`")));
                            }
                        }
                        _ => {}
                    }
                    Tok::Sym(s)
                }
                None => return Err(here(format!("unexpected character `{c}`"))),
            }
        };
        col += i - start;
        toks.push(Token {
            tok,
            line: tl,
            col: tc,
        });
    }
    toks.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    Ok(toks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        lex(s, 1).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn lexes_operators_literals_and_reductions() {
        assert_eq!(
            kinds("y[i] <<min>>= 1.5e-3f32 # c\n"),
            vec![
                Tok::Ident("y".into()),
                Tok::Sym("["),
                Tok::Ident("i".into()),
                Tok::Sym("]"),
                Tok::Sym("<<"),
                Tok::Ident("min".into()),
                Tok::Sym(">>="),
                Tok::Literal("1.5e-3f32".into()),
                Tok::Newline,
                Tok::Eof
            ]
        );
        assert_eq!(kinds("1:n")[1], Tok::Sym(":"));
        assert_eq!(kinds("A .= 0")[1], Tok::Sym(".="));
        assert_eq!(kinds("@freeze(A)")[0], Tok::Macro("freeze".into()));
        assert_eq!(kinds("-Inf")[1], Tok::Literal("Inf".into()));
    }

    #[test]
    fn newlines_inside_brackets_are_skipped() {
        assert!(!kinds("f(a,\n b)").contains(&Tok::Newline));
    }

    #[test]
    fn errors_have_positions() {
        let e = lex("a = 1\n  b $ c", 1).unwrap_err().to_string();
        assert!(e.contains("2:5") && e.contains('$'), "{e}");
        assert!(lex("a)", 1).is_err());
    }
}
