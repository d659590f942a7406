//! `Program`: a parsed Finch program whose declared formats have been checked, the entry
//! point of the library (`Program::parse(text)?`).
//!
//! Parsing checks the syntax and name resolution (`notation`), then that every declared
//! format string is a valid format and that every access uses as many indices as its
//! tensor's format has modes. Running uses the dense reference interpreter for now; the
//! compiled engines arrive with the compiler (issue #3).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::formats::Format;
use crate::notation::{self, Access, DeclKind, Expr, Stmt};
use crate::reference::{self, Bindings, RunOptions, RunStats};

/// One declared tensor with its parsed format.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDecl {
    /// input / output / temp.
    pub kind: DeclKind,
    /// The tensor's name.
    pub name: String,
    /// Its format.
    pub format: Format,
}

/// A parsed and checked Finch program.
#[derive(Clone, Debug)]
pub struct Program {
    ast: notation::Program,
    decls: Vec<TensorDecl>,
}

impl Program {
    /// Parses program text (declarations, then statements) and checks formats and access
    /// arities. Errors point at the offending line and column.
    pub fn parse(text: &str) -> Result<Program> {
        let ast = notation::parse_program(text)?;
        Program::from_ast(ast, text)
    }

    /// Checks an AST built in Rust (or parsed) and wraps it. `text` is used only to show
    /// source lines in errors (pass `""` for built programs).
    pub fn from_ast(ast: notation::Program, text: &str) -> Result<Program> {
        let mut decls = Vec::with_capacity(ast.decls.len());
        for d in &ast.decls {
            let format = Format::parse(&d.format).map_err(|e| {
                let source_line = text
                    .lines()
                    .nth(d.span.line.saturating_sub(1))
                    .unwrap_or("")
                    .to_string();
                Error::Parse(Box::new(crate::error::SourceError {
                    line: d.span.line,
                    col: d.span.col,
                    message: format!("in the format of `{}`: {e}", d.name),
                    source_line,
                }))
            })?;
            decls.push(TensorDecl {
                kind: d.kind,
                name: d.name.clone(),
                format,
            });
        }
        let ndims: HashMap<&str, usize> = decls
            .iter()
            .map(|d| (d.name.as_str(), d.format.ndims()))
            .collect();
        check_arity_stmt(&ast.body, &ndims)?;
        check_outputs_made(&ast.body, &decls)?;
        check_read_or_updated(&ast.body, &decls)?;
        Ok(Program { ast, decls })
    }

    /// The syntax tree.
    pub fn ast(&self) -> &notation::Program {
        &self.ast
    }

    /// The declared tensors, in source order.
    pub fn decls(&self) -> &[TensorDecl] {
        &self.decls
    }

    /// The declaration of one tensor.
    pub fn decl(&self, name: &str) -> Option<&TensorDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    /// Runs the program on dense arrays with the reference interpreter: inputs are taken
    /// from `bindings`, outputs are left there.
    pub fn run_reference(&self, bindings: &mut Bindings, opts: &RunOptions) -> Result<RunStats> {
        reference::run(&self.ast, bindings, opts)
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&notation::print_program(&self.ast))
    }
}

/// Lifecycles (Finch paper §5.5): within one statement a tensor declared outside it is
/// either read (frozen) or updated (thawed), never both; one declared (`.=`) inside is
/// private to it, and scalars are exempt. Checked statement by statement, from the top
/// level into every loop's, `let`'s and branch's body, so that every engine refuses the
/// same programs.
fn check_read_or_updated(body: &Stmt, decls: &[TensorDecl]) -> Result<()> {
    notation::ast::each_scoped_statement(body, &mut |_, uses| {
        let mut both: Vec<&String> = uses
            .reads
            .intersection(&uses.writes)
            .filter(|n| !uses.declared.contains(*n))
            .filter(|n| {
                decls
                    .iter()
                    .any(|d| &d.name == *n && !matches!(d.format, Format::Scalar(..)))
            })
            .collect();
        both.sort();
        match both.first() {
            Some(name) => Err(Error::Program(format!(
                "`{name}` is read and written in the same loop nest; a tensor declared outside a scope is either read or updated within it (split the loops)"
            ))),
            None => Ok(()),
        }
    })
}

