//! The kernel printer: a readable text form for snapshots and debugging.
//!
//! ```text
//! kernel spmv(b0: f64[] A_val, b1: i64[] A_ptr, ...; in v0; out v1)
//!   for v2 = 0 .. 5
//!     v3 = b1[v2]
//! ```

use std::fmt::{self, Write};

use super::ir::{Hint, KExpr, KStmt, Kernel};
use crate::algebra::{Fixity, Op};

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bufs: Vec<String> = self
            .bufs
            .iter()
            .enumerate()
            .map(|(k, b)| {
                let mode = match (b.writable, b.growable) {
                    (_, true) => "grow ",
                    (true, false) => "mut ",
                    _ => "",
                };
                let held = if b.narrow { " as u32" } else { "" };
                format!("b{k}: {mode}{}[]{held} {}", b.elem, b.name)
            })
            .collect();
        write!(f, "kernel {}({})", self.name, bufs.join(", "))?;
        let list = |ids: &[super::ir::LocalId]| {
            ids.iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.inputs.is_empty() {
            write!(f, " in({})", list(&self.inputs))?;
        }
        if !self.outputs.is_empty() {
            write!(f, " out({})", list(&self.outputs))?;
        }
        if self.reassociate {
            write!(f, " reassociate")?;
        }
        writeln!(f)?;
        for (k, l) in self.locals.iter().enumerate() {
            writeln!(f, "  local v{k}: {} {}", l.ty, l.name)?;
        }
        let mut out = String::new();
        block(&mut out, &self.body, 1)?;
        f.write_str(&out)
    }
}

fn block(out: &mut String, body: &[KStmt], level: usize) -> fmt::Result {
    for s in body {
        stmt(out, s, level)?;
    }
    Ok(())
}

fn stmt(out: &mut String, s: &KStmt, level: usize) -> fmt::Result {
    let pad = "  ".repeat(level);
    match s {
        KStmt::Assign(l, e) => writeln!(out, "{pad}{l} = {}", expr(e)),
        KStmt::Store { buf, index, value } => {
            writeln!(out, "{pad}{buf}[{}] = {}", expr(index), expr(value))
        }
        KStmt::Resize { buf, len, fill } => {
            writeln!(out, "{pad}resize {buf} to {} fill {fill}", expr(len))
        }
        KStmt::Sort { buf, lo, hi } => {
            writeln!(out, "{pad}sort {buf}[{} .. {}]", expr(lo), expr(hi))
        }
        KStmt::For { var, lo, hi, body } => {
            writeln!(out, "{pad}for {var} = {} .. {}", expr(lo), expr(hi))?;
            block(out, body, level + 1)?;
            writeln!(out, "{pad}end")
        }
        KStmt::While { cond, body } => {
            writeln!(out, "{pad}while {}", expr(cond))?;
            block(out, body, level + 1)?;
            writeln!(out, "{pad}end")
        }
        KStmt::If {
            cond,
            then,
            otherwise,
        } => {
            writeln!(out, "{pad}if {}", expr(cond))?;
            block(out, then, level + 1)?;
            if !otherwise.is_empty() {
                writeln!(out, "{pad}else")?;
                block(out, otherwise, level + 1)?;
            }
            writeln!(out, "{pad}end")
        }
        KStmt::Break => writeln!(out, "{pad}break"),
        KStmt::Fail(c) => writeln!(out, "{pad}fail {c}"),
        KStmt::Hint(Hint::Prefetch { buf, index, ahead }) => {
            writeln!(out, "{pad}prefetch {buf}[{}] ahead {ahead}", expr(index))
        }
        KStmt::Hint(Hint::ScalarRest) => writeln!(out, "{pad}hint scalar_rest"),
        KStmt::Hint(Hint::NoUnroll) => writeln!(out, "{pad}hint no_unroll"),
        KStmt::Hint(Hint::RowPointer { local, buf }) => {
            writeln!(
                out,
                "{pad}hint row_pointer {} into {buf}",
                expr(&KExpr::Local(*local))
            )
        }
    }
}

/// An expression in text form (fully parenthesized infix).
pub fn expr(e: &KExpr) -> String {
    match e {
        KExpr::Lit(v) => v.to_string(),
        KExpr::Local(l) => l.to_string(),
        KExpr::Load(b, i) => format!("{b}[{}]", expr(i)),
        KExpr::Len(b) => format!("len({b})"),
        KExpr::Op(op, args) => match (op.fixity(), args.as_slice()) {
            (Fixity::Infix(_), [a, b]) => format!("({} {} {})", expr(a), op.symbol(), expr(b)),
            (Fixity::Prefix, [a]) => {
                format!("{}{}", if *op == Op::Neg { "-" } else { "!" }, expr(a))
            }
            _ => format!(
                "{op}({})",
                args.iter().map(expr).collect::<Vec<_>>().join(", ")
            ),
        },
        KExpr::Search { buf, value, lo, hi } => {
            format!("search({buf}, {}, {}, {})", expr(value), expr(lo), expr(hi))
        }
    }
}
