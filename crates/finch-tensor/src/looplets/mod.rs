//! Looplets (Looplets paper §3; Finch paper §5.6): compile-time descriptions of how a
//! tensor's last dimension is structured over the loop being lowered, and the lowering IR
//! they live in.
//!
//! A [`Tensor`] in the lowering IR is either a subfiber not yet unfurled (a level and a
//! position), a looplet for the current loop's index, a constant subtensor
//! (`FillLeaf`), or a scalar target. Extents are absolute, 1-based and inclusive, as in
//! Finch; stops are `i64` kernel expressions.
//!
//! Truncation ([`truncate_before_stop`]): a Spike restricted to a range that ends before
//! its stop is its body's Run; a Switch truncates each case; every other looplet here is
//! self-similar.

use std::rc::Rc;

use crate::algebra::{Op, Value};
use crate::kernel::{KExpr, KStmt};

/// A subfiber: tensor `tensor`, level `depth` (0 = root), at kernel position `pos`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fiber {
    /// Index into the lowerer's tensor table.
    pub tensor: usize,
    /// Level depth (0 = root level).
    pub depth: usize,
    /// Position within the level (`i64`, 0-based).
    pub pos: KExpr,
    /// For a mode of a SparseCOO level below its first: the end (exclusive) of the run of
    /// tuples from `pos` that share the outer coordinates (`None` elsewhere).
    pub end: Option<KExpr>,
    /// For a leaf position a sparse output level is extruding: how a write claims it.
    pub hollow: Option<Hollow>,
    /// The read protocol the access asks of each level, and whether it is a write.
    pub protocols: Protocols,
}

impl Fiber {
    /// The leaf position `pos` a written level hands out (tensor `tensor`, level `depth`),
    /// claimed on the first write as `hollow` says.
    pub fn hollow_leaf(tensor: usize, depth: usize, pos: KExpr, hollow: Hollow) -> Tensor {
        Tensor::Fiber(Fiber {
            tensor,
            depth,
            pos,
            end: None,
            hollow: Some(hollow),
            protocols: Protocols::default(),
        })
    }
}

impl Hollow {
    /// A claim that sets `dirty`, where storing the fill into an unclaimed position does
    /// nothing (a level recording only the indices written).
    pub fn claiming(dirty: crate::kernel::LocalId, claim: Vec<KStmt>) -> Hollow {
        Hollow {
            dirty,
            claim,
            skip_fill: true,
            skip_fill_values: false,
            fill_claims: false,
            repeated: false,
        }
    }
}

/// What an access asks of its tensor's levels: at each depth, `follow` (random access),
/// `gallop` (a Jumper) or, by default, `walk`; and whether a statement writes it (levels
/// both written and read in one kernel, such as a SparseByteMap workspace, unfurl
/// differently). Depths from [`Protocols::MAX_DEPTH`] on always walk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Protocols {
    follow: u32,
    gallop: u32,
    written: bool,
}

impl Protocols {
    /// The deepest level (exclusive) a protocol other than `walk` can be asked of.
    pub const MAX_DEPTH: usize = 31;

    /// Whether the level at `depth` is read by random access.
    pub fn follows(self, depth: usize) -> bool {
        depth < Self::MAX_DEPTH && self.follow & (1 << depth) != 0
    }

    /// Whether the level at `depth` is galloped over.
    pub fn gallops(self, depth: usize) -> bool {
        depth < Self::MAX_DEPTH && self.gallop & (1 << depth) != 0
    }

    /// Whether a statement writes the access.
    pub fn is_written(self) -> bool {
        self.written
    }

    /// Asks the level at `depth` for random access (ignored from `MAX_DEPTH` on).
    pub fn set_follow(&mut self, depth: usize) {
        if depth < Self::MAX_DEPTH {
            self.follow |= 1 << depth;
        }
    }

    /// Asks the level at `depth` to gallop (ignored from `MAX_DEPTH` on).
    pub fn set_gallop(&mut self, depth: usize) {
        if depth < Self::MAX_DEPTH {
            self.gallop |= 1 << depth;
        }
    }

    /// Marks the access as written.
    pub fn set_written(&mut self) {
        self.written = true;
    }
}

