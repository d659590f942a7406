//! The Finch language: AST, parser and printer.

pub mod ast;

pub use ast::{Access, AssignOp, Decl, DeclKind, Expr, Extent, Program, Protocol, Span, Stmt};
