//! The Finch language: AST, lexer, parser (with `line:column` errors) and printer
//! (`parse ∘ print = id`).

pub mod ast;
mod lexer;
mod parser;
mod printer;

pub use ast::{Access, AssignOp, Decl, DeclKind, Expr, Extent, Program, Protocol, Span, Stmt};
pub use parser::{parse_expr, parse_program, parse_stmt};
pub use printer::{print_expr, print_program, print_stmt};
