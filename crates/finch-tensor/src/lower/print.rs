//! The program after conversion, in Finch-like text (`finch lower`, as the paper's
//! Fig. 17 shows normalization): every loop with its dimensionalized extent, accesses
//! with their wrappers (`A[i - 1, j]`, `img[x, ~(y + 1)]`), comparison masks as `if`s,
//! workspace resets, and the lifecycle statements the compiler inserted (`@freeze`).

use std::fmt::Write;

use super::convert::{Converted, TensorInfo};
use crate::algebra::{Fixity, Op};
use crate::kernel::{tidy_expr, KExpr, Kernel};
use crate::looplets::{Expr, Stmt, Tensor};

/// The converted program as text.
pub fn print_converted(c: &Converted) -> String {
    let p = Printer {
        kernel: &c.kernel,
        tensors: &c.tensors,
    };
    let mut out = String::new();
    for t in c.tensors.iter() {
        let kind = match t.kind {
            crate::notation::DeclKind::Input => "input ",
            crate::notation::DeclKind::Output => "output",
            crate::notation::DeclKind::Temp => "temp  ",
        };
        let _ = writeln!(out, "{kind} {} :: {}", t.name, t.format);
    }
    p.stmt(&mut out, &c.body, 0);
    out
}

struct Printer<'a> {
    kernel: &'a Kernel,
    tensors: &'a [TensorInfo],
}

