//! The parser: recursive descent for statements, precedence climbing for expressions
//! (binding powers from `Op::fixity`), name resolution while parsing.
//!
//! Decisions:
//! * `-` directly followed by a number literal is a negative literal (`-1`), unless the
//!   literal is the base of `^` (`-2^2` is `-(2^2)`, as in Julia). The printer writes a
//!   negation of a literal as `-(2)`, so every AST prints to text that parses back to it.
//! * Infix operators are left-associative (`^` is right-associative); comparisons do not
//!   chain (`a < b < c` is `(a < b) < c`).
//! * An infix operator written as a function with two or more arguments, `+(a, b, c)`, is
//!   one call with all the arguments.
//! * A name bound by an enclosing `for` is an index, by an enclosing `let` a variable; a
//!   name used as `X[...]`, `X .= v`, `@freeze(X)` or `return X` must be a declared tensor.
//! * `~` (permissive) and `walk/gallop/follow/extrude/laminate(...)` (protocols) are only
//!   allowed inside `[...]`.

use super::ast::{Access, AssignOp, Decl, DeclKind, Expr, Extent, Program, Protocol, Span, Stmt};
use super::lexer::{error_at, lex, Tok, Token};
use crate::algebra::{Fixity, Op, Value};
use crate::error::{Error, Result};

/// Parses a whole program: declarations, then statements.
pub fn parse_program(text: &str) -> Result<Program> {
    let toks = lex(text, 1)?;
    let mut p = Parser::new(text, toks, Vec::new());
    p.program()
}

/// Parses one statement (or several, as a block) in a context where `tensors` are the
/// declared tensor names. Indices and variables must be bound inside the text.
pub fn parse_stmt(text: &str, tensors: &[&str]) -> Result<Stmt> {
    let toks = lex(text, 1)?;
    let mut p = Parser::new(text, toks, tensors.iter().map(|s| s.to_string()).collect());
    let body = p.stmts(&[])?;
    p.expect_eof()?;
    Ok(body)
}

/// Parses one expression where `tensors` are tensor names, `indices` loop indices and
/// `variables` `let` variables.
pub fn parse_expr(
    text: &str,
    tensors: &[&str],
    indices: &[&str],
    variables: &[&str],
) -> Result<Expr> {
    let toks = lex(text, 1)?;
    let mut p = Parser::new(text, toks, tensors.iter().map(|s| s.to_string()).collect());
    p.scopes
        .extend(indices.iter().map(|s| (s.to_string(), true)));
    p.scopes
        .extend(variables.iter().map(|s| (s.to_string(), false)));
    p.skip_newlines();
    let e = p.expr(0)?;
    p.skip_newlines();
    p.expect_eof()?;
    Ok(e)
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    at: usize,
    tensors: Vec<String>,
    /// Bound names, innermost last: (name, is_index).
    scopes: Vec<(String, bool)>,
    /// Nesting of `[...]`, where `~` and protocols are allowed.
    in_index: usize,
    /// Expressions being parsed inside one another (parentheses, operands, arguments).
    expr_depth: usize,
    /// Compound statements being parsed inside one another.
    stmt_depth: usize,
}

/// The deepest expression tree (and parser recursion) accepted: every later pass walks
/// expressions recursively, and a deeper tree (`((((...))))`, or `1 + 1 + ... + 1` with
/// tens of thousands of terms) would overflow the stack of the thread compiling it.
const MAX_EXPR_DEPTH: usize = 1000;

const SPLIT_EXPR: &str = "split it into parts held by `let` or summed by several statements";

/// The deepest nesting of compound statements (`for`, `if`, `let`, `begin`) accepted.
const MAX_STMT_DEPTH: usize = 200;

/// The depth of an expression tree (a leaf is 1). Only called on trees the parser built
/// within [`MAX_EXPR_DEPTH`], so its recursion is bounded.
fn tree_depth(e: &Expr) -> usize {
    let below = match e {
        Expr::Call { args, .. } => args.iter().map(tree_depth).max().unwrap_or(0),
        Expr::Access(a) => a.indices.iter().map(tree_depth).max().unwrap_or(0),
        Expr::Permissive(x) | Expr::Protocol(_, x) => tree_depth(x),
        Expr::Window { lo, hi, index } => tree_depth(lo).max(tree_depth(hi)).max(tree_depth(index)),
        _ => 0,
    };
    below + 1
}

