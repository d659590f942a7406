//! The printer: canonical program text (2-space indentation, one statement per line,
//! minimal parentheses). Guarantee: `parse_program(&print_program(p)) == p` for every
//! program the parser can produce (property-tested), and likewise for statements and
//! expressions.

use super::ast::{Access, AssignOp, Expr, Extent, Program, Stmt};
use crate::algebra::{Fixity, Op, Value};

/// Prints a whole program: declarations, a blank line, then the statements.
pub fn print_program(p: &Program) -> String {
    let mut out = String::new();
    for d in &p.decls {
        out.push_str(&format!(
            "{} {} :: {}\n",
            d.kind.keyword(),
            d.name,
            d.format
        ));
    }
    if !p.decls.is_empty() {
        out.push('\n');
    }
    body(&mut out, &p.body, 0);
    out
}

/// Prints a statement (several lines for compound statements, no trailing newline).
pub fn print_stmt(s: &Stmt) -> String {
    let mut out = String::new();
    stmt(&mut out, s, 0);
    out.trim_end_matches('\n').to_string()
}

/// Prints an expression.
pub fn print_expr(e: &Expr) -> String {
    expr(e, 0)
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// A statement list: a `Block` of other than one statement prints its statements; any
/// other statement (including a one-statement `Block`) prints itself.
fn body(out: &mut String, s: &Stmt, level: usize) {
    match s {
        Stmt::Block(v) if v.len() != 1 => {
            for s in v {
                stmt(out, s, level);
            }
        }
        s => stmt(out, s, level),
    }
}

fn stmt(out: &mut String, s: &Stmt, level: usize) {
    indent(out, level);
    match s {
        Stmt::Declare { tensor, init } => out.push_str(&format!("{tensor} .= {}\n", expr(init, 0))),
        Stmt::Assign { lhs, op, rhs } => {
            let op = match op {
                AssignOp::Store => "=".to_string(),
                AssignOp::Reduce(Op::Add) => "+=".to_string(),
                AssignOp::Reduce(Op::Sub) => "-=".to_string(),
                AssignOp::Reduce(Op::Mul) => "*=".to_string(),
                AssignOp::Reduce(Op::BitOr) => "|=".to_string(),
                AssignOp::Reduce(Op::BitAnd) => "&=".to_string(),
                AssignOp::Reduce(op) => format!("<<{op}>>="),
            };
            out.push_str(&format!("{} {op} {}\n", access(lhs), expr(rhs, 0)));
        }
        Stmt::Loop {
            index,
            extent,
            body: b,
        } => {
            let ext = match extent {
                Extent::Auto => "_".to_string(),
                Extent::Range(a, b) => format!("{}:{}", expr(a, 0), expr(b, 0)),
            };
            out.push_str(&format!("for {index} = {ext}\n"));
            body(out, b, level + 1);
            indent(out, level);
            out.push_str("end\n");
        }
        Stmt::Sieve { .. } => {
            sieve(out, s, level, "if");
            indent(out, level);
            out.push_str("end\n");
        }
        Stmt::Define {
            var,
            value,
            body: b,
        } => {
            out.push_str(&format!("let {var} = {}\n", expr(value, 0)));
            body(out, b, level + 1);
            indent(out, level);
            out.push_str("end\n");
        }
        Stmt::Block(v) => {
            out.push_str("begin\n");
            for s in v {
                stmt(out, s, level + 1);
            }
            indent(out, level);
            out.push_str("end\n");
        }
        Stmt::Freeze(t) => out.push_str(&format!("@freeze({t})\n")),
        Stmt::Thaw(t) => out.push_str(&format!("@thaw({t})\n")),
        Stmt::Return(names) => out.push_str(&format!("return {}\n", names.join(", "))),
    }
}

/// `if`/`elseif` chain without the final `end` (the caller has indented the first line).
fn sieve(out: &mut String, s: &Stmt, level: usize, keyword: &str) {
    let Stmt::Sieve {
        cond,
        then,
        otherwise,
    } = s
    else {
        return;
    };
    out.push_str(&format!("{keyword} {}\n", expr(cond, 0)));
    body(out, then, level + 1);
    match otherwise.as_deref() {
        None => {}
        Some(next @ Stmt::Sieve { .. }) => {
            indent(out, level);
            sieve(out, next, level, "elseif");
        }
        Some(other) => {
            indent(out, level);
            out.push_str("else\n");
            body(out, other, level + 1);
        }
    }
}

fn access(a: &Access) -> String {
    let idx: Vec<String> = a.indices.iter().map(|e| expr(e, 0)).collect();
    format!("{}[{}]", a.tensor, idx.join(", "))
}

fn is_negative_literal(v: &Value) -> bool {
    match *v {
        Value::F64(x) => x.is_sign_negative() && !x.is_nan(),
        Value::F32(x) => x.is_sign_negative() && !x.is_nan(),
        Value::I64(x) => x < 0,
        Value::I32(x) => x < 0,
        Value::I16(x) => x < 0,
        Value::I8(x) => x < 0,
        _ => false,
    }
}

fn is_number_literal(v: &Value) -> bool {
    !matches!(v, Value::Bool(_) | Value::Missing)
}

/// Binding power of an expression's outermost operator (atoms bind tightest).
fn power(e: &Expr) -> u8 {
    match e {
        Expr::Literal(v) if is_negative_literal(v) => 9,
        Expr::Call { op, args } => match op.fixity() {
            Fixity::Infix(bp) if args.len() == 2 => bp,
            Fixity::Prefix => 9,
            _ if *op == Op::Add && args.len() == 1 => 9,
            _ => 100,
        },
        Expr::Permissive(_) => 9,
        _ => 100,
    }
}

/// Prints `e` where the context needs binding power at least `min`.
fn expr(e: &Expr, min: u8) -> String {
    let text = match e {
        Expr::Literal(v) => v.to_string(),
        Expr::Index(n) | Expr::Variable(n) => n.clone(),
        Expr::Access(a) => access(a),
        Expr::Permissive(x) => format!("~{}", expr(x, 10)),
        Expr::Protocol(p, x) => format!("{}({})", p.name(), expr(x, 0)),
        Expr::Window { lo, hi, index } => {
            format!("({}:{})({})", expr(lo, 0), expr(hi, 0), expr(index, 0))
        }
        Expr::Call { op, args } => call(*op, args),
    };
    if power(e) < min {
        format!("({text})")
    } else {
        text
    }
}

fn call(op: Op, args: &[Expr]) -> String {
    let list = |args: &[Expr]| {
        args.iter()
            .map(|a| expr(a, 0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (op.fixity(), args) {
        (Fixity::Infix(bp), [a, b]) => {
            let (lmin, rmin) = if op == Op::Pow {
                (bp + 1, bp)
            } else {
                (bp, bp + 1)
            };
            format!("{} {} {}", expr(a, lmin), op.symbol(), expr(b, rmin))
        }
        (Fixity::Prefix, [x]) | (Fixity::Infix(_), [x])
            if matches!(op, Op::Neg | Op::Not | Op::Add) =>
        {
            let sym = if op == Op::Add { "+" } else { op.symbol() };
            let inner = expr(x, 9);
            // `-(2)` keeps a negation of a literal from reading back as a negative literal;
            // `-(-x)` avoids `--`. (`inner` has no parentheses of its own in both cases, so
            // it is the operand's text at any precedence: printing it again would double
            // the time per unary operator, exponential in a chain of them.)
            let literal_operand = matches!(x, Expr::Literal(v) if is_number_literal(v));
            if literal_operand || inner.starts_with('-') || inner.starts_with('+') {
                format!("{sym}({inner})")
            } else {
                format!("{sym}{inner}")
            }
        }
        (Fixity::Infix(_) | Fixity::Prefix, _) => format!("{}({})", op.symbol(), list(args)),
        (Fixity::Call, _) => match op {
            Op::Choose(z) => format!("choose({z})({})", list(args)),
            _ => format!("{}({})", op.symbol(), list(args)),
        },
    }
}
