//! The kernel verifier: checks every invariant backends rely on and reports all
//! violations, each with where it is (`stmt 3.1` = the first statement in the body of the
//! third top-level statement).
//!
//! Checked: locals and buffers exist; expressions are well typed (see `ir::op_type`);
//! loads index with `i64`; stores go to writable buffers with the element type; resizes
//! go to growable buffers; `for` variables are `i64` locals; conditions are `bool`;
//! `break` is inside a loop; inputs/outputs name existing locals.

use super::ir::{op_type, BufId, Hint, KExpr, KStmt, Kernel, LocalId};
use crate::algebra::ScalarType;
use crate::error::{Error, Result};

struct Verifier<'k> {
    k: &'k Kernel,
    errors: Vec<String>,
}

/// Verifies a kernel; the error lists every problem found.
pub fn verify(k: &Kernel) -> Result<()> {
    let mut v = Verifier {
        k,
        errors: Vec::new(),
    };
    for &l in k.inputs.iter().chain(&k.outputs) {
        if l.0 as usize >= k.locals.len() {
            v.errors.push(format!("signature: {l} is not a local"));
        }
    }
    for (n, p) in k.bufs.iter().enumerate() {
        if p.narrow && (p.elem != ScalarType::I64 || p.writable || p.growable) {
            v.errors.push(format!(
                "signature: b{n} ({}) is narrow but not a read-only i64 buffer",
                p.name
            ));
        }
    }
    v.block(&k.body, "", 0);
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Program(format!(
            "kernel `{}` is malformed:\n  {}",
            k.name,
            v.errors.join("\n  ")
        )))
    }
}

impl Verifier<'_> {
    fn local(&mut self, l: LocalId, at: &str) -> Option<ScalarType> {
        match self.k.locals.get(l.0 as usize) {
            Some(d) => Some(d.ty),
            None => {
                self.errors.push(format!("{at}: {l} is not a local"));
                None
            }
        }
    }

    fn buf(&mut self, b: BufId, at: &str) -> Option<&super::ir::BufParam> {
        let k = self.k;
        match k.bufs.get(b.0 as usize) {
            Some(p) => Some(p),
            None => {
                self.errors.push(format!("{at}: {b} is not a buffer"));
                None
            }
        }
    }

    fn expect(&mut self, e: &KExpr, want: ScalarType, what: &str, at: &str) {
        if let Some(t) = self.expr(e, at) {
            if t != want {
                self.errors
                    .push(format!("{at}: {what} has type {t}, expected {want}"));
            }
        }
    }

    fn expr(&mut self, e: &KExpr, at: &str) -> Option<ScalarType> {
        match e {
            KExpr::Lit(v) => match v.scalar_type() {
                Some(t) => Some(t),
                None => {
                    self.errors
                        .push(format!("{at}: `missing` cannot appear in a kernel"));
                    None
                }
            },
            KExpr::Local(l) => self.local(*l, at),
            KExpr::Load(b, i) => {
                self.expect(i, ScalarType::I64, "a load index", at);
                self.buf(*b, at).map(|p| p.elem)
            }
            KExpr::Len(b) => self.buf(*b, at).map(|_| ScalarType::I64),
            KExpr::Op(op, args) => {
                let tys: Vec<Option<ScalarType>> = args.iter().map(|a| self.expr(a, at)).collect();
                let tys: Option<Vec<ScalarType>> = tys.into_iter().collect();
                let tys = tys?;
                match op_type(*op, &tys) {
                    Some(t) => Some(t),
                    None => {
                        let list: Vec<String> = tys.iter().map(|t| t.to_string()).collect();
                        self.errors.push(format!(
                            "{at}: `{op}` does not apply to ({})",
                            list.join(", ")
                        ));
                        None
                    }
                }
            }
            KExpr::Search { buf, value, lo, hi } => {
                let elem = self.buf(*buf, at).map(|p| p.elem);
                if let Some(elem) = elem {
                    self.expect(value, elem, "the searched value", at);
                }
                self.expect(lo, ScalarType::I64, "a search bound", at);
                self.expect(hi, ScalarType::I64, "a search bound", at);
                Some(ScalarType::I64)
            }
        }
    }

    fn block(&mut self, body: &[KStmt], prefix: &str, loops: usize) {
        for (n, s) in body.iter().enumerate() {
            let at = if prefix.is_empty() {
                format!("stmt {}", n + 1)
            } else {
                format!("{prefix}.{}", n + 1)
            };
            self.stmt(s, &at, loops);
        }
    }

    fn stmt(&mut self, s: &KStmt, at: &str, loops: usize) {
        match s {
            KStmt::Assign(l, e) => {
                if let Some(t) = self.local(*l, at) {
                    self.expect(e, t, &format!("the value assigned to {l}"), at);
                }
            }
            KStmt::Store { buf, index, value } => {
                self.expect(index, ScalarType::I64, "a store index", at);
                if let Some(p) = self.buf(*buf, at).cloned() {
                    if !p.writable {
                        self.errors
                            .push(format!("{at}: {buf} ({}) is read-only", p.name));
                    }
                    self.expect(value, p.elem, &format!("the value stored into {buf}"), at);
                }
            }
            KStmt::Resize { buf, len, fill } => {
                self.expect(len, ScalarType::I64, "a length", at);
                if let Some(p) = self.buf(*buf, at).cloned() {
                    if !p.growable {
                        self.errors
                            .push(format!("{at}: {buf} ({}) is not growable", p.name));
                    }
                    if fill.scalar_type() != Some(p.elem) {
                        self.errors
                            .push(format!("{at}: fill {fill} is not a {}", p.elem));
                    }
                }
            }
            KStmt::Sort { buf, lo, hi } => {
                self.expect(lo, ScalarType::I64, "a sort bound", at);
                self.expect(hi, ScalarType::I64, "a sort bound", at);
                if let Some(p) = self.buf(*buf, at).cloned() {
                    if !p.writable || p.elem != ScalarType::I64 {
                        self.errors.push(format!(
                            "{at}: {buf} ({}) must be a writable i64 buffer to sort",
                            p.name
                        ));
                    }
                }
            }
            KStmt::For { var, lo, hi, body } => {
                if let Some(t) = self.local(*var, at) {
                    if t != ScalarType::I64 {
                        self.errors.push(format!(
                            "{at}: loop variable {var} has type {t}, expected i64"
                        ));
                    }
                }
                self.expect(lo, ScalarType::I64, "a loop bound", at);
                self.expect(hi, ScalarType::I64, "a loop bound", at);
                self.block(body, at, loops + 1);
            }
            KStmt::While { cond, body } => {
                self.expect(cond, ScalarType::Bool, "a condition", at);
                self.block(body, at, loops + 1);
            }
            KStmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.expect(cond, ScalarType::Bool, "a condition", at);
                self.block(then, &format!("{at}.then"), loops);
                self.block(otherwise, &format!("{at}.else"), loops);
            }
            KStmt::Break => {
                if loops == 0 {
                    self.errors.push(format!("{at}: `break` outside a loop"));
                }
            }
            KStmt::Fail(_) | KStmt::Hint(Hint::ScalarRest | Hint::NoUnroll) => {}
            KStmt::Hint(Hint::Prefetch { buf, index, .. }) => {
                self.expect(index, ScalarType::I64, "a prefetch position", at);
                self.buf(*buf, at);
            }
            KStmt::Hint(Hint::RowPointer { local, buf }) => {
                self.expect(
                    &KExpr::Local(*local),
                    ScalarType::I64,
                    "a row pointer's offset",
                    at,
                );
                self.buf(*buf, at);
            }
        }
    }
}