const PREFIX_BP: u8 = 9;

fn sym_op(s: &str) -> Option<Op> {
    Some(match s {
        "+" => Op::Add,
        "-" => Op::Sub,
        "*" => Op::Mul,
        "/" => Op::Div,
        "%" => Op::Rem,
        "^" => Op::Pow,
        "&" => Op::BitAnd,
        "|" => Op::BitOr,
        "<<" => Op::Shl,
        ">>" => Op::Shr,
        "==" => Op::Eq,
        "!=" => Op::Ne,
        "<" => Op::Lt,
        "<=" => Op::Le,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        "&&" => Op::And,
        "||" => Op::Or,
        _ => return None,
    })
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Literal(s) => format!("`{s}`"),
        Tok::Macro(s) => format!("`@{s}`"),
        Tok::Sym(s) => format!("`{s}`"),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of file".into(),
    }
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Ident(s) | Tok::Literal(s) => s.clone(),
        Tok::Macro(s) => format!("@{s}"),
        Tok::Sym(s) => s.to_string(),
        Tok::Newline | Tok::Eof => String::new(),
    }
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, toks: Vec<Token>, tensors: Vec<String>) -> Parser<'a> {
        Parser {
            text,
            toks,
            at: 0,
            tensors,
            scopes: Vec::new(),
            in_index: 0,
            expr_depth: 0,
            stmt_depth: 0,
        }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.at + k).min(self.toks.len() - 1)].tok
    }

    fn token(&self) -> &Token {
        &self.toks[self.at.min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        t
    }

    fn err_here(&self, message: impl Into<String>) -> Error {
        let t = self.token();
        error_at(self.text, t.line, t.col, message)
    }

    fn unexpected(&self, expected: &str) -> Error {
        self.err_here(format!(
            "expected {expected}, found {}",
            describe(self.peek())
        ))
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str, context: &str) -> Result<()> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{s}` {context}")))
        }
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(x) if x == w)
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Tok::Newline) || self.is_sym(";") {
            self.bump();
        }
    }

    fn expect_eof(&mut self) -> Result<()> {
        self.skip_newlines();
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            Err(self.unexpected("end of file"))
        }
    }

    fn ident(&mut self, what: &str) -> Result<(String, Span)> {
        let span = Span {
            line: self.token().line,
            col: self.token().col,
        };
        match self.peek().clone() {
            Tok::Ident(s) if !is_keyword(&s) => {
                self.bump();
                Ok((s, span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn lookup(&self, name: &str) -> Option<bool> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|&(_, ix)| ix)
    }

    fn is_tensor(&self, name: &str) -> bool {
        self.tensors.iter().any(|t| t == name)
    }

    fn tensor_name(&mut self, context: &str) -> Result<String> {
        let t = self.token().clone();
        let (name, _) = self.ident(&format!("a tensor name {context}"))?;
        if !self.is_tensor(&name) {
            return Err(error_at(
                self.text,
                t.line,
                t.col,
                format!("`{name}` is not a declared tensor (declare it with `input`, `output` or `temp`)"),
            ));
        }
        Ok(name)
    }

    fn bind(&mut self, name: &str, is_index: bool, line: usize, col: usize) -> Result<()> {
        if self.is_tensor(name) {
            return Err(error_at(
                self.text,
                line,
                col,
                format!(
                    "`{name}` is a tensor; a {} cannot have its name",
                    if is_index {
                        "loop index"
                    } else {
                        "`let` variable"
                    }
                ),
            ));
        }
        // A loop over an index already bound by an enclosing loop would make one name
        // mean two indices in the loop body (Finch's lowering names each loop's index).
        if is_index && self.scopes.iter().any(|(n, ix)| *ix && n == name) {
            return Err(error_at(
                self.text,
                line,
                col,
                format!(
                    "the loop index `{name}` is already the index of an enclosing `for`; give the inner loop another name"
                ),
            ));
        }
        self.scopes.push((name.to_string(), is_index));
        Ok(())
    }

    // ---- program and declarations ----

    fn program(&mut self) -> Result<Program> {
        let mut decls: Vec<Decl> = Vec::new();
        loop {
            self.skip_newlines();
            let kind = match self.peek() {
                Tok::Ident(w) if w == "input" => DeclKind::Input,
                Tok::Ident(w) if w == "output" => DeclKind::Output,
                Tok::Ident(w) if w == "temp" => DeclKind::Temp,
                _ => break,
            };
            let start = self.token().clone();
            self.bump();
            let (name, _) = self.ident("a tensor name after the declaration keyword")?;
            if decls.iter().any(|d| d.name == name) {
                return Err(error_at(
                    self.text,
                    start.line,
                    start.col,
                    format!("`{name}` is declared twice"),
                ));
            }
            self.expect_sym(
                "::",
                &format!(
                    "after `{name}` (e.g. `{} {name} :: Dense(Element(0.0))`)",
                    kind.keyword()
                ),
            )?;
            let format = self.decl_format(&name)?;
            self.tensors.push(name.clone());
            decls.push(Decl {
                kind,
                name,
                format,
                span: Span {
                    line: start.line,
                    col: start.col,
                },
            });
        }
        let body = self.stmts(&[])?;
        self.expect_eof()?;
        Ok(Program { decls, body })
    }

    // ---- statements ----

    /// Statements until one of the `terminators` words (not consumed) or end of file; a
    /// single statement stands for itself, several form a `Block`.
    /// The format after `NAME ::`, up to the end of the line or a `;`, as text (the
    /// format checker reads it). Brackets must pair up: an unclosed `(` would swallow the
    /// lines after it once the program is printed.
    fn decl_format(&mut self, name: &str) -> Result<String> {
        let fmt_tok = self.token().clone();
        let mut format = String::new();
        // Two names or numbers in a row keep a space between them, so that the text
        // reads back as the same tokens (`0.5 1` is not `0.51`); the format checker
        // then refuses it by name.
        let mut after_word = false;
        let mut open: Vec<(&'static str, usize, usize)> = Vec::new();
        while !matches!(self.peek(), Tok::Newline | Tok::Eof) && !self.is_sym(";") {
            let at = self.token().clone();
            let t = self.bump();
            let word = matches!(t, Tok::Ident(_) | Tok::Literal(_));
            if word && after_word {
                format.push(' ');
            }
            after_word = word;
            match t {
                Tok::Sym("(") => open.push((")", at.line, at.col)),
                Tok::Sym("{") => open.push(("}", at.line, at.col)),
                // (The guard pops the bracket a closing one pairs with.)
                Tok::Sym(close @ (")" | "}")) if open.pop().map(|(c, _, _)| c) != Some(close) => {
                    return Err(error_at(
                        self.text,
                        at.line,
                        at.col,
                        format!("`{close}` without its opening bracket in the format of `{name}`"),
                    ));
                }
                Tok::Macro(_) => {
                    return Err(error_at(
                        self.text,
                        fmt_tok.line,
                        fmt_tok.col,
                        format!("unexpected {} in the format of `{name}`", describe(&t)),
                    ))
                }
                Tok::Sym(s) if !matches!(s, "," | "-" | ")" | "}") => {
                    return Err(error_at(
                        self.text,
                        fmt_tok.line,
                        fmt_tok.col,
                        format!("unexpected {} in the format of `{name}`", describe(&t)),
                    ))
                }
                _ => {}
            }
            format.push_str(&tok_text(&t));
        }
        if let Some((close, line, col)) = open.pop() {
            return Err(error_at(
                self.text,
                line,
                col,
                format!("this bracket is not closed (`{close}`) in the format of `{name}`"),
            ));
        }
        if format.is_empty() {
            return Err(error_at(
                self.text,
                fmt_tok.line,
                fmt_tok.col,
                format!("missing format for `{name}` after `::`"),
            ));
        }
        Ok(format)
    }

    fn stmts(&mut self, terminators: &[&str]) -> Result<Stmt> {
        let mut v = self.stmt_list(terminators)?;
        Ok(if v.len() == 1 {
            v.pop().unwrap_or(Stmt::Block(Vec::new()))
        } else {
            Stmt::Block(v)
        })
    }

    fn stmt_list(&mut self, terminators: &[&str]) -> Result<Vec<Stmt>> {
        let mut v = Vec::new();
        loop {
            self.skip_newlines();
            match self.peek() {
                Tok::Eof => break,
                Tok::Ident(w) if terminators.contains(&w.as_str()) => break,
                _ => {}
            }
            v.push(self.stmt()?);
            match self.peek() {
                Tok::Newline | Tok::Eof => {}
                Tok::Sym(";") => {}
                Tok::Ident(w) if terminators.contains(&w.as_str()) => {}
                _ => return Err(self.unexpected("a new line or `;` after the statement")),
            }
        }
        Ok(v)
    }

    fn close(&mut self, what: &str, line: usize, col: usize) -> Result<()> {
        if self.is_word("end") {
            self.bump();
            Ok(())
        } else {
            Err(self.err_here(format!(
                "expected `end` to close `{what}` at {line}:{col}, found {}",
                describe(self.peek())
            )))
        }
    }

    fn stmt(&mut self) -> Result<Stmt> {
        if self.stmt_depth >= MAX_STMT_DEPTH {
            return Err(self.too_deep("a statement", MAX_STMT_DEPTH, "write fewer nested blocks"));
        }
        self.stmt_depth += 1;
        let s = self.stmt_inner();
        self.stmt_depth -= 1;
        s
    }

    fn stmt_inner(&mut self) -> Result<Stmt> {
        let t = self.token().clone();
        match self.peek().clone() {
            Tok::Ident(w) if w == "for" => {
                self.bump();
                let mut headers = Vec::new();
                loop {
                    let it = self.token().clone();
                    let (index, _) = self.ident("a loop index after `for`")?;
                    self.expect_sym("=", &format!("after `for {index}`"))?;
                    let extent = if self.is_word("_") {
                        self.bump();
                        Extent::Auto
                    } else {
                        let a = self.expr(0)?;
                        self.expect_sym(":", "in the loop range `a:b`")?;
                        let b = self.expr(0)?;
                        Extent::Range(a, b)
                    };
                    self.bind(&index, true, it.line, it.col)?;
                    headers.push((index, extent));
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                let body = self.stmts(&["end"])?;
                self.close("for", t.line, t.col)?;
                let mut s = body;
                for (index, extent) in headers.into_iter().rev() {
                    self.scopes.pop();
                    s = Stmt::Loop {
                        index,
                        extent,
                        body: Box::new(s),
                    };
                }
                Ok(s)
            }
            Tok::Ident(w) if w == "if" => {
                self.bump();
                self.if_rest(t.line, t.col)
            }
            Tok::Ident(w) if w == "let" => {
                self.bump();
                let mut defs = Vec::new();
                loop {
                    let vt = self.token().clone();
                    let (var, _) = self.ident("a variable name after `let`")?;
                    self.expect_sym("=", &format!("after `let {var}`"))?;
                    let value = self.expr(0)?;
                    self.bind(&var, false, vt.line, vt.col)?;
                    defs.push((var, value));
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                let body = self.stmts(&["end"])?;
                self.close("let", t.line, t.col)?;
                let mut s = body;
                for (var, value) in defs.into_iter().rev() {
                    self.scopes.pop();
                    s = Stmt::Define {
                        var,
                        value,
                        body: Box::new(s),
                    };
                }
                Ok(s)
            }
            Tok::Ident(w) if w == "begin" => {
                self.bump();
                let body = self.stmt_list(&["end"])?;
                self.close("begin", t.line, t.col)?;
                Ok(Stmt::Block(body))
            }
            Tok::Ident(w) if w == "return" => {
                self.bump();
                let mut names = vec![self.tensor_name("after `return`")?];
                while self.eat_sym(",") {
                    names.push(self.tensor_name("after `,`")?);
                }
                Ok(Stmt::Return(names))
            }
            Tok::Macro(m) => {
                self.bump();
                let which = match m.as_str() {
                    "freeze" | "thaw" => m.clone(),
                    other => {
                        return Err(error_at(
                            self.text,
                            t.line,
                            t.col,
                            format!("unknown macro `@{other}` (expected `@freeze` or `@thaw`)"),
                        ))
                    }
                };
                self.expect_sym("(", &format!("after `@{which}`"))?;
                let name = self.tensor_name(&format!("in `@{which}(...)`"))?;
                self.expect_sym(")", &format!("to close `@{which}(`"))?;
                Ok(if which == "freeze" {
                    Stmt::Freeze(name)
                } else {
                    Stmt::Thaw(name)
                })
            }
            Tok::Ident(w) if matches!(w.as_str(), "end" | "else" | "elseif") => Err(self.err_here(
                format!("`{w}` without a matching `for`, `if`, `let` or `begin`"),
            )),
            Tok::Ident(name)
                if name == "swizzle"
                    && !self.is_tensor(&name)
                    && matches!(self.peek_at(1), Tok::Sym("(")) =>
            {
                self.bump();
                let lhs = self.swizzled_access()?;
                let op = self.assign_op()?;
                let rhs = self.expr(0)?;
                Ok(Stmt::Assign { lhs, op, rhs })
            }
            Tok::Ident(name) => {
                if !self.is_tensor(&name) {
                    let what = match self.lookup(&name) {
                        Some(true) => "a loop index",
                        Some(false) => "a `let` variable",
                        None => "not a declared tensor",
                    };
                    return Err(self.err_here(format!(
                        "cannot assign to `{name}`: it is {what} (statements write tensors: `X[i] = ...`, `s[] += ...`, `X .= 0`)"
                    )));
                }
                self.bump();
                if self.eat_sym(".=") {
                    let init = self.expr(0)?;
                    return Ok(Stmt::Declare { tensor: name, init });
                }
                if !self.is_sym("[") {
                    return Err(self.unexpected(&format!(
                        "`[` or `.=` after the tensor `{name}` (a scalar is written `{name}[]`)"
                    )));
                }
                let lhs = self.access_rest(name)?;
                let op = self.assign_op()?;
                let rhs = self.expr(0)?;
                Ok(Stmt::Assign { lhs, op, rhs })
            }
            _ => Err(self.unexpected("a statement")),
        }
    }

    /// After `if` (or `elseif`): condition, body, then `elseif`/`else`/`end`.
    fn if_rest(&mut self, line: usize, col: usize) -> Result<Stmt> {
        let cond = self.expr(0)?;
        let then = self.stmts(&["end", "else", "elseif"])?;
        let otherwise = if self.is_word("elseif") {
            self.bump();
            // The nested `if` shares this one's `end`.
            Some(Box::new(self.if_rest(line, col)?))
        } else if self.is_word("else") {
            self.bump();
            let e = self.stmts(&["end"])?;
            self.close("if", line, col)?;
            Some(Box::new(e))
        } else {
            self.close("if", line, col)?;
            None
        };
        Ok(Stmt::Sieve {
            cond,
            then: Box::new(then),
            otherwise,
        })
    }

    fn assign_op(&mut self) -> Result<AssignOp> {
        let t = self.token().clone();
        let op = match self.peek().clone() {
            Tok::Sym("=") => AssignOp::Store,
            Tok::Sym("+=") => AssignOp::Reduce(Op::Add),
            Tok::Sym("-=") => AssignOp::Reduce(Op::Sub),
            Tok::Sym("*=") => AssignOp::Reduce(Op::Mul),
            Tok::Sym("|=") => AssignOp::Reduce(Op::BitOr),
            Tok::Sym("&=") => AssignOp::Reduce(Op::BitAnd),
            Tok::Sym("<<") => {
                self.bump();
                let op = self.reduce_op()?;
                if !self.is_sym(">>=") {
                    return Err(self.unexpected("`>>=` to close `<<op>>=`"));
                }
                self.bump();
                return Ok(AssignOp::Reduce(op));
            }
            Tok::Sym(".=") => {
                return Err(
                    self.err_here("`.=` declares a whole tensor: write `X .= v`, not `X[i] .= v`")
                )
            }
            _ => {
                return Err(error_at(
                    self.text,
                    t.line,
                    t.col,
                    format!(
                        "expected an assignment (`=`, `+=`, `<<op>>=`, ...), found {}",
                        describe(self.peek())
                    ),
                ))
            }
        };
        self.bump();
        Ok(op)
    }

    /// The operator inside `<<...>>=`.
    fn reduce_op(&mut self) -> Result<Op> {
        let t = self.token().clone();
        match self.bump() {
            Tok::Sym(s) => match Op::from_reduce_symbol(s) {
                Some(op) => Ok(op),
                None => Err(error_at(
                    self.text,
                    t.line,
                    t.col,
                    format!("`{s}` is not a binary operator"),
                )),
            },
            Tok::Ident(name) if name == "choose" => {
                self.expect_sym("(", "after `choose` (e.g. `<<choose(0)>>=`)")?;
                let z = self.literal_value()?;
                self.expect_sym(")", "to close `choose(`")?;
                Ok(Op::Choose(z))
            }
            Tok::Ident(name) => {
                match Op::from_call_name(&name).or_else(|| Op::from_reduce_symbol(&name)) {
                    Some(op) if op.arity() != Some(1) => Ok(op),
                    _ => Err(error_at(
                        self.text,
                        t.line,
                        t.col,
                        format!("`{name}` is not a binary operator or function"),
                    )),
                }
            }
            other => Err(error_at(
                self.text,
                t.line,
                t.col,
                format!(
                    "expected an operator after `<<`, found {}",
                    describe(&other)
                ),
            )),
        }
    }

    /// A literal, possibly negative (for `choose(z)`).
    fn literal_value(&mut self) -> Result<Value> {
        let neg = self.eat_sym("-");
        let t = self.token().clone();
        match self.bump() {
            Tok::Literal(s) => {
                let text = if neg { format!("-{s}") } else { s.clone() };
                Value::parse_literal(&text).ok_or_else(|| {
                    error_at(
                        self.text,
                        t.line,
                        t.col,
                        format!("`{text}` is not a valid literal (out of range for its type?)"),
                    )
                })
            }
            other => Err(error_at(
                self.text,
                t.line,
                t.col,
                format!("expected a literal, found {}", describe(&other)),
            )),
        }
    }

    // ---- expressions ----

    fn access_rest(&mut self, tensor: String) -> Result<Access> {
        self.expect_sym("[", "")?;
        self.in_index += 1;
        let mut indices = Vec::new();
        self.skip_newlines();
        if !self.is_sym("]") {
            loop {
                indices.push(self.expr(0)?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.in_index -= 1;
        self.expect_sym("]", &format!("to close `{tensor}[`"))?;
        Ok(Access { tensor, indices })
    }

    /// After `swizzle`: `(A, σ...)[idx...]`, Finch's SwizzleTensor, whose mode `k` is mode
    /// `σ[k]` of `A` (`swizzle(A, 2, 1)` is `A` transposed). Applied here, as the paper's
    /// wrapperization does: the access is `A[idx[invperm(σ)]...]`, i.e. mode `σ[k]` of `A`
    /// takes `idx[k]`.
    fn swizzled_access(&mut self) -> Result<Access> {
        let start = self.token().clone();
        self.expect_sym("(", "after `swizzle`")?;
        let tensor = self.tensor_name("in `swizzle(...)`")?;
        let mut perm = Vec::new();
        while self.eat_sym(",") {
            let t = self.token().clone();
            let v = self.literal_value()?;
            match v.as_i128().and_then(|n| usize::try_from(n).ok()) {
                Some(n) if n >= 1 && v.scalar_type().is_some_and(|t| t.is_integer()) => {
                    perm.push(n)
                }
                _ => {
                    return Err(error_at(
                        self.text,
                        t.line,
                        t.col,
                        format!("`swizzle` takes mode numbers (1, 2, ...), not `{v}`"),
                    ))
                }
            }
        }
        self.expect_sym(")", "to close `swizzle(`")?;
        if !self.is_sym("[") {
            return Err(self.unexpected(&format!(
                "`[` after `swizzle({tensor}, ...)`: a swizzled tensor is read or written with indices"
            )));
        }
        let a = self.access_rest(tensor)?;
        let n = a.indices.len();
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (1..=n).collect::<Vec<_>>() {
            return Err(error_at(
                self.text,
                start.line,
                start.col,
                format!(
                    "`swizzle({}, {})` is indexed with {n} indices, so its modes must be a permutation of 1:{n}",
                    a.tensor,
                    perm.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let mut indices: Vec<Option<Expr>> = vec![None; n];
        for (k, e) in a.indices.into_iter().enumerate() {
            indices[perm[k] - 1] = Some(e);
        }
        Ok(Access {
            tensor: a.tensor,
            indices: indices.into_iter().flatten().collect(),
        })
    }

    /// Precedence climbing: parses an expression whose infix operators bind tighter than
    /// `min_bp`.
    fn too_deep(&self, what: &str, limit: usize, instead: &str) -> Error {
        self.err_here(format!("{what} nested more than {limit} deep; {instead}"))
    }

    fn expr(&mut self, min_bp: u8) -> Result<Expr> {
        if self.expr_depth >= MAX_EXPR_DEPTH {
            return Err(self.too_deep("an expression", MAX_EXPR_DEPTH, SPLIT_EXPR));
        }
        self.expr_depth += 1;
        let e = self.expr_chain(min_bp);
        self.expr_depth -= 1;
        e
    }

    /// An operand and the infix operators after it; a left-associative chain deepens the
    /// tree without recursing here, so its depth is counted as it grows.
    fn expr_chain(&mut self, min_bp: u8) -> Result<Expr> {
        let mut lhs = self.prefix()?;
        let mut depth: Option<usize> = None;
        while let Some(op) = match self.peek() {
            Tok::Sym(s) => sym_op(s),
            _ => None,
        } {
            let Fixity::Infix(bp) = op.fixity() else {
                break;
            };
            if bp <= min_bp {
                break;
            }
            self.bump();
            // `^` is right-associative: its right operand may contain `^` again.
            let rhs = self.expr(if op == Op::Pow { bp - 1 } else { bp })?;
            let d = depth
                .unwrap_or_else(|| tree_depth(&lhs))
                .max(tree_depth(&rhs))
                + 1;
            if d > MAX_EXPR_DEPTH {
                return Err(self.too_deep("an expression", MAX_EXPR_DEPTH, SPLIT_EXPR));
            }
            depth = Some(d);
            lhs = Expr::Call {
                op,
                args: vec![lhs, rhs],
            };
        }
        Ok(lhs)
    }

    fn prefix(&mut self) -> Result<Expr> {
        let t = self.token().clone();
        match self.peek().clone() {
            Tok::Literal(s) => {
                self.bump();
                Value::parse_literal(&s).map(Expr::Literal).ok_or_else(|| error_at(self.text, t.line, t.col, format!("`{s}` is not a valid literal (out of range for its type, or an unknown suffix)")))
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr(0)?;
                // `(lo:hi)(i)` in a tensor index: a window.
                if self.in_index > 0 && self.eat_sym(":") {
                    let hi = self.expr(0)?;
                    self.expect_sym(")", "to close the window `(lo:hi`")?;
                    self.expect_sym(
                        "(",
                        "after the window `(lo:hi)`: its index, as in `(lo:hi)(i)`",
                    )?;
                    let index = self.expr(0)?;
                    self.expect_sym(")", "to close the window's index")?;
                    return Ok(Expr::Window {
                        lo: Box::new(e),
                        hi: Box::new(hi),
                        index: Box::new(index),
                    });
                }
                self.expect_sym(")", "to close `(`")?;
                Ok(e)
            }
            Tok::Sym("~") => {
                self.bump();
                if self.in_index == 0 {
                    return Err(error_at(
                        self.text,
                        t.line,
                        t.col,
                        "`~` marks a permissive index and is only allowed inside `[...]`",
                    ));
                }
                let e = self.expr(PREFIX_BP)?;
                Ok(Expr::Permissive(Box::new(e)))
            }
            Tok::Sym(s)
                if matches!(s, "-" | "+" | "!")
                    || (sym_op(s).is_some() && matches!(self.peek_at(1), Tok::Sym("("))) =>
            {
                self.bump();
                // `+(a, b, c)`: an infix operator called with two or more arguments.
                if let (Some(op), Tok::Sym("(")) = (sym_op(s), self.peek()) {
                    if let Some(args) = self.try_call_args()? {
                        return Ok(Expr::Call { op, args });
                    }
                    if !matches!(s, "-" | "+" | "!") {
                        return Err(error_at(
                            self.text,
                            t.line,
                            t.col,
                            format!("`{s}(...)` needs two or more arguments"),
                        ));
                    }
                }
                if s == "-" {
                    if let Tok::Literal(lit) = self.peek().clone() {
                        let lt = self.token().clone();
                        if !matches!(self.peek_at(1), Tok::Sym("^"))
                            && lit != "true"
                            && lit != "false"
                            && lit != "missing"
                        {
                            self.bump();
                            let text = format!("-{lit}");
                            return Value::parse_literal(&text).map(Expr::Literal).ok_or_else(|| error_at(self.text, lt.line, lt.col, format!("`{text}` is not a valid literal (out of range for its type?)")));
                        }
                    }
                }
                let operand = self.expr(PREFIX_BP)?;
                let op = match s {
                    "-" => Op::Neg,
                    "!" => Op::Not,
                    _ => Op::Add,
                };
                Ok(Expr::Call {
                    op,
                    args: vec![operand],
                })
            }
            Tok::Ident(name) => {
                self.bump();
                self.name_expr(name, t.line, t.col)
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    /// If the next tokens are `(a, b, ...)` with at least two arguments, consumes them.
    fn try_call_args(&mut self) -> Result<Option<Vec<Expr>>> {
        // Look for the comma before parsing anything: parsing the first argument and
        // backing off when none follows would parse `+(+(+(...)))` twice per level,
        // exponential time in a chain of unary operators.
        if !self.parenthesis_holds_a_comma() {
            return Ok(None);
        }
        self.bump(); // (
        let mut args = vec![self.expr(0)?];
        self.expect_sym(",", "between arguments")?;
        loop {
            args.push(self.expr(0)?);
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_sym(")", "to close the argument list")?;
        Ok(Some(args))
    }

    /// Whether the parenthesis at the cursor has a comma at its own depth before it closes.
    fn parenthesis_holds_a_comma(&self) -> bool {
        let mut depth = 0usize;
        for t in &self.toks[self.at..] {
            match &t.tok {
                Tok::Sym("(" | "[" | "{") => depth += 1,
                Tok::Sym(")" | "]" | "}") => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return false;
                    }
                }
                Tok::Sym(",") if depth == 1 => return true,
                Tok::Eof => return false,
                _ => {}
            }
        }
        false
    }

    fn call_args(&mut self, name: &str) -> Result<Vec<Expr>> {
        self.expect_sym("(", &format!("after `{name}`"))?;
        let mut args = Vec::new();
        if !self.is_sym(")") {
            loop {
                args.push(self.expr(0)?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.expect_sym(")", &format!("to close `{name}(`"))?;
        Ok(args)
    }

    fn name_expr(&mut self, name: String, line: usize, col: usize) -> Result<Expr> {
        let here = |p: &Self, m: String| error_at(p.text, line, col, m);
        if is_keyword(&name) {
            return Err(here(
                self,
                format!("unexpected keyword `{name}` in an expression"),
            ));
        }
        if self.is_sym("[") {
            if !self.is_tensor(&name) {
                return Err(here(self, format!("`{name}` is not a declared tensor (declare it with `input`, `output` or `temp`)")));
            }
            return Ok(Expr::Access(self.access_rest(name)?));
        }
        if let Some(is_index) = self.lookup(&name) {
            if self.is_sym("(") {
                return Err(here(
                    self,
                    format!(
                        "`{name}` is a {} and cannot be called",
                        if is_index { "loop index" } else { "variable" }
                    ),
                ));
            }
            return Ok(if is_index {
                Expr::Index(name)
            } else {
                Expr::Variable(name)
            });
        }
        if self.is_tensor(&name) {
            return Err(here(self, format!("the tensor `{name}` must be read with brackets: `{name}[...]` (`{name}[]` for a scalar)")));
        }
        if name == "swizzle" && self.is_sym("(") {
            return Ok(Expr::Access(self.swizzled_access()?));
        }
        if self.is_sym("(") {
            if let Some(p) = Protocol::from_name(&name) {
                if self.in_index == 0 {
                    return Err(here(
                        self,
                        format!("the protocol `{name}(...)` is only allowed inside `[...]`"),
                    ));
                }
                let mut args = self.call_args(&name)?;
                if args.len() != 1 {
                    return Err(here(self, format!("`{name}` takes one index")));
                }
                return Ok(Expr::Protocol(p, Box::new(args.remove(0))));
            }
            if name == "choose" {
                self.expect_sym("(", "after `choose`")?;
                let z = self.literal_value()?;
                self.expect_sym(")", "to close `choose(`")?;
                let args = self.call_args("choose(z)")?;
                return Ok(Expr::Call {
                    op: Op::Choose(z),
                    args,
                });
            }
            let Some(op) = Op::from_call_name(&name) else {
                return Err(here(self, format!("unknown function `{name}`")));
            };
            let args = self.call_args(&name)?;
            let ok = match op.arity() {
                Some(k) => args.len() == k,
                None => !args.is_empty(),
            };
            if !ok {
                return Err(here(
                    self,
                    format!(
                        "`{name}` takes {} argument(s), got {}",
                        op.arity()
                            .map_or("one or more".to_string(), |k| k.to_string()),
                        args.len()
                    ),
                ));
            }
            return Ok(Expr::Call { op, args });
        }
        Err(here(
            self,
            format!("unknown name `{name}`: not a loop index, `let` variable or tensor"),
        ))
    }
}

fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "for"
            | "if"
            | "elseif"
            | "else"
            | "end"
            | "let"
            | "begin"
            | "return"
            | "_"
            | "input"
            | "output"
            | "temp"
    )
}