/// A leaf position handed out by a sparse level being written (Finch's hollow subfiber):
/// the first write of an index runs the level's `claim` (growing buffers, fixing an
/// origin, initializing the value) which sets `dirty`; the level reads `dirty` after the
/// index's statements to record the index.
#[derive(Clone, Debug, PartialEq)]
pub struct Hollow {
    /// Set by the first write.
    pub dirty: crate::kernel::LocalId,
    /// Run before the first write of an index (it must set `dirty`).
    pub claim: Vec<KStmt>,
    /// Whether storing the fill is a no-op (a level that records only written indices at
    /// positions nothing else writes; where the write is `repeated`, only while the index
    /// is unclaimed); otherwise it is stored without claiming.
    pub skip_fill: bool,
    /// Whether a plain store of a value that turns out to be the fill at run time is
    /// skipped too (a level whose indices of one fiber share a position: SparsePoint).
    pub skip_fill_values: bool,
    /// Whether storing the fill claims the index like any other value (a level whose
    /// position for the index is found by the claim: SparseHash).
    pub fill_claims: bool,
    /// Whether the write may run more than once for its index (a loop inside the index's
    /// statements encloses it), so an earlier run may have claimed the position: the fill
    /// written then must reach it (the last write wins), so it is not skipped.
    pub repeated: bool,
}

/// A looplet for the dimension indexed by the loop being lowered.
#[derive(Clone)]
pub enum Looplet {
    /// Random access: the element at index `i` is `f(i)`.
    Lookup(Rc<dyn Fn(KExpr) -> Tensor>),
    /// Random access for writes, with code to run after the statements of each index
    /// (a sparse level records the index if a write happened).
    LookupWrite {
        /// The element at index `i`.
        body: Rc<dyn Fn(KExpr) -> Tensor>,
        /// Runs after each index's statements.
        epilogue: Rc<dyn Fn(KExpr) -> Vec<KStmt>>,
    },
    /// A write target that accepts a whole run at once (Finch's AcceptRun): `body(lo, hi)`
    /// is the one position the indices `lo..=hi` share, `epilogue(lo, hi)` runs after the
    /// run's statements (a run-length level records the run if it was written). Where the
    /// value varies by index, each index is its own run.
    AcceptRun {
        /// The position of the run `lo..=hi`.
        body: Rc<dyn Fn(KExpr, KExpr) -> Tensor>,
        /// Runs after the run's statements.
        epilogue: Rc<dyn Fn(KExpr, KExpr) -> Vec<KStmt>>,
    },
    /// Every element is `body`.
    Run(Box<Tensor>),
    /// `body` up to `stop - 1`, `tail` at `stop` (the end of the enclosing extent).
    Spike {
        /// The repeated part.
        body: Box<Tensor>,
        /// The last element.
        tail: Box<Tensor>,
    },
    /// Consecutive phases, each ending at its (inclusive, absolute) `stop`; the last
    /// phase ends at the extent's end.
    Sequence(Vec<(Option<KExpr>, Looplet)>),
    /// Children of the same shape one after another, driven by run-time state.
    Stepper(Rc<Stepper>),
    /// Like a Stepper, but when coiterated the step ends at the *largest* stop among the
    /// jumpers (the leader); the others are walked as Steppers within the step
    /// (galloping, Looplets §4.7).
    Jumper(Rc<Stepper>),
    /// The first case whose condition holds at run time (Looplets' Switch/Case); the last
    /// condition is usually `true`. Conditions are loop-invariant (`bool` kernel code).
    Switch(Vec<(KExpr, Looplet)>),
    /// Hoisted setup code around a looplet.
    Thunk {
        /// Emitted before the loop.
        preamble: Vec<KStmt>,
        /// The looplet.
        body: Box<Looplet>,
        /// Emitted after the loop.
        epilogue: Vec<KStmt>,
    },
}

/// A stepper's parts (Looplets §4.6).
pub struct Stepper {
    /// Advances state so the current child contains index `start` (an `i64` 1-based
    /// expression).
    pub seek: Box<dyn Fn(KExpr) -> Vec<KStmt>>,
    /// Run at the start of every step.
    pub preamble: Vec<KStmt>,
    /// The (inclusive, absolute) last index of the current child.
    pub stop: KExpr,
    /// The current child.
    pub chunk: Looplet,
    /// Advances to the next child.
    pub next: Vec<KStmt>,
    /// Set when the children are one per stored position, so the walk can be a counted
    /// loop over positions wherever the extent reaches the last child's stop.
    pub counted: Option<Counted>,
    /// Set for the segments of a level walked to the end of the extent (a block, or the
    /// gap between two): see [`Segments`].
    pub outside: Option<Segments>,
}