/// Every output is declared (`X .= v`) or written by a statement that runs before the
/// program's first top-level `return` (statements after it never run): an output the
/// program never makes is an error, in every engine.
fn check_outputs_made(body: &Stmt, decls: &[TensorDecl]) -> Result<()> {
    /// Collects the tensors `s` declares or writes; `false` once a `return` is reached.
    fn made<'a>(s: &'a Stmt, out: &mut Vec<&'a str>) -> bool {
        match s {
            Stmt::Declare { tensor, .. } => out.push(tensor),
            Stmt::Assign { lhs, .. } => out.push(&lhs.tensor),
            Stmt::Loop { body, .. } | Stmt::Define { body, .. } => {
                made(body, out);
            }
            Stmt::Sieve {
                then, otherwise, ..
            } => {
                made(then, out);
                if let Some(o) = otherwise {
                    made(o, out);
                }
            }
            Stmt::Block(v) => return v.iter().all(|s| made(s, out)),
            Stmt::Return(_) => return false,
            Stmt::Freeze(_) | Stmt::Thaw(_) => {}
        }
        true
    }
    let mut names = Vec::new();
    made(body, &mut names);
    match decls
        .iter()
        .find(|d| d.kind == DeclKind::Output && !names.contains(&d.name.as_str()))
    {
        Some(d) => Err(Error::Program(format!(
            "the output `{0}` is never declared (`{0} .= ...`) or written{1}",
            d.name,
            if body.returns() {
                " before the program returns"
            } else {
                ""
            }
        ))),
        None => Ok(()),
    }
}

fn check_access(a: &Access, ndims: &HashMap<&str, usize>) -> Result<()> {
    if let Some(&n) = ndims.get(a.tensor.as_str()) {
        if n != a.indices.len() {
            return Err(Error::Program(format!(
                "`{}` has {n} mode{} but is accessed with {} ind{}: `{}[{}]`",
                a.tensor,
                if n == 1 { "" } else { "s" },
                a.indices.len(),
                if a.indices.len() == 1 { "ex" } else { "ices" },
                a.tensor,
                a.indices
                    .iter()
                    .map(notation::print_expr)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    a.indices
        .iter()
        .try_for_each(|e| check_arity_expr(e, ndims))
}

fn check_arity_expr(e: &Expr, ndims: &HashMap<&str, usize>) -> Result<()> {
    match e {
        Expr::Literal(_) | Expr::Index(_) | Expr::Variable(_) => Ok(()),
        Expr::Call { args, .. } => args.iter().try_for_each(|a| check_arity_expr(a, ndims)),
        Expr::Access(a) => check_access(a, ndims),
        Expr::Permissive(x) | Expr::Protocol(_, x) => check_arity_expr(x, ndims),
        Expr::Window { lo, hi, index } => [lo, hi, index]
            .into_iter()
            .try_for_each(|x| check_arity_expr(x, ndims)),
    }
}

fn check_arity_stmt(s: &Stmt, ndims: &HashMap<&str, usize>) -> Result<()> {
    match s {
        Stmt::Declare { init, .. } => check_arity_expr(init, ndims),
        Stmt::Assign { lhs, rhs, .. } => {
            check_access(lhs, ndims)?;
            check_arity_expr(rhs, ndims)
        }
        Stmt::Loop { extent, body, .. } => {
            if let notation::Extent::Range(a, b) = extent {
                check_arity_expr(a, ndims)?;
                check_arity_expr(b, ndims)?;
            }
            check_arity_stmt(body, ndims)
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            check_arity_expr(cond, ndims)?;
            check_arity_stmt(then, ndims)?;
            otherwise
                .as_deref()
                .map_or(Ok(()), |o| check_arity_stmt(o, ndims))
        }
        Stmt::Define { value, body, .. } => {
            check_arity_expr(value, ndims)?;
            check_arity_stmt(body, ndims)
        }
        Stmt::Block(v) => v.iter().try_for_each(|s| check_arity_stmt(s, ndims)),
        Stmt::Freeze(_) | Stmt::Thaw(_) | Stmt::Return(_) => Ok(()),
    }
}
