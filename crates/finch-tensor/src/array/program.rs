//! Program generation and execution: an element-wise expression over operands becomes
//! a `.fin` program, compiled once and cached in memory by its text (which declares every
//! input's and the output's format, so the text is the key the issue asks for: program
//! structure and formats), then run on the operands' tensors.
//!
//! The program of `C = f(A0, A1)` over a result of shape `n1 × n2`:
//!
//! ```text
//! input  A0 :: Dense(SparseList(Element(0.0)))
//! input  A1 :: Dense(Element(0.0))
//! output C :: Dense(SparseList(Element(0.0)))
//! C .= 0.0
//! for i2 = _, i1 = _
//!   C[i1, i2] = f(A0[i1, i2], A1[i2])
//! end
//! ```
//!
//! Loops run from the last mode outward to the first, the storage order of every format
//! (the root level is the last mode), so every read is concordant. An operand with fewer
//! modes reads the trailing indices; a mode of size 1 broadcast against a larger result
//! is read at index `1`. 0-d operands are literals, so the compiler folds them with the
//! fills.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::algebra::{Op, Value};
use crate::engine::{CompiledProgram, Engine};
use crate::error::{Error, Result};
use crate::formats::Format;
use crate::tensor::Tensor;
use crate::Program;

use super::rules::{derive, fill_guard};

/// An element-wise expression over numbered operands.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    /// Operand `k` read at the current coordinate (broadcast as its shape says).
    Operand(usize),
    /// A constant.
    Literal(Value),
    /// An operator applied to arguments.
    Call(Op, Vec<Expr>),
}

/// The name of the output tensor in every generated program.
pub(crate) const OUTPUT: &str = "C";

/// An operand of a generated program.
pub(crate) struct ProgramOperand<'a> {
    /// Its tensor.
    pub(crate) tensor: &'a Tensor,
    /// The name it is bound to (operands given twice share one).
    pub(crate) name: String,
}

/// Writes the program computing `expr` into an output of `format` and `shape`.
pub(crate) fn element_wise_program(
    expr: &Expr,
    operands: &[ProgramOperand<'_>],
    out_format: &Format,
    out_shape: &[usize],
) -> Result<String> {
    let fills: Vec<Value> = operands.iter().map(|o| o.tensor.fill_value()).collect();
    let mut text = String::new();
    let mut declared: Vec<&str> = Vec::new();
    for op in operands {
        // 0-d operands are literals in the expression.
        if op.tensor.ndims() > 0 && !declared.contains(&op.name.as_str()) {
            declared.push(&op.name);
            let _ = writeln!(text, "input {} :: {}", op.name, op.tensor.format());
        }
    }
    let _ = writeln!(text, "output {OUTPUT} :: {out_format}");
    let _ = writeln!(text, "{OUTPUT} .= {}", out_format.fill_value());
    let rank = out_shape.len();
    let indices: Vec<String> = (1..=rank).map(|m| format!("i{m}")).collect();
    let body = print_expr(expr, operands, &fills, out_shape)?;
    if rank == 0 {
        let _ = writeln!(text, "{OUTPUT}[] = {body}");
    } else {
        let loops: Vec<String> = indices.iter().rev().map(|i| format!("{i} = _")).collect();
        let _ = writeln!(text, "for {}", loops.join(", "));
        let _ = writeln!(text, "  {OUTPUT}[{}] = {body}", indices.join(", "));
        let _ = writeln!(text, "end");
    }
    Ok(text)
}

/// The text of an expression, with the explicit-fill guards of `rules::fill_guard`.
fn print_expr(
    e: &Expr,
    operands: &[ProgramOperand<'_>],
    fills: &[Value],
    out_shape: &[usize],
) -> Result<String> {
    match e {
        Expr::Literal(v) => Ok(literal(v)),
        Expr::Operand(k) => {
            let op = operands.get(*k).ok_or_else(|| {
                Error::Program(format!("internal: the expression reads operand {k}"))
            })?;
            Ok(read(op, out_shape))
        }
        Expr::Call(op, args) => {
            let texts = args
                .iter()
                .map(|a| print_expr(a, operands, fills, out_shape))
                .collect::<Result<Vec<_>>>()?;
            let call = call_text(*op, &texts);
            let mut guarded = call;
            for (k, arg) in args.iter().enumerate() {
                let arg_fill = derive(arg, fills)?.fill;
                if let Some(a) = fill_guard(*op, k, &arg_fill) {
                    let a = literal(&a);
                    guarded = format!("ifelse({} == {a}, {a}, {guarded})", texts[k]);
                }
            }
            Ok(guarded)
        }
    }
}

/// A literal, parenthesized when negative so that it reads as one operand anywhere.
fn literal(v: &Value) -> String {
    let text = v.to_string();
    if text.starts_with('-') {
        format!("({text})")
    } else {
        text
    }
}

/// A read of an operand at the result's coordinate: trailing modes aligned, a mode of
/// size 1 against a larger result read at index 1.
fn read(op: &ProgramOperand<'_>, out_shape: &[usize]) -> String {
    let shape = op.tensor.shape();
    let offset = out_shape.len() - shape.len();
    let idx: Vec<String> = shape
        .iter()
        .enumerate()
        .map(|(j, &n)| {
            if n == 1 && out_shape[offset + j] != 1 {
                "1".to_string()
            } else {
                format!("i{}", offset + j + 1)
            }
        })
        .collect();
    format!("{}[{}]", op.name, idx.join(", "))
}

/// An operator applied to argument texts, in its written form.
fn call_text(op: Op, args: &[String]) -> String {
    use crate::algebra::Fixity;
    match (op.fixity(), args) {
        (Fixity::Infix(_), [a, b]) => format!("({a} {} {b})", op.symbol()),
        (Fixity::Prefix, [a]) => format!("({}{a})", op.symbol()),
        _ => format!("{op}({})", args.join(", ")),
    }
}

/// Whether compiled programs run as generated C (the default) or in the interpreter.
static USE_INTERPRETER: AtomicBool = AtomicBool::new(false);
static COMPILES: AtomicUsize = AtomicUsize::new(0);
static HITS: AtomicUsize = AtomicUsize::new(0);

/// How many compiled programs the cache keeps, the most recently used: one per distinct
/// operation (operator, operand types, formats and fills), so a session rarely reaches
/// it; past it, the least recently used goes (and its kernel is unloaded once nothing
/// else holds it), so that a process running ever new operations keeps its memory
/// bounded.
const CACHED_PROGRAMS: usize = 512;

/// The compiled programs by engine (interpreter or not) and text.
type Programs = crate::recent::Recent<(bool, String), Arc<CompiledProgram>>;

type Cache = Mutex<Programs>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Programs::new(CACHED_PROGRAMS)))
}

