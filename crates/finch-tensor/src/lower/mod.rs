//! The recursive lowerer (Finch paper §5.6): outermost loop first, every access whose last
//! index is the loop index is unfurled into a looplet nest, and the looplet style of
//! highest priority decides the rule (finch-looplets.md §3):
//!
//! `Thunk > Run > Spike > Sequence > Stepper > Lookup`, then a loop with no looplets
//! (plain `for`, or collapsed by run integration when its body does not use the index).
//!
//! Each rule lives in one method (`rule_thunk`, `rule_run`, ...), emits kernel IR and
//! smaller loops, which are lowered recursively; the simplifier runs after every step.

mod bounds;
mod convert;
mod fission;
mod hash;
mod print;
mod unfurl;

pub use convert::{
    convert, Bound, Converted, LevelParams, OutArray, RangeCheck, Size, TensorInfo, WindowCheck,
};
pub use print::print_converted;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

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
/// others. Where the specialized code grows too large (past [`COMPACT_PAST`] expression
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

/// Does `s` write the scalar `k` (an update or a nested declaration)?
fn writes_scalar(s: &Stmt, k: usize) -> bool {
    match s {
        Stmt::Assign { lhs, .. } => matches!(lhs.0, Tensor::Scalar(t) if t == k),
        Stmt::SetScalar(t, _) => *t == k,
        Stmt::Loop { body, .. } | Stmt::Define { body, .. } => writes_scalar(body, k),
        Stmt::Sieve {
            then, otherwise, ..
        } => writes_scalar(then, k) || writes_scalar(otherwise, k),
        Stmt::Block(v) => v.iter().any(|s| writes_scalar(s, k)),
        Stmt::Reset(..) | Stmt::Freeze(_) | Stmt::SetLocal(..) | Stmt::Check(..) => false,
    }
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

/// Does truncating the looplet (a step ending before its stop) change it? Only a Spike
/// (which loses its tail) does; runs, sequences and lookups are self-similar.
fn truncation_changes(l: &Looplet) -> bool {
    match l {
        Looplet::Spike { .. } => true,
        Looplet::Thunk { body, .. } => truncation_changes(body),
        Looplet::Switch(cases) => cases.iter().any(|(_, l)| truncation_changes(l)),
        _ => false,
    }
}

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

/// A stepper's child over a step ending at or before the child's stop, where `ends` holds
/// when it ends at it: a spike keeps its repeated part and ends in its tail only if
/// `ends`, else in the repeated part; a child that truncation leaves as it is stays. `None`
/// for other children.
fn spike_where(l: &Looplet, ends: &KExpr) -> Option<Looplet> {
    match l {
        Looplet::Spike { body, tail } => Some(Looplet::Spike {
            body: body.clone(),
            tail: Box::new(Tensor::Switch {
                pre: vec![],
                cond: ends.clone(),
                then: tail.clone(),
                otherwise: body.clone(),
            }),
        }),
        Looplet::Thunk {
            preamble,
            body,
            epilogue,
        } => Some(Looplet::Thunk {
            preamble: preamble.clone(),
            body: Box::new(spike_where(body, ends)?),
            epilogue: epilogue.clone(),
        }),
        other if !truncation_changes(other) => Some(other.clone()),
        _ => None,
    }
}

/// Does a simplified statement do nothing or write only constants? (See
/// `Lowerer::fill_decides`.)
fn only_constants(s: &Stmt) -> bool {
    match s {
        Stmt::Assign { rhs, .. } => matches!(rhs, Expr::Lit(_)),
        Stmt::Block(v) => v.iter().all(only_constants),
        Stmt::Loop { body, .. } | Stmt::Define { body, .. } => only_constants(body),
        Stmt::Sieve {
            then, otherwise, ..
        } => only_constants(then) && only_constants(otherwise),
        _ => false,
    }
}

/// The stepper and fill of a sorted walk, `Sequence(Phase(Stepper(Spike(fill, ..))),
/// Phase(Run(fill)))` with the stepper counting stored positions; `None` for anything else.
fn sorted_walk_parts(l: &Looplet) -> Option<(Rc<Stepper>, Value)> {
    let Looplet::Sequence(phases) = l else {
        return None;
    };
    let [(Some(_), Looplet::Stepper(s)), (None, Looplet::Run(rest))] = phases.as_slice() else {
        return None;
    };
    let (Looplet::Spike { body, .. }, Tensor::FillLeaf(fill), Some(_)) =
        (&s.chunk, &**rest, &s.counted)
    else {
        return None;
    };
    matches!(&**body, Tensor::FillLeaf(v) if v == fill).then(|| (s.clone(), *fill))
}

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

/// A run of fill and its value.
fn fill_run_of(l: &Looplet) -> Option<Value> {
    match l {
        Looplet::Run(t) => match &**t {
            Tensor::FillLeaf(v) => Some(*v),
            _ => None,
        },
        _ => None,
    }
}

/// A block's middle phase: a Lookup, or a Run of a stored subfiber.
fn is_block_middle(l: &Looplet) -> bool {
    match l {
        Looplet::Lookup(_) => true,
        Looplet::Run(t) => !matches!(**t, Tensor::FillLeaf(_)),
        _ => false,
    }
}

/// A block's middle phase (a Lookup or a Run) where `cond` holds, `fill` where it does not.
fn present_middle(middle: &Looplet, cond: KExpr, fill: Value) -> Looplet {
    let present = move |t: Tensor| unfurl::present_where(t, &cond, fill);
    match middle {
        Looplet::Lookup(f) => {
            let f = f.clone();
            Looplet::Lookup(Rc::new(move |i| present(f(i))))
        }
        Looplet::Run(t) => Looplet::Run(Box::new(present((**t).clone()))),
        other => other.clone(),
    }
}

/// `kind` with a block clipped to end by `end`, the last index of its level: walked to
/// the end of the extent, a padded read is read past its level's last index too, where
/// the padding stood. An empty SparsePoint fiber's entry is the index after the level's
/// last, which a shift by `c` brings into a loop that runs past `n - c`: the walk read
/// the entry of a fiber the level may not have (another fiber's value, or outside the
/// value buffer).
fn block_ending_by(kind: ToTheEnd, end: &KExpr) -> ToTheEnd {
    match kind {
        ToTheEnd::Block {
            first,
            last,
            middle,
        } => ToTheEnd::Block {
            first,
            last: KExpr::Op(Op::Min, vec![last, end.clone()]),
            middle,
        },
        other => other,
    }
}

/// How `l` can be walked to the end of the extent; `None` when it cannot.
fn to_the_end_parts(l: &Looplet) -> Option<(ToTheEnd, Value)> {
    if let Some((s, fill)) = sorted_walk_parts(l) {
        return Some((ToTheEnd::Walk(s), fill));
    }
    let Looplet::Sequence(phases) = l else {
        return None;
    };
    match phases.as_slice() {
        [(Some(before), head), (Some(last), middle), (None, rest)] => {
            let fill = fill_run_of(head)?;
            if fill_run_of(rest) != Some(fill) {
                return None;
            }
            if is_block_middle(middle) {
                // A block padded with `missing` is a permissive read of a Dense level: its
                // `missing` outside reaches a `coalesce` (`Lowerer::coalesce_selects`) or
                // an assignment, which it makes a branch (the simplifier's `lift-missing`).
                let first = KExpr::bin(Op::Add, before.clone(), KExpr::int(1));
                let (last, middle) = (last.clone(), middle.clone());
                let block = ToTheEnd::Block {
                    first,
                    last,
                    middle,
                };
                return Some((block, fill));
            }
            let (preamble, inner) = match middle {
                Looplet::Thunk {
                    preamble,
                    body,
                    epilogue,
                } if epilogue.is_empty() => (preamble.clone(), &**body),
                other => (vec![], other),
            };
            let (inner, inner_fill) = to_the_end_parts(inner)?;
            if matches!(inner, ToTheEnd::Padded { .. }) {
                return None;
            }
            let inner = block_ending_by(inner, last);
            let (inner, pad) = (Box::new(inner), fill);
            Some((
                ToTheEnd::Padded {
                    inner,
                    preamble,
                    pad,
                },
                inner_fill,
            ))
        }
        [(Some(_), Looplet::Stepper(s)), (None, rest)] => {
            let fill = fill_run_of(rest)?;
            let Looplet::Sequence(chunk) = &s.chunk else {
                return None;
            };
            let [(Some(before), head), (None, middle)] = chunk.as_slice() else {
                return None;
            };
            let fits = s.counted.is_some() && fill_run_of(head) == Some(fill);
            (fits && is_block_middle(middle)).then(|| {
                let (before, middle) = (before.clone(), middle.clone());
                let blocks = s.clone();
                (
                    ToTheEnd::Blocks {
                        blocks,
                        before,
                        middle,
                    },
                    fill,
                )
            })
        }
        _ => None,
    }
}

/// Walk `s` (see [`sorted_walk_parts`]) over a whole extent ending at `past - 1`: while
/// entries remain (`counted.more`) it is `s`; after them its stop is `past`, beyond every
/// step, so it contributes the fill of its truncated child.
fn stepper_to_the_end(s: Rc<Stepper>, past: &KExpr) -> Stepper {
    let more = s
        .counted
        .as_ref()
        .map_or(KExpr::Lit(Value::Bool(false)), |c| c.more.clone());
    let only_while = |code: Vec<KStmt>, more: &KExpr| -> Vec<KStmt> {
        if code.is_empty() {
            return code;
        }
        vec![KStmt::If {
            cond: more.clone(),
            then: code,
            otherwise: vec![],
        }]
    };
    let KExpr::Local(stop) = s.stop else {
        let inner = s.clone();
        let seek_more = more.clone();
        return Stepper {
            seek: Box::new(move |start| only_while((inner.seek)(start), &seek_more)),
            preamble: only_while(s.preamble.clone(), &more),
            stop: KExpr::Op(Op::IfElse, vec![more, s.stop.clone(), past.clone()]),
            chunk: s.chunk.clone(),
            next: s.next.clone(),
            counted: None,
            outside: None,
        };
    };
    // A sorted walk's preamble reads its entry's index into the stop local, and only
    // seeking and advancing change the entry: the stop is read there, once per entry
    // rather than once per step, and set past the end when the entries run out.
    let reload = vec![KStmt::If {
        cond: more.clone(),
        then: s.preamble.clone(),
        otherwise: vec![KStmt::Assign(stop, past.clone())],
    }];
    let (inner, after_seek) = (s.clone(), reload.clone());
    Stepper {
        seek: Box::new(move |start| {
            let mut code = only_while((inner.seek)(start), &more);
            code.extend(after_seek.iter().cloned());
            code
        }),
        preamble: vec![],
        stop: s.stop.clone(),
        chunk: s.chunk.clone(),
        next: s.next.iter().cloned().chain(reload).collect(),
        counted: None,
        outside: None,
    }
}

/// Moves stepper `s` to its next child where its current one ends at the step's end `st`.
fn advance_where_ended(s: &Stepper, st: &KExpr) -> KStmt {
    advance_if(s, KExpr::bin(Op::Eq, s.stop.clone(), st.clone()))
}

/// Moves stepper `s` to its next child where `cond` holds.
fn advance_if(s: &Stepper, cond: KExpr) -> KStmt {
    KStmt::If {
        cond,
        then: s.next.clone(),
        otherwise: vec![],
    }
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

/// A [`Tensor::Present`] fiber read at a shifted index becomes a [`Tensor::Switch`] on its
/// condition, which the statement resolves with an `if`: only a loop over the fiber's own
/// level (a concordized read at a bound index among them), or its leaf, takes the
/// condition in. A Dense level, or a level whose fill is the tensor's (`takes`), takes
/// it in when shifted too (`unfurl_all`): only a fill of `missing` (a shifted read of a
/// Dense parent outside it) over a sparse level is branched on.
fn present_read_shifted(
    s: Stmt,
    takes: &dyn Fn(&crate::looplets::Fiber, Value) -> bool,
) -> Result<Stmt> {
    map_exprs(s, &mut |e| {
        map_accesses(e, &mut |t, idx| match t {
            Tensor::Present { cond, fiber, fill }
                if matches!(idx.last(), Some(Expr::Wrapped { .. })) && !takes(&fiber, fill) =>
            {
                Ok(Expr::Access(
                    Box::new(Tensor::Switch {
                        pre: vec![],
                        cond,
                        then: Box::new(Tensor::Fiber(fiber)),
                        otherwise: Box::new(Tensor::FillLeaf(fill)),
                    }),
                    idx,
                ))
            }
            t => Ok(Expr::Access(Box::new(t), idx)),
        })
    })
}

/// A child of a level's looplet with the fiber the level lacks (its fill) replaced by an
/// empty fiber of the level below, which keeps that level's bounds
/// (`Lowerer::absent_fibers_keep_bounds`); also in either branch of a search's hit or
/// miss (`follow`), where the miss is the fill.
fn empty_keeps_bounds(t: Tensor, fill: Value, below: &crate::looplets::Fiber) -> Tensor {
    match t {
        Tensor::FillLeaf(v) if v == fill => Tensor::Present {
            cond: KExpr::Lit(Value::Bool(false)),
            fiber: below.clone(),
            fill: v,
        },
        Tensor::Switch {
            pre,
            cond,
            then,
            otherwise,
        } => Tensor::Switch {
            pre,
            cond,
            then: Box::new(empty_keeps_bounds(*then, fill, below)),
            otherwise: Box::new(empty_keeps_bounds(*otherwise, fill, below)),
        },
        t => t,
    }
}

/// Adds to `out` the reads (tensor, printed indices) of `e` at a shifted index where a
/// read outside the tensor is told apart from its fill: permissive reads other than
/// `coalesce(x[~(..)], fill)`, and unchecked ones (out of range). Only those need a fiber
/// a level lacks to keep its bounds (`Lowerer::absent_fibers_keep_bounds`).
fn reads_out_of_bounds_apart(
    e: &Expr,
    fill_of: &dyn Fn(usize) -> Value,
    out: &mut Vec<(usize, String)>,
) {
    let tensor_of = |t: &Tensor| match t {
        Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } => Some(f.tensor),
        _ => None,
    };
    match e {
        Expr::Call(Op::Coalesce, args) => {
            if let (Some(Expr::Access(t, idx)), [Expr::Lit(pad)]) = (args.first(), &args[1..]) {
                if let Some(k) = tensor_of(t) {
                    // An unchecked read outside stops the kernel whatever the pad.
                    let unchecked = idx.iter().any(|i| may_fall_outside(i) && !is_permissive(i));
                    if *pad != fill_of(k) || unchecked {
                        out.push((k, read_key(idx)));
                    }
                    for i in idx.iter() {
                        reads_out_of_bounds_apart(i, fill_of, out);
                    }
                    return;
                }
            }
            for a in args {
                reads_out_of_bounds_apart(a, fill_of, out);
            }
        }
        Expr::Access(t, idx) => {
            if let Some(k) = tensor_of(t) {
                if idx.iter().any(may_fall_outside) {
                    out.push((k, read_key(idx)));
                }
            }
            for i in idx.iter() {
                reads_out_of_bounds_apart(i, fill_of, out);
            }
        }
        Expr::Call(_, args) => {
            for a in args {
                reads_out_of_bounds_apart(a, fill_of, out);
            }
        }
        Expr::Permissive(x, g) => {
            reads_out_of_bounds_apart(x, fill_of, out);
            if let Some(g) = g {
                reads_out_of_bounds_apart(g, fill_of, out);
            }
        }
        _ => {}
    }
}

/// How [`reads_out_of_bounds_apart`] names a read's indices: printed, with the reads
/// inside them (`I[i]` in `x[~I[i], i]`) as a placeholder, since the lowering unfurls
/// those first and the read must still be found by the name it had before. Two reads
/// named alike both keep their fibers' bounds, which only costs code.
fn read_key(idx: &[Expr]) -> String {
    let erased: Vec<Expr> = idx
        .iter()
        .map(|x| {
            map_accesses(x.clone(), &mut |_, _| Ok(Expr::Index("_read".into())))
                .unwrap_or_else(|_| x.clone())
        })
        .collect();
    format!("{erased:?}")
}

/// Is `i` a shifted index that may fall outside its mode, reading `missing` there
/// (permissive) or stopping the kernel (unchecked)? A permissive computed index counts:
/// a shifted index of an enclosing loop becomes one once that loop binds it.
fn may_fall_outside(i: &Expr) -> bool {
    is_permissive(i)
        || matches!(
            i,
            Expr::Wrapped {
                in_bounds: false,
                ..
            }
        )
}

fn is_permissive(i: &Expr) -> bool {
    matches!(
        i,
        Expr::Wrapped {
            permissive: true,
            ..
        } | Expr::Permissive(..)
    )
}

/// The tensor of the first read of [`Tensor::OutOfRange`] in `e`, if any.
fn out_of_range_read(e: &Expr) -> Option<usize> {
    match e {
        Expr::Access(t, idx) => match &**t {
            Tensor::OutOfRange(k) => Some(*k),
            _ => idx.iter().find_map(out_of_range_read),
        },
        Expr::Call(_, args) => args.iter().find_map(out_of_range_read),
        _ => None,
    }
}

fn last_is(idx: &[Expr], index: &str) -> bool {
    matches!(idx.last(), Some(Expr::Index(i)) if i == index)
}

/// The fiber an access reads at an already-bound index (a value, not a loop index still to
/// be lowered), itself or where present: such a read is concordized at the leaf.
fn bound_access<'a>(t: &'a Tensor, idx: &[Expr]) -> Option<&'a crate::looplets::Fiber> {
    match (t, idx.last()) {
        (Tensor::Fiber(f) | Tensor::Present { fiber: f, .. }, Some(last))
            if !matches!(last, Expr::Index(_) | Expr::Wrapped { .. }) =>
        {
            Some(f)
        }
        _ => None,
    }
}