/// A stepper over segments, each a block or a gap: its chunk is the block's middle where
/// `inside` holds and `fill` where it does not. A step where every such stepper is outside
/// its blocks reads each as its fill; a step where every one padded with `missing` (a
/// shifted read of a Dense level) is inside reads them as `block`, with no select.
#[derive(Clone)]
pub struct Segments {
    /// Holds where the current segment is a block.
    pub inside: crate::kernel::LocalId,
    /// The value of every index of a gap.
    pub fill: Value,
    /// The middle of the current block (a Lookup or a Run).
    pub block: Looplet,
}

impl Segments {
    /// The same segments with `f` applied to the block's middle (a shift, a mapping of
    /// its children).
    fn map_block(&self, f: impl Fn(&Looplet) -> Looplet) -> Segments {
        Segments {
            block: f(&self.block),
            ..self.clone()
        }
    }
}

/// A stepper whose children are one per stored position (a SparseList fiber's entries).
#[derive(Clone, Debug)]
pub struct Counted {
    /// Holds while children remain (`q < q_stop`).
    pub more: KExpr,
    /// The stop of the last child: the stepper never extends past it.
    pub last: KExpr,
    /// A local holding the first stored index of the current child, where every child's
    /// exceeds the previous child's stop and the first child's is at least 1 (a
    /// SparseBlockList's blocks): a walk from index 1 then starts each step at or before
    /// it, so the child's stored part needs no clipping to the step.
    pub first: Option<crate::kernel::LocalId>,
}

impl std::fmt::Debug for Looplet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Looplet::Lookup(_) => f.write_str("Lookup"),
            Looplet::LookupWrite { .. } => f.write_str("LookupWrite"),
            Looplet::AcceptRun { .. } => f.write_str("AcceptRun"),
            Looplet::Run(b) => write!(f, "Run({b:?})"),
            Looplet::Spike { body, tail } => write!(f, "Spike({body:?}, {tail:?})"),
            Looplet::Sequence(p) => write!(f, "Sequence({} phases)", p.len()),
            Looplet::Stepper(_) => f.write_str("Stepper"),
            Looplet::Jumper(_) => f.write_str("Jumper"),
            Looplet::Thunk { body, .. } => write!(f, "Thunk({body:?})"),
            Looplet::Switch(cases) => write!(f, "Switch({} cases)", cases.len()),
        }
    }
}

/// A tensor in the lowering IR.
#[derive(Clone, Debug)]
pub enum Tensor {
    /// A subfiber not yet unfurled.
    Fiber(Fiber),
    /// A looplet over the current loop's index.
    Looplet(Looplet),
    /// A subtensor all of whose entries equal the value.
    FillLeaf(Value),
    /// A leaf value (all indices consumed).
    Value(Expr),
    /// A 0-d tensor kept in a kernel local (by lowerer scalar id).
    Scalar(usize),
    /// A leaf held in a kernel local while a loop runs (scalar replacement of an output
    /// element the loop reduces into).
    Local(crate::kernel::LocalId),
    /// A write target that discards what is written (Finch's `Null`): the positions of a
    /// permissive write (`y[~(i + 1)]`) outside the tensor. An assignment to it is removed.
    Null,
    /// The positions of a non-permissive shifted read (`A[i + j]`) outside tensor `t`: a
    /// statement that reads it stops the kernel with `t`'s index-out-of-range error, as
    /// the reference interpreter stops where it reads out of bounds.
    OutOfRange(usize),
    /// Subfiber `fiber` where `cond` holds, and `fill` everywhere where it does not: a
    /// coiterated operand's entry at a step that may end before it, read by one body for
    /// both cases (rather than one body per combination of operands). A level that cannot
    /// take the condition into its own loop bounds makes it a [`Tensor::Switch`].
    Present {
        /// The condition (`bool`, computed before the body).
        cond: KExpr,
        /// The subfiber where it holds.
        fiber: Fiber,
        /// The value everywhere where it does not.
        fill: Value,
    },
    /// A choice made at run time: after `pre` runs, `then` if `cond` holds, else
    /// `otherwise` (a random access that may miss). Resolved by an `if` around the
    /// statement that reads it.
    Switch {
        /// Code computing the condition.
        pre: Vec<KStmt>,
        /// The condition (`bool`).
        cond: KExpr,
        /// The tensor when it holds.
        then: Box<Tensor>,
        /// The tensor otherwise.
        otherwise: Box<Tensor>,
    },
}

