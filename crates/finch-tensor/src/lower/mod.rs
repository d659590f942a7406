//! The recursive lowerer (Finch paper §5.6): outermost loop first, every access whose last
//! index is the loop index is unfurled into a looplet nest, and the looplet style of
//! highest priority decides the rule (finch-looplets.md §3):
//!
//! `Thunk > Run > Spike > Sequence > Stepper > Lookup`, then a loop with no looplets
//! (plain `for`, or collapsed by run integration when its body does not use the index).
//!
//! Each rule is a method in a file named after its looplet (`thunk`, `run`, `spike`,
//! `sequence`, `stepper`, `jumper`, `switch`, `lookup`), emits kernel IR and smaller
//! loops, which are lowered recursively; the simplifier runs after every step. Around the
//! rules: `concordize` (reads out of loop order), `shifted` (reads that may fall outside
//! their tensor), `masks`, `scalar_replace`, `writes` (output writes) and `exprs`
//! (expression translation); `convert` builds the lowering IR, `unfurl` a level's
//! looplets, `fission` and `hash` the rest.

mod bounds;
mod concordize;
mod convert;
mod exprs;
mod fission;
mod jumper;
pub(crate) mod kit;
mod lifecycle;
mod lookup;
mod masks;
mod print;
mod run;
mod scalar_replace;
mod sequence;
mod shifted;
mod spike;
mod stepper;
mod switch;
mod thunk;
mod unfurl;
mod writes;

pub(crate) use convert::LeafParams;
pub use convert::{
    convert, Bound, Converted, LevelParams, OutArray, RangeCheck, Read, Size, TensorInfo,
    WindowCheck, Written,
};
pub use print::print_converted;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use self::{concordize::*, sequence::*, shifted::*, stepper::*, writes::*};
use crate::algebra::{promote, Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::kernel::{op_type, KExpr, KStmt, Kernel, LocalId};
use crate::looplets::{truncate_before_stop, Expr, Looplet, Stepper, Stmt, Tensor};
use crate::simplify::{is_empty, simplify_expr, simplify_stmt, type_of, Typer};

/// A lowered program: the kernel and what the run time needs to bind tensors to it.
pub struct Lowered {
    /// The kernel.
    pub kernel: Kernel,
    /// Tensors in declaration order with their kernel parameters.
    pub tensors: Vec<TensorInfo>,
    /// Sizes that must be equal when tensors are bound, with the index that ties them.
    pub constraints: Vec<(Size, Size, String)>,
    /// Shapes of outputs, per mode.
    pub output_shapes: HashMap<usize, Vec<Option<Size>>>,
    /// Windows to check inside their modes when tensors are bound.
    pub windows: Vec<WindowCheck>,
    /// Loop ranges to check against the offset reads they run over.
    pub ranges: Vec<RangeCheck>,
    /// Warnings for the user (costly but correct constructs).
    pub warnings: Vec<String>,
}

/// Kernels whose lowering holds more kernel-IR expression nodes than this (500-700 KB of
/// C, 3-10 s of `cc -O3`; the largest example program, Fig. 26's erosion, holds 10 656)
/// are lowered again compactly (`Lowerer::compact`), and the smaller of the two kept.
const COMPACT_PAST: usize = 12_000;

/// How the lowering budget's refusal starts (see [`LOWERING_BUDGET`]).
const PAST_THE_BUDGET: &str = "a kernel this large: lowering passed";

/// Lowers a checked program to a kernel: with every loop specialized for the operands'
/// structure, or, if asked, compactly: every term of a sum in a loop shared with the
/// others. Where the specialized code grows too large (past `COMPACT_PAST` expression
/// nodes or the lowering budget), the smallest of it, of the compact lowering and of the
/// specialized lowering with independent statements in loops of their own
/// (`lower/fission.rs`) is kept.
pub fn lower_program(program: &crate::Program, compact: bool) -> Result<Lowered> {
    lower_program_any_order(program, compact, &HashSet::new())
}

/// [`lower_program`] with the outputs named in `any_order` written as SparseHash groups
/// (or a SparseByteMap vector) and stored in their declared formats when frozen, dropping
/// values equal to the fill: the run time's second attempt at an output whose in-order
/// levels could not take what the program wrote (see `CompiledProgram::run`).
pub fn lower_program_any_order(
    program: &crate::Program,
    compact: bool,
    any_order: &HashSet<String>,
) -> Result<Lowered> {
    if compact {
        return lower_with(program, true, any_order);
    }
    let size = |l: &Lowered| crate::kernel::expr_nodes(&l.kernel.body);
    let specialized = match lower_with(program, false, any_order) {
        Ok(l) if size(&l) <= COMPACT_PAST => return Ok(l),
        Ok(l) => Some(l),
        Err(Error::Unsupported(m)) if m.starts_with(PAST_THE_BUDGET) => None,
        Err(e) => return Err(e),
    };
    // Too large: also with independent statements in loops of their own, and compactly;
    // the smallest is kept (the compact lowering's error if nothing else lowered).
    let split = lower_split(program, any_order).ok().flatten();
    let compacted = lower_with(program, true, any_order);
    // On a tie the first (the specialized kernel) is kept.
    let best = [specialized, split].into_iter().flatten().min_by_key(size);
    match (best, compacted) {
        (Some(b), Ok(c)) if size(&c) < size(&b) => Ok(c),
        (Some(b), _) => Ok(b),
        (None, c) => c,
    }
}

/// Lowers a checked program to a kernel, compactly or not (see `Lowerer::compact`).
fn lower_with(
    program: &crate::Program,
    compact: bool,
    any_order: &HashSet<String>,
) -> Result<Lowered> {
    lower_converted(convert::convert(program, any_order)?, compact)
}

/// Lowers a checked program with its loop nests split into independent statements' nests
/// (see [`fission`]); `None` when no nest splits.
fn lower_split(program: &crate::Program, any_order: &HashSet<String>) -> Result<Option<Lowered>> {
    let mut c = convert::convert(program, any_order)?;
    let Some(body) = fission::split_independent(&c.body) else {
        return Ok(None);
    };
    c.body = body;
    lower_converted(c, false).map(Some)
}

/// Lowers a converted program (its body in lowering IR) to a verified kernel.
fn lower_converted(c: Converted, compact: bool) -> Result<Lowered> {
    let mut l = Lowerer {
        kernel: c.kernel,
        tensors: c.tensors,
        depth: 0,
        nonempty: Vec::new(),
        at_most: Vec::new(),
        lowered: 0,
        compact,
        open_claims: Vec::new(),
    };
    let body = l.lower(c.body)?;
    l.kernel.body = crate::kernel::tidy(body);
    crate::kernel::verify(&l.kernel)?;
    Ok(Lowered {
        kernel: l.kernel,
        tensors: l.tensors,
        constraints: c.constraints,
        output_shapes: c.output_shapes,
        windows: c.windows,
        ranges: c.ranges,
        warnings: c.warnings,
    })
}

/// Looplet styles, lowest priority first (the order is the priority; only here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Style {
    AcceptRun,
    Lookup,
    Stepper,
    Jumper,
    Sequence,
    Spike,
    Run,
    Switch,
    Thunk,
}