/// Is the access a read at a bound index (see [`bound_access`]) that never reads
/// `missing`, whose value a local can hold?
fn hoistable(t: &Tensor, idx: &[Expr]) -> bool {
    bound_access(t, idx).is_some()
        && !crate::simplify::may_be_missing(&Expr::Access(Box::new(t.clone()), idx.to_vec()))
}

/// Is `e` a read [`Lowerer::hoist_bound_reads`] moves into a local: a [`hoistable`]
/// access, or a `coalesce` of a read at a bound index that may be `missing` (a
/// permissive one) with defaults that read nothing so, which is never `missing`?
fn hoistable_expr(e: &Expr) -> bool {
    match e {
        Expr::Access(t, idx) => hoistable(t, idx),
        Expr::Call(Op::Coalesce, args) => {
            matches!(args.first(), Some(Expr::Access(t, idx)) if bound_access(t, idx).is_some())
                && args[1..].iter().all(|a| bound_reads(a) == 0)
                && !crate::simplify::may_be_missing(e)
        }
        _ => false,
    }
}

/// Counts the outermost hoistable reads in `e` (see [`hoistable_expr`]).
fn count_hoistable(e: &Expr, n: &mut usize) {
    match e {
        e if hoistable_expr(e) => *n += 1,
        Expr::Access(_, idx) => idx.iter().for_each(|x| count_hoistable(x, n)),
        Expr::Call(_, args) => args.iter().for_each(|x| count_hoistable(x, n)),
        _ => {}
    }
}

/// Does the statement read a level at an already-bound index (to be concordized at the
/// leaf, so not integrable as a whole)?
fn needs_concordizing(s: &Stmt) -> bool {
    let mut found = false;
    let _ = map_exprs(s.clone(), &mut |e| {
        found |= bound_reads(&e) > 0;
        Ok(e)
    });
    found
}

/// The first access in `e` (innermost first) whose last index is a value, with the fiber
/// it reads and that value: the read [`Lowerer::concordize`] takes next.
fn first_bound_read(e: &Expr) -> Option<(crate::looplets::Fiber, Expr)> {
    match e {
        Expr::Access(t, idx) => idx
            .iter()
            .find_map(first_bound_read)
            .or_else(|| bound_access(t, idx).map(|f| (f.clone(), idx[idx.len() - 1].clone()))),
        Expr::Call(_, a) => a.iter().find_map(first_bound_read),
        _ => None,
    }
}

/// The expressions of a statement whose reads [`Lowerer::concordize`] looks at, in the
/// order `map_exprs` visits them (the written access first); `None` for a statement it
/// leaves to the others.
fn concordized_exprs(s: &Stmt) -> Option<Vec<Expr>> {
    Some(match s {
        Stmt::Assign { lhs, rhs, .. } => vec![
            Expr::Access(Box::new(lhs.0.clone()), lhs.1.clone()),
            rhs.clone(),
        ],
        Stmt::Sieve { cond, .. } => vec![cond.clone()],
        Stmt::Define { value, .. } => vec![value.clone()],
        Stmt::SetScalar(_, e) | Stmt::SetLocal(_, e) => vec![e.clone()],
        _ => return None,
    })
}

/// Can the statement's next read at a bound index be concordized now: is its index free
/// of Switches? (`x[p[k]]`, `p` sparse: `p[k]` is a Switch between stored and fill until
/// it is resolved, and only then is `x`'s index a value.)
fn concordizable_now(s: &Stmt) -> bool {
    concordized_exprs(s)
        .and_then(|exprs| exprs.iter().find_map(first_bound_read))
        .is_some_and(|(_, value)| !has_switch(&value))
}

/// Does `e` read a Switch anywhere?
fn has_switch(e: &Expr) -> bool {
    match e {
        Expr::Access(t, idx) => matches!(**t, Tensor::Switch { .. }) || idx.iter().any(has_switch),
        Expr::Call(_, a) => a.iter().any(has_switch),
        Expr::Permissive(x, guard) => has_switch(x) || guard.as_deref().is_some_and(has_switch),
        _ => false,
    }
}