impl Printer<'_> {
    fn kexpr(&self, e: &KExpr) -> String {
        match tidy_expr(e.clone()) {
            KExpr::Lit(v) => v.to_string(),
            KExpr::Local(l) => self
                .kernel
                .locals
                .get(l.0 as usize)
                .map_or_else(|| l.to_string(), |d| d.name.clone()),
            KExpr::Op(op, args) => match (op.fixity(), args.as_slice()) {
                (Fixity::Infix(_), [a, b]) => {
                    format!("({} {} {})", self.kexpr(a), op.symbol(), self.kexpr(b))
                }
                _ => format!(
                    "{op}({})",
                    args.iter()
                        .map(|a| self.kexpr(a))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            other => crate::kernel::print_expr(&other),
        }
    }

    fn tensor(&self, t: &Tensor) -> String {
        match t {
            Tensor::Fiber(f) => self
                .tensors
                .get(f.tensor)
                .map_or_else(|| "?".into(), |i| i.name.clone()),
            Tensor::Scalar(s) => self
                .tensors
                .get(*s)
                .map_or_else(|| "?".into(), |i| i.name.clone()),
            Tensor::FillLeaf(v) => v.to_string(),
            Tensor::Value(e) => self.expr(e),
            Tensor::Local(l) => self.kexpr(&KExpr::Local(*l)),
            Tensor::Looplet(l) => format!("{l:?}"),
            Tensor::Switch { .. } => "switch".into(),
            Tensor::Present { cond, fiber, .. } => format!(
                "{} where {}",
                self.tensors
                    .get(fiber.tensor)
                    .map_or("?", |i| i.name.as_str()),
                self.kexpr(cond)
            ),
            Tensor::Null => "null".into(),
            Tensor::OutOfRange(t) => format!(
                "out_of_range({})",
                self.tensors.get(*t).map_or("?", |i| i.name.as_str())
            ),
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Lit(v) => v.to_string(),
            Expr::Code(k) => self.kexpr(k),
            Expr::Index(i) => i.trim_start_matches("let:").to_string(),
            Expr::Permissive(x, None) => format!("~({})", self.expr(x)),
            Expr::Permissive(x, Some(g)) => {
                format!("~({} if {} else error)", self.expr(x), self.expr(g))
            }
            Expr::Wrapped {
                index,
                offset,
                by,
                permissive,
                ..
            } => {
                let index = match by {
                    Some(b) => format!("{index} + {}", self.expr(b)),
                    None => index.clone(),
                };
                let index = &index;
                let shifted = match *offset {
                    0 => index.clone(),
                    c if c > 0 => format!("{index} + {c}"),
                    c => format!("{index} - {}", c.unsigned_abs()),
                };
                match (permissive, *offset + i64::from(by.is_some())) {
                    (true, 0) => format!("~{shifted}"),
                    (true, _) => format!("~({shifted})"),
                    (false, _) => shifted,
                }
            }
            Expr::Call(op, args) => match (op.fixity(), args.as_slice()) {
                (Fixity::Infix(_), [a, b]) => {
                    format!("({} {} {})", self.expr(a), op.symbol(), self.expr(b))
                }
                (Fixity::Prefix, [a]) => {
                    format!("{}{}", if *op == Op::Neg { "-" } else { "!" }, self.expr(a))
                }
                _ => format!(
                    "{op}({})",
                    args.iter()
                        .map(|a| self.expr(a))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            Expr::Access(t, idx) => {
                let name = self.tensor(t);
                if matches!(**t, Tensor::Scalar(_)) {
                    return format!("{name}[]");
                }
                if idx.is_empty() {
                    return name;
                }
                let idx: Vec<String> = idx.iter().map(|x| self.expr(x)).collect();
                format!("{name}[{}]", idx.join(", "))
            }
        }
    }

    fn stmt(&self, out: &mut String, s: &Stmt, level: usize) {
        let pad = "  ".repeat(level);
        match s {
            Stmt::Loop {
                index,
                lo,
                hi,
                body,
            } => {
                let _ = writeln!(
                    out,
                    "{pad}for {index} = {}:{}",
                    self.kexpr(lo),
                    self.kexpr(hi)
                );
                self.stmt(out, body, level + 1);
                let _ = writeln!(out, "{pad}end");
            }
            Stmt::Assign { lhs, op, rhs } => {
                let target = self.expr(&Expr::Access(Box::new(lhs.0.clone()), lhs.1.clone()));
                let op = match op {
                    None => "=".to_string(),
                    Some(Op::Add) => "+=".into(),
                    Some(Op::Sub) => "-=".into(),
                    Some(Op::Mul) => "*=".into(),
                    Some(op) => format!("<<{op}>>="),
                };
                let _ = writeln!(out, "{pad}{target} {op} {}", self.expr(rhs));
            }
            Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => {
                let _ = writeln!(out, "{pad}if {}", self.expr(cond));
                self.stmt(out, then, level + 1);
                if !matches!(&**otherwise, Stmt::Block(v) if v.is_empty()) {
                    let _ = writeln!(out, "{pad}else");
                    self.stmt(out, otherwise, level + 1);
                }
                let _ = writeln!(out, "{pad}end");
            }
            Stmt::Define { var, value, body } => {
                let _ = writeln!(
                    out,
                    "{pad}let {} = {}",
                    var.trim_start_matches("let:"),
                    self.expr(value)
                );
                self.stmt(out, body, level + 1);
                let _ = writeln!(out, "{pad}end");
            }
            Stmt::Block(v) => {
                for s in v {
                    self.stmt(out, s, level);
                }
            }
            Stmt::SetScalar(t, e) => {
                let name = self.tensors.get(*t).map_or("?", |i| i.name.as_str());
                let _ = writeln!(out, "{pad}{name} .= {}", self.expr(e));
            }
            Stmt::Check(e, code) => {
                let _ = writeln!(out, "{pad}check {} else fail {code}", self.expr(e));
            }
            Stmt::SetLocal(l, e) => {
                let _ = writeln!(
                    out,
                    "{pad}{} = {}",
                    self.kexpr(&KExpr::Local(*l)),
                    self.expr(e)
                );
            }
            Stmt::Reset(t, v) => {
                let name = self.tensors.get(*t).map_or("?", |i| i.name.as_str());
                let _ = writeln!(out, "{pad}{name} .= {v}");
            }
            Stmt::Freeze(t) => {
                let name = self.tensors.get(*t).map_or("?", |i| i.name.as_str());
                let _ = writeln!(out, "{pad}@freeze({name})");
            }
        }
    }
}