fn style_of(l: &Looplet) -> Style {
    match l {
        Looplet::Lookup(_) | Looplet::LookupWrite { .. } => Style::Lookup,
        Looplet::AcceptRun { .. } => Style::AcceptRun,
        Looplet::Stepper(_) => Style::Stepper,
        Looplet::Jumper(_) => Style::Jumper,
        Looplet::Sequence(_) => Style::Sequence,
        Looplet::Spike { .. } => Style::Spike,
        Looplet::Run(_) => Style::Run,
        Looplet::Thunk { .. } => Style::Thunk,
        Looplet::Switch(_) => Style::Switch,
    }
}

/// Code a run-accepting write target runs after a run `lo..=hi`.
type RunEpilogue = Rc<dyn Fn(KExpr, KExpr) -> Vec<KStmt>>;

/// Steppers one loop coiterates with a specialized body for each combination of those
/// whose child ends the step (`2^n` bodies).
const MAX_VARIANT_STEPPERS: usize = 4;

/// Statements lowered for one step of a loop over one stepper (see `rule_stepper`) past
/// which the loop is not also specialized as a counted loop: the counted copy only saves
/// clipping each step to the extent, which a step this large (an inner loop, a body read
/// through several searches) does not notice, while copying it doubles the code of every
/// loop nested in it (on seed 101 of the tester it kept 10 more programs of 2000 under
/// the lowering budget).
const COUNTED_STEP_PAST: usize = 30;

/// Statements one kernel's lowering may produce (about 2-3 MB of C, 20 s of `cc -O3`):
/// past it, the program is refused rather than compiled for minutes. The code grows
/// exponentially with the sparse operands one loop coiterates (the phases of their walks
/// and the children that end each step); the largest example program takes under 1000.
const LOWERING_BUDGET: usize = 6000;

/// A coiterated operand that can be walked to the end of the extent (see
/// `Lowerer::walks_to_the_end`), with its fill.
enum ToTheEnd {
    /// A sorted walk ([`sorted_walk_parts`]): its stepper.
    Walk(Rc<Stepper>),
    /// Entries at the consecutive indices `first..=last`, each `middle` (a SparseBand's
    /// block, a SparseInterval's run, a SparsePoint's entry):
    /// `Sequence(Run(fill), middle, Run(fill))`, the middle a Lookup or a Run.
    Block {
        first: KExpr,
        last: KExpr,
        middle: Looplet,
    },
    /// One of the others shifted and padded with another value (`x[~(i + c)]`:
    /// `Sequence(Run(pad), Thunk(preamble, inner), Run(pad))`), walked to the end as the
    /// inner one where the body reads the pad as it reads the fill.
    Padded {
        inner: Box<ToTheEnd>,
        preamble: Vec<KStmt>,
        pad: Value,
    },
    /// Blocks of consecutive indices, walked by `blocks`, whose chunk is
    /// `Sequence(Phase(stop = before, Run(fill)), middle)` (SparseBlockList, SparseRunList).
    Blocks {
        blocks: Rc<Stepper>,
        before: KExpr,
        middle: Looplet,
    },
}

/// The segment walk of one block (its bounds and fill) and the locals it keeps, for
/// other blocks with the same bounds to share (`Lowerer::walk_to_the_end`).
struct SharedSegments {
    first: KExpr,
    last: KExpr,
    fill: Value,
    inside: LocalId,
    stop: LocalId,
}

/// What [`Lowerer::select_missing_leaves`] made of a statement.
enum Selected {
    /// The statement, its missing leaves read as selects.
    Code(Vec<KStmt>),
    /// Nothing yet: its reads still to be concordized come first.
    Wait,
}

/// A stepper's chunk read through a [`Tensor::Present`] condition, and the local holding
/// the condition (see `Lowerer::present_chunks`); `None` for a stepper branched on.
type PresentChunk = Option<(LocalId, Looplet)>;

/// What to do with one looplet access `A[.., i]` for the loop index `i`.
enum Repl {
    /// Leave it.
    Keep,
    /// Replace the looplet, still indexed by `i`.
    Looplet(Looplet),
    /// The index `i` is consumed: the access becomes `t[..]`.
    Consume(Tensor),
}