/// The accesses in `e` that read a level at an already-bound index.
fn bound_reads(e: &Expr) -> usize {
    match e {
        Expr::Access(t, idx) => {
            idx.iter().map(bound_reads).sum::<usize>() + usize::from(bound_access(t, idx).is_some())
        }
        Expr::Call(_, a) => a.iter().map(bound_reads).sum(),
        _ => 0,
    }
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
            KStmt::Break | KStmt::Fail(_) => false,
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
            Stmt::Freeze(t) => {
                let ptr = self.tensors[t].levels.iter().find_map(|l| match l {
                    LevelParams::SparseListOut { ptr, .. } => Some(*ptr),
                    _ => None,
                });
                let Some(ptr) = ptr else {
                    return Err(Error::Program("internal: freeze of a non-list".into()));
                };
                // Counts to offsets: ptr[p] += ptr[p - 1].
                let p = self.fresh(&format!("{}_freeze", self.tensors[t].name), ScalarType::I64);
                let at = |e: KExpr| KExpr::load(ptr, e);
                let prev = KExpr::bin(Op::Sub, KExpr::Local(p), KExpr::int(1));
                Ok(vec![KStmt::For {
                    var: p,
                    lo: KExpr::int(1),
                    hi: KExpr::Len(ptr),
                    body: vec![KStmt::Store {
                        buf: ptr,
                        index: KExpr::Local(p),
                        value: KExpr::bin(Op::Add, at(KExpr::Local(p)), at(prev)),
                    }],
                }])
            }
            Stmt::Reset(t, v) => {
                let levels = self.tensors[t].levels.clone();
                // The leaf's values and the reset value in their type (a Pattern leaf has
                // none).
                let leaf = match levels.last() {
                    Some(LevelParams::Element { val, .. }) => {
                        let elem = self.kernel.bufs[val.0 as usize].elem;
                        let v = v.convert_exact(elem).ok_or_else(|| {
                            Error::Program(format!(
                                "`{}` ({elem}) cannot be set to {v}",
                                self.tensors[t].name
                            ))
                        })?;
                        Some((*val, v))
                    }
                    Some(LevelParams::Pattern) => None,
                    _ => {
                        return Err(Error::Program(
                            "internal: reset of a tensor without a leaf".into(),
                        ))
                    }
                };
                let q = self.fresh(&format!("{}_reset", self.tensors[t].name), ScalarType::I64);
                // The first level with storage of its own decides (a SparseHash group under
                // Dense levels is one table over every mode; all-Dense levels reach the
                // leaf).
                let first = levels
                    .iter()
                    .find(|l| !matches!(l, LevelParams::Dense { .. }));
                match (first, leaf) {
                    // A run-length workspace starts over: later writes overwrite its runs.
                    (Some(LevelParams::RunsOut { qos, .. }), _) => {
                        Ok(vec![KStmt::Assign(*qos, KExpr::int(0))])
                    }
                    // A sorted vector workspace starts empty (its one fiber's count is 0
                    // until a write ends): entries are written again from position 0, and
                    // a claim sets each value.
                    (
                        Some(LevelParams::SparseListOut {
                            ptr, qos, dirty, ..
                        }),
                        _,
                    ) => Ok(vec![
                        KStmt::Assign(*qos, KExpr::int(0)),
                        KStmt::Assign(*dirty, KExpr::Lit(Value::Bool(false))),
                        KStmt::Store {
                            buf: *ptr,
                            index: KExpr::int(1),
                            value: KExpr::int(0),
                        },
                    ]),
                    // A hash workspace empties the slots its entries hold.
                    (Some(l @ LevelParams::HashOut { .. }), _) => {
                        let (h, _) = hash::HashTable::of(l)
                            .ok_or_else(|| Error::Program("internal: a SparseHash table".into()))?;
                        Ok(h.reset(q))
                    }
                    // A bytemap workspace resets only the positions it set (TACO's
                    // workspace): the cost follows the previous nonzeros, not the size.
                    (Some(LevelParams::SparseByteMapOut { tbl, srt, nsrt, .. }), leaf) => {
                        let at = KExpr::load(*srt, KExpr::Local(q));
                        let mut body = vec![KStmt::Store {
                            buf: *tbl,
                            index: at.clone(),
                            value: KExpr::Lit(Value::Bool(false)),
                        }];
                        if let Some((val, v)) = leaf {
                            body.push(KStmt::Store {
                                buf: val,
                                index: at,
                                value: KExpr::Lit(v),
                            });
                        }
                        Ok(vec![
                            KStmt::For {
                                var: q,
                                lo: KExpr::int(0),
                                hi: KExpr::Local(*nsrt),
                                body,
                            },
                            KStmt::Assign(*nsrt, KExpr::int(0)),
                        ])
                    }
                    // A dense workspace: every value.
                    (_, Some((val, v))) => Ok(vec![KStmt::For {
                        var: q,
                        lo: KExpr::int(0),
                        hi: KExpr::Len(val),
                        body: vec![KStmt::Store {
                            buf: val,
                            index: KExpr::Local(q),
                            value: KExpr::Lit(v),
                        }],
                    }]),
                    (_, None) => Err(Error::Program(
                        "internal: reset of a non-dense tensor".into(),
                    )),
                }
            }
            Stmt::SetScalar(t, e) => {
                let target = self.tensors[t]
                    .scalar
                    .ok_or_else(|| Error::Program("internal: not a scalar".into()))?;
                let (v, vt) = self.kexpr(&e)?;
                let v = self.convert_for_store(
                    v,
                    vt,
                    self.kernel.locals[target.0 as usize].ty,
                    &self.tensors[t].name.clone(),
                )?;
                let mut code = vec![KStmt::Assign(target, v)];
                // Declaring a SparseScalar clears its written flag.
                if let Some(d) = self.tensors[t].dirty {
                    code.push(KStmt::Assign(d, KExpr::Lit(Value::Bool(false))));
                }
                Ok(code)
            }
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

    /// An assignment reading two or more stored leaves that may be missing (Switches
    /// between a leaf and fill: random access into a sparse level), each a term its fill
    /// does not decide (see [`Self::fill_decides`]): rather than one copy of the statement per
    /// combination of them (`2^n`), every read's `pre` code runs first and the statement
    /// reads each as a [`Tensor::Present`] leaf (`cond ? value : fill`). `None` otherwise.
    fn select_missing_leaves(&mut self, s: &Stmt) -> Result<Option<Selected>> {
        if !matches!(s, Stmt::Assign { .. }) {
            return Ok(None);
        }
        let mut switches = 0;
        // Candidates by their position among the statement's accesses.
        let mut candidates: Vec<(usize, Vec<KStmt>, KExpr, crate::looplets::Fiber, Value)> =
            Vec::new();
        let mut n = 0;
        map_exprs(s.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                if matches!(t, Tensor::Switch { .. }) {
                    switches += 1;
                }
                if let (
                    Tensor::Switch {
                        pre,
                        cond,
                        then,
                        otherwise,
                    },
                    true,
                ) = (&t, idx.is_empty())
                {
                    if let (Tensor::Fiber(f), Tensor::FillLeaf(fill)) = (&**then, &**otherwise) {
                        if self.is_leaf(f) && f.hollow.is_none() && !f.protocols.is_written() {
                            candidates.push((n, pre.clone(), cond.clone(), f.clone(), *fill));
                        }
                    }
                }
                n += 1;
                Ok(Expr::Access(Box::new(t), idx))
            })
        })?;
        if candidates.is_empty() {
            return Ok(None);
        }
        let replace = |s: &Stmt, with: &dyn Fn(usize) -> Option<Tensor>| -> Result<Stmt> {
            let mut n = 0;
            map_exprs(s.clone(), &mut |e| {
                map_accesses(e, &mut |t, idx| {
                    let k = n;
                    n += 1;
                    Ok(Expr::Access(Box::new(with(k).unwrap_or(t)), idx))
                })
            })
        };
        let mut terms = Vec::new();
        for c in &candidates {
            let without = replace(s, &|k| (k == c.0).then_some(Tensor::FillLeaf(c.4)))?;
            if !self.fill_decides(without) {
                terms.push(c);
            }
        }
        // Reads still to be concordized (at an index bound already) become such Switches
        // one at a time: wait for them while every Switch is a term.
        if !terms.is_empty() && terms.len() == switches && concordizable_now(s) {
            return Ok(Some(Selected::Wait));
        }
        if terms.len() < 2 {
            return Ok(None);
        }
        let selected = replace(s, &|k| {
            terms
                .iter()
                .find(|c| c.0 == k)
                .map(|(_, _, cond, fiber, fill)| Tensor::Present {
                    cond: cond.clone(),
                    fiber: fiber.clone(),
                    fill: *fill,
                })
        })?;
        let mut code: Vec<KStmt> = terms.iter().flat_map(|c| c.1.iter().cloned()).collect();
        code.extend(self.lower(selected)?);
        Ok(Some(Selected::Code(code)))
    }

    /// Resolves the first `Switch` tensor read or written by a statement: its `pre` code,
    /// then an `if` with the statement lowered for each choice.
    fn resolve_switch(&mut self, s: &Stmt) -> Result<Option<Vec<KStmt>>> {
        match self.select_missing_leaves(s)? {
            Some(Selected::Code(code)) => return Ok(Some(code)),
            Some(Selected::Wait) => return Ok(None),
            None => {}
        }
        // A SparseScalar's switch on its written flag moves out of any statement that does
        // not write the scalar (so a whole loop specializes); one that does is resolved
        // inside, where the flag is current.
        let leaf = !matches!(
            s,
            Stmt::Loop { .. } | Stmt::Block(_) | Stmt::Sieve { .. } | Stmt::Define { .. }
        );
        let movable = |t: &Tensor| match t {
            Tensor::Switch { then, .. } => match **then {
                Tensor::Scalar(k) if self.tensors[k].dirty.is_some() => {
                    leaf || !writes_scalar(s, k)
                }
                _ => true,
            },
            _ => false,
        };
        let mut found: Option<(Vec<KStmt>, KExpr)> = None;
        let _ = map_exprs(s.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                if let (None, Tensor::Switch { pre, cond, .. }) = (&found, &t) {
                    if movable(&t) {
                        found = Some((pre.clone(), cond.clone()));
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        })?;
        let Some((pre, cond)) = found else {
            return Ok(None);
        };
        // The first switch, and any other on the same condition with nothing to run
        // first (reads of one level where one shifted read is present), take one branch.
        let pick = |take_then: bool| -> Result<Stmt> {
            let mut done = false;
            map_exprs(s.clone(), &mut |e| {
                map_accesses(e, &mut |t, idx| {
                    let same = |t: &Tensor| matches!(t, Tensor::Switch { pre: p, cond: c, .. } if p.is_empty() && *c == cond);
                    if (!done || same(&t)) && movable(&t) {
                        if let Tensor::Switch {
                            then, otherwise, ..
                        } = t
                        {
                            done = true;
                            return Ok(Expr::Access(if take_then { then } else { otherwise }, idx));
                        }
                    }
                    Ok(Expr::Access(Box::new(t), idx))
                })
            })
        };
        let then = pick(true)?;
        let otherwise = pick(false)?;
        let mut code = pre;
        code.push(KStmt::If {
            cond,
            then: self.lower(then)?,
            otherwise: self.lower(otherwise)?,
        });
        Ok(Some(code))
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
                                    KExpr::bin(Op::Add, k, KExpr::int(*offset))
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

    /// A level that may lack the fiber at an index (any but Dense) read where a deeper
    /// index is shifted and permissive or unchecked (`A[~(i + 1), j]` over a sparse list
    /// of columns): a fiber it lacks is an empty fiber of the level below (a
    /// [`Tensor::Present`] that never holds) rather than its fill, so that a read of it
    /// outside its bounds is still `missing`, or out of range, and not the fill. Only the
    /// reads in `bounded` (`reads_out_of_bounds_apart`) need it.
    fn absent_fibers_keep_bounds(
        &self,
        f: &crate::looplets::Fiber,
        idx: &[Expr],
        bounded: &[(usize, String)],
        l: Looplet,
    ) -> Looplet {
        let deeper = &idx[..idx.len().saturating_sub(1)];
        let shifted = deeper.iter().any(may_fall_outside);
        let level = self.tensors[f.tensor].levels.get(f.depth);
        let one_mode = !matches!(
            level,
            Some(LevelParams::Dense { .. } | LevelParams::CooOut { .. })
        );
        // The modes of a SparseCOO level, or of a SparseHash group read back, below its
        // first read a run of entries: none.
        let end = match level {
            Some(
                LevelParams::Coo { mode, modes, .. } | LevelParams::HashOut { mode, modes, .. },
            ) if mode + 1 < *modes => Some(KExpr::int(0)),
            _ => None,
        };
        let read = (f.tensor, read_key(idx));
        let apart = bounded.contains(&read);
        if !shifted || !one_mode || !apart || f.protocols.is_written() {
            return l;
        }
        let fill = self.fill_of(f.tensor);
        let below = crate::looplets::Fiber {
            tensor: f.tensor,
            depth: f.depth + 1,
            pos: KExpr::int(0),
            end,
            hollow: None,
            protocols: f.protocols,
        };
        let empty: Rc<dyn Fn(Tensor) -> Tensor> =
            Rc::new(move |t| empty_keeps_bounds(t, fill, &below));
        crate::looplets::map_children(&l, &empty)
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

    /// The reads of a loop over one index (a concordized read, a spike's tail, a point of
    /// a phase) searched rather than walked: a walk over one index is its seek and its
    /// stepper's two loops, each with a copy of the rest of the statement for every phase
    /// (five to eight copies per read, multiplied across the reads of a level read at one
    /// index twice, `A[i, ~i]`), where a search is one branch on the hit, at the same cost
    /// (the walk's seek is the same binary search). Only reads at the index itself, and
    /// none with a permissive index: those keep their walks, whose padding phases read
    /// `missing` where a `coalesce` takes it (searched, a read of a level below a missing
    /// fiber read its fill where the reference reads `missing`).
    fn searched_at_one_index(&self, body: Stmt, index: &str) -> Result<Stmt> {
        map_exprs(body, &mut |e| {
            map_accesses(e, &mut |mut t, idx| {
                if last_is(&idx, index) && !idx.iter().any(is_permissive) {
                    if let Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } = &mut t {
                        if self.searchable(f) {
                            f.protocols.set_follow(f.depth);
                        }
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        })
    }

    /// Can fiber `f`'s level, read, be searched (`follow`) where it would be walked?
    /// Sorted lists (a SparseList, a SparseCOO mode, a written list or hash table read
    /// back) and structured levels are; Dense levels are looked up anyway.
    fn searchable(&self, f: &crate::looplets::Fiber) -> bool {
        if f.protocols.is_written() || f.depth >= crate::looplets::Protocols::MAX_DEPTH {
            return false;
        }
        matches!(
            self.tensors[f.tensor].levels.get(f.depth),
            Some(
                LevelParams::SparseList { .. }
                    | LevelParams::Structured { .. }
                    | LevelParams::Coo { .. }
                    | LevelParams::SparseListOut { .. }
                    | LevelParams::HashOut { .. }
            )
        )
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

    /// Concordization at the leaf (Finch paper §5.4): an access whose next index was
    /// already bound — an outer loop's index read in the wrong order (`A[i, j]` under
    /// `for i, for j` over a column-major `A`) or a computed index (`x[I[i]]`) — is read
    /// through a loop of one iteration over that value, after a check that it lies in
    /// the tensor: `for k = v:v` unfurls the level at `v` with its own protocol.
    fn concordize(&mut self, s: &Stmt) -> Result<Option<Vec<KStmt>>> {
        let Some(exprs) = concordized_exprs(s) else {
            return Ok(None);
        };
        let Some((fiber, value)) = exprs.iter().find_map(first_bound_read) else {
            return Ok(None);
        };
        // A permissive computed index reads `missing` outside the tensor; its guard, if
        // any, is checked first.
        let (value, permissive, guard) = match value {
            Expr::Permissive(x, guard) => (*x, true, guard),
            v => (v, false, None),
        };
        let v = self.index_value(&value, fiber.tensor)?;
        let k = self.fresh("concordant", ScalarType::I64);
        let name = format!("concordant:{}", k.0);
        // The statement with that access's last index renamed to the new loop's index.
        let target = fiber.clone();
        let mut replaced = false;
        let mut rename = |t: Tensor, mut idx: Vec<Expr>| -> Result<Expr> {
            if !replaced && bound_access(&t, &idx) == Some(&target) {
                if let Some(last) = idx.last_mut() {
                    *last = Expr::Index(name.clone());
                }
                replaced = true;
            }
            Ok(Expr::Access(Box::new(t), idx))
        };
        let body = map_exprs(s.clone(), &mut |e| map_accesses(e, &mut rename))?;
        let size = self.level_size(&fiber)?;
        let outside = KExpr::Op(
            Op::Or,
            vec![
                KExpr::bin(Op::Lt, KExpr::Local(k), KExpr::int(1)),
                KExpr::bin(Op::Gt, KExpr::Local(k), size),
            ],
        );
        let inside = self.lower(Stmt::Loop {
            index: name,
            lo: KExpr::Local(k),
            hi: KExpr::Local(k),
            body: Box::new(body),
        })?;
        let mut code = Vec::new();
        if let Some(g) = guard {
            let (ok, _) = self.kexpr(&g)?;
            code.push(KStmt::If {
                cond: ok,
                then: vec![],
                otherwise: vec![KStmt::Fail(
                    crate::backend::c::OUTSIDE_WINDOW_BASE + fiber.tensor as i32,
                )],
            });
        }
        code.push(KStmt::Assign(k, v));
        let written = match s {
            Stmt::Assign { lhs, .. } => bound_access(&lhs.0, &lhs.1) == Some(&fiber),
            _ => false,
        };
        if permissive && written {
            // Outside the tensor, the statement writes to `Null`, which the simplifier
            // removes: only the check remains.
            let nowhere = match s.clone() {
                Stmt::Assign { lhs, op, rhs } => Stmt::Assign {
                    lhs: (Tensor::Null, lhs.1),
                    op,
                    rhs,
                },
                other => other,
            };
            code.push(KStmt::If {
                cond: outside,
                then: self.lower(nowhere)?,
                otherwise: inside,
            });
        } else if permissive {
            // Outside: the same statement with that read `missing` (a `coalesce` around it
            // gives the padding value).
            let mut gone = false;
            let mut miss = |t: Tensor, idx: Vec<Expr>| -> Result<Expr> {
                if !gone {
                    if let Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } = &t {
                        if *f == fiber && matches!(idx.last(), Some(Expr::Permissive(..))) {
                            gone = true;
                            return Ok(Expr::Lit(crate::algebra::Value::Missing));
                        }
                    }
                }
                Ok(Expr::Access(Box::new(t), idx))
            };
            let padded = map_exprs(s.clone(), &mut |e| map_accesses(e, &mut miss))?;
            code.push(KStmt::If {
                cond: outside,
                then: self.lower(padded)?,
                otherwise: inside,
            });
        } else {
            code.push(KStmt::If {
                cond: outside,
                then: vec![KStmt::Fail(
                    crate::backend::c::INDEX_OUT_OF_RANGE_BASE + fiber.tensor as i32,
                )],
                otherwise: vec![],
            });
            code.extend(inside);
        }
        Ok(Some(code))
    }

    /// Reads at bound indices (random accesses, concordized one at a time) each read into
    /// a local of their own first, where concordizing them in the statement would copy it
    /// for every case of every read (the product of their phases, found or not, walked or
    /// searched, at each level): then the code is their sum. That is where a statement
    /// reads two or more, but the last (which stays, so that a factor's fill still skips
    /// the statement), and every one in the condition of an `if` or the value of a `let`,
    /// whose branches or body would be copied. Reads that may be `missing` (permissive)
    /// stay, as no local holds `missing`, unless a `coalesce` takes them (which moves
    /// with them); so does every read of a statement whose write is itself concordized
    /// (its range check comes first). The reads keep the order in which concordizing would
    /// take them, so the first out of range still stops the kernel. `None` when nothing
    /// moves.
    fn hoist_bound_reads(&mut self, s: &Stmt) -> Result<Option<Vec<KStmt>>> {
        let (keep, rebuild): (usize, &dyn Fn(Stmt, Expr) -> Stmt) = match s {
            Stmt::Assign { lhs, .. } if bound_access(&lhs.0, &lhs.1).is_some() => return Ok(None),
            Stmt::Assign { lhs, .. } if lhs.1.iter().any(|x| bound_reads(x) > 0) => {
                return Ok(None)
            }
            Stmt::Assign { .. } => (1, &|s, e| match s {
                Stmt::Assign { lhs, op, .. } => Stmt::Assign { lhs, op, rhs: e },
                s => s,
            }),
            Stmt::Sieve { .. } => (0, &|s, e| match s {
                Stmt::Sieve {
                    then, otherwise, ..
                } => Stmt::Sieve {
                    cond: e,
                    then,
                    otherwise,
                },
                s => s,
            }),
            Stmt::Define { .. } => (0, &|s, e| match s {
                Stmt::Define { var, body, .. } => Stmt::Define {
                    var,
                    value: e,
                    body,
                },
                s => s,
            }),
            _ => return Ok(None),
        };
        let e = match s {
            Stmt::Assign { rhs: e, .. }
            | Stmt::Sieve { cond: e, .. }
            | Stmt::Define { value: e, .. } => e,
            _ => return Ok(None),
        };
        let mut found = 0;
        count_hoistable(e, &mut found);
        if found <= keep {
            return Ok(None);
        }
        let mut reads = Vec::new();
        let mut take = found - keep;
        let e = self.hoisted(e.clone(), &mut take, &mut reads)?;
        let mut code = Vec::new();
        for (l, read) in reads {
            code.extend(self.lower(Stmt::Assign {
                lhs: (Tensor::Local(l), vec![]),
                op: None,
                rhs: read,
            })?);
        }
        code.extend(self.lower(rebuild(s.clone(), e))?);
        Ok(Some(code))
    }

    /// `e` with its first `take` hoistable reads (see [`hoistable_expr`]) replaced by
    /// fresh locals, pushed to `reads` with the read each takes.
    fn hoisted(
        &mut self,
        e: Expr,
        take: &mut usize,
        reads: &mut Vec<(LocalId, Expr)>,
    ) -> Result<Expr> {
        if hoistable_expr(&e) {
            if *take == 0 {
                return Ok(e);
            }
            *take -= 1;
            let Some(ty) = type_of(&e, self) else {
                return Ok(e);
            };
            let l = self.fresh("read", ty);
            reads.push((l, e));
            return Ok(Expr::Access(Box::new(Tensor::Local(l)), vec![]));
        }
        Ok(match e {
            Expr::Access(t, idx) => {
                let mut out = Vec::new();
                for x in idx {
                    out.push(self.hoisted(x, take, reads)?);
                }
                Expr::Access(t, out)
            }
            Expr::Call(op, args) => {
                let mut out = Vec::new();
                for x in args {
                    out.push(self.hoisted(x, take, reads)?);
                }
                Expr::Call(op, out)
            }
            e => e,
        })
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

    /// Jumper (Looplets §4.7): each step ends at the largest stop among the jumpers (the
    /// leader, clipped to the extent); a jumper whose stop ends the step contributes its
    /// full chunk and advances, the others are walked as Steppers within the step. Every
    /// jumper seeks to the step's start first (another leader may have jumped past it).
    fn rule_jumper(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        let jumpers: Vec<Rc<Stepper>> = self
            .looplets(&body, index)?
            .into_iter()
            .filter_map(|l| match l {
                Looplet::Jumper(s) => Some(s),
                _ => None,
            })
            .collect();
        let i = self.fresh(&format!("{index}_jump_start"), ScalarType::I64);
        let st = self.fresh(&format!("{index}_jump_stop"), ScalarType::I64);
        let mut step = Vec::new();
        if let Some(guard) = self.short_circuit_guard(&body) {
            step.push(KStmt::If {
                cond: guard,
                then: vec![KStmt::Break],
                otherwise: vec![],
            });
        }
        for j in &jumpers {
            step.extend((j.seek)(KExpr::Local(i)));
            step.extend(j.preamble.iter().cloned());
        }
        let leader = KExpr::Op(Op::Max, jumpers.iter().map(|j| j.stop.clone()).collect());
        step.push(KStmt::Assign(
            st,
            KExpr::Op(Op::Min, vec![hi.clone(), leader]),
        ));
        step.extend(self.jumper_variants(
            index,
            &body,
            &jumpers,
            KExpr::Local(i),
            KExpr::Local(st),
            0,
            &mut Vec::new(),
        )?);
        step.push(KStmt::Assign(
            i,
            KExpr::bin(Op::Add, KExpr::Local(st), KExpr::int(1)),
        ));
        Ok(vec![
            KStmt::Assign(i, lo),
            KStmt::While {
                cond: KExpr::bin(Op::Le, KExpr::Local(i), hi),
                body: step,
            },
        ])
    }

    /// The step body for every combination of leading (full chunk) and demoted (walked)
    /// jumpers, as nested `if`s on `stop_k == st`.
    #[allow(clippy::too_many_arguments)]
    fn jumper_variants(
        &mut self,
        index: &str,
        body: &Stmt,
        jumpers: &[Rc<Stepper>],
        lo: KExpr,
        st: KExpr,
        k: usize,
        leads: &mut Vec<bool>,
    ) -> Result<Vec<KStmt>> {
        if k == jumpers.len() {
            let choice = leads.clone();
            let step_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Jumper(s) => {
                    let n = jumpers.iter().position(|x| Rc::ptr_eq(x, s)).unwrap_or(0);
                    Repl::Looplet(if choice[n] {
                        s.chunk.clone()
                    } else {
                        Looplet::Stepper(s.clone())
                    })
                }
                _ => Repl::Keep,
            })?;
            let mut code = self.lower_step(index, step_body, lo, st)?;
            for (j, &lead) in jumpers.iter().zip(leads.iter()) {
                if lead {
                    code.extend(j.next.iter().cloned());
                }
            }
            return Ok(code);
        }
        let cond = KExpr::bin(Op::Eq, jumpers[k].stop.clone(), st.clone());
        leads.push(true);
        let then =
            self.jumper_variants(index, body, jumpers, lo.clone(), st.clone(), k + 1, leads)?;
        leads.pop();
        leads.push(false);
        let otherwise = self.jumper_variants(index, body, jumpers, lo, st, k + 1, leads)?;
        leads.pop();
        Ok(vec![KStmt::If {
            cond,
            then,
            otherwise,
        }])
    }

    /// Scalar replacement: when the body writes an output element whose position does not
    /// depend on the loop (its indices are all consumed) and does not otherwise read that
    /// tensor, the element lives in a local for the loop: loaded before, stored after.
    /// (A reduction `y[i] += ...` inside a loop over `j` then stays in a register.)
    fn scalar_replace(
        &mut self,
        index: &str,
        lo: &KExpr,
        hi: &KExpr,
        body: &Stmt,
    ) -> Result<Option<Vec<KStmt>>> {
        fn leaf_writes(s: &Stmt, out: &mut Vec<crate::looplets::Fiber>) {
            match s {
                // A position a sparse level hands out must be claimed by its own writes,
                // so it is never replaced (marked with an impossible tensor id).
                Stmt::Assign {
                    lhs: (Tensor::Fiber(f), idx),
                    ..
                } if idx.is_empty() => out.push(match f.hollow {
                    None => f.clone(),
                    Some(_) => crate::looplets::Fiber {
                        tensor: usize::MAX,
                        ..f.clone()
                    },
                }),
                Stmt::Loop { body, .. } | Stmt::Define { body, .. } => leaf_writes(body, out),
                Stmt::Sieve {
                    then, otherwise, ..
                } => {
                    leaf_writes(then, out);
                    leaf_writes(otherwise, out);
                }
                Stmt::Block(v) => v.iter().for_each(|s| leaf_writes(s, out)),
                _ => {}
            }
        }
        let mut writes = Vec::new();
        leaf_writes(body, &mut writes);
        let Some(target) = writes.first().cloned() else {
            return Ok(None);
        };
        if target.tensor == usize::MAX || writes.iter().any(|w| w != &target) {
            return Ok(None);
        }
        // The tensor must not be read, nor written through any other access, in the body.
        let mut other_use = false;
        let _ = map_exprs(body.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| {
                match &t {
                    Tensor::Fiber(f)
                        if f.tensor == target.tensor && !(f == &target && idx.is_empty()) =>
                    {
                        other_use = true
                    }
                    // An access at the loop's index (`w[i]` beside `w[j]` in a loop over
                    // `i`) may reach the element, which the local would then overwrite.
                    Tensor::Looplet(l) if l.tensor_id() == Some(target.tensor) => other_use = true,
                    _ => {}
                }
                Ok(Expr::Access(Box::new(t), idx))
            })
        });
        let reads_target = {
            let mut n = 0;
            let _ = map_exprs(body.clone(), &mut |e| {
                map_accesses(e, &mut |t, idx| {
                    if matches!(&t, Tensor::Fiber(f) if f == &target) {
                        n += 1;
                    }
                    Ok(Expr::Access(Box::new(t), idx))
                })
            });
            n
        };
        // Each write counts once as an access in `map_exprs`; any extra is a read.
        if other_use || reads_target != writes.len() {
            return Ok(None);
        }
        let Some(LevelParams::Element { val, .. }) = self.tensors[target.tensor]
            .levels
            .get(target.depth)
            .cloned()
        else {
            return Ok(None);
        };
        let ty = self.kernel.bufs[val.0 as usize].elem;
        let acc = self.fresh(&format!("{}_acc", self.tensors[target.tensor].name), ty);
        let replaced = map_exprs(body.clone(), &mut |e| {
            map_accesses(e, &mut |t, idx| match t {
                Tensor::Fiber(f) if f == target => {
                    Ok(Expr::Access(Box::new(Tensor::Local(acc)), idx))
                }
                other => Ok(Expr::Access(Box::new(other), idx)),
            })
        })?;
        let mut code = vec![KStmt::Assign(acc, KExpr::load(val, target.pos.clone()))];
        code.extend(self.dispatch(index, lo.clone(), hi.clone(), replaced)?);
        code.push(KStmt::Store {
            buf: val,
            index: target.pos,
            value: KExpr::Local(acc),
        });
        Ok(Some(code))
    }

    /// Masks (Finch paper Table 5): a comparison of the loop index with a value that does
    /// not depend on it becomes a Sequence of `true`/`false` runs over the index, so the
    /// loop splits at the boundary and the branch that is false there vanishes. `i <= e`
    /// is UpTri, `i >= e` LoTri, `i == e` Diag; strict and negated forms likewise.
    fn masks(&mut self, body: Stmt, index: &str) -> Result<Stmt> {
        fn rewrite(l: &mut Lowerer, e: Expr, index: &str) -> Result<Expr> {
            let e = match e {
                Expr::Call(op, args) => Expr::Call(
                    op,
                    args.into_iter()
                        .map(|a| rewrite(l, a, index))
                        .collect::<Result<_>>()?,
                ),
                other => return Ok(other),
            };
            let Expr::Call(op, args) = &e else {
                return Ok(e);
            };
            let [a, b] = args.as_slice() else {
                return Ok(e);
            };
            let is_i = |x: &Expr| matches!(x, Expr::Index(n) if n == index);
            // Normalize to `i OP other`.
            let (op, other) = match (is_i(a), is_i(b)) {
                (true, false) => (*op, b),
                (false, true) => match op {
                    Op::Le => (Op::Ge, a),
                    Op::Lt => (Op::Gt, a),
                    Op::Ge => (Op::Le, a),
                    Op::Gt => (Op::Lt, a),
                    Op::Eq | Op::Ne => (*op, a),
                    _ => return Ok(e),
                },
                _ => return Ok(e),
            };
            if !matches!(op, Op::Le | Op::Lt | Op::Ge | Op::Gt | Op::Eq | Op::Ne) || !bound(other) {
                return Ok(e);
            }
            let (k, t) = l.kexpr(other)?;
            if !t.is_integer() {
                return Ok(e);
            }
            let k = if t == ScalarType::I64 {
                k
            } else {
                KExpr::Op(Op::Cast(ScalarType::I64), vec![k])
            };
            let minus1 = KExpr::bin(Op::Sub, k.clone(), KExpr::int(1));
            let run = |v: bool| Looplet::Run(Box::new(Tensor::Value(Expr::Lit(Value::Bool(v)))));
            let phases = match op {
                Op::Le => vec![(Some(k), run(true)), (None, run(false))],
                Op::Lt => vec![(Some(minus1), run(true)), (None, run(false))],
                Op::Ge => vec![(Some(minus1), run(false)), (None, run(true))],
                Op::Gt => vec![(Some(k), run(false)), (None, run(true))],
                Op::Eq => vec![
                    (Some(minus1), run(false)),
                    (Some(k), run(true)),
                    (None, run(false)),
                ],
                _ => vec![
                    (Some(minus1), run(true)),
                    (Some(k), run(false)),
                    (None, run(true)),
                ],
            };
            Ok(Expr::Access(
                Box::new(Tensor::Looplet(Looplet::Sequence(phases))),
                vec![Expr::Index(index.to_string())],
            ))
        }
        /// No unbound index or unlowered access inside.
        fn bound(e: &Expr) -> bool {
            match e {
                Expr::Lit(_) | Expr::Code(_) => true,
                Expr::Call(_, a) => a.iter().all(bound),
                Expr::Index(_) | Expr::Wrapped { .. } | Expr::Permissive(..) | Expr::Access(..) => {
                    false
                }
            }
        }
        map_exprs(body, &mut |e| rewrite(self, e, index))
    }

    /// Thunk: hoist every preamble before the loop, then lower the loop over the bodies.
    fn rule_thunk(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        let mut pre = Vec::new();
        let mut post = Vec::new();
        let body = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Thunk {
                preamble,
                body,
                epilogue,
            } => {
                pre.extend(preamble.iter().cloned());
                post.extend(epilogue.iter().cloned());
                Repl::Looplet((**body).clone())
            }
            _ => Repl::Keep,
        })?;
        pre.extend(self.lower(Stmt::Loop {
            index: index.into(),
            lo,
            hi,
            body: Box::new(body),
        })?);
        pre.extend(post);
        Ok(pre)
    }

    /// Switch (Looplets §6.1 example 4): the loop lowered once per case of the first
    /// Switch, under an `if`/`else` chain of the case conditions in order (other Switches
    /// are handled inside each branch, so the branches cover the cartesian product of the
    /// cases and each condition is tested once on a path).
    fn rule_switch(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        let cases = self
            .looplets(&body, index)?
            .into_iter()
            .find_map(|l| match l {
                Looplet::Switch(c) => Some(c),
                _ => None,
            })
            .ok_or_else(|| Error::Program("internal: no switch".into()))?;
        // Every switch on the same conditions takes the same case (reads that share one
        // segment walk, each where present): one branch for them all, not one nested in
        // another for each.
        let conds: Vec<KExpr> = cases.iter().map(|(c, _)| c.clone()).collect();
        let same = |other: &[(KExpr, Looplet)]| {
            other.len() == conds.len() && other.iter().zip(&conds).all(|((c, _), d)| c == d)
        };
        let mut chain: Vec<KStmt> = Vec::new();
        for (pos, (cond, _)) in cases.iter().enumerate().rev() {
            let case_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Switch(other) if same(other) => Repl::Looplet(other[pos].1.clone()),
                _ => Repl::Keep,
            })?;
            let cond = cond.clone();
            let code = self.lower(Stmt::Loop {
                index: index.into(),
                lo: lo.clone(),
                hi: hi.clone(),
                body: Box::new(case_body),
            })?;
            chain = match cond {
                KExpr::Lit(Value::Bool(true)) => code,
                KExpr::Lit(Value::Bool(false)) => chain,
                cond => vec![KStmt::If {
                    cond,
                    then: code,
                    otherwise: chain,
                }],
            };
        }
        Ok(chain)
    }

    /// Run: every element is the run's body, so the index is consumed.
    fn rule_run(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        let body = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Run(t) => Repl::Consume((**t).clone()),
            _ => Repl::Keep,
        })?;
        self.lower(Stmt::Loop {
            index: index.into(),
            lo,
            hi,
            body: Box::new(body),
        })
    }

    /// Spike: the body over `lo:hi-1`, the tail at `hi` (all spikes end at `hi`).
    fn rule_spike(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        let guard = self.short_circuit_guard(&body);
        let run_part = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::Spike { body, .. } => Repl::Looplet(Looplet::Run(body.clone())),
            _ => Repl::Keep,
        })?;
        let tail_part = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Spike { tail, .. } => Repl::Looplet(Looplet::Run(tail.clone())),
            _ => Repl::Keep,
        })?;
        let before = KExpr::bin(Op::Sub, hi.clone(), KExpr::int(1));
        let mut out = Vec::new();
        let first = self.lower(Stmt::Loop {
            index: index.into(),
            lo: lo.clone(),
            hi: before.clone(),
            body: Box::new(run_part),
        })?;
        out.extend(self.guarded(&lo, &before, first));
        let tail = self.lower(Stmt::Loop {
            index: index.into(),
            lo: hi.clone(),
            hi: hi.clone(),
            body: Box::new(tail_part),
        })?;
        let tail = self.guarded(&lo, &hi, tail);
        unless_short_circuited(&mut out, &guard, tail);
        Ok(out)
    }

    /// Sequence: one loop per phase of the first Sequence, each clipped to the extent and
    /// guarded against being empty; other Sequences are handled inside those loops.
    fn rule_sequence(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let phases = self
            .looplets(&body, index)?
            .into_iter()
            .find_map(|l| match l {
                Looplet::Sequence(p) => Some(p),
                _ => None,
            })
            .ok_or_else(|| Error::Program("internal: no sequence".into()))?;
        if let Some(merged) = self.walks_to_the_end(index, &body, &lo, &hi)? {
            return self.dispatch(index, lo, hi, merged);
        }
        let guard = self.short_circuit_guard(&body);
        let mut out = Vec::new();
        let mut start = lo.clone();
        for (k, (stop, phase)) in phases.iter().enumerate() {
            let end = match stop {
                Some(s) if k + 1 < phases.len() => bounds::fold_min_max(
                    KExpr::Op(Op::Min, vec![hi.clone(), s.clone()]),
                    &self.at_most,
                ),
                _ => hi.clone(),
            };
            let next = bounds::fold_min_max(
                KExpr::Op(
                    Op::Max,
                    vec![lo.clone(), KExpr::bin(Op::Add, end.clone(), KExpr::int(1))],
                ),
                &self.at_most,
            );
            // A phase that ends one index after the previous one (a SparsePoint's stored
            // index) holds at most that index: lowered at it, with no loop.
            let single = k
                .checked_sub(1)
                .and_then(|j| phases[j].0.as_ref())
                .zip(stop.as_ref())
                .filter(|(prev, s)| **prev == KExpr::bin(Op::Sub, (*s).clone(), KExpr::int(1)))
                .filter(|_| k + 1 < phases.len())
                .map(|(_, s)| s.clone());
            // A phase the bounds prover shows empty (its start exceeds its end whatever the
            // sizes) emits nothing: e.g. the padding before index 1 of `A[~(i + 1)]`.
            if single.is_none() && bounds::provably_empty(&start, &end, &self.at_most) {
                start = next;
                continue;
            }
            let is_sequence = |l: &Looplet| matches!(l, Looplet::Sequence(_));
            let phase_body = self.replace_first(body.clone(), index, is_sequence, phase)?;
            if let Some(s) = single {
                let code = self.lower(Stmt::Loop {
                    index: index.into(),
                    lo: s.clone(),
                    hi: s.clone(),
                    body: Box::new(phase_body),
                })?;
                if !code.is_empty() {
                    let inside = KExpr::Op(
                        Op::And,
                        vec![
                            KExpr::bin(Op::Le, lo.clone(), s.clone()),
                            KExpr::bin(Op::Le, s, hi.clone()),
                        ],
                    );
                    let phase_code = vec![KStmt::If {
                        cond: inside,
                        then: code,
                        otherwise: vec![],
                    }];
                    unless_short_circuited(&mut out, &guard, phase_code);
                }
                start = next;
                continue;
            }
            let s_local = self.fresh(&format!("{index}_phase_start"), ScalarType::I64);
            let e_local = self.fresh(&format!("{index}_phase_stop"), ScalarType::I64);
            if let KExpr::Local(x) = end {
                // The phase stop is that local's value (the prover may compare with it).
                self.at_most.extend([(x, e_local), (e_local, x)]);
            }
            // A constant start stays visible to the rules below (a seek to index 1 is free).
            let phase_lo = match &start {
                KExpr::Lit(_) => start.clone(),
                _ => KExpr::Local(s_local),
            };
            let code = self.lower(Stmt::Loop {
                index: index.into(),
                lo: phase_lo,
                hi: KExpr::Local(e_local),
                body: Box::new(phase_body),
            })?;
            // Phases whose body vanished (e.g. a run of fill values) cost nothing; one the
            // prover shows non-empty (a block's indices) needs no test.
            if !code.is_empty() {
                let non_empty = bounds::provably_le(&start, &end, &self.at_most);
                let mut phase_code = vec![
                    KStmt::Assign(s_local, start.clone()),
                    KStmt::Assign(e_local, end),
                ];
                if non_empty {
                    phase_code.extend(code);
                } else {
                    phase_code.push(KStmt::If {
                        cond: KExpr::bin(Op::Le, KExpr::Local(s_local), KExpr::Local(e_local)),
                        then: code,
                        otherwise: vec![],
                    });
                }
                unless_short_circuited(&mut out, &guard, phase_code);
            }
            start = next;
        }
        Ok(out)
    }

    /// Three or more sorted walks coiterated (`Sequence(Phase(stepper), Phase(Run(fill)))`
    /// each): the phases of each walk would split the loop into one loop per combination
    /// of the walks still running (`2^n`). A walk whose fill alone does not make the body
    /// vanish (a term of a sum, not a factor of a product, whose phases do vanish) becomes
    /// one stepper over the whole extent instead, whose stop lies past `hi` once its
    /// entries are exhausted. Levels of consecutive indices (bands, intervals, points,
    /// blocks, sparse runs: [`ToTheEnd`]) are walked to the end too, segment by segment
    /// ([`Self::walk_to_the_end`]), where more than [`MAX_VARIANT_STEPPERS`] operands are
    /// coiterated: their phases would make `3^n` loops (2 MB of C for six bands), but
    /// below that size those loops run 10-25 % faster than the shared one (measured on
    /// sums of three and four bands). `None` when no walk is rewritten.
    fn walks_to_the_end(
        &mut self,
        index: &str,
        body: &Stmt,
        lo: &KExpr,
        hi: &KExpr,
    ) -> Result<Option<Stmt>> {
        let looplets = self.looplets(body, index)?;
        let parts: Vec<Option<(ToTheEnd, Value)>> = looplets.iter().map(to_the_end_parts).collect();
        let blockwise = |kind: &ToTheEnd| match kind {
            ToTheEnd::Padded { inner, .. } => !matches!(**inner, ToTheEnd::Walk(_)),
            other => !matches!(other, ToTheEnd::Walk(_)),
        };
        let walks = parts
            .iter()
            .filter(|p| matches!(p, Some((kind, _)) if !blockwise(kind)))
            .count();
        let blocks = parts
            .iter()
            .filter(|p| matches!(p, Some((kind, _)) if blockwise(kind)))
            .count();
        let steppers = looplets
            .iter()
            .filter(|l| matches!(l, Looplet::Stepper(_)))
            .count();
        let take_blocks = self.compact || walks + blocks + steppers > MAX_VARIANT_STEPPERS;
        let coiterated = walks + steppers + if take_blocks { blocks } else { 0 };
        if !self.shares_one_loop(coiterated, looplets.len()) {
            return Ok(None);
        }
        let mut merged = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            let Some((kind, fill)) = part else {
                continue;
            };
            if !take_blocks && blockwise(kind) {
                continue;
            }
            let without = |v: Value| {
                self.rewrite(body.clone(), index, &mut |n, _| {
                    if n == k {
                        Repl::Consume(Tensor::FillLeaf(v))
                    } else {
                        Repl::Keep
                    }
                })
            };
            let at_fill = without(*fill)?;
            // Walked to the end, a padded walk reads its fill where it read the pad: only
            // where the body does the same with both (`coalesce(x[~(i + c)], 0.0)` over a
            // fill of 0.0). The simplified statements differ at most in what replaced the
            // operand, so their printed forms tell.
            if let ToTheEnd::Padded { pad, .. } = kind {
                let at_pad = without(*pad)?;
                let (a, b) = (
                    simplify_stmt(at_pad, self),
                    simplify_stmt(at_fill.clone(), self),
                );
                if format!("{a:?}") != format!("{b:?}") {
                    continue;
                }
            }
            if !self.fill_decides(at_fill) {
                merged.push(k);
            }
        }
        if merged.is_empty() {
            return Ok(None);
        }
        let past = KExpr::bin(Op::Add, hi.clone(), KExpr::int(1));
        let mut walked = Vec::new();
        let mut shared = Vec::new();
        for (k, part) in parts.into_iter().enumerate() {
            walked.push(match part {
                Some((kind, fill)) if merged.contains(&k) => {
                    let ends = [lo, &past];
                    let (init, s) = self.walk_to_the_end(index, kind, fill, ends, &mut shared);
                    let walk = Looplet::Stepper(Rc::new(s));
                    Some(match init.is_empty() {
                        true => walk,
                        false => Looplet::Thunk {
                            preamble: init,
                            body: Box::new(walk),
                            epilogue: vec![],
                        },
                    })
                }
                _ => None,
            });
        }
        let body = self.rewrite(body.clone(), index, &mut |n, _| match walked.get(n) {
            Some(Some(l)) => Repl::Looplet(l.clone()),
            _ => Repl::Keep,
        })?;
        Ok(Some(body))
    }

    /// `kind` as one stepper over the whole extent (`start` to `past - 1`), with the code
    /// that starts it: a sorted walk as [`stepper_to_the_end`] makes it; levels of
    /// consecutive indices step from segment to segment (the fill before a block, the
    /// block, ...), each child their middle read where the segment is a block and the fill
    /// elsewhere (a [`Tensor::Present`]), so that no child changes when a step ends before
    /// its stop and the coiterating loop needs no branch on it.
    ///
    /// Blocks with the same bounds and fill (reads of one Dense level at one shift, as in
    /// a 2-D stencil) share one segment walk (`shared`): the first walks it, the others
    /// read their middle where its `inside` holds and never advance it themselves.
    fn walk_to_the_end(
        &mut self,
        index: &str,
        kind: ToTheEnd,
        fill: Value,
        [start, past]: [&KExpr; 2],
        shared: &mut Vec<SharedSegments>,
    ) -> (Vec<KStmt>, Stepper) {
        let (first, last, middle, blocks) = match kind {
            ToTheEnd::Walk(s) => return (vec![], stepper_to_the_end(s, past)),
            ToTheEnd::Padded {
                inner, preamble, ..
            } => {
                let (init, s) = self.walk_to_the_end(index, *inner, fill, [start, past], shared);
                return (preamble.into_iter().chain(init).collect(), s);
            }
            ToTheEnd::Block {
                first,
                last,
                middle,
            } => (first, last, middle, None),
            ToTheEnd::Blocks {
                blocks,
                before,
                middle,
            } => {
                let first = KExpr::bin(Op::Add, before, KExpr::int(1));
                (first, blocks.stop.clone(), middle, Some(blocks))
            }
        };
        let same = |x: &&SharedSegments| {
            blocks.is_none() && x.first == first && x.last == last && x.fill == fill
        };
        if let Some(x) = shared.iter().find(same) {
            let (inside, stop) = (x.inside, x.stop);
            let follower = Stepper {
                seek: Box::new(|_| vec![]),
                preamble: vec![],
                stop: KExpr::Local(stop),
                chunk: present_middle(&middle, KExpr::Local(inside), fill),
                next: vec![],
                counted: None,
                outside: Some(crate::looplets::Segments {
                    inside,
                    fill,
                    block: middle,
                }),
            };
            return (vec![], follower);
        }
        let inside = self.fresh(&format!("{index}_in_block"), ScalarType::Bool);
        let stop = self.fresh(&format!("{index}_segment_stop"), ScalarType::I64);
        if blocks.is_none() {
            shared.push(SharedSegments {
                first: first.clone(),
                last: last.clone(),
                fill,
                inside,
                stop,
            });
        }
        let chunk = present_middle(&middle, KExpr::Local(inside), fill);
        let segments = move |seek, next| Stepper {
            seek,
            preamble: vec![],
            stop: KExpr::Local(stop),
            chunk,
            next,
            counted: None,
            outside: Some(crate::looplets::Segments {
                inside,
                fill,
                block: middle,
            }),
        };
        let minus1 = |e: KExpr| KExpr::bin(Op::Sub, e, KExpr::int(1));
        let set = |x: LocalId, e: KExpr| KStmt::Assign(x, e);
        let Some(b) = blocks else {
            // One block: the segment before it, the block, the rest; an empty one skipped.
            let past = past.clone();
            let enter = move |at: KExpr| {
                let (first, last) = (first.clone(), last.clone());
                let ahead = KExpr::bin(Op::Lt, at.clone(), first.clone());
                let within = KExpr::bin(Op::Le, at.clone(), last.clone());
                vec![
                    set(
                        inside,
                        KExpr::Op(
                            Op::And,
                            vec![
                                KExpr::bin(Op::Le, first.clone(), at.clone()),
                                within.clone(),
                            ],
                        ),
                    ),
                    set(
                        stop,
                        KExpr::Op(
                            Op::IfElse,
                            vec![
                                ahead,
                                minus1(first),
                                KExpr::Op(Op::IfElse, vec![within, last, past.clone()]),
                            ],
                        ),
                    ),
                ]
            };
            let next = enter(KExpr::bin(Op::Add, KExpr::Local(stop), KExpr::int(1)));
            let init = enter(KExpr::int(1));
            let seek = move |start: KExpr| match start {
                KExpr::Lit(Value::I64(1)) => vec![],
                start => enter(start),
            };
            return (init, segments(Box::new(seek), next));
        };
        // Blocks: the segment before each block, then the block; past the last, the rest.
        let more = b
            .counted
            .as_ref()
            .map_or(KExpr::Lit(Value::Bool(false)), |c| c.more.clone());
        let (loader, past) = (b.clone(), past.clone());
        let load = move |at: KExpr| {
            let mut then = loader.preamble.clone();
            then.push(set(inside, KExpr::bin(Op::Le, first.clone(), at)));
            then.push(set(
                stop,
                KExpr::Op(
                    Op::IfElse,
                    vec![
                        KExpr::Local(inside),
                        loader.stop.clone(),
                        minus1(first.clone()),
                    ],
                ),
            ));
            vec![KStmt::If {
                cond: more.clone(),
                then,
                otherwise: vec![
                    set(inside, KExpr::Lit(Value::Bool(false))),
                    set(stop, past.clone()),
                ],
            }]
        };
        let mut on = b.next.clone();
        on.extend(load(KExpr::bin(Op::Add, KExpr::Local(stop), KExpr::int(1))));
        let next = vec![KStmt::If {
            cond: KExpr::Local(inside),
            then: on,
            otherwise: vec![
                set(inside, KExpr::Lit(Value::Bool(true))),
                set(stop, b.stop.clone()),
            ],
        }];
        // A shifted walk's blocks may end before the loop's start: seek there first. Seeks
        // only move forward, so not to index 1 when the loop starts before it (a read at
        // `j + 1` runs `j` from 0): the blocks ending before 1 would be skipped.
        let mut init = (b.seek)(start.clone());
        init.extend(load(start.clone()));
        let first_start = start.clone();
        let seek = move |start: KExpr| {
            if start == first_start {
                return vec![];
            }
            let mut code = (b.seek)(start.clone());
            code.extend(load(start));
            code
        };
        (init, segments(Box::new(seek), next))
    }

    /// Stepper: a `while` loop over steps ending at the nearest stop; a stepper whose stop
    /// ends the step contributes its full chunk and advances, the others a truncated one.
    fn rule_stepper(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        let steppers: Vec<std::rc::Rc<Stepper>> = self
            .looplets(&body, index)?
            .into_iter()
            .filter_map(|l| match l {
                Looplet::Stepper(s) => Some(s),
                _ => None,
            })
            .collect();
        let i = self.fresh(&format!("{index}_step_start"), ScalarType::I64);
        let st = self.fresh(&format!("{index}_step_stop"), ScalarType::I64);
        let seek_to = match &lo {
            KExpr::Lit(_) => lo.clone(),
            _ => KExpr::Local(i),
        };
        // From index 1 no stepper seeks into the middle of a child.
        let from_one = matches!(lo, KExpr::Lit(Value::I64(1)));
        let mut out = vec![KStmt::Assign(i, lo)];
        for s in &steppers {
            out.extend((s.seek)(seek_to.clone()));
        }
        // Short-circuit (Finch paper §3.3.3): when the body only reduces into
        // ShortCircuitScalars and all of them hold an annihilator, the rest of the loop
        // cannot change anything: leave it (checked at every step of either loop below).
        let leave: Vec<KStmt> = self
            .short_circuit_guard(&body)
            .map(|guard| KStmt::If {
                cond: guard,
                then: vec![KStmt::Break],
                otherwise: vec![],
            })
            .into_iter()
            .collect();
        let mut step = leave.clone();
        for s in &steppers {
            step.extend(s.preamble.iter().cloned());
        }
        let mut stops = vec![hi.clone()];
        stops.extend(steppers.iter().map(|s| s.stop.clone()));
        step.push(KStmt::Assign(st, KExpr::Op(Op::Min, stops)));
        let (lo_step, st_step) = (KExpr::Local(i), KExpr::Local(st));
        let segments: Vec<(usize, crate::looplets::Segments)> = steppers
            .iter()
            .enumerate()
            .filter_map(|(n, s)| s.outside.clone().map(|x| (n, x)))
            .collect();
        // What one step costs (statements lowered), for the counted loop below.
        let before = self.lowered;
        let all = self.step_code(index, &body, &steppers, lo_step.clone(), st_step.clone())?;
        let step_cost = self.lowered - before;
        if segments.is_empty() {
            step.extend(all);
        } else {
            // A step where every segment walk is outside its blocks reads them as their
            // fill (a gap of a sum's terms does nothing): their steppers only advance.
            let none = self.step_with_segments_as(
                index,
                &body,
                &steppers,
                &segments,
                &|x| Repl::Consume(Tensor::FillLeaf(x.fill)),
                (lo_step.clone(), st_step.clone()),
            )?;
            let holds = |xs: &[&crate::looplets::Segments], op: Op| {
                xs.iter()
                    .map(|x| KExpr::Local(x.inside))
                    .reduce(|a, b| KExpr::Op(op, vec![a, b]))
                    .unwrap_or(KExpr::Lit(Value::Bool(false)))
            };
            let every: Vec<&crate::looplets::Segments> = segments.iter().map(|(_, x)| x).collect();
            let mut some = vec![KStmt::If {
                cond: holds(&every, Op::Or),
                then: all,
                otherwise: none,
            }];
            // Shifted reads of Dense levels (padded with `missing`) are inside their level
            // over most of the extent: there they read it directly, with no select.
            let padded: Vec<(usize, crate::looplets::Segments)> = segments
                .iter()
                .filter(|(_, x)| x.fill.is_missing())
                .cloned()
                .collect();
            if !padded.is_empty() {
                let within = self.step_with_segments_as(
                    index,
                    &body,
                    &steppers,
                    &padded,
                    &|x| Repl::Looplet(x.block.clone()),
                    (lo_step, st_step),
                )?;
                let each: Vec<&crate::looplets::Segments> = padded.iter().map(|(_, x)| x).collect();
                some = vec![KStmt::If {
                    cond: holds(&each, Op::And),
                    then: within,
                    otherwise: some,
                }];
            }
            step.extend(some);
        }
        step.push(KStmt::Assign(
            i,
            KExpr::bin(Op::Add, KExpr::Local(st), KExpr::int(1)),
        ));
        let general = KStmt::While {
            cond: KExpr::bin(Op::Le, KExpr::Local(i), hi.clone()),
            body: step,
        };
        // One stepper over stored positions (Finch's common case: a SparseList walked
        // against dense operands): where the extent reaches its last stop, every remaining
        // step is whole, so the loop counts positions with no per-step clipping.
        if let ([only], true) = (steppers.as_slice(), step_cost <= COUNTED_STEP_PAST) {
            if let Some(counted) = &only.counted {
                let mut fast = leave;
                fast.extend(only.preamble.iter().cloned());
                // The stop may read the stepper's state, which `next` advances: fix it first.
                fast.push(KStmt::Assign(st, only.stop.clone()));
                if let KExpr::Local(x) = only.stop {
                    // In the counted loop the step ends at the child's stop.
                    self.at_most.extend([(x, st), (st, x)]);
                }
                // From index 1 (no seek into a child), and then from one past the previous
                // child's stop, a step starts at or before the child's first stored index.
                if let Some(first) = counted.first.filter(|_| from_one) {
                    self.at_most.push((i, first));
                }
                fast.extend(self.stepper_variants(
                    index,
                    &body,
                    (&steppers, &[None]),
                    KExpr::Local(i),
                    KExpr::Local(st),
                    1,
                    &mut vec![true],
                )?);
                fast.push(KStmt::Assign(
                    i,
                    KExpr::bin(Op::Add, KExpr::Local(st), KExpr::int(1)),
                ));
                let counted_loop = KStmt::While {
                    cond: counted.more.clone(),
                    body: fast,
                };
                // The usual case, a phase ending at the fiber's last index, needs no test.
                if bounds::provably_le(&counted.last, &hi, &self.at_most) {
                    out.push(counted_loop);
                } else {
                    out.push(KStmt::If {
                        cond: KExpr::bin(Op::Le, counted.last.clone(), hi),
                        then: vec![counted_loop],
                        otherwise: vec![general],
                    });
                }
                return Ok(out);
            }
        }
        out.push(general);
        Ok(out)
    }

    /// One step `lo..=st` of coiterated `steppers` where each segment walk of `taken` (a
    /// stepper's position and its [`crate::looplets::Segments`]) is read as `read` makes
    /// it rather than through its chunk: the body lowered with the other steppers, then
    /// the taken ones advanced where their segment ends.
    fn step_with_segments_as(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[Rc<Stepper>],
        taken: &[(usize, crate::looplets::Segments)],
        read: &dyn Fn(&crate::looplets::Segments) -> Repl,
        (lo, st): (KExpr, KExpr),
    ) -> Result<Vec<KStmt>> {
        let taken_at = |n: usize| taken.iter().find(|(m, _)| *m == n).map(|(_, x)| x);
        let body = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::Stepper(x) => match steppers.iter().position(|y| Rc::ptr_eq(x, y)) {
                Some(n) => taken_at(n).map_or(Repl::Keep, read),
                None => Repl::Keep,
            },
            _ => Repl::Keep,
        })?;
        let rest: Vec<Rc<Stepper>> = steppers
            .iter()
            .enumerate()
            .filter(|(n, _)| taken_at(*n).is_none())
            .map(|(_, s)| s.clone())
            .collect();
        let mut code = match rest.is_empty() {
            true => self.lower_step(index, body, lo, st.clone())?,
            false => self.step_code(index, &body, &rest, lo, st.clone())?,
        };
        for (n, _) in taken {
            code.push(advance_where_ended(&steppers[*n], &st));
        }
        Ok(code)
    }

    /// One step `lo..=st` of coiterated `steppers` (a stepper loop's body after the step's
    /// end is found): the body for the combinations of steppers whose child ends there,
    /// or one body branching on each, and the steppers' advances.
    fn step_code(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[Rc<Stepper>],
        lo: KExpr,
        st: KExpr,
    ) -> Result<Vec<KStmt>> {
        let mut code = Vec::new();
        let present = self.present_chunks(index, body, steppers)?;
        for (s, p) in steppers.iter().zip(&present) {
            if let Some((ends, _)) = p {
                code.push(KStmt::Assign(
                    *ends,
                    KExpr::bin(Op::Eq, s.stop.clone(), st.clone()),
                ));
            }
        }
        if steppers.len() > MAX_VARIANT_STEPPERS {
            code.extend(self.stepper_switched(index, body, steppers, &present, lo, st)?);
        } else {
            code.extend(self.stepper_variants(
                index,
                body,
                (steppers, &present),
                lo,
                st,
                0,
                &mut Vec::new(),
            )?);
        }
        Ok(code)
    }

    /// The condition under which every reduction of `body` is into a ShortCircuitScalar
    /// that already holds an annihilator of its operator; `None` when the body does
    /// anything else or an operator has no annihilator test.
    fn short_circuit_guard(&self, body: &Stmt) -> Option<KExpr> {
        fn targets(s: &Stmt, out: &mut Vec<(usize, Op)>) -> bool {
            match s {
                Stmt::Assign {
                    lhs: (Tensor::Scalar(t), _),
                    op: Some(op),
                    ..
                } => {
                    out.push((*t, *op));
                    true
                }
                Stmt::Sieve {
                    then, otherwise, ..
                } => targets(then, out) && targets(otherwise, out),
                Stmt::Define { body, .. } | Stmt::Loop { body, .. } => targets(body, out),
                Stmt::Block(v) => v.iter().all(|s| targets(s, out)),
                _ => false,
            }
        }
        let mut found = Vec::new();
        if !targets(body, &mut found) || found.is_empty() {
            return None;
        }
        let mut conds = Vec::new();
        for (t, op) in found {
            let info = &self.tensors[t];
            if !matches!(info.format, crate::formats::Format::Scalar(k, _) if k.short_circuits()) {
                return None;
            }
            let local = KExpr::Local(info.scalar?);
            let ty = info.format.element_type();
            conds.push(match op {
                Op::Choose(z) => KExpr::bin(Op::Ne, local, KExpr::Lit(z.convert_exact(ty)?)),
                op => KExpr::bin(
                    Op::Eq,
                    local,
                    KExpr::Lit(op.annihilator(ty, crate::algebra::Side::Left)?),
                ),
            });
        }
        conds
            .into_iter()
            .reduce(|a, b| KExpr::Op(Op::And, vec![a, b]))
    }

    /// The step body for every combination of full/truncated steppers, as nested `if`s on
    /// `stop_k == st`; a stepper with a present chunk (see [`Self::present_chunks`]) is not
    /// branched on.
    #[allow(clippy::too_many_arguments)]
    fn stepper_variants(
        &mut self,
        index: &str,
        body: &Stmt,
        (steppers, present): (&[std::rc::Rc<Stepper>], &[PresentChunk]),
        lo: KExpr,
        st: KExpr,
        k: usize,
        full: &mut Vec<bool>,
    ) -> Result<Vec<KStmt>> {
        let present_of = |n: usize| present.get(n).and_then(Option::as_ref);
        if k == steppers.len() {
            let choice = full.clone();
            let step_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Stepper(s) => {
                    let n = steppers
                        .iter()
                        .position(|x| std::rc::Rc::ptr_eq(x, s))
                        .unwrap_or(0);
                    Repl::Looplet(match present_of(n) {
                        Some((_, chunk)) => chunk.clone(),
                        None if choice[n] => s.chunk.clone(),
                        None => truncate_before_stop(&s.chunk),
                    })
                }
                _ => Repl::Keep,
            })?;
            let mut code = self.lower_step(index, step_body, lo, st.clone())?;
            for (n, (s, &f)) in steppers.iter().zip(full.iter()).enumerate() {
                if let Some((ends, _)) = present_of(n) {
                    code.push(advance_if(s, KExpr::Local(*ends)));
                } else if f {
                    code.extend(s.next.iter().cloned());
                } else if !truncation_changes(&s.chunk) {
                    // One body served both cases: advance only where the step ended at
                    // this stepper's stop.
                    code.push(advance_where_ended(s, &st));
                }
            }
            return Ok(code);
        }
        let steppers_present = (steppers, present);
        if present_of(k).is_some() || !truncation_changes(&steppers[k].chunk) {
            // A chunk that truncation leaves as it is (runs, sequences, lookups), or one
            // read through its present condition, needs no branch on whether the step ends
            // at its stop: the body is the same.
            full.push(false);
            let code = self.stepper_variants(index, body, steppers_present, lo, st, k + 1, full);
            full.pop();
            return code;
        }
        let cond = KExpr::bin(Op::Eq, steppers[k].stop.clone(), st.clone());
        full.push(true);
        let then = self.stepper_variants(
            index,
            body,
            steppers_present,
            lo.clone(),
            st.clone(),
            k + 1,
            full,
        )?;
        full.pop();
        full.push(false);
        let otherwise =
            self.stepper_variants(index, body, steppers_present, lo, st, k + 1, full)?;
        full.pop();
        Ok(vec![KStmt::If {
            cond,
            then,
            otherwise,
        }])
    }

    /// One step of more steppers than [`stepper_variants`] specializes for (its variants
    /// double with each): one body, in which a stepper's spike at the step's end is its
    /// tail where its stop ends the step and its repeated part where it does not, chosen
    /// by an `if` at the statements that read it; a stepper advances where its stop ends
    /// the step.
    fn stepper_switched(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[std::rc::Rc<Stepper>],
        present: &[PresentChunk],
        lo: KExpr,
        st: KExpr,
    ) -> Result<Vec<KStmt>> {
        let mut chunks = Vec::new();
        for (s, p) in steppers.iter().zip(present) {
            if let Some((_, chunk)) = p {
                chunks.push(chunk.clone());
                continue;
            }
            let ends = KExpr::bin(Op::Eq, s.stop.clone(), st.clone());
            let chunk = spike_where(&s.chunk, &ends).ok_or_else(|| {
                Error::Unsupported(format!(
                    "coiterating {} sparse operands in one loop where one is not a list of single entries (at most {MAX_VARIANT_STEPPERS} then)",
                    steppers.len()
                ))
            })?;
            chunks.push(chunk);
        }
        let step_body = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::Stepper(s) => match steppers.iter().position(|x| std::rc::Rc::ptr_eq(x, s)) {
                Some(n) => Repl::Looplet(chunks[n].clone()),
                None => Repl::Keep,
            },
            _ => Repl::Keep,
        })?;
        let mut code = self.lower_step(index, step_body, lo, st.clone())?;
        for (s, p) in steppers.iter().zip(present) {
            code.push(match p {
                Some((ends, _)) => advance_if(s, KExpr::Local(*ends)),
                None => advance_where_ended(s, &st),
            });
        }
        Ok(code)
    }

    /// For each coiterated stepper, the chunk that reads its entry at a step's end through
    /// a [`Tensor::Present`] condition (`ends`, a local set to `stop == st` at each step),
    /// so that one body serves the steps that end at its entry and those that do not,
    /// where branching would copy that body (`None`: branch as before). That is a stepper
    /// of three or more whose chunk is a spike from fill to a stored subfiber, unless
    /// its fill alone makes the step do nothing (a factor of a product: there the branch
    /// costs no code and skips the work), and whose subfiber is a level (a loop to copy)
    /// or, past [`MAX_VARIANT_STEPPERS`], also a leaf (a value to select).
    fn present_chunks(
        &mut self,
        index: &str,
        body: &Stmt,
        steppers: &[std::rc::Rc<Stepper>],
    ) -> Result<Vec<PresentChunk>> {
        let mut out = Vec::new();
        let operands = self.looplets(body, index)?.len();
        for s in steppers {
            out.push(None);
            if !self.shares_one_loop(steppers.len(), operands) {
                continue;
            }
            let Looplet::Spike { body: before, tail } = &s.chunk else {
                continue;
            };
            let (Tensor::FillLeaf(fill), Tensor::Fiber(fiber)) = (&**before, &**tail) else {
                continue;
            };
            if fiber.hollow.is_some() || fiber.end.is_some() {
                continue;
            }
            if self.is_leaf(fiber) && !self.compact && steppers.len() <= MAX_VARIANT_STEPPERS {
                continue;
            }
            let without = self.rewrite(body.clone(), index, &mut |_, l| match l {
                Looplet::Stepper(x) if std::rc::Rc::ptr_eq(x, s) => {
                    Repl::Consume(Tensor::FillLeaf(*fill))
                }
                _ => Repl::Keep,
            })?;
            if self.fill_decides(without) {
                continue;
            }
            let ends = self.fresh(&format!("{index}_ends"), ScalarType::Bool);
            let chunk = Looplet::Spike {
                body: before.clone(),
                tail: Box::new(Tensor::Present {
                    cond: KExpr::Local(ends),
                    fiber: fiber.clone(),
                    fill: *fill,
                }),
            };
            if let Some(last) = out.last_mut() {
                *last = Some((ends, chunk));
            }
        }
        Ok(out)
    }

    /// One step `lo..=st` of a stepper or jumper loop, over the children chosen for it.
    fn lower_step(&mut self, index: &str, body: Stmt, lo: KExpr, st: KExpr) -> Result<Vec<KStmt>> {
        // A step is never empty: the loop runs while `lo <= hi` and seeking leaves every
        // stop at or after `lo`.
        self.nonempty.push((lo.clone(), st.clone()));
        let code = self.lower(Stmt::Loop {
            index: index.into(),
            lo,
            hi: st,
            body: Box::new(body),
        });
        self.nonempty.pop();
        code
    }

    /// AcceptRun (Finch's run-accepting writes), once every read is constant over the
    /// extent: when the body only writes AcceptRun targets and does not use the index, the
    /// whole extent is one run, written once; otherwise each index is its own run.
    fn rule_accept_run(
        &mut self,
        index: &str,
        lo: KExpr,
        hi: KExpr,
        body: Stmt,
    ) -> Result<Vec<KStmt>> {
        fn only_run_writes(s: &Stmt) -> bool {
            match s {
                Stmt::Assign { lhs, .. } => {
                    matches!(lhs.0, Tensor::Looplet(Looplet::AcceptRun { .. }))
                }
                Stmt::Sieve {
                    then, otherwise, ..
                } => only_run_writes(then) && only_run_writes(otherwise),
                Stmt::Define { body, .. } => only_run_writes(body),
                Stmt::Block(v) => v.iter().all(only_run_writes),
                _ => false,
            }
        }
        if !only_run_writes(&body) {
            return self.rule_lookup(index, lo, hi, body);
        }
        let mut epilogues: Vec<RunEpilogue> = Vec::new();
        let whole = self.rewrite(body.clone(), index, &mut |_, l| match l {
            Looplet::AcceptRun { body, epilogue } => {
                epilogues.push(epilogue.clone());
                Repl::Consume(body(lo.clone(), hi.clone()))
            }
            _ => Repl::Keep,
        })?;
        if mentions(&whole, index) {
            return self.rule_lookup(index, lo, hi, body);
        }
        let mut code = self.lower_claiming(whole)?;
        if code.is_empty() {
            return Ok(code);
        }
        for e in &epilogues {
            code.extend(e(lo.clone(), hi.clone()));
        }
        Ok(self.guarded(&lo, &hi, code))
    }

    /// Lowers `body`, the statements of one index (or run) of written levels, with the
    /// claim flags of the positions they write open: a write of the same level nested in
    /// them (another statement's, at another index) claims through flags of its own
    /// (`Lowerer::own_claim_state`), or it would take this index's claim for its own.
    fn lower_claiming(&mut self, mut body: Stmt) -> Result<Vec<KStmt>> {
        let open = self.open_claims.len();
        let claims = &mut self.open_claims;
        crate::looplets::for_each_claim(&mut body, &mut |h| claims.push(h.dirty));
        let code = self.lower(body);
        self.open_claims.truncate(open);
        code
    }

    /// Lookup (or no looplet): a plain loop binding the index; a loop of one iteration
    /// binds it without looping; a body that does not use the index is integrated.
    fn rule_lookup(&mut self, index: &str, lo: KExpr, hi: KExpr, body: Stmt) -> Result<Vec<KStmt>> {
        // Per-index epilogues of written lookups run after the index's statements, and only
        // where those statements did something.
        let mut epilogues: Vec<Rc<dyn Fn(KExpr) -> Vec<KStmt>>> = Vec::new();
        if lo == hi {
            let body = self.rewrite(body, index, &mut |_, l| match l {
                Looplet::Lookup(f) => Repl::Consume(f(hi.clone())),
                Looplet::LookupWrite { body, epilogue } => {
                    epilogues.push(epilogue.clone());
                    Repl::Consume(body(hi.clone()))
                }
                Looplet::AcceptRun { body, epilogue } => {
                    let e = epilogue.clone();
                    epilogues.push(Rc::new(move |i: KExpr| e(i.clone(), i)));
                    Repl::Consume(body(hi.clone(), hi.clone()))
                }
                _ => Repl::Keep,
            })?;
            let mut code = self.lower_claiming(bind(body, index, &hi))?;
            if !code.is_empty() {
                for e in &epilogues {
                    code.extend(e(hi.clone()));
                }
            }
            return Ok(code);
        }
        if self.styles(&body, index).is_empty()
            && !mentions(&body, index)
            && !needs_concordizing(&body)
        {
            if let Some(code) = self.integrate(&lo, &hi, &body)? {
                return Ok(code);
            }
        }
        let var = self.fresh(index, ScalarType::I64);
        // Short-circuit (Finch paper §3.3.3), as in steppers: leave once every target holds
        // an annihilator.
        let guard = self.short_circuit_guard(&body);
        let original = body.clone();
        let body = self.rewrite(body, index, &mut |_, l| match l {
            Looplet::Lookup(f) => Repl::Consume(f(KExpr::Local(var))),
            Looplet::LookupWrite { body, epilogue } => {
                epilogues.push(epilogue.clone());
                Repl::Consume(body(KExpr::Local(var)))
            }
            Looplet::AcceptRun { body, epilogue } => {
                let e = epilogue.clone();
                epilogues.push(Rc::new(move |i: KExpr| e(i.clone(), i)));
                Repl::Consume(body(KExpr::Local(var), KExpr::Local(var)))
            }
            _ => Repl::Keep,
        })?;
        let mut inner = self.lower_claiming(bind(body, index, &KExpr::Local(var)))?;
        if inner.is_empty() {
            return Ok(vec![]);
        }
        // Writes that lower to nothing at every index of the range (the fill written where
        // nothing was claimed) leave epilogues that never fire; without those writes the
        // body may not use the index at all and be integrated (a sum over a run of fill
        // beside a sparse output's write of the fill: one addition of n terms, not a loop).
        if !epilogues.is_empty()
            && epilogues
                .iter()
                .all(|e| never_fires(&e(KExpr::Local(var)), &inner))
        {
            let quiet = self.rewrite(original, index, &mut |_, l| match l {
                Looplet::LookupWrite { .. } | Looplet::AcceptRun { .. } => {
                    Repl::Consume(Tensor::Null)
                }
                _ => Repl::Keep,
            })?;
            let quiet = simplify_stmt(quiet, self);
            return self.rule_lookup(index, lo, hi, quiet);
        }
        for e in &epilogues {
            inner.extend(e(KExpr::Local(var)));
        }
        let Some(guard) = guard else {
            return Ok(vec![KStmt::For {
                var,
                lo,
                hi: KExpr::bin(Op::Add, hi, KExpr::int(1)),
                body: inner,
            }]);
        };
        // Checked before the loop and after each index, so no index runs once it is
        // decided.
        inner.push(KStmt::If {
            cond: guard.clone(),
            then: vec![KStmt::Break],
            otherwise: vec![],
        });
        Ok(vec![KStmt::If {
            cond: guard,
            then: vec![],
            otherwise: vec![KStmt::For {
                var,
                lo,
                hi: KExpr::bin(Op::Add, hi, KExpr::int(1)),
                body: inner,
            }],
        }])
    }

    /// Run integration (finch-looplets.md §5.4) of a loop whose body does not use its
    /// index: `+=`/`-=` multiply by the extent, idempotent reductions happen once.
    fn integrate(&mut self, lo: &KExpr, hi: &KExpr, body: &Stmt) -> Result<Option<Vec<KStmt>>> {
        if let Stmt::Assign {
            lhs,
            op: None,
            rhs: rhs @ Expr::Lit(_),
        } = body
        {
            // Storing a constant n times is storing it once.
            let code = self.emit_assign(lhs.clone(), None, rhs.clone())?;
            return Ok(Some(self.guarded(lo, hi, code)));
        }
        let Stmt::Assign {
            lhs,
            op: Some(op),
            rhs,
        } = body
        else {
            return Ok(None);
        };
        let n = KExpr::bin(
            Op::Add,
            KExpr::bin(Op::Sub, hi.clone(), lo.clone()),
            KExpr::int(1),
        );
        match op {
            Op::Add | Op::Sub => {
                let rt = type_of(rhs, self).unwrap_or(ScalarType::F64);
                let rhs = Expr::Call(
                    Op::Mul,
                    vec![
                        Expr::Call(
                            Op::Cast(if rt == ScalarType::Bool {
                                ScalarType::I64
                            } else {
                                rt
                            }),
                            vec![Expr::Code(n.clone())],
                        ),
                        rhs.clone(),
                    ],
                );
                let code = self.emit_assign(lhs.clone(), Some(*op), rhs)?;
                Ok(Some(self.guarded(lo, hi, code)))
            }
            Op::Mul => {
                // `x *= r` repeated n times is `x *= r ^ n`.
                let pow = Expr::Call(
                    Op::Pow,
                    vec![
                        rhs.clone(),
                        Expr::Call(Op::Cast(ScalarType::I64), vec![Expr::Code(n.clone())]),
                    ],
                );
                let code = self.emit_assign(lhs.clone(), Some(Op::Mul), pow)?;
                Ok(Some(self.guarded(lo, hi, code)))
            }
            op if op.is_idempotent() => {
                let code = self.emit_assign(lhs.clone(), Some(*op), rhs.clone())?;
                Ok(Some(self.guarded(lo, hi, code)))
            }
            _ => Ok(None),
        }
    }

    /// `target op= rhs` at a leaf.
    fn emit_assign(
        &mut self,
        lhs: (Tensor, Vec<Expr>),
        op: Option<Op>,
        rhs: Expr,
    ) -> Result<Vec<KStmt>> {
        // A read outside a tensor through a non-permissive shifted index stops the kernel,
        // at one position or over a run of them integrated into one update.
        if let Some(t) = out_of_range_read(&rhs) {
            return Ok(vec![KStmt::Fail(
                crate::backend::c::INDEX_OUT_OF_RANGE_BASE + t as i32,
            )]);
        }
        let (t, idx) = lhs;
        if !idx.is_empty() {
            return Err(Error::Program(
                "internal: a write with indices left after lowering".into(),
            ));
        }
        if let Tensor::Fiber(
            f @ crate::looplets::Fiber {
                hollow: Some(_), ..
            },
        ) = &t
        {
            return self.emit_hollow(f.clone(), op, rhs);
        }
        // A SparseScalar records that it was written.
        let dirty = match &t {
            Tensor::Scalar(s) => self.tensors[*s].dirty,
            _ => None,
        };
        let (old, elem, name, store): (KExpr, ScalarType, String, Box<dyn Fn(KExpr) -> KStmt>) =
            match t {
                Tensor::Scalar(s) => {
                    let l = self.tensors[s]
                        .scalar
                        .ok_or_else(|| Error::Program("internal: scalar".into()))?;
                    (
                        KExpr::Local(l),
                        self.kernel.locals[l.0 as usize].ty,
                        self.tensors[s].name.clone(),
                        Box::new(move |v| KStmt::Assign(l, v)),
                    )
                }
                Tensor::Local(l) => (
                    KExpr::Local(l),
                    self.kernel.locals[l.0 as usize].ty,
                    "an accumulator".to_string(),
                    Box::new(move |v| KStmt::Assign(l, v)),
                ),
                Tensor::Fiber(f) => match self.tensors[f.tensor].levels.get(f.depth) {
                    Some(LevelParams::Element { val, .. }) => {
                        let (val, pos) = (*val, f.pos.clone());
                        (
                            KExpr::load(val, pos.clone()),
                            self.kernel.bufs[val.0 as usize].elem,
                            self.tensors[f.tensor].name.clone(),
                            Box::new(move |v| KStmt::Store {
                                buf: val,
                                index: pos.clone(),
                                value: v,
                            }),
                        )
                    }
                    _ => {
                        return Err(Error::Program(
                            "internal: a write to a non-leaf level".into(),
                        ))
                    }
                },
                other => return Err(Error::Program(format!("internal: a write to {other:?}"))),
            };
        let value = match op {
            None => rhs,
            Some(op) => Expr::Call(op, vec![Expr::Code(old), rhs]),
        };
        let value = simplify_expr(value, self);
        let (v, vt) = self.kexpr(&value)?;
        let v = self.convert_for_store(v, vt, elem, &name)?;
        let mut code = vec![store(v)];
        if let Some(d) = dirty {
            code.push(KStmt::Assign(d, KExpr::Lit(Value::Bool(true))));
        }
        Ok(code)
    }

    /// An update of a written Pattern leaf, which stores nothing: its value is whether the
    /// index is claimed (`h.dirty`, which the level above records). `=` and `|=` of `true`
    /// claim it; any other update `op= c` sets the claim to `op(claimed, c)`, as Finch.jl
    /// does (a Pattern subfiber written is a scalar over the level's `dirty` flag), so
    /// `&=` or a store of `false` takes back a claim an earlier write of the index made.
    fn emit_pattern_update(
        &mut self,
        h: &crate::looplets::Hollow,
        t: usize,
        op: Option<Op>,
        rhs: Expr,
    ) -> Result<Vec<KStmt>> {
        let name = self.tensors[t].name.clone();
        let unclaimed = KExpr::Op(Op::Not, vec![KExpr::Local(h.dirty)]);
        let sets = matches!(op, None | Some(Op::Or | Op::BitOr));
        let value = match op {
            Some(op) if !sets => {
                // A level that records an index only where its flag ends up set can take
                // a claim back; the others (SparseByteMap, SparseHash) keep a flag per
                // entry instead where the program may clear one (`convert::may_clear`).
                if !h.skip_fill {
                    return Err(Error::Program(format!(
                        "internal: an update of the Pattern tensor `{name}` that may clear an index"
                    )));
                }
                let value = Expr::Call(op, vec![Expr::Code(KExpr::Local(h.dirty)), rhs]);
                simplify_expr(value, self)
            }
            _ => rhs,
        };
        let (c, ty) = self.kexpr(&value)?;
        let c = if sets {
            if ty != ScalarType::Bool {
                return Err(Error::Program(format!(
                    "`{name}` is a Pattern (bool) tensor but the value written is {ty}"
                )));
            }
            c
        } else {
            self.convert_for_store(c, ty, ScalarType::Bool, &name)?
        };
        if (op.is_none() && h.repeated && h.skip_fill) || !sets {
            // An earlier run of the write may have claimed the index, and the claim is the
            // entry (the level records what is claimed): a `false` takes it back.
            return Ok(vec![KStmt::If {
                cond: c,
                then: vec![KStmt::If {
                    cond: unclaimed,
                    then: h.claim.clone(),
                    otherwise: vec![],
                }],
                otherwise: vec![KStmt::Assign(h.dirty, KExpr::Lit(Value::Bool(false)))],
            }]);
        }
        // `|= c`, or `= c` written once per index: `false` changes nothing.
        Ok(vec![KStmt::If {
            cond: KExpr::Op(Op::And, vec![c, unclaimed]),
            then: h.claim.clone(),
            otherwise: vec![],
        }])
    }

    /// A write to a position an extruding sparse level hands out: the first write of the
    /// index claims the position (growing the buffers by doubling), then the value is
    /// updated. Storing the fill value into an unclaimed position does nothing.
    fn emit_hollow(
        &mut self,
        f: crate::looplets::Fiber,
        op: Option<Op>,
        rhs: Expr,
    ) -> Result<Vec<KStmt>> {
        let Some(h) = f.hollow.clone() else {
            return Err(Error::Program("internal: not a hollow position".into()));
        };
        let fill = self.fill_of(f.tensor);
        if matches!(
            self.tensors[f.tensor].levels.get(f.depth),
            Some(LevelParams::Pattern)
        ) {
            return self.emit_pattern_update(&h, f.tensor, op, rhs);
        }
        let plain = Tensor::Fiber(crate::looplets::Fiber {
            hollow: None,
            ..f.clone()
        });
        let store = self.emit_assign((plain, vec![]), op, rhs.clone())?;
        let dirty = KExpr::Local(h.dirty);
        if op.is_none() && matches!(simplify_expr(rhs.clone(), self), Expr::Lit(v) if v.same(&fill))
        {
            // Storing the fill claims nothing. Where the level skips it (an extruded list:
            // one statement writes it, so nothing claimed this index before) no code is
            // emitted, and a loop over a region of fills vanishes. A write an inner loop
            // repeats may have claimed the index at an earlier iteration: there the fill
            // is stored (and the level's record drops a value that is the fill).
            if h.skip_fill && h.repeated {
                return Ok(vec![KStmt::If {
                    cond: dirty,
                    then: store,
                    otherwise: vec![],
                }]);
            }
            if h.skip_fill {
                return Ok(vec![]);
            }
            if !h.fill_claims {
                return Ok(store);
            }
        }
        let claim = h.claim.clone();
        let mut code = vec![KStmt::If {
            cond: KExpr::Op(Op::Not, vec![dirty.clone()]),
            then: claim,
            otherwise: vec![],
        }];
        code.extend(store);
        if h.skip_fill_values {
            // Only stores of values other than the fill, and updates by values other than
            // the operator's identity (`+= 0` changes nothing), claim the index: the
            // result holds what a dense run would store. A store an inner loop repeats
            // reaches a position an earlier iteration claimed whatever its value.
            let (v, ty) = self.kexpr(&rhs)?;
            let unchanged = match op {
                None => fill.convert_exact(ty),
                Some(op) => op.identity(ty, crate::algebra::Side::Right),
            };
            if let Some(u) = unchanged {
                let mut cond = KExpr::bin(Op::Ne, v, KExpr::Lit(u));
                if op.is_none() && h.repeated {
                    cond = KExpr::Op(Op::Or, vec![dirty, cond]);
                }
                return Ok(vec![KStmt::If {
                    cond,
                    then: code,
                    otherwise: vec![],
                }]);
            }
        }
        Ok(code)
    }

    /// Converts a value for storing into a tensor of type `to`: identical types, `bool`
    /// into anything, narrower into wider integers of the same signedness, unsigned into
    /// wider signed, and any integer or float into a float (rounded to the nearest, as the
    /// reference engine does). Anything else could lose information and is a compile
    /// error.
    fn convert_for_store(
        &self,
        v: KExpr,
        from: ScalarType,
        to: ScalarType,
        name: &str,
    ) -> Result<KExpr> {
        if from == to {
            return Ok(v);
        }
        if let KExpr::Lit(x) = &v {
            // A constant converts exactly or not at all, decided now.
            return x.convert_exact(to).map(KExpr::Lit).ok_or_else(|| {
                Error::Program(format!(
                    "the constant {x} cannot be stored exactly into `{name}` ({to})"
                ))
            });
        }
        let exact = from == ScalarType::Bool
            || (from.is_integer()
                && to.is_integer()
                && from.is_signed_integer() == to.is_signed_integer()
                && from.bits() < to.bits())
            || (from.is_integer()
                && !from.is_signed_integer()
                && to.is_signed_integer()
                && from.bits() < to.bits())
            || (from == ScalarType::F32 && to == ScalarType::F64);
        // An integer or a wider float stored into a float tensor rounds to the nearest
        // value, as Julia's `convert` and the reference engine do (`i64` past 2^53).
        let rounds = to.is_float() && (from.is_integer() || from.is_float());
        if rounds && to == ScalarType::F32 && from.is_integer() {
            // Through `f64`, as every engine's `Value` conversion goes: the same rounding.
            let wide = KExpr::Op(Op::Cast(ScalarType::F64), vec![v]);
            Ok(KExpr::Op(Op::Cast(to), vec![wide]))
        } else if exact || rounds {
            Ok(KExpr::Op(Op::Cast(to), vec![v]))
        } else {
            Err(Error::Program(format!(
                "storing a {from} value into `{name}` ({to}) could lose information; convert it explicitly, e.g. `{to}(...)`"
            )))
        }
    }

    /// A leaf that holds only where `cond` does ([`Tensor::Present`]): a select, which
    /// reads the value only where it exists (C's `?:`); a Pattern leaf is the condition.
    fn present_leaf(
        &mut self,
        cond: &KExpr,
        fiber: &crate::looplets::Fiber,
        fill: Value,
    ) -> Result<(KExpr, ScalarType)> {
        let leaf = Expr::Access(Box::new(Tensor::Fiber(fiber.clone())), vec![]);
        let (value, ty) = self.kexpr(&leaf)?;
        if fill.is_missing() {
            // Left where no branch resolves it (`lift-missing` splits assignments on it,
            // `coalesce_selects` reads it): an `if` condition, which the reference
            // refuses where it is `missing`, or an index. Refused as `missing` is.
            return self.kexpr(&Expr::Lit(fill));
        }
        let fill = fill
            .convert_exact(ty)
            .ok_or_else(|| Error::Program(format!("internal: the fill {fill} of a {ty} leaf")))?;
        Ok(match (value, fill) {
            (KExpr::Lit(Value::Bool(true)), Value::Bool(false)) => (cond.clone(), ty),
            (value, fill) => (
                KExpr::Op(Op::IfElse, vec![cond.clone(), value, KExpr::Lit(fill)]),
                ty,
            ),
        })
    }

    /// `coalesce(a, b, ...)` once the only arguments that may be `missing` are leaves read
    /// where a condition holds and `missing` elsewhere (a shifted read of a Dense level
    /// walked segment by segment, see `Lowerer::walk_to_the_end`): a select of each such
    /// leaf where it holds, of the rest where it does not. Its type is the leaf's where
    /// the rest converts to it exactly (the padding literal), else the promoted type.
    fn coalesce_selects(&mut self, args: &[Expr]) -> Result<(KExpr, ScalarType)> {
        let Some((first, rest)) = args.split_first() else {
            return self.kexpr(&Expr::Lit(Value::Missing));
        };
        if rest.is_empty() || !crate::simplify::may_be_missing(first) {
            return self.kexpr(first);
        }
        let mut present = Vec::new();
        let Some(read) = crate::simplify::read_where_present(first, &mut present) else {
            return self.kexpr(&Expr::Lit(Value::Missing));
        };
        let Some(cond) = present.into_iter().reduce(|a, b| KExpr::bin(Op::And, a, b)) else {
            return self.kexpr(&Expr::Lit(Value::Missing));
        };
        let (value, value_ty) = self.kexpr(&read)?;
        let (other, other_ty) = self.coalesce_selects(rest)?;
        let ty = match &other {
            _ if other_ty == value_ty => value_ty,
            KExpr::Lit(v) if v.convert_exact(value_ty).is_some() => value_ty,
            _ => promote(value_ty, other_ty),
        };
        let cast = |k: KExpr, t: ScalarType| match k {
            _ if t == ty => k,
            KExpr::Lit(v) => match v.convert_exact(ty) {
                Some(v) => KExpr::Lit(v),
                None => KExpr::Op(Op::Cast(ty), vec![KExpr::Lit(v)]),
            },
            k => KExpr::Op(Op::Cast(ty), vec![k]),
        };
        let select = vec![cond, cast(value, value_ty), cast(other, other_ty)];
        Ok((KExpr::Op(Op::IfElse, select), ty))
    }

    /// A kernel expression and its type, with explicit conversions to the operator's
    /// common argument type (Julia promotion, as `Op::eval`).
    fn kexpr(&mut self, e: &Expr) -> Result<(KExpr, ScalarType)> {
        match e {
            Expr::Lit(v) => match v.scalar_type() {
                Some(t) => Ok((KExpr::Lit(*v), t)),
                None => Err(Error::Unsupported(
                    "a `missing` value (a permissive read outside its tensor) reaching compiled code; wrap the read in `coalesce(..., default)`"
                        .into(),
                )),
            },
            Expr::Code(k) => Ok((k.clone(), kexpr_type(&self.kernel, k))),
            Expr::Index(i) | Expr::Wrapped { index: i, .. } => Err(Error::Program(format!(
                "internal: the index `{i}` is unbound at a leaf"
            ))),
            Expr::Permissive(..) => Err(Error::Program(
                "internal: a permissive index outside an access".into(),
            )),
            Expr::Access(t, idx) => {
                if !idx.is_empty() {
                    return Err(Error::Program(format!(
                        "internal: an access with {} indices left at a leaf ({t:?})",
                        idx.len()
                    )));
                }
                match &**t {
                    Tensor::Scalar(s) => {
                        let l = self.tensors[*s]
                            .scalar
                            .ok_or_else(|| Error::Program("internal: scalar".into()))?;
                        Ok((KExpr::Local(l), self.kernel.locals[l.0 as usize].ty))
                    }
                    Tensor::Fiber(f) => match self.tensors[f.tensor].levels.get(f.depth) {
                        Some(LevelParams::Element { val, .. }) => Ok((
                            KExpr::load(*val, f.pos.clone()),
                            self.kernel.bufs[val.0 as usize].elem,
                        )),
                        Some(LevelParams::Pattern) => {
                            Ok((KExpr::Lit(Value::Bool(true)), ScalarType::Bool))
                        }
                        _ => Err(Error::Program(
                            "internal: a read of a non-leaf level".into(),
                        )),
                    },
                    Tensor::FillLeaf(v) => self.kexpr(&Expr::Lit(*v)),
                    Tensor::Present { cond, fiber, fill } => self.present_leaf(cond, fiber, *fill),
                    Tensor::Local(l) => Ok((KExpr::Local(*l), self.kernel.locals[l.0 as usize].ty)),
                    Tensor::Switch { .. } => Err(Error::Program(
                        "internal: an unresolved switch at a leaf".into(),
                    )),
                    Tensor::Null => Err(Error::Program("internal: a read of null".into())),
                    Tensor::OutOfRange(_) => Err(Error::Program(
                        "internal: an out-of-range read left in a value".into(),
                    )),
                    Tensor::Value(v) => self.kexpr(v),
                    Tensor::Looplet(l) => Err(Error::Program(format!(
                        "internal: an unlowered looplet {l:?}"
                    ))),
                }
            }
            Expr::Call(Op::Coalesce, args) => self.coalesce_selects(args),
            Expr::Call(op, args) => {
                let parts = args
                    .iter()
                    .map(|a| self.kexpr(a))
                    .collect::<Result<Vec<_>>>()?;
                let tys: Vec<ScalarType> = parts.iter().map(|p| p.1).collect();
                let cast = |(k, t): (KExpr, ScalarType), to: ScalarType| {
                    if t == to {
                        k
                    } else {
                        KExpr::Op(Op::Cast(to), vec![k])
                    }
                };
                let common = tys
                    .iter()
                    .copied()
                    .reduce(promote)
                    .unwrap_or(ScalarType::I64);
                let arith = if common == ScalarType::Bool {
                    ScalarType::I64
                } else {
                    common
                };
                let args: Vec<KExpr> = match op {
                    Op::Add
                    | Op::Sub
                    | Op::Mul
                    | Op::Pow
                    | Op::Div
                    | Op::Rem
                    | Op::RemFn
                    | Op::Mod
                    | Op::IntDiv
                    | Op::Fld
                    | Op::Neg
                    | Op::Abs => parts.into_iter().map(|p| cast(p, arith)).collect(),
                    Op::Shl | Op::Shr => {
                        let mut it = parts.into_iter();
                        let a = it.next().map(|p| {
                            cast(
                                p.clone(),
                                if p.1 == ScalarType::Bool {
                                    ScalarType::I64
                                } else {
                                    p.1
                                },
                            )
                        });
                        a.into_iter().chain(it.map(|p| p.0)).collect()
                    }
                    Op::IfElse => {
                        let value_ty = tys[1..]
                            .iter()
                            .copied()
                            .reduce(promote)
                            .unwrap_or(ScalarType::I64);
                        parts
                            .into_iter()
                            .enumerate()
                            .map(|(k, p)| if k == 0 { p.0 } else { cast(p, value_ty) })
                            .collect()
                    }
                    Op::And
                    | Op::Or
                    | Op::Not
                    | Op::Sqrt
                    | Op::Exp
                    | Op::Log
                    | Op::Sin
                    | Op::Cos
                    | Op::Cast(_) => parts.into_iter().map(|p| p.0).collect(),
                    _ => parts.into_iter().map(|p| cast(p, common)).collect(),
                };
                let arg_tys: Vec<ScalarType> =
                    args.iter().map(|a| kexpr_type(&self.kernel, a)).collect();
                // An integer power has its base's type (`Int8(3) ^ 5` is an `Int8`), but the
                // kernel computes it in the arguments' common type: wrapping multiplication
                // there, then wrapping into the base's type, gives the same bits.
                let narrowed = match (op, tys.as_slice()) {
                    (Op::Pow, [base, exp]) => Op::Pow
                        .eval(&[Value::one_of(*base), Value::one_of(*exp)])
                        .ok()
                        .and_then(|v| v.scalar_type())
                        .filter(|t| t.is_integer()),
                    _ => None,
                };
                match op_type(*op, &arg_tys) {
                    Some(t) => match narrowed {
                        Some(n) if n != t && t.is_integer() => {
                            Ok((KExpr::Op(Op::Cast(n), vec![KExpr::Op(*op, args)]), n))
                        }
                        _ => Ok((KExpr::Op(*op, args), t)),
                    },
                    None => Err(Error::Program(format!(
                        "`{op}` cannot be compiled for arguments of types ({})",
                        tys.iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))),
                }
            }
        }
    }
}