impl Tensor {
    /// The tensor (by lowerer id) this is part of, where it tells: a fiber's or a
    /// scalar's, or for a looplet that of the parts it hands out (the first phase or case
    /// that tells).
    pub fn tensor_id(&self) -> Option<usize> {
        match self {
            Tensor::Fiber(f) | Tensor::Present { fiber: f, .. } => Some(f.tensor),
            Tensor::Scalar(t) | Tensor::OutOfRange(t) => Some(*t),
            Tensor::Looplet(l) => l.tensor_id(),
            Tensor::Switch {
                then, otherwise, ..
            } => then.tensor_id().or_else(|| otherwise.tensor_id()),
            Tensor::FillLeaf(_) | Tensor::Value(_) | Tensor::Local(_) | Tensor::Null => None,
        }
    }
}

impl Looplet {
    /// See [`Tensor::tensor_id`].
    pub fn tensor_id(&self) -> Option<usize> {
        let one = || KExpr::Lit(Value::I64(1));
        match self {
            Looplet::Lookup(f) | Looplet::LookupWrite { body: f, .. } => f(one()).tensor_id(),
            Looplet::AcceptRun { body, .. } => body(one(), one()).tensor_id(),
            Looplet::Run(t) => t.tensor_id(),
            Looplet::Spike { body, tail } => tail.tensor_id().or_else(|| body.tensor_id()),
            Looplet::Sequence(phases) => phases.iter().find_map(|(_, l)| l.tensor_id()),
            Looplet::Stepper(s) | Looplet::Jumper(s) => s.chunk.tensor_id(),
            Looplet::Switch(cases) => cases.iter().find_map(|(_, l)| l.tensor_id()),
            Looplet::Thunk { body, .. } => body.tensor_id(),
        }
    }
}

/// An expression in the lowering IR.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A constant.
    Lit(Value),
    /// A run-time value in kernel IR (locals, loads).
    Code(KExpr),
    /// A loop index that is not yet bound (the loop is still being lowered).
    Index(String),
    /// A permissive computed access index (`x[~(i + j - 2)]`): outside the tensor the
    /// read is `missing`. With a guard (a permissive window indexed by an expression,
    /// `x[~(lo:hi)(i + 1)]`), the read is an error where the guard is false: the index
    /// left the window.
    Permissive(Box<Expr>, Option<Box<Expr>>),
    /// An access index `index + offset`, permissive (`~(...)`: out of bounds reads
    /// `missing`) or not; only in access index lists, until the level is unfurled.
    Wrapped {
        /// The loop index.
        index: String,
        /// The constant offset.
        offset: i64,
        /// A further offset computed from indices of enclosing loops (Finch's
        /// ToeplitzTensor: `x[~(i + j)]` read in the loop over `i` inside the loop over `j`).
        by: Option<Box<Expr>>,
        /// Whether out-of-bounds reads give `missing`.
        permissive: bool,
        /// Whether the loop's extent keeps a non-permissive read inside the tensor (a
        /// constant offset, a window); otherwise reading outside it stops the kernel.
        in_bounds: bool,
    },
    /// An operator application.
    Call(Op, Vec<Expr>),
    /// A tensor read with the indices still to consume (last = innermost loop).
    Access(Box<Tensor>, Vec<Expr>),
}