/// The lowerer's state.
pub(crate) struct Lowerer {
    pub(crate) kernel: Kernel,
    pub(crate) tensors: Vec<TensorInfo>,
    /// Recursion depth (a guard against runaway rules).
    depth: usize,
    /// Extents `(lo, hi)` known to be non-empty where they are lowered (a stepper's step:
    /// the loop condition gives `lo <= hi` and seeking gives `stop >= lo`).
    nonempty: Vec<(KExpr, KExpr)>,
    /// Facts `a <= b` between locals, from level invariants, for the bounds prover.
    pub(crate) at_most: Vec<(LocalId, LocalId)>,
    /// Statements lowered so far.
    lowered: usize,
    /// Share one loop among every two or more coiterated terms of a sum (levels of
    /// consecutive indices walked segment by segment, leaves read as selects) rather than
    /// specializing loops for up to [`MAX_VARIANT_STEPPERS`] of them: smaller code, a
    /// little slower where few operands are coiterated.
    compact: bool,
    /// The claim flags of the positions written by the statements being lowered for one
    /// index of a written level (see [`Lowerer::lower_claiming`]).
    open_claims: Vec<LocalId>,
}

impl Typer for Lowerer {
    fn code_type(&self, e: &KExpr) -> ScalarType {
        kexpr_type(&self.kernel, e)
    }

    fn tensor_type(&self, t: &Tensor) -> Option<ScalarType> {
        match t {
            Tensor::Fiber(f) => Some(self.tensors[f.tensor].format.element_type()),
            Tensor::Scalar(s) => Some(self.tensors[*s].format.element_type()),
            Tensor::Local(l) => Some(self.kernel.locals[l.0 as usize].ty),
            Tensor::Switch {
                then, otherwise, ..
            } => self
                .tensor_type(then)
                .or_else(|| self.tensor_type(otherwise)),
            Tensor::Present { fiber, .. } => Some(self.tensors[fiber.tensor].format.element_type()),
            Tensor::Null => None,
            Tensor::OutOfRange(t) => Some(self.tensors[*t].format.element_type()),
            Tensor::FillLeaf(v) => v.scalar_type(),
            Tensor::Value(e) => type_of(e, self),
            Tensor::Looplet(l) => match l {
                Looplet::Run(t) => self.tensor_type(t),
                Looplet::Spike { tail, .. } => self.tensor_type(tail),
                Looplet::Lookup(f) | Looplet::LookupWrite { body: f, .. } => {
                    self.tensor_type(&f(KExpr::int(1)))
                }
                Looplet::AcceptRun { body, .. } => {
                    self.tensor_type(&body(KExpr::int(1), KExpr::int(1)))
                }
                // The first phase or case whose type is known: one of `missing` (a
                // permissive read outside its tensor) has none, and the others tell.
                Looplet::Sequence(p) => p
                    .iter()
                    .find_map(|(_, l)| self.tensor_type(&Tensor::Looplet(l.clone()))),
                Looplet::Stepper(s) | Looplet::Jumper(s) => {
                    self.tensor_type(&Tensor::Looplet(s.chunk.clone()))
                }
                Looplet::Thunk { body, .. } => self.tensor_type(&Tensor::Looplet((**body).clone())),
                Looplet::Switch(cases) => cases
                    .iter()
                    .find_map(|(_, l)| self.tensor_type(&Tensor::Looplet(l.clone()))),
            },
        }
    }
}

/// The type of a kernel expression.
pub(crate) fn kexpr_type(k: &Kernel, e: &KExpr) -> ScalarType {
    match e {
        KExpr::Lit(v) => v.scalar_type().unwrap_or(ScalarType::I64),
        KExpr::Local(l) => k.locals[l.0 as usize].ty,
        KExpr::Load(b, _) => k.bufs[b.0 as usize].elem,
        KExpr::Len(_) | KExpr::Search { .. } => ScalarType::I64,
        KExpr::Op(op, args) => {
            let tys: Vec<ScalarType> = args.iter().map(|a| kexpr_type(k, a)).collect();
            op_type(*op, &tys).unwrap_or(ScalarType::I64)
        }
    }
}

// ---- generic traversals of the lowering IR ----

