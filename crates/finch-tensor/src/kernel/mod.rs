//! The kernel IR that lowering produces and backends run: a strictly typed imperative
//! language with buffers, locals, loops, branches and a small runtime (`scansearch`,
//! buffer growth). See `ir` for the language, `verify` for its invariants, `print` for
//! its text form.

mod ir;
pub mod passes;
mod peephole;
mod print;
mod verify;

pub use ir::{
    count_reads, expr_count, expr_nodes, mentions_any, op_type, visit_exprs, BufId, BufParam, Hint,
    KExpr, KStmt, Kernel, LocalDecl, LocalId,
};
pub use peephole::{tidy, tidy_expr};
pub use print::expr as print_expr;
pub use verify::verify;