/// A statement in the lowering IR.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `for index = lo:hi` (inclusive bounds, `i64`).
    Loop {
        /// The index.
        index: String,
        /// First value.
        lo: KExpr,
        /// Last value.
        hi: KExpr,
        /// Body.
        body: Box<Stmt>,
    },
    /// `lhs op= rhs` (`op = None` stores).
    Assign {
        /// The written tensor and its remaining indices.
        lhs: (Tensor, Vec<Expr>),
        /// The reduction operator (`None` for `=`).
        op: Option<Op>,
        /// The value.
        rhs: Expr,
    },
    /// `if cond { then } else { otherwise }`.
    Sieve {
        /// Condition.
        cond: Expr,
        /// Taken when true.
        then: Box<Stmt>,
        /// Taken when false.
        otherwise: Box<Stmt>,
    },
    /// Binds a variable (to a kernel local) for the body.
    Define {
        /// The variable's lowering name.
        var: String,
        /// Its value.
        value: Expr,
        /// Scope.
        body: Box<Stmt>,
    },
    /// Statements in order.
    Block(Vec<Stmt>),
    /// Sets a scalar target to a value (a nested `s .= v`).
    SetScalar(usize, Expr),
    /// Sets every element of a dense tensor's values to a constant (a `X .= v` inside a
    /// loop: a workspace reset).
    Reset(usize, Value),
    /// Finishes a SparseList output written by earlier statements so later ones can read
    /// it (Finch's `freeze`): its per-fiber counts become offsets.
    Freeze(usize),
    /// Sets a kernel local to an `i64` value: the extent of a loop over a window whose
    /// bounds use enclosing indices, computed where those are bound.
    SetLocal(crate::kernel::LocalId, Expr),
    /// Stops the kernel with error `code` unless `cond` holds (a window computed from
    /// enclosing indices that must fit its tensor).
    Check(Expr, i32),
}

/// `s` with the index or `let` variable `name` replaced by `with` wherever it is free: a
/// nested `let` or loop of the same name shadows it.
pub fn substitute(s: Stmt, name: &str, with: &Expr) -> Stmt {
    fn expr(e: Expr, name: &str, with: &Expr) -> Expr {
        match e {
            Expr::Index(i) if i == name => with.clone(),
            // A shifted read of this index at a level other than the loop's own (`A[i - 1,
            // j]` under `for i, for j` over a column-major `A`): once the index is bound,
            // its position is a computed value, read through concordization like `A[i, j]`
            // there; permissive, it reads `missing` outside the tensor.
            Expr::Wrapped {
                index,
                offset,
                by,
                permissive,
                ..
            } if index == name => {
                let mut at = with.clone();
                if offset != 0 {
                    at = Expr::Call(Op::Add, vec![at, Expr::Lit(Value::I64(offset))]);
                }
                if let Some(by) = by {
                    at = Expr::Call(Op::Add, vec![at, expr(*by, name, with)]);
                }
                if permissive {
                    Expr::Permissive(Box::new(at), None)
                } else {
                    at
                }
            }
            Expr::Wrapped {
                index,
                offset,
                by,
                permissive,
                in_bounds,
            } => Expr::Wrapped {
                index,
                offset,
                by: by.map(|b| Box::new(expr(*b, name, with))),
                permissive,
                in_bounds,
            },
            Expr::Permissive(x, guard) => Expr::Permissive(
                Box::new(expr(*x, name, with)),
                guard.map(|g| Box::new(expr(*g, name, with))),
            ),
            Expr::Call(op, a) => {
                Expr::Call(op, a.into_iter().map(|x| expr(x, name, with)).collect())
            }
            Expr::Access(t, idx) => Expr::Access(
                Box::new(match *t {
                    Tensor::Value(v) => Tensor::Value(expr(v, name, with)),
                    other => other,
                }),
                idx.into_iter().map(|x| expr(x, name, with)).collect(),
            ),
            other => other,
        }
    }
    let sub = |s: Box<Stmt>| Box::new(substitute(*s, name, with));
    match s {
        Stmt::Assign { lhs, op, rhs } => Stmt::Assign {
            lhs: (
                lhs.0,
                lhs.1.into_iter().map(|x| expr(x, name, with)).collect(),
            ),
            op,
            rhs: expr(rhs, name, with),
        },
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => Stmt::Sieve {
            cond: expr(cond, name, with),
            then: sub(then),
            otherwise: sub(otherwise),
        },
        Stmt::Define { var, value, body } => {
            let value = expr(value, name, with);
            let body = if var == name { body } else { sub(body) };
            Stmt::Define { var, value, body }
        }
        Stmt::Loop {
            index,
            lo,
            hi,
            body,
        } => {
            let body = if index == name { body } else { sub(body) };
            Stmt::Loop {
                index,
                lo,
                hi,
                body,
            }
        }
        Stmt::Block(b) => Stmt::Block(b.into_iter().map(|s| substitute(s, name, with)).collect()),
        Stmt::SetScalar(t, e) => Stmt::SetScalar(t, expr(e, name, with)),
        Stmt::SetLocal(l, e) => Stmt::SetLocal(l, expr(e, name, with)),
        Stmt::Check(e, code) => Stmt::Check(expr(e, name, with), code),
        other @ (Stmt::Reset(..) | Stmt::Freeze(_)) => other,
    }
}