/// Chooses the engine the array layer compiles its programs for (process-wide; the
/// default is [`Engine::C`], which falls back to the interpreter without a C compiler).
pub fn set_engine(engine: Engine) {
    USE_INTERPRETER.store(engine == Engine::Interp, Ordering::Relaxed);
}

/// The engine the array layer compiles its programs for.
pub fn engine() -> Engine {
    if USE_INTERPRETER.load(Ordering::Relaxed) {
        Engine::Interp
    } else {
        Engine::C
    }
}

/// Counts of the in-memory program cache of the array layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Programs compiled (cache misses) since the process started.
    pub compiles: usize,
    /// Calls that found their compiled program in the cache.
    pub hits: usize,
    /// Programs held now.
    pub entries: usize,
}

/// The cache's counts.
pub fn cache_stats() -> CacheStats {
    CacheStats {
        compiles: COMPILES.load(Ordering::Relaxed),
        hits: HITS.load(Ordering::Relaxed),
        entries: cache().lock().map_or(0, |c| c.len()),
    }
}

/// Empties the in-memory program cache (the counts keep counting).
pub fn clear_cache() {
    if let Ok(mut c) = cache().lock() {
        c.clear();
    }
}

/// The compiled program of `text`, from the cache or compiled now.
fn compiled(text: &str) -> Result<Arc<CompiledProgram>> {
    let key = (USE_INTERPRETER.load(Ordering::Relaxed), text.to_string());
    if let Some(p) = cache().lock().ok().and_then(|mut c| c.get(&key).cloned()) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(p);
    }
    let program = Program::parse(text).map_err(|e| internal(text, e))?;
    let compiled = Arc::new(program.compile(engine())?);
    COMPILES.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut c) = cache().lock() {
        c.insert(key, Arc::clone(&compiled));
    }
    Ok(compiled)
}

fn internal(text: &str, e: Error) -> Error {
    Error::Program(format!(
        "internal: the array layer wrote a program the parser refuses ({e}):\n{text}"
    ))
}

/// Compiles (or fetches) `text` and runs it on the operands; returns the output.
pub(crate) fn run(text: &str, operands: &[ProgramOperand<'_>]) -> Result<Tensor> {
    let program = compiled(text)?;
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    for op in operands {
        // The engine takes its inputs by value; an operand is copied in once.
        if op.tensor.ndims() > 0 && !tensors.contains_key(&op.name) {
            tensors.insert(op.name.clone(), op.tensor.clone());
        }
    }
    program.run(&mut tensors, &HashMap::new())?;
    tensors.remove(OUTPUT).ok_or_else(|| {
        Error::Program(format!(
            "internal: the program did not produce `{OUTPUT}`:\n{text}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache keeps the most recently used programs up to its bound.
    #[test]
    fn the_program_cache_keeps_the_recently_used_up_to_its_bound() {
        let text = "input x :: Dense(Element(0.0))\noutput y :: Dense(Element(0.0))\ny .= 0\nfor i = _\n  y[i] = x[i]\nend\n";
        let program = Arc::new(
            Program::parse(text)
                .and_then(|p| p.compile(Engine::Interp))
                .expect("a program of one copy compiles"),
        );
        let key = |n: usize| (true, format!("program {n}"));
        let mut cache = Programs::new(CACHED_PROGRAMS);
        for n in 0..CACHED_PROGRAMS {
            cache.insert(key(n), Arc::clone(&program));
        }
        // Using the first keeps it: the second is now the least recently used.
        assert!(cache.get(&key(0)).is_some());
        cache.insert(key(CACHED_PROGRAMS), Arc::clone(&program));
        assert_eq!(cache.len(), CACHED_PROGRAMS);
        assert!(cache.get(&key(1)).is_none());
        assert!(cache.get(&key(0)).is_some());
        assert!(cache.get(&key(CACHED_PROGRAMS)).is_some());
    }
}