/// Appends `code` to `out`, or, when `guard` (see `short_circuit_guard`) exists and `out`
/// already updates the ShortCircuitScalars, appends it under `if !guard`: once an earlier
/// part of a step left them at an annihilator, a later one must not run. The reference
/// stops at the first annihilator; a run of -4 after a gap of zeros would otherwise turn
/// the product's 0.0 into -0.0.
fn unless_short_circuited(out: &mut Vec<KStmt>, guard: &Option<KExpr>, code: Vec<KStmt>) {
    match guard {
        Some(g) if !out.is_empty() && !code.is_empty() => out.push(KStmt::If {
            cond: g.clone(),
            then: vec![],
            otherwise: code,
        }),
        _ => out.extend(code),
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
            Tensor::Value(Expr::Code(KExpr::load(
                data,
                KExpr::bin(Op::Sub, j, KExpr::int(1)),
            )))
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
                        body: vec![KStmt::Assign(
                            p,
                            KExpr::bin(Op::Add, KExpr::Local(p), KExpr::int(1)),
                        )],
                    }]
                }),
                preamble: vec![],
                stop: KExpr::load(stops, KExpr::Local(p)),
                chunk: Looplet::Run(Box::new(Tensor::Value(Expr::Code(KExpr::load(
                    vals,
                    KExpr::Local(p),
                ))))),
                next: vec![KStmt::Assign(
                    p,
                    KExpr::bin(Op::Add, KExpr::Local(p), KExpr::int(1)),
                )],
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
                next: vec![KStmt::Assign(
                    p,
                    KExpr::bin(Op::Add, KExpr::Local(p), KExpr::int(1)),
                )],
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