/// Calls `f` on every hollow position `s` writes (its claims), in statement order.
pub fn for_each_claim(s: &mut Stmt, f: &mut impl FnMut(&mut Hollow)) {
    match s {
        Stmt::Assign {
            lhs:
                (
                    Tensor::Fiber(Fiber {
                        hollow: Some(h), ..
                    }),
                    _,
                ),
            ..
        } => f(h),
        Stmt::Sieve {
            then, otherwise, ..
        } => {
            for_each_claim(then, f);
            for_each_claim(otherwise, f);
        }
        Stmt::Define { body, .. } | Stmt::Loop { body, .. } => for_each_claim(body, f),
        Stmt::Block(b) => b.iter_mut().for_each(|s| for_each_claim(s, f)),
        _ => {}
    }
}

/// The looplet a truncated child becomes when the step ends before the child's stop: a
/// Spike loses its tail.
pub fn truncate_before_stop(l: &Looplet) -> Looplet {
    match l {
        Looplet::Spike { body, .. } => Looplet::Run(body.clone()),
        Looplet::Thunk {
            preamble,
            body,
            epilogue,
        } => Looplet::Thunk {
            preamble: preamble.clone(),
            body: Box::new(truncate_before_stop(body)),
            epilogue: epilogue.clone(),
        },
        Looplet::Switch(cases) => Looplet::Switch(
            cases
                .iter()
                .map(|(c, l)| (c.clone(), truncate_before_stop(l)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The looplet of a level read at `i + c` (Finch's OffsetTensor, Looplets' Shift): in
/// loop coordinates `i`, every stop `s` of the level becomes `s - c`, a lookup at `i`
/// reads the level at `i + c`, and a stepper seeks `start + c`.
pub fn shift(l: &Looplet, c: i64) -> Looplet {
    shift_by(l, &KExpr::int(c))
}

/// [`shift`] by a run-time amount `c` (an `i64` kernel expression, fixed while the loop
/// runs).
pub fn shift_by(l: &Looplet, c: &KExpr) -> Looplet {
    if matches!(c, KExpr::Lit(Value::I64(0))) {
        return l.clone();
    }
    let back = {
        let c = c.clone();
        move |s: &KExpr| s.clone() - c.clone()
    };
    let up = {
        let c = c.clone();
        move |e: KExpr| e + c.clone()
    };
    match l {
        Looplet::Lookup(f) => {
            let f = f.clone();
            Looplet::Lookup(Rc::new(move |i| f(up(i))))
        }
        Looplet::LookupWrite { body, epilogue } => {
            let (body, epilogue) = (body.clone(), epilogue.clone());
            let up2 = up.clone();
            Looplet::LookupWrite {
                body: Rc::new(move |i| body(up(i))),
                epilogue: Rc::new(move |i| epilogue(up2(i))),
            }
        }
        Looplet::AcceptRun { body, epilogue } => {
            let (body, epilogue) = (body.clone(), epilogue.clone());
            let up2 = up.clone();
            Looplet::AcceptRun {
                body: Rc::new(move |lo, hi| body(up(lo), up(hi))),
                epilogue: Rc::new(move |lo, hi| epilogue(up2(lo), up2(hi))),
            }
        }
        Looplet::Run(t) => Looplet::Run(t.clone()),
        Looplet::Spike { body, tail } => Looplet::Spike {
            body: body.clone(),
            tail: tail.clone(),
        },
        nested => map_nested(nested, &back, &|s| shift_stepper(s, c), &|l| shift_by(l, c)),
    }
}

/// `l`'s nested looplets (a sequence's phases, a stepper's chunk, a thunk's body, a
/// switch's cases) rebuilt by `inner`, a sequence's stops mapped by `stop` and a stepper
/// rebuilt by `stepper`; any other looplet as it is.
fn map_nested(
    l: &Looplet,
    stop: &dyn Fn(&KExpr) -> KExpr,
    stepper: &dyn Fn(&Rc<Stepper>) -> Stepper,
    inner: &dyn Fn(&Looplet) -> Looplet,
) -> Looplet {
    match l {
        Looplet::Sequence(phases) => Looplet::Sequence(
            phases
                .iter()
                .map(|(s, p)| (s.as_ref().map(stop), inner(p)))
                .collect(),
        ),
        Looplet::Stepper(s) => Looplet::Stepper(Rc::new(stepper(s))),
        Looplet::Jumper(s) => Looplet::Jumper(Rc::new(stepper(s))),
        Looplet::Thunk {
            preamble,
            body,
            epilogue,
        } => Looplet::Thunk {
            preamble: preamble.clone(),
            body: Box::new(inner(body)),
            epilogue: epilogue.clone(),
        },
        Looplet::Switch(cases) => Looplet::Switch(
            cases
                .iter()
                .map(|(cond, l)| (cond.clone(), inner(l)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `l` with `f` applied to every child it reads (runs, spikes, lookups' elements, and
/// the children of steppers, sequences, thunks and switches); writes are left as they
/// are.
pub fn map_children(l: &Looplet, f: &Rc<dyn Fn(Tensor) -> Tensor>) -> Looplet {
    let tensor = |t: &Tensor| Box::new(f(t.clone()));
    match l {
        Looplet::Lookup(g) => {
            let (g, f) = (g.clone(), f.clone());
            Looplet::Lookup(Rc::new(move |i| f(g(i))))
        }
        Looplet::LookupWrite { .. } | Looplet::AcceptRun { .. } => l.clone(),
        Looplet::Run(t) => Looplet::Run(tensor(t)),
        Looplet::Spike { body, tail } => Looplet::Spike {
            body: tensor(body),
            tail: tensor(tail),
        },
        nested => map_nested(
            nested,
            &|stop| stop.clone(),
            &|s| map_stepper_children(s, f),
            &|l| map_children(l, f),
        ),
    }
}

fn map_stepper_children(s: &Rc<Stepper>, f: &Rc<dyn Fn(Tensor) -> Tensor>) -> Stepper {
    let inner = s.clone();
    Stepper {
        seek: Box::new(move |start| (inner.seek)(start)),
        preamble: s.preamble.clone(),
        stop: s.stop.clone(),
        chunk: map_children(&s.chunk, f),
        next: s.next.clone(),
        counted: s.counted.clone(),
        outside: s
            .outside
            .as_ref()
            .map(|x| x.map_block(|b| map_children(b, f))),
    }
}

/// `e + c`, folded when both are constants (so a seek to a known index stays known).
fn add_const(e: KExpr, c: &KExpr) -> KExpr {
    match (e, c) {
        (KExpr::Lit(Value::I64(n)), KExpr::Lit(Value::I64(k))) => KExpr::int(n.wrapping_add(*k)),
        (e, c) => e + c.clone(),
    }
}

fn shift_stepper(s: &Rc<Stepper>, c: &KExpr) -> Stepper {
    let inner = s.clone();
    let back = |e: &KExpr| e.clone() - c.clone();
    let up = c.clone();
    Stepper {
        seek: Box::new(move |start| (inner.seek)(add_const(start, &up))),
        preamble: s.preamble.clone(),
        stop: back(&s.stop),
        chunk: shift_by(&s.chunk, c),
        next: s.next.clone(),
        counted: s.counted.as_ref().map(|k| Counted {
            more: k.more.clone(),
            last: back(&k.last),
            // A shifted walk seeks into the middle of a child.
            first: None,
        }),
        outside: s.outside.as_ref().map(|x| x.map_block(|b| shift_by(b, c))),
    }
}

/// A permissive read (`A[~(i + c)]`) of a level of size `n`, already shifted: `missing`
/// before index `1 - c` and after `n - c`, the level in between (`c` may be computed at
/// run time).
pub fn pad_missing(l: Looplet, c: &KExpr, n: KExpr) -> Looplet {
    pad_with(l, c, n, Tensor::FillLeaf(Value::Missing))
}

/// A shifted level of size `n` padded with runs of `outside` before index `1 - c` and
/// after `n - c`.
pub fn pad_with(l: Looplet, c: &KExpr, n: KExpr, outside: Tensor) -> Looplet {
    let missing = || Looplet::Run(Box::new(outside.clone()));
    let minus_c = match c {
        KExpr::Lit(Value::I64(k)) => KExpr::int(k.wrapping_neg()),
        c => KExpr::int(0) - c.clone(),
    };
    Looplet::Sequence(vec![
        (Some(minus_c), missing()),
        (Some(n - c.clone()), l),
        (None, missing()),
    ])
}