/// Applies `f` to every expression of a statement (pre-order on statements).
fn map_exprs(s: Stmt, f: &mut dyn FnMut(Expr) -> Result<Expr>) -> Result<Stmt> {
    Ok(match s {
        Stmt::Loop {
            index,
            lo,
            hi,
            body,
        } => Stmt::Loop {
            index,
            lo,
            hi,
            body: Box::new(map_exprs(*body, f)?),
        },
        Stmt::Assign { lhs, op, rhs } => {
            // The written access is treated as an expression so that its looplets are
            // transformed like the reads'.
            let target = f(Expr::Access(Box::new(lhs.0), lhs.1))?;
            let Expr::Access(t, idx) = target else {
                return Err(Error::Program(
                    "internal: a write target became a value".into(),
                ));
            };
            Stmt::Assign {
                lhs: (*t, idx),
                op,
                rhs: f(rhs)?,
            }
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => Stmt::Sieve {
            cond: f(cond)?,
            then: Box::new(map_exprs(*then, f)?),
            otherwise: Box::new(map_exprs(*otherwise, f)?),
        },
        Stmt::Define { var, value, body } => Stmt::Define {
            var,
            value: f(value)?,
            body: Box::new(map_exprs(*body, f)?),
        },
        Stmt::Block(v) => Stmt::Block(
            v.into_iter()
                .map(|s| map_exprs(s, f))
                .collect::<Result<_>>()?,
        ),
        Stmt::SetScalar(t, e) => Stmt::SetScalar(t, f(e)?),
        Stmt::SetLocal(l, e) => Stmt::SetLocal(l, f(e)?),
        Stmt::Check(e, code) => Stmt::Check(f(e)?, code),
        Stmt::Reset(t, v) => Stmt::Reset(t, v),
        Stmt::Freeze(t) => Stmt::Freeze(t),
    })
}

/// Applies `f` to every access (innermost first) of an expression tree.
fn map_accesses(e: Expr, f: &mut dyn FnMut(Tensor, Vec<Expr>) -> Result<Expr>) -> Result<Expr> {
    Ok(match e {
        Expr::Access(t, idx) => {
            let idx = idx
                .into_iter()
                .map(|x| map_accesses(x, f))
                .collect::<Result<Vec<_>>>()?;
            let t = match *t {
                Tensor::Value(v) => Tensor::Value(map_accesses(v, f)?),
                other => other,
            };
            f(t, idx)?
        }
        Expr::Call(op, args) => Expr::Call(
            op,
            args.into_iter()
                .map(|x| map_accesses(x, f))
                .collect::<Result<_>>()?,
        ),
        Expr::Permissive(x, guard) => Expr::Permissive(
            Box::new(map_accesses(*x, f)?),
            guard
                .map(|g| map_accesses(*g, f).map(Box::new))
                .transpose()?,
        ),
        other => other,
    })
}

/// Does the expression mention the index (or `let` variable) anywhere?
fn expr_mentions(e: &Expr, index: &str) -> bool {
    match e {
        Expr::Index(i) => i == index,
        Expr::Wrapped { index: i, by, .. } => {
            i == index || by.as_ref().is_some_and(|b| expr_mentions(b, index))
        }
        Expr::Permissive(x, guard) => {
            expr_mentions(x, index) || guard.as_ref().is_some_and(|g| expr_mentions(g, index))
        }
        Expr::Call(_, a) => a.iter().any(|x| expr_mentions(x, index)),
        Expr::Access(t, idx) => {
            idx.iter().any(|x| expr_mentions(x, index))
                || matches!(&**t, Tensor::Value(v) if expr_mentions(v, index))
        }
        _ => false,
    }
}

/// Does the statement mention the index anywhere?
fn mentions(s: &Stmt, index: &str) -> bool {
    match s {
        Stmt::Loop { body, .. } => mentions(body, index),
        Stmt::Assign { lhs, rhs, .. } => {
            lhs.1.iter().any(|x| expr_mentions(x, index)) || expr_mentions(rhs, index)
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => expr_mentions(cond, index) || mentions(then, index) || mentions(otherwise, index),
        Stmt::Define { value, body, .. } => expr_mentions(value, index) || mentions(body, index),
        Stmt::Block(v) => v.iter().any(|s| mentions(s, index)),
        Stmt::SetScalar(_, e) | Stmt::SetLocal(_, e) | Stmt::Check(e, _) => expr_mentions(e, index),
        Stmt::Reset(..) | Stmt::Freeze(_) => false,
    }
}

/// Whether the writes an index's statements make lowered to nothing: the statements
/// `inner` store into no buffer, and the index's epilogue `code` cannot fire after them
/// (it is one `if flag` on a write's claimed flag, which every epilogue clears and
/// `inner` never sets). A write of the fill over a Pattern leaf that may clear an entry
/// stores, so it is not nothing.
fn never_fires(code: &[KStmt], inner: &[KStmt]) -> bool {
    /// Whether `stmts` store into a buffer or assign `flag`.
    fn effects(stmts: &[KStmt], flag: crate::kernel::LocalId) -> bool {
        stmts.iter().any(|s| match s {
            KStmt::Assign(l, _) => *l == flag,
            KStmt::Store { .. } | KStmt::Resize { .. } | KStmt::Sort { .. } => true,
            KStmt::For { body, .. } | KStmt::While { body, .. } => effects(body, flag),
            KStmt::If {
                then, otherwise, ..
            } => effects(then, flag) || effects(otherwise, flag),
            KStmt::Break | KStmt::Fail(_) | KStmt::Hint(_) => false,
        })
    }
    match code {
        [KStmt::If {
            cond: KExpr::Local(flag),
            otherwise,
            ..
        }] => otherwise.is_empty() && !effects(inner, *flag),
        _ => false,
    }
}

/// Replaces the index (or `let` variable) `name` by a kernel value.
fn bind(s: Stmt, name: &str, value: &KExpr) -> Stmt {
    crate::looplets::substitute(s, name, &Expr::Code(value.clone()))
}

impl Lowerer {
    fn fresh(&mut self, name: &str, ty: ScalarType) -> LocalId {
        self.kernel.local(name.to_string(), ty)
    }

    /// A computed index of tensor `t` as an `i64` kernel value (integers of other widths
    /// are converted; anything else is an error naming the tensor).
    fn index_value(&mut self, e: &Expr, t: usize) -> Result<KExpr> {
        let (v, ty) = self.kexpr(e)?;
        if !ty.is_integer() {
            return Err(Error::Program(format!(
                "an index of `{}` has type {ty}; indices are integers",
                self.tensors[t].name
            )));
        }
        Ok(if ty == ScalarType::I64 {
            v
        } else {
            KExpr::Op(Op::Cast(ScalarType::I64), vec![v])
        })
    }

    /// Lowers a statement to kernel IR.
    fn lower(&mut self, s: Stmt) -> Result<Vec<KStmt>> {
        self.lowered += 1;
        if self.lowered > LOWERING_BUDGET {
            return Err(Error::Unsupported(format!(
                "{PAST_THE_BUDGET} {LOWERING_BUDGET} statements (several megabytes of C); coiterating many sparse operands in one loop multiplies the code (split the statement, e.g. `s[] += a[i] + b[i]` and `s[] += c[i] + d[i]` in two loops)"
            )));
        }
        self.depth += 1;
        if self.depth > 200 {
            return Err(Error::Program(
                "internal: the lowering does not terminate".into(),
            ));
        }
        let s = simplify_stmt(s, self);
        // A Dense level, and any level where present with its own fill elsewhere (its
        // fiber read only where present, `unfurl_present`), are shifted where present.
        let takes = |f: &crate::looplets::Fiber, fill: Value| {
            let dense = matches!(
                self.tensors[f.tensor].levels.get(f.depth),
                Some(LevelParams::Dense { .. })
            );
            dense || fill == self.fill_of(f.tensor)
        };
        let s = present_read_shifted(s, &takes)?;
        if let Some(code) = self.resolve_switch(&s)? {
            self.depth -= 1;
            return Ok(code);
        }
        if let Some(code) = self.hoist_bound_reads(&s)? {
            self.depth -= 1;
            return Ok(code);
        }
        if let Some(code) = self.concordize(&s)? {
            self.depth -= 1;
            return Ok(code);
        }
        let r = match s {
            Stmt::Block(v) => {
                let mut out = Vec::new();
                for s in v {
                    out.extend(self.lower(s)?);
                }
                Ok(out)
            }
            Stmt::Loop {
                index,
                lo,
                hi,
                body,
            } => self.lower_loop(&index, lo, hi, *body),
            Stmt::Assign { lhs, op, rhs } => self.emit_assign(lhs, op, rhs),
            Stmt::Sieve { cond, .. } | Stmt::Define { value: cond, .. }
                if out_of_range_read(&cond).is_some() =>
            {
                let t = out_of_range_read(&cond).unwrap_or_default();
                Ok(vec![KStmt::Fail(
                    crate::backend::c::INDEX_OUT_OF_RANGE_BASE + t as i32,
                )])
            }
            Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => {
                let (c, t) = self.kexpr(&cond)?;
                if t != ScalarType::Bool {
                    return Err(Error::Program(format!(
                        "an `if` condition has type {t}, not bool"
                    )));
                }
                Ok(vec![KStmt::If {
                    cond: c,
                    then: self.lower(*then)?,
                    otherwise: self.lower(*otherwise)?,
                }])
            }
            Stmt::Define { var, value, body } => {
                let (v, t) = self.kexpr(&value)?;
                let l = self.fresh(var.trim_start_matches("let:"), t);
                let mut out = vec![KStmt::Assign(l, v)];
                out.extend(self.lower(bind(*body, &var, &KExpr::Local(l)))?);
                Ok(out)
            }
            Stmt::SetLocal(l, e) => {
                let (v, t) = self.kexpr(&e)?;
                let v = match t {
                    ScalarType::I64 => v,
                    t if t.is_integer() => KExpr::Op(Op::Cast(ScalarType::I64), vec![v]),
                    t => {
                        return Err(Error::Program(format!(
                            "a loop extent has type {t}, not an integer"
                        )))
                    }
                };
                Ok(vec![KStmt::Assign(l, v)])
            }
            Stmt::Check(e, code) => {
                let (c, _) = self.kexpr(&e)?;
                Ok(vec![KStmt::If {
                    cond: KExpr::Op(Op::Not, vec![c]),
                    then: vec![KStmt::Fail(code)],
                    otherwise: vec![],
                }])
            }
            Stmt::Freeze(t) => self.lower_freeze(t),
            Stmt::Reset(t, v) => self.lower_reset(t, v),
            Stmt::SetScalar(t, e) => self.lower_set_scalar(t, e),
        };
        self.depth -= 1;
        r
    }

    /// Do `coiterated` walks among a loop's `operands` share one loop (see
    /// [`Self::walks_to_the_end`])? Three or more do; two do where the loop reads more
    /// operands than [`MAX_VARIANT_STEPPERS`] (their subfibers' loops would be copied for
    /// each combination of the two, and each copy is large), or where lowering compactly.
    fn shares_one_loop(&self, coiterated: usize, operands: usize) -> bool {
        coiterated >= 3 || (coiterated == 2 && (self.compact || operands > MAX_VARIANT_STEPPERS))
    }

    /// Does `without` (a body with one operand replaced by its fill), simplified, do nothing
    /// or write only constants? Then that operand is a factor (of a product, or of a write
    /// the fill of a sparse output drops): where it has no entry the step is decided
    /// without the others, and a loop of its own (a branch, a phase) lets that part vanish
    /// or become a constant write. Otherwise it is a term.
    fn fill_decides(&self, without: Stmt) -> bool {
        only_constants(&simplify_stmt(without, self))
    }

    /// Is fiber `f` at its tensor's leaf (Element or Pattern)?
    fn is_leaf(&self, f: &crate::looplets::Fiber) -> bool {
        matches!(
            self.tensors[f.tensor].levels.get(f.depth),
            Some(LevelParams::Element { .. } | LevelParams::Pattern)
        )
    }

    /// Unfurls every fiber indexed last by `index`.
    fn unfurl_all(&mut self, body: Stmt, index: &str) -> Result<Stmt> {
        // The reads whose missing fibers keep their bounds (`absent_fibers_keep_bounds`).
        let mut bounded = Vec::new();
        let _ = map_exprs(body.clone(), &mut |e| {
            reads_out_of_bounds_apart(&e, &|t| self.fill_of(t), &mut bounded);
            Ok(e)
        });
        map_exprs(body, &mut |e| {
            map_accesses(e, &mut |t, mut idx| {
                if let (Tensor::Fiber(f), true) = (&t, last_is(&idx, index)) {
                    let l = self.unfurl(f)?;
                    let l = self.absent_fibers_keep_bounds(f, &idx, &bounded, l);
                    return Ok(Expr::Access(Box::new(Tensor::Looplet(l)), idx));
                }
                if let (Tensor::Present { cond, fiber, fill }, true) = (&t, last_is(&idx, index)) {
                    let l = self.unfurl_present(fiber, cond, *fill)?;
                    let l = self.absent_fibers_keep_bounds(fiber, &idx, &bounded, l);
                    return Ok(Expr::Access(Box::new(Tensor::Looplet(l)), idx));
                }
                // A wrapped index (offset and/or permissive): the level's looplet, shifted to
                // loop coordinates and, if permissive, padded with `missing`.
                // A fiber where present ([`Tensor::Present`]) is shifted where
                // `present_read_shifted` left it (a Dense level, or the tensor's own fill).
                let (f, present) = match &t {
                    Tensor::Fiber(f) => (Some(f), None),
                    Tensor::Present { cond, fiber, fill } => (Some(fiber), Some((cond, *fill))),
                    _ => (None, None),
                };
                if let (
                    Some(f),
                    Some(Expr::Wrapped {
                        index: i,
                        offset,
                        by,
                        permissive,
                        in_bounds,
                    }),
                ) = (f, idx.last())
                {
                    if i == index {
                        let permissive = *permissive;
                        // The whole offset: the constant plus the part computed from the
                        // enclosing loops' indices (bound by now).
                        let by = match by {
                            None => KExpr::int(*offset),
                            Some(e) => {
                                let k = self.index_value(e, f.tensor)?;
                                if *offset == 0 {
                                    k
                                } else {
                                    k + (*offset)
                                }
                            }
                        };
                        let unshifted = match present {
                            None => self.unfurl(f)?,
                            Some((cond, fill)) => self.unfurl_present(f, cond, fill)?,
                        };
                        let unshifted =
                            self.absent_fibers_keep_bounds(f, &idx, &bounded, unshifted);
                        let mut l = crate::looplets::shift_by(&unshifted, &by);
                        if permissive {
                            let size = self.level_size(f)?;
                            l = crate::looplets::pad_missing(l, &by, size);
                        } else if !*in_bounds {
                            let size = self.level_size(f)?;
                            let outside = Tensor::OutOfRange(f.tensor);
                            l = crate::looplets::pad_with(l, &by, size, outside);
                        }
                        if let Some(last) = idx.last_mut() {
                            *last = Expr::Index(index.to_string());
                        }
                        return Ok(Expr::Access(Box::new(Tensor::Looplet(l)), idx));
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        })
    }

    /// The size of the mode a fiber's level indexes (an `i64` kernel expression).
    fn level_size(&self, f: &crate::looplets::Fiber) -> Result<KExpr> {
        let shape = match self.tensors[f.tensor]
            .levels
            .get(f.depth)
            .and_then(LevelParams::shape)
        {
            Some(shape) => shape,
            None => {
                return Err(Error::Program(format!(
                    "internal: `{}` has no level {}",
                    self.tensors[f.tensor].name,
                    f.depth + 1
                )))
            }
        };
        Ok(KExpr::Local(shape))
    }

    /// The styles of the looplets indexed last by `index`.
    fn styles(&self, body: &Stmt, index: &str) -> Vec<Style> {
        let mut out = Vec::new();
        let _ = map_exprs(body.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                if let (Tensor::Looplet(l), true) = (&t, last_is(&idx, index)) {
                    out.push(style_of(l));
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        });
        out
    }

    /// Rewrites the looplet accesses indexed last by `index`; `f` gets each looplet with
    /// its occurrence number.
    /// The looplets indexed by `index` in `body`, in order.
    fn looplets(&self, body: &Stmt, index: &str) -> Result<Vec<Looplet>> {
        let mut found = Vec::new();
        self.rewrite(body.clone(), index, &mut |_, l| {
            found.push(l.clone());
            Repl::Keep
        })?;
        Ok(found)
    }

    /// `body` with the first looplet that `is` accepts replaced by `with`.
    fn replace_first(
        &self,
        body: Stmt,
        index: &str,
        is: fn(&Looplet) -> bool,
        with: &Looplet,
    ) -> Result<Stmt> {
        let mut taken = false;
        self.rewrite(body, index, &mut |_, l| {
            if !taken && is(l) {
                taken = true;
                Repl::Looplet(with.clone())
            } else {
                Repl::Keep
            }
        })
    }

    fn rewrite(
        &self,
        body: Stmt,
        index: &str,
        f: &mut dyn FnMut(usize, &Looplet) -> Repl,
    ) -> Result<Stmt> {
        let mut n = 0;
        map_exprs(body, &mut |e| {
            map_accesses(e, &mut |t, mut idx| {
                if let (Tensor::Looplet(l), true) = (&t, last_is(&idx, index)) {
                    let k = n;
                    n += 1;
                    match f(k, l) {
                        Repl::Keep => {}
                        Repl::Looplet(l) => {
                            return Ok(Expr::Access(Box::new(Tensor::Looplet(l)), idx))
                        }
                        Repl::Consume(t) => {
                            idx.pop();
                            return Ok(Expr::Access(Box::new(t), idx));
                        }
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        })
    }

    fn lower_loop(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        let mut body = body;
        if lo == hi {
            body = self.searched_at_one_index(body, index)?;
        }
        if lo != hi {
            // A position an enclosing loop handed out is written at every iteration.
            crate::looplets::for_each_claim(&mut body, &mut |h| h.repeated = true);
        }
        let body = self.unfurl_all(body, index)?;
        let body = self.masks(body, index)?;
        let body = simplify_stmt(body, self);
        if is_empty(&body) {
            return Ok(vec![]);
        }
        if lo != hi {
            if let Some(code) = self.scalar_replace(index, &lo, &hi, &body)? {
                return Ok(code);
            }
        }
        self.dispatch(index, lo, hi, body)
    }

    /// Is the extent `lo:hi` known to be non-empty here?
    fn is_nonempty(&self, lo: &KExpr, hi: &KExpr) -> bool {
        lo == hi || self.nonempty.iter().any(|(a, b)| a == lo && b == hi)
    }

    /// `code` guarded by `lo <= hi` unless that is known.
    fn guarded(&self, lo: &KExpr, hi: &KExpr, code: Vec<KStmt>) -> Vec<KStmt> {
        if code.is_empty() || self.is_nonempty(lo, hi) {
            code
        } else {
            vec![KStmt::If {
                cond: KExpr::bin(Op::Le, lo.clone(), hi.clone()),
                then: code,
                otherwise: vec![],
            }]
        }
    }

    /// Applies the rule of the highest-priority looplet style in the body.
    fn dispatch(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        match self.styles(&body, index).iter().max() {
            Some(Style::Thunk) => self.rule_thunk(index, lo, hi, body),
            Some(Style::Switch) => self.rule_switch(index, lo, hi, body),
            Some(Style::Run) => self.rule_run(index, lo, hi, body),
            Some(Style::Spike) => self.rule_spike(index, lo, hi, body),
            Some(Style::Sequence) => self.rule_sequence(index, lo, hi, body),
            Some(Style::Jumper) => self.rule_jumper(index, lo, hi, body),
            Some(Style::Stepper) => self.rule_stepper(index, lo, hi, body),
            Some(Style::Lookup) | None => self.rule_lookup(index, lo, hi, body),
            Some(Style::AcceptRun) => self.rule_accept_run(index, lo, hi, body),
        }
    }
}

/// The lowering examples of Looplets §6.1 (typos fixed, finch-looplets.md §4), with
/// hand-built looplets: each checks the loop shape of the kernel and its result.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{interp, BufArg};
    use crate::formats::{Format, ScalarKind};
    use crate::notation::DeclKind;
    use crate::tensor::Buffer;
    use std::rc::Rc;

    /// A lowerer with one f64 scalar output `C` (tensor 0).
    fn lowerer() -> Lowerer {
        let mut kernel = Kernel::new("example");
        let c = kernel.local("C", ScalarType::F64);
        kernel.outputs.push(c);
        Lowerer {
            kernel,
            tensors: vec![TensorInfo {
                name: "C".into(),
                kind: DeclKind::Output,
                format: Format::Scalar(ScalarKind::Scalar, Value::F64(0.0)),
                levels: vec![],
                scalar: Some(c),
                dirty: None,
                written: true,
                init: None,
                frozen_in_kernel: false,
            }],
            depth: 0,
            nonempty: Vec::new(),
            at_most: Vec::new(),
            lowered: 0,
            compact: false,
            open_claims: Vec::new(),
        }
    }

    fn c_plus_eq(rhs: Expr) -> Stmt {
        Stmt::Assign {
            lhs: (Tensor::Scalar(0), vec![]),
            op: Some(Op::Add),
            rhs,
        }
    }

    fn at(l: Looplet) -> Expr {
        Expr::Access(Box::new(Tensor::Looplet(l)), vec![Expr::Index("i".into())])
    }

    fn lit(x: f64) -> Expr {
        Expr::Lit(Value::F64(x))
    }

    /// Lowers `for i = lo:hi: body`, runs it on `bufs`, returns (C, kernel text).
    fn run(mut l: Lowerer, lo: i64, hi: i64, body: Stmt, bufs: &mut [Buffer]) -> (f64, String) {
        let code = l
            .lower(Stmt::Loop {
                index: "i".into(),
                lo: KExpr::int(lo),
                hi: KExpr::int(hi),
                body: Box::new(body),
            })
            .unwrap();
        l.kernel.body = crate::kernel::tidy(code);
        let text = l.kernel.to_string();
        let mut args: Vec<BufArg> = bufs.iter_mut().map(BufArg::Values).collect();
        let (out, _) =
            interp::run(&l.kernel, &mut args, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
        (out[0].as_f64().unwrap(), text)
    }

    #[test]
    fn example_1_lookup() {
        let mut l = lowerer();
        let data = l.kernel.buf("data", ScalarType::F64, false, false);
        let a = Looplet::Lookup(Rc::new(|j| {
            Tensor::Value(Expr::Call(
                Op::Pow,
                vec![Expr::Code(j), Expr::Lit(Value::I64(2))],
            ))
        }));
        let b = Looplet::Lookup(Rc::new(move |j| {
            Tensor::Value(Expr::Code(KExpr::load(data, j - 1)))
        }));
        let body = c_plus_eq(Expr::Call(Op::Mul, vec![lit(2.0), lit(1.0), at(a), at(b)]));
        let (c, text) = run(l, 1, 3, body, &mut [Buffer::F64(vec![1.0, 2.0, 3.0])]);
        assert_eq!(c, 72.0);
        assert_eq!(text.matches("for ").count(), 1, "{text}");
    }

    #[test]
    fn example_2_runs_vanish_or_integrate() {
        let l = lowerer();
        let body = c_plus_eq(Expr::Call(
            Op::Mul,
            vec![
                at(Looplet::Run(Box::new(Tensor::Value(lit(3.0))))),
                at(Looplet::Run(Box::new(Tensor::FillLeaf(Value::F64(0.0))))),
            ],
        ));
        let (c, text) = run(l, 1, 10, body, &mut []);
        assert_eq!(c, 0.0);
        assert!(!text.contains("for ") && !text.contains("v0 ="), "{text}");
        // `for i in 4:10: C += Run(3)[i]` is `C += 7 * 3` with no loop.
        let l = lowerer();
        let (c, text) = run(
            l,
            4,
            10,
            c_plus_eq(at(Looplet::Run(Box::new(Tensor::Value(lit(3.0)))))),
            &mut [],
        );
        assert_eq!(c, 21.0);
        assert!(!text.contains("for "), "{text}");
    }

    #[test]
    fn example_4_switch() {
        // A = Switch(x > 1 -> Run(1), true -> Run(2)), B = Switch(y > 1 -> Run(3),
        // true -> Run(4)); for i in 1:5: C[] += A[i] * B[i]. With x = 2, y = 0: C = 5 * 4.
        let mut l = lowerer();
        let xy = l.kernel.buf("xy", ScalarType::F64, false, false);
        let above = |k: i64| {
            KExpr::bin(
                Op::Gt,
                KExpr::load(xy, KExpr::int(k)),
                KExpr::Lit(Value::F64(1.0)),
            )
        };
        let run_of = |v: f64| Looplet::Run(Box::new(Tensor::Value(lit(v))));
        let switch = |k: i64, a: f64, b: f64| {
            Looplet::Switch(vec![
                (above(k), run_of(a)),
                (KExpr::Lit(Value::Bool(true)), run_of(b)),
            ])
        };
        let body = c_plus_eq(Expr::Call(
            Op::Mul,
            vec![at(switch(0, 1.0, 2.0)), at(switch(1, 3.0, 4.0))],
        ));
        let (c, text) = run(l, 1, 5, body, &mut [Buffer::F64(vec![2.0, 0.0])]);
        assert_eq!(c, 20.0, "{text}");
        // Four branches (the cartesian product), each a run integrated without a loop; each
        // condition tested once on a path.
        assert!(!text.contains("for "), "{text}");
        assert_eq!(text.matches("if (b0[0] > 1.0)").count(), 1, "{text}");
        assert_eq!(text.matches("if (b0[1] > 1.0)").count(), 2, "{text}");
        for product in ["* 3.0", "* 4.0", "* 6.0", "* 8.0"] {
            assert!(text.contains(product), "{product} in {text}");
        }
    }

    #[test]
    fn example_3_spike() {
        let mut l = lowerer();
        let ad = l.kernel.buf("Adata", ScalarType::F64, false, false);
        let bd = l.kernel.buf("Bdata", ScalarType::F64, false, false);
        let spike = |d| Looplet::Spike {
            body: Box::new(Tensor::FillLeaf(Value::F64(0.0))),
            tail: Box::new(Tensor::Value(Expr::Code(KExpr::load(d, KExpr::int(3))))),
        };
        let body = c_plus_eq(Expr::Call(Op::Mul, vec![at(spike(ad)), at(spike(bd))]));
        let (c, text) = run(
            l,
            1,
            4,
            body,
            &mut [
                Buffer::F64(vec![0.0, 0.0, 0.0, 2.0]),
                Buffer::F64(vec![0.0, 0.0, 0.0, 5.0]),
            ],
        );
        assert_eq!(c, 10.0);
        assert!(!text.contains("for ") && !text.contains("while"), "{text}");
    }

    #[test]
    fn example_5_sequence() {
        let l = lowerer();
        let seq = |stop: i64, a: f64, b: f64| {
            Looplet::Sequence(vec![
                (
                    Some(KExpr::int(stop)),
                    Looplet::Run(Box::new(Tensor::Value(lit(a)))),
                ),
                (None, Looplet::Run(Box::new(Tensor::Value(lit(b))))),
            ])
        };
        let body = c_plus_eq(Expr::Call(
            Op::Mul,
            vec![at(seq(4, 1.0, 2.0)), at(seq(6, 3.0, 4.0))],
        ));
        let (c, text) = run(l, 1, 10, body, &mut []);
        assert_eq!(c, 56.0);
        // Every phase body is constant: all four loops are integrated away.
        assert!(!text.contains("for "), "{text}");
    }

    #[test]
    fn example_7_jumpers_gallop() {
        let mut l = lowerer();
        let idx = l.kernel.buf("idx", ScalarType::I64, false, false);
        let val = l.kernel.buf("val", ScalarType::F64, false, false);
        let jdx = l.kernel.buf("jdx", ScalarType::I64, false, false);
        let wal = l.kernel.buf("wal", ScalarType::F64, false, false);
        let mut jumper = |stops, vals, name: &str| {
            let p = l.kernel.local(name, ScalarType::I64);
            Looplet::Jumper(Rc::new(Stepper {
                // Seek: advance while the current child ends before `start`.
                seek: Box::new(move |start| {
                    vec![KStmt::While {
                        cond: KExpr::bin(Op::Lt, KExpr::load(stops, KExpr::Local(p)), start),
                        body: vec![KStmt::Assign(p, KExpr::Local(p) + 1)],
                    }]
                }),
                preamble: vec![],
                stop: KExpr::load(stops, KExpr::Local(p)),
                chunk: Looplet::Run(Box::new(Tensor::Value(Expr::Code(KExpr::load(
                    vals,
                    KExpr::Local(p),
                ))))),
                next: vec![KStmt::Assign(p, KExpr::Local(p) + 1)],
                counted: None,
                outside: None,
            }))
        };
        let a = jumper(idx, val, "p");
        let b = jumper(jdx, wal, "q");
        let body = c_plus_eq(Expr::Call(Op::Mul, vec![at(a), at(b)]));
        let (c, text) = run(
            l,
            1,
            10,
            body,
            &mut [
                Buffer::I64(vec![3, 7, 10]),
                Buffer::F64(vec![1.0, 2.0, 3.0]),
                Buffer::I64(vec![5, 10]),
                Buffer::F64(vec![10.0, 20.0]),
            ],
        );
        assert_eq!(c, 330.0);
        // An outer `while` over leader steps, with demoted steppers walking inside.
        assert!(text.matches("while").count() >= 2, "{text}");
    }

    #[test]
    fn example_6_steppers_coiterate() {
        let mut l = lowerer();
        let idx = l.kernel.buf("idx", ScalarType::I64, false, false);
        let val = l.kernel.buf("val", ScalarType::F64, false, false);
        let jdx = l.kernel.buf("jdx", ScalarType::I64, false, false);
        let wal = l.kernel.buf("wal", ScalarType::F64, false, false);
        let mut stepper = |stops, vals, name: &str| {
            let p = l.kernel.local(name, ScalarType::I64);
            Looplet::Stepper(Rc::new(Stepper {
                seek: Box::new(|_| vec![]),
                preamble: vec![],
                stop: KExpr::load(stops, KExpr::Local(p)),
                chunk: Looplet::Run(Box::new(Tensor::Value(Expr::Code(KExpr::load(
                    vals,
                    KExpr::Local(p),
                ))))),
                next: vec![KStmt::Assign(p, KExpr::Local(p) + 1)],
                counted: None,
                outside: None,
            }))
        };
        let a = stepper(idx, val, "p");
        let b = stepper(jdx, wal, "q");
        let body = c_plus_eq(Expr::Call(Op::Mul, vec![at(a), at(b)]));
        let (c, text) = run(
            l,
            1,
            10,
            body,
            &mut [
                Buffer::I64(vec![3, 7, 10]),
                Buffer::F64(vec![1.0, 2.0, 3.0]),
                Buffer::I64(vec![5, 10]),
                Buffer::F64(vec![10.0, 20.0]),
            ],
        );
        assert_eq!(c, 330.0);
        // One `while` over steps; each step's constant body is integrated (no `for`).
        assert_eq!(
            (text.matches("while").count(), text.matches("for ").count()),
            (1, 0),
            "{text}"
        );
    }
}
