//! From the program AST to the lowering IR, with the facts the run time needs: which
//! kernel parameters each tensor's levels use, loop extents (Finch paper §4 rules, decided
//! statically: `_` is the size of a tensor mode indexed by the bare loop index), the
//! dimension constraints to check when tensors are bound, and output shapes.
//!
//! It also collects the checks the kernel does not make itself: windows inside their modes
//! and loop ranges against the offset reads they run over ([`WindowCheck`],
//! [`RangeCheck`]), and lifecycles (a tensor read and updated in one statement is refused).
//! Reads that several statements of a scope repeat are read once around them. An output
//! its in-order levels cannot take (read back, written by more than one statement, out of
//! loop order, at shifted or computed indices) is found during the conversion, which then
//! runs again with it written as a SparseHash group ([`convert`]).
//!
//! What the compiled engines do not take is refused here as `Unsupported`, naming the
//! construct: for instance a loop bound other than an integer literal or an input scalar
//! plus or minus a literal, a write into a Pattern leaf under a Dense level, a sparse
//! tensor declared with a value other than its fill, or an in-place update of an input
//! other than Dense levels over an Element leaf. The reference engine runs these programs.

use std::collections::{HashMap, HashSet};

use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::{Format, LevelFormat, LevelKind};
use crate::kernel::{BufId, KExpr, Kernel, LocalId};
use crate::looplets::{Expr, Fiber, Stmt, Tensor};
use crate::notation::ast::{collect_uses, each_scoped_statement};
use crate::notation::{self, AssignOp, DeclKind, Extent};

mod extents;
mod level_params;
mod shared_reads;
mod tensor_table;

pub use level_params::{HashView, LevelParams, OutArray, TensorInfo};
use shared_reads::*;
pub(crate) use tensor_table::readable_runs;
use tensor_table::*;

/// A window whose bounds use enclosing loop indices: computed and checked in the kernel.
struct DynamicWindow {
    tensor: usize,
    mode: usize,
    lo: notation::Expr,
    hi: notation::Expr,
    /// `~(lo:hi)(j)`: it may reach outside the tensor.
    permissive: bool,
}

/// Where a size comes from at run time.
#[derive(Clone, Debug, PartialEq)]
pub enum Size {
    /// Mode `mode` (0-based) of tensor `tensor` (index into the tensor table).
    Mode(usize, usize),
    /// A constant.
    Const(i64),
    /// The length `hi - lo + 1` of a window `(lo:hi)`.
    Span(Bound, Bound),
}

/// A window bound known when tensors are bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// A literal.
    Const(i64),
    /// The value of an integer input scalar the program does not write (tensor index),
    /// plus a constant.
    Scalar(usize, i64),
}

/// A window `(lo:hi)` of mode `mode` of tensor `tensor`: checked inside the mode when
/// tensors are bound.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowCheck {
    /// Tensor index.
    pub tensor: usize,
    /// Mode (0-based).
    pub mode: usize,
    /// First index.
    pub lo: Bound,
    /// Last index.
    pub hi: Bound,
}

/// A loop `for index = lo:hi` over a read `A[index + offset]` (Finch's OffsetArray): the
/// range must be the read's in-bounds range `1 - offset : n - offset`, where `n` is the
/// size of mode `mode` of tensor `tensor`, checked when tensors are bound (Finch.jl's
/// `dimensionalize!` checks both limits of a loop against every access; so does the
/// reference). The loop then runs over that range, where the read is in bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeCheck {
    /// The loop index.
    pub index: String,
    /// The range's first index.
    pub lo: Bound,
    /// The range's last index.
    pub hi: Bound,
    /// Tensor index.
    pub tensor: usize,
    /// Mode (0-based).
    pub mode: usize,
    /// The read's constant offset.
    pub offset: i64,
}

/// What lowering needs besides the statements.
pub struct Converted {
    /// The kernel being built (parameters and locals so far).
    pub kernel: Kernel,
    /// Tensors in declaration order.
    pub tensors: Vec<TensorInfo>,
    /// Pairs of sizes that must be equal (checked when tensors are bound), with the loop
    /// index that ties them.
    pub constraints: Vec<(Size, Size, String)>,
    /// For each non-scalar output declared at the top level: its shape.
    pub output_shapes: HashMap<usize, Vec<Option<Size>>>,
    /// Windows to check inside their modes.
    pub windows: Vec<WindowCheck>,
    /// Loop ranges to check against the offset reads they run over.
    pub ranges: Vec<RangeCheck>,
    /// The body in lowering IR.
    pub body: Stmt,
    /// Things that compile but cost more than the user may expect (a non-concordant read
    /// of a sparse level is random access).
    pub warnings: Vec<String>,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T> {
    Err(Error::Unsupported(what.into()))
}

struct Converter<'a> {
    tensors: &'a mut Vec<TensorInfo>,
    /// The kernel, for locals the conversion needs (window lengths).
    kernel: &'a mut Kernel,
    by_name: HashMap<String, usize>,
    /// Loop indices in scope, outermost first, with their size source.
    loops: Vec<(String, Option<Size>)>,
    /// Per loop in scope: the offset `c` of the reads that gave its extent (`for i = _`
    /// over `A[i + c]` runs over `1 - c : n - c`; `A[i - 1]` gives `2 : n + 1`).
    loop_offsets: Vec<i64>,
    /// `let` variables in scope.
    lets: Vec<String>,
    /// Reads bound to a `let` by [`common_scope_reads`] so far (names `let:read#{n}`).
    cse_count: usize,
    constraints: Vec<(Size, Size, String)>,
    output_shapes: HashMap<usize, Vec<Option<Size>>>,
    windows: Vec<WindowCheck>,
    ranges: Vec<RangeCheck>,
    /// How many loops enclosed each tensor's last declaration (`X .= v`).
    declared_at: HashMap<usize, usize>,
    /// Outputs written in a loop order their in-order levels cannot take, which can be
    /// written as a SparseHash group instead (the conversion is then done again).
    any_order: std::collections::HashSet<String>,
    top_level: bool,
    /// Sparse outputs already written by a statement.
    sparse_written: std::collections::HashSet<usize>,
    warnings: Vec<String>,
}

/// Converts a checked program, with the outputs named in `any_order` (and any found to
/// need it) written as SparseHash groups.
pub fn convert(
    program: &crate::Program,
    any_order: &std::collections::HashSet<String>,
) -> Result<Converted> {
    let mut any_order = any_order.clone();
    loop {
        match convert_with(program, &any_order) {
            // Outputs found to need writes in any order: once more, with those written
            // as SparseHash groups.
            Err(Retry(more)) if !more.is_subset(&any_order) => any_order.extend(more),
            Err(Retry(_)) => {
                return Err(Error::Program(
                    "internal: an output written in any order twice".into(),
                ))
            }
            Ok(c) => return c,
        }
    }
}

/// Outputs to write as SparseHash groups, found by a conversion that has to be redone.
struct Retry(std::collections::HashSet<String>);

/// [`convert`] with the outputs in `any_order` written as SparseHash groups.
fn convert_with(
    program: &crate::Program,
    any_order: &std::collections::HashSet<String>,
) -> std::result::Result<Result<Converted>, Retry> {
    let mut kernel = Kernel::new("finch_program");
    let mut tensors = match tensor_table(program, &mut kernel, any_order) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let by_name = tensors
        .iter()
        .enumerate()
        .map(|(k, t)| (t.name.clone(), k))
        .collect();
    let mut c = Converter {
        tensors: &mut tensors,
        kernel: &mut kernel,
        by_name,
        loops: Vec::new(),
        loop_offsets: Vec::new(),
        lets: Vec::new(),
        cse_count: 0,
        constraints: Vec::new(),
        output_shapes: HashMap::new(),
        windows: Vec::new(),
        ranges: Vec::new(),
        declared_at: HashMap::new(),
        any_order: std::collections::HashSet::new(),
        top_level: true,
        sparse_written: std::collections::HashSet::new(),
        warnings: Vec::new(),
    };
    let mut read_back = std::collections::HashSet::new();
    if let Err(e) = check_lifecycles(&c, &program.ast().body, &mut read_back) {
        return Ok(Err(e));
    }
    if !read_back.is_empty() {
        return Err(Retry(read_back));
    }
    let body = c.stmt(&program.ast().body);
    if !c.any_order.is_empty() {
        return Err(Retry(std::mem::take(&mut c.any_order)));
    }
    let body = match body {
        Ok(b) => b,
        Err(e) => return Ok(Err(e)),
    };
    let constraints = std::mem::take(&mut c.constraints);
    let output_shapes = std::mem::take(&mut c.output_shapes);
    let warnings = std::mem::take(&mut c.warnings);
    let windows = std::mem::take(&mut c.windows);
    let ranges = std::mem::take(&mut c.ranges);
    Ok(Ok(Converted {
        kernel,
        tensors,
        constraints,
        output_shapes,
        windows,
        ranges,
        body,
        warnings,
    }))
}

impl Converter<'_> {
    fn tensor(&self, name: &str) -> Result<usize> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| Error::Program(format!("`{name}` is not declared")))
    }

    /// A fresh `i64` kernel local.
    fn kernel_local(&mut self, name: &str) -> LocalId {
        self.kernel.local(name.to_string(), ScalarType::I64)
    }

    fn stmt(&mut self, s: &notation::Stmt) -> Result<Stmt> {
        let top = std::mem::replace(&mut self.top_level, false);
        let r = self.stmt_inner(s, top);
        self.top_level = top;
        r
    }

    fn stmt_inner(&mut self, s: &notation::Stmt, top: bool) -> Result<Stmt> {
        Ok(match s {
            notation::Stmt::Block(v) => {
                let mut out = Vec::new();
                for s in v {
                    if top {
                        // A SparseList output written by an earlier statement and read by
                        // this one is frozen first; writing it again after is refused.
                        let (mut reads, mut writes, mut declared) = Default::default();
                        collect_uses(s, &mut reads, &mut writes, &mut declared);
                        for name in &reads {
                            let Some(&t) = self.by_name.get(name) else {
                                continue;
                            };
                            // A SparseList output level right above the leaf.
                            let list_out = matches!(
                                self.tensors[t].levels.iter().rev().nth(1),
                                Some(LevelParams::SparseListOut { .. })
                            );
                            if list_out
                                && self.sparse_written.contains(&t)
                                && !self.tensors[t].frozen_in_kernel
                            {
                                self.tensors[t].frozen_in_kernel = true;
                                out.push(Stmt::Freeze(t));
                            }
                        }
                        for name in &writes {
                            if let Some(&t) = self.by_name.get(name) {
                                if self.tensors[t].frozen_in_kernel {
                                    return unsupported(format!(
                                        "writing `{name}` after a statement read it (a sparse output written in order is frozen when read; declare it again to write it anew)"
                                    ));
                                }
                            }
                        }
                    }
                    // Statements of a top-level block are still top level.
                    self.top_level = top;
                    out.push(self.stmt(s)?);
                    // A `return` ends the program: what follows never runs.
                    if top && s.returns() {
                        break;
                    }
                }
                if top {
                    Stmt::Block(out)
                } else {
                    common_scope_reads(Stmt::Block(out), &mut self.cse_count)
                }
            }
            notation::Stmt::Declare { tensor, init } => {
                let t = self.tensor(tensor)?;
                self.declared_at.insert(t, self.loops.len());
                let init = match self.expr(init)? {
                    Expr::Lit(v) => v,
                    _ => {
                        return unsupported(format!("`{tensor} .= ...` with a non-constant value"))
                    }
                };
                if let Some(l) = self.tensors[t].scalar {
                    let _ = l;
                    let fill = self.tensors[t].format.fill_value();
                    let is_fill = fill
                        .scalar_type()
                        .and_then(|ty| init.convert_exact(ty))
                        .is_some_and(|v| v.same(&fill));
                    if let (Some(_), Format::Scalar(kind, _)) =
                        (self.tensors[t].dirty, &self.tensors[t].format)
                    {
                        if !is_fill {
                            return Err(Error::Program(format!(
                                "`{tensor} .= {init}`: a {} is declared with its fill value ({fill}); until it is written it reads as the fill",
                                kind.name()
                            )));
                        }
                    }
                    return Ok(Stmt::SetScalar(t, Expr::Lit(init)));
                }
                let dense = self.tensors[t]
                    .levels
                    .iter()
                    .all(|l| matches!(l, LevelParams::Dense { .. } | LevelParams::Element { .. }));
                let byte_map = matches!(
                    self.tensors[t].levels.as_slice(),
                    [
                        LevelParams::SparseByteMapOut { .. },
                        LevelParams::Element { .. } | LevelParams::Pattern
                    ]
                );
                let runs = readable_runs(&self.tensors[t]);
                // A SparseHash group, under leading Dense levels or not: one table over
                // every mode, emptied as a whole.
                let hash = matches!(
                    self.tensors[t]
                        .levels
                        .iter()
                        .find(|l| !matches!(l, LevelParams::Dense { .. })),
                    Some(LevelParams::HashOut { .. })
                );
                // A sorted vector workspace: written in order, then read, per iteration.
                let list = self.tensors[t].kind == DeclKind::Temp
                    && matches!(
                        self.tensors[t].levels.as_slice(),
                        [
                            LevelParams::SparseListOut { .. },
                            LevelParams::Element { .. } | LevelParams::Pattern
                        ]
                    );
                // A sparse level holds only what differs from its fill: the positions a
                // kernel leaves unwritten read as the fill, in an output or a workspace,
                // at the top level or in a loop (Finch.jl's Element level refuses any value
                // but the fill, under a dense level too).
                let sparse = self.tensors[t]
                    .levels
                    .iter()
                    .any(LevelParams::is_sparse_out);
                let fill = self.tensors[t].format.fill_value();
                if sparse
                    && !init
                        .convert_exact(fill.scalar_type().unwrap_or(ScalarType::F64))
                        .is_some_and(|v| v.same(&fill))
                {
                    return unsupported(format!(
                        "declaring the sparse tensor `{tensor}` with {init}, which is not its fill value {fill} (a sparse level stores only what differs from the fill, as in Finch.jl); write `{tensor} .= {fill}`, or give `{tensor}` the leaf `Element({init})` to start from {init}, or Dense levels"
                    ));
                }
                if !top {
                    if self.tensors[t].kind == DeclKind::Input {
                        return unsupported(format!(
                            "declaring the input `{tensor}` inside a loop or branch; declare an output or `temp` and copy `{tensor}` into it"
                        ));
                    }
                    if !(dense || byte_map || runs || hash || list) {
                        // Any other format is written as one SparseHash group below its
                        // leading Dense levels, which a declaration empties, and built in
                        // its own format when frozen (the conversion is done again).
                        self.needs_any_order(t, format!(
                            "declaring `{tensor}` inside a loop or branch: its levels must take writes in any order; declare it with Dense, SparseByteMap or SparseHash levels over an Element or Pattern leaf"
                        ))?;
                        return Ok(Stmt::Block(vec![]));
                    }
                    // Allocated once by the run time; reset here on every execution.
                    self.tensors[t].init.get_or_insert(init);
                    return Ok(Stmt::Reset(t, init));
                }
                if self.tensors[t].kind == DeclKind::Input {
                    return unsupported(format!("re-declaring the input `{tensor}`"));
                }
                self.tensors[t].init = Some(init);
                Stmt::Block(vec![])
            }
            notation::Stmt::Assign { lhs, op, rhs } => {
                let t = self.tensor(&lhs.tensor)?;
                let sparse = self.tensors[t].levels.iter().any(is_extruded);
                if sparse && !self.sparse_written.insert(t) {
                    self.needs_any_order(t, format!(
                        "`{}` is written by more than one statement; a sparse output of this format is written once, in order",
                        lhs.tensor
                    ))?;
                }
                let input = self.tensors[t].kind == DeclKind::Input;
                let dense = self.tensors[t]
                    .levels
                    .iter()
                    .all(|l| matches!(l, LevelParams::Dense { .. } | LevelParams::Element { .. }));
                if input && !dense {
                    return unsupported(format!(
                        "updating the input `{}` in place: only inputs of Dense levels over an Element leaf can be updated in place",
                        lhs.tensor
                    ));
                }
                // An input updated in place starts from its values (no declaration needed).
                if !input && self.tensors[t].scalar.is_none() && self.tensors[t].init.is_none() {
                    return Err(Error::Program(format!(
                        "`{}` is written before it is declared (add `{} .= ...` before the loops)",
                        lhs.tensor, lhs.tensor
                    )));
                }
                let (tensor, idx) = self.access(lhs, true)?;
                let op = match op {
                    AssignOp::Store => None,
                    AssignOp::Reduce(op) => Some(*op),
                };
                let rhs = self.expr(rhs)?;
                common_scope_reads(
                    Stmt::Assign {
                        lhs: (tensor, idx),
                        op,
                        rhs,
                    },
                    &mut self.cse_count,
                )
            }
            notation::Stmt::Loop {
                index,
                extent,
                body,
            } => {
                let mut offset = 0i64;
                // An explicit range not starting at 1: the loop's own bounds.
                let mut range: Option<(KExpr, KExpr)> = None;
                // Windows `A[(lo:hi)(i)]` give `i` the span of the window.
                let (spans, dynamic) = self.window_uses(index, body)?;
                // The loop statements run first: spans of windows computed from enclosing
                // indices, and their checks.
                let mut before: Vec<Stmt> = Vec::new();
                let size = match extent {
                    // Windows alone: a known one gives the extent, else one computed in
                    // the kernel (below).
                    Extent::Auto
                        if !(spans.is_empty() && dynamic.is_empty()) && {
                            let mut bare = Vec::new();
                            self.bare_uses(index, body, &mut bare);
                            let mut shifted = Vec::new();
                            self.offset_uses(index, body, &mut shifted);
                            bare.is_empty() && shifted.is_empty()
                        } =>
                    {
                        spans.first().cloned()
                    }
                    Extent::Auto => {
                        // Bare uses (`A[i]`) and offset uses (`A[i + c]`) each give a range
                        // `1 - c : n - c`; permissive uses (`A[~i]`) give none. All ranges
                        // must agree.
                        let mut uses: Vec<(usize, usize, i64)> = Vec::new();
                        let mut bare = Vec::new();
                        self.bare_uses(index, body, &mut bare);
                        uses.extend(bare.into_iter().map(|(t, m)| (t, m, 0)));
                        self.offset_uses(index, body, &mut uses);
                        let Some((t, m, c)) = self.agreeing_uses(index, "_", uses)? else {
                            let mut indexed = false;
                            walk_accesses(body, &mut |a| {
                                indexed |= a.indices.iter().any(|e| mentions_index(e, index));
                            });
                            if indexed {
                                return unsupported(format!(
                                    "cannot determine the extent of `for {index} = _`: every tensor is indexed by `{index}` permissively or through an expression Finch-RS does not compile yet (give the loop a range)"
                                ));
                            }
                            return Err(Error::Program(format!(
                                "cannot determine the extent of `for {index} = _`: no tensor is indexed by `{index}` in its body"
                            )));
                        };
                        offset = c;
                        Some(Size::Mode(t, m))
                    }
                    Extent::Range(lo_expr, hi_expr) => {
                        let (lo, hi) = (self.bound(lo_expr)?, self.bound(hi_expr)?);
                        let mut shifted = Vec::new();
                        self.offset_uses(index, body, &mut shifted);
                        if shifted.is_empty() {
                            let (size, own) = self.plain_range(index, (lo, hi), body)?;
                            range = own;
                            Some(size)
                        } else {
                            let extent = format!(
                                "{}:{}",
                                notation::print_expr(lo_expr),
                                notation::print_expr(hi_expr)
                            );
                            let windowed = !(spans.is_empty() && dynamic.is_empty());
                            let (t, m, c) = self.shifted_range(
                                index,
                                &extent,
                                (lo, hi),
                                body,
                                shifted,
                                windowed,
                            )?;
                            offset = c;
                            Some(Size::Mode(t, m))
                        }
                    }
                };
                // Windows computed from enclosing indices: each lies inside its mode and
                // has the loop's length, checked each time the loop starts; with nothing
                // else to give the loop its extent, the first one does.
                if !dynamic.is_empty() {
                    let length = match &size {
                        Some(Size::Const(n)) => Some(Expr::Lit(Value::I64(*n))),
                        Some(Size::Mode(t, m)) => Some(Expr::Code(self.mode_size(*t, *m)?)),
                        Some(Size::Span(lo, hi)) => Some(Expr::Code(crate::kernel::tidy_expr(
                            (self.bound_value(*hi)? - self.bound_value(*lo)?) + 1,
                        ))),
                        None => None,
                    };
                    if offset != 0 || range.is_some() {
                        return unsupported(format!(
                            "a window computed from enclosing indices with an offset read of `{index}` or a range not starting at 1"
                        ));
                    }
                    let span_local = self.kernel_local(&format!("{index}_window_length"));
                    let mut first = true;
                    for w in &dynamic {
                        let (t, m) = (&w.tensor, &w.mode);
                        let (lo, hi) = (self.expr(&w.lo)?, self.expr(&w.hi)?);
                        let int = |n: i64| Expr::Lit(Value::I64(n));
                        let len = Expr::Call(
                            Op::Add,
                            vec![Expr::Call(Op::Sub, vec![hi.clone(), lo.clone()]), int(1)],
                        );
                        let n = Expr::Code(self.mode_size(*t, *m)?);
                        let mut ok = vec![Expr::Call(Op::Le, vec![int(0), len.clone()])];
                        if !w.permissive {
                            ok.push(Expr::Call(Op::Le, vec![int(1), lo.clone()]));
                            ok.push(Expr::Call(Op::Le, vec![hi.clone(), n]));
                        }
                        match (&length, first) {
                            (Some(l), _) => ok.push(Expr::Call(Op::Eq, vec![len, l.clone()])),
                            (None, true) => before.push(Stmt::SetLocal(span_local, len)),
                            (None, false) => ok.push(Expr::Call(
                                Op::Eq,
                                vec![len, Expr::Code(KExpr::Local(span_local))],
                            )),
                        }
                        first = false;
                        before.push(Stmt::Check(
                            Expr::Call(Op::And, ok),
                            crate::backend::c::WINDOW_MISMATCH_BASE + *t as i32,
                        ));
                    }
                    if length.is_none() {
                        range = Some((KExpr::int(1), KExpr::Local(span_local)));
                    }
                }
                if let Some(size) = &size {
                    for span in &spans {
                        if span != size {
                            if offset != 0 {
                                return unsupported(format!(
                                    "a window and an offset read of `{index}` in one loop (read one of them permissively, `~`)"
                                ));
                            }
                            self.constraints
                                .push((span.clone(), size.clone(), index.clone()));
                        }
                    }
                }
                self.loops.push((index.clone(), size));
                self.loop_offsets.push(offset);
                let body = self.stmt(body);
                self.loop_offsets.pop();
                let (_, size) = self.loops.pop().unwrap_or_default();
                let (lo, hi) = match (range, size) {
                    (Some(r), _) => r,
                    (None, Some(Size::Const(n))) => (KExpr::int(1), KExpr::int(n)),
                    (None, Some(Size::Mode(t, m))) => (KExpr::int(1), self.mode_size(t, m)?),
                    (None, Some(Size::Span(lo, hi))) => (
                        KExpr::int(1),
                        crate::kernel::tidy_expr(
                            (self.bound_value(hi)? - self.bound_value(lo)?) + 1,
                        ),
                    ),
                    (None, None) => return Err(Error::Program(format!("no extent for `{index}`"))),
                };
                // `A[i + c]` in bounds: `i` runs over `1 - c : n - c`.
                let (lo, hi) = if offset == 0 {
                    (lo, hi)
                } else {
                    (
                        crate::kernel::tidy_expr(KExpr::bin(
                            crate::algebra::Op::Sub,
                            lo,
                            KExpr::int(offset),
                        )),
                        crate::kernel::tidy_expr(KExpr::bin(
                            crate::algebra::Op::Sub,
                            hi,
                            KExpr::int(offset),
                        )),
                    )
                };
                let l = Stmt::Loop {
                    index: index.clone(),
                    lo,
                    hi,
                    body: Box::new(body?),
                };
                if before.is_empty() {
                    l
                } else {
                    before.push(l);
                    Stmt::Block(before)
                }
            }
            notation::Stmt::Sieve {
                cond,
                then,
                otherwise,
            } => common_scope_reads(
                Stmt::Sieve {
                    cond: self.expr(cond)?,
                    then: Box::new(self.stmt(then)?),
                    otherwise: Box::new(match otherwise {
                        Some(o) => self.stmt(o)?,
                        None => Stmt::Block(vec![]),
                    }),
                },
                &mut self.cse_count,
            ),
            notation::Stmt::Define { var, value, body } => {
                let value = self.expr(value)?;
                self.lets.push(var.clone());
                let body = self.stmt(body);
                self.lets.pop();
                common_scope_reads(
                    Stmt::Define {
                        var: format!("let:{var}"),
                        value,
                        body: Box::new(body?),
                    },
                    &mut self.cse_count,
                )
            }
            notation::Stmt::Freeze(_) | notation::Stmt::Thaw(_) => Stmt::Block(vec![]),
            notation::Stmt::Return(_) => {
                if !top {
                    return unsupported("`return` inside a loop or branch");
                }
                Stmt::Block(vec![])
            }
        })
    }

    /// Converts an access: checks bare, concordant indices; records output shapes.
    fn access(&mut self, a: &notation::Access, is_write: bool) -> Result<(Tensor, Vec<Expr>)> {
        let t = self.tensor(&a.tensor)?;
        if self.tensors[t].scalar.is_some() {
            // A SparseScalar read is a run-time choice between its value and its fill, so
            // the statement specializes where it was not written (`0 * x` vanishes).
            if let (Some(dirty), false) = (self.tensors[t].dirty, is_write) {
                return Ok((
                    Tensor::Switch {
                        pre: vec![],
                        cond: KExpr::Local(dirty),
                        then: Box::new(Tensor::Scalar(t)),
                        otherwise: Box::new(Tensor::FillLeaf(self.tensors[t].format.fill_value())),
                    },
                    vec![],
                ));
            }
            return Ok((Tensor::Scalar(t), vec![]));
        }
        let mut depths = Vec::new();
        let mut idx = Vec::new();
        let mut protocols = crate::looplets::Protocols::default();
        let ndims = a.indices.len();
        for (m, e) in a.indices.iter().enumerate() {
            // `(lo:hi)(j)`: index `lo + j - 1`, `j` in `1:hi-lo+1` (Finch's WindowedTensor
            // under an OffsetTensor); the window is checked inside the mode when tensors
            // are bound. `~(lo:hi)(j)` reads `missing` (writes nothing) outside the tensor.
            let (window, permissive) = match e {
                notation::Expr::Permissive(x) if matches!(**x, notation::Expr::Window { .. }) => {
                    (&**x, true)
                }
                e => (e, false),
            };
            if let notation::Expr::Window {
                lo,
                hi,
                index: within,
            } = window
            {
                let walked = match &**within {
                    notation::Expr::Index(name) if !self.around_declaration(t, m, name) => {
                        Some(name)
                    }
                    _ => None,
                };
                let Some(name) = walked else {
                    // An expression: index `lo + e - 1` computed (and concordized), made
                    // out of range when `e` is outside the window so the read fails as the
                    // reference's does. A permissive window reads `missing` outside the
                    // tensor, but `e` outside the window is still an error: the read's
                    // guard.
                    if let (Ok(lo), Ok(hi), false) = (self.bound(lo), self.bound(hi), permissive) {
                        self.windows.push(WindowCheck {
                            tensor: t,
                            mode: m,
                            lo,
                            hi,
                        });
                    }
                    if is_write && !self.tensors[t].takes_writes_in_any_order() {
                        self.needs_any_order(t, format!(
                            "writing `{}` through a window: only Dense, SparseByteMap and SparseHash levels take writes at shifted positions",
                            a.tensor
                        ))?;
                    }
                    let call =
                        |op: Op, args: Vec<notation::Expr>| notation::Expr::Call { op, args };
                    let int = |n: i64| notation::Expr::Literal(Value::I64(n));
                    let (e, lo, hi) = ((**within).clone(), (**lo).clone(), (**hi).clone());
                    let span = call(Op::Add, vec![call(Op::Sub, vec![hi, lo.clone()]), int(1)]);
                    let inside = call(
                        Op::And,
                        vec![
                            call(Op::Le, vec![int(1), e.clone()]),
                            call(Op::Le, vec![e.clone(), span]),
                        ],
                    );
                    let at = call(Op::Add, vec![lo, call(Op::Sub, vec![e, int(1)])]);
                    if permissive {
                        let guard = Box::new(self.expr(&inside)?);
                        idx.push(Expr::Permissive(Box::new(self.expr(&at)?), Some(guard)));
                        continue;
                    }
                    idx.push(self.expr(&call(Op::IfElse, vec![inside, at, int(0)]))?);
                    continue;
                };
                // Bounds known when tensors are bound are checked then; bounds from
                // enclosing indices, where the loop over the window starts.
                match (self.bound(lo), self.bound(hi)) {
                    (Ok(lo), Ok(hi)) => {
                        if !permissive {
                            self.windows.push(WindowCheck {
                                tensor: t,
                                mode: m,
                                lo,
                                hi,
                            })
                        }
                    }
                    _ if self.known_at_loop(lo) && self.known_at_loop(hi) => {}
                    (lo, hi) => {
                        lo?;
                        hi?;
                    }
                }
                if is_write {
                    if !self.tensors[t].takes_writes_in_any_order() {
                        self.needs_any_order(t, format!(
                            "writing `{}` through a window: only Dense, SparseByteMap and SparseHash levels take writes at shifted positions",
                            a.tensor
                        ))?;
                    }
                    let at = notation::Expr::Call {
                        op: Op::Add,
                        args: vec![
                            (**within).clone(),
                            notation::Expr::Call {
                                op: Op::Sub,
                                args: vec![(**lo).clone(), notation::Expr::Literal(Value::I64(1))],
                            },
                        ],
                    };
                    let at = self.expr(&at)?;
                    idx.push(if permissive {
                        Expr::Permissive(Box::new(at), None)
                    } else {
                        at
                    });
                    continue;
                }
                let depth = self.loop_depth(name, &a.tensor)?;
                depths.push(depth);
                idx.push(Expr::Wrapped {
                    index: name.clone(),
                    offset: -1,
                    by: Some(Box::new(self.expr(lo)?)),
                    permissive,
                    in_bounds: !permissive,
                });
                continue;
            }
            // `i + c`, `~i`, `~(i + c)`: an offset and/or permissive read (wrapperization).
            let wrapped = match e {
                notation::Expr::Permissive(x) => {
                    crate::reference::dims::offset_index(x).map(|(i, c)| (i, c, true))
                }
                other => crate::reference::dims::offset_index(other)
                    .filter(|&(_, c)| c != 0)
                    .map(|(i, c)| (i, c, false)),
            };
            let wrapped = wrapped.filter(|(name, ..)| !self.around_declaration(t, m, name));
            let random_writes = self.tensors[t].takes_writes_in_any_order();
            if let Some((name, offset, permissive)) = wrapped {
                if is_write {
                    if !random_writes {
                        self.needs_any_order(t, format!(
                            "writing `{}[{}]` through an offset or permissive index: only Dense, SparseByteMap and SparseHash levels take writes at shifted positions",
                            a.tensor,
                            notation::print_expr(e)
                        ))?;
                    }
                    // A shifted write is a write at a computed index (concordized at the
                    // leaf); a permissive one outside the tensor is dropped.
                    let at = match e {
                        notation::Expr::Permissive(x) => {
                            Expr::Permissive(Box::new(self.expr(x)?), None)
                        }
                        other => self.expr(other)?,
                    };
                    let _ = (name, offset, permissive);
                    idx.push(at);
                    continue;
                }
                let depth = self.loop_depth(name, &a.tensor)?;
                depths.push(depth);
                idx.push(Expr::Wrapped {
                    index: name.to_string(),
                    offset,
                    by: None,
                    permissive,
                    in_bounds: true,
                });
                continue;
            }
            // `i + e` or `~(i + e)`, `e` computed from indices of loops around `i`'s
            // (Finch's ToeplitzTensor): the level is walked in `i`'s loop, shifted by `e`;
            // outside the tensor a permissive read is `missing` and any other stops the
            // kernel where it is read.
            let (inner, permissive) = match e {
                notation::Expr::Permissive(x) => (&**x, true),
                other => (other, false),
            };
            if !is_write {
                let toeplitz = self
                    .toeplitz(inner)
                    .filter(|(name, _)| !self.around_declaration(t, m, name));
                if let Some((name, rest)) = toeplitz {
                    let depth = self
                        .loops
                        .iter()
                        .position(|(n, _)| *n == name)
                        .ok_or_else(|| Error::Program("internal: toeplitz index".into()))?;
                    depths.push(depth);
                    idx.push(Expr::Wrapped {
                        index: name,
                        offset: 0,
                        by: Some(Box::new(self.expr(&rest)?)),
                        permissive,
                        in_bounds: false,
                    });
                    continue;
                }
            }
            // Any other index expression of loop indices (`I[i]`, `i + j`): its value is
            // computed, then read through a one-index loop (concordization).
            let computed = !matches!(e, notation::Expr::Index(_) | notation::Expr::Protocol(..));
            if computed {
                let writable = self.tensors[t].takes_writes_in_any_order();
                if is_write && !writable {
                    self.needs_any_order(t, format!(
                        "writing `{}[{}]` at a computed index: only Dense, SparseByteMap and SparseHash levels take writes in any order",
                        a.tensor,
                        notation::print_expr(e)
                    ))?;
                }
                // `~(expr)`: out of the tensor a read is `missing` and a write is dropped.
                if let notation::Expr::Permissive(x) = e {
                    idx.push(Expr::Permissive(Box::new(self.expr(x)?), None));
                    continue;
                }
                idx.push(self.expr(e)?);
                continue;
            }
            let name = match e {
                notation::Expr::Index(i) => i,
                notation::Expr::Protocol(p @ (notation::Protocol::Follow | notation::Protocol::Gallop), x) if !is_write && ndims - 1 - m < crate::looplets::Protocols::MAX_DEPTH => match &**x {
                    notation::Expr::Index(i) => {
                        if *p == notation::Protocol::Follow {
                            protocols.set_follow(ndims - 1 - m);
                        } else {
                            protocols.set_gallop(ndims - 1 - m);
                        }
                        i
                    }
                    _ => return unsupported(format!("a protocol around a non-index in `{}[...]`", a.tensor)),
                },
                notation::Expr::Protocol(p, x) => match &**x {
                    notation::Expr::Index(i) if *p == notation::Protocol::Walk || *p == notation::Protocol::Extrude => i,
                    _ => return unsupported(format!("the protocol `{}` in `{}[...]` (reads take `walk`, `gallop` and `follow`)", p.name(), a.tensor)),
                },
                other => {
                    return unsupported(format!(
                        "the index `{}` of `{}` is not compiled (accesses take loop indices, windows, protocols, and expressions of indices and scalars)",
                        notation::print_expr(other),
                        a.tensor
                    ))
                }
            };
            if self.around_declaration(t, m, name) {
                if is_write && !self.tensors[t].takes_writes_in_any_order() {
                    self.needs_any_order(t, format!(
                        "writing `{}` at `{name}`, the index of a loop around its declaration: only Dense, SparseByteMap and SparseHash levels take writes at an index fixed for the whole declaration",
                        a.tensor
                    ))?;
                }
                // A value, not `Index` (which the loop would walk): the cast keeps the
                // simplifier from folding it back.
                let at = Expr::Call(Op::Cast(ScalarType::I64), vec![Expr::Index(name.clone())]);
                idx.push(at);
                continue;
            }
            let depth = self.loop_depth(name, &a.tensor)?;
            depths.push(depth);
            idx.push(Expr::Index(name.clone()));
        }
        // Concordant: the last index is bound outermost (Finch is column-major). A read
        // out of that order is concordized at the leaf (random access into the levels
        // below the first out-of-order index); a write must be to levels that take writes
        // in any order.
        let random_writes = self.tensors[t].takes_writes_in_any_order();
        if depths.windows(2).any(|w| w[0] <= w[1]) && !is_write {
            let sparse = self.tensors[t].levels.iter().any(|l| {
                !matches!(
                    l,
                    LevelParams::Dense { .. } | LevelParams::Element { .. } | LevelParams::Pattern
                )
            });
            if sparse {
                self.warnings.push(format!(
                    "the read `{}[{}]` is not in loop order (its last index should be the outermost loop); its sparse levels are searched at each access (reorder the loops or store `{}` transposed to avoid it)",
                    a.tensor,
                    a.indices.iter().map(notation::print_expr).collect::<Vec<_>>().join(", "),
                    a.tensor
                ));
            }
        } else if depths.windows(2).any(|w| w[0] <= w[1]) && !random_writes {
            self.needs_any_order(t, format!(
                "the write `{}[{}]` is not in loop order (the last index must be the outermost loop), and only Dense, SparseByteMap and SparseHash levels take writes in any order",
                a.tensor,
                a.indices.iter().map(notation::print_expr).collect::<Vec<_>>().join(", ")
            ))?;
        }
        if is_write && depths.len() == ndims {
            self.check_single_pass(t, &depths, a)?;
        }
        if is_write {
            if let Some(&d) = depths.iter().find(|&&d| self.loop_offsets[d] != 0) {
                return unsupported(format!(
                    "writing `{}` indexed by `{}`, which runs over shifted indices (an output sized by an offset loop)",
                    a.tensor, self.loops[d].0
                ));
            }
            let sizes: Vec<Option<Size>> =
                depths.iter().map(|&d| self.loops[d].1.clone()).collect();
            let entry = self
                .output_shapes
                .entry(t)
                .or_insert_with(|| vec![None; sizes.len()]);
            for (slot, s) in entry.iter_mut().zip(sizes) {
                if slot.is_none() {
                    *slot = s;
                }
            }
        }
        if is_write {
            protocols.set_written();
        }
        let root = Tensor::Fiber(Fiber {
            tensor: t,
            depth: 0,
            pos: KExpr::int(0),
            end: None,
            hollow: None,
            protocols,
        });
        Ok((root, idx))
    }

    /// Would accessing mode `m` of `t` at loop index `name` walk a level of `t` in a loop
    /// around `t`'s declaration (`for i: w .= 0; ...; y[j] = w[(3:5)(i)]`)? A read's walk
    /// would start before each iteration empties and refills `t`, and then read positions
    /// of the old contents (a RunList workspace: old values, and positions out of bounds
    /// through stale run ends); a write's would record its index after the iteration's
    /// reads. Such an access is made one at a computed index instead, concordized where it
    /// is. A Dense level (with every level above it Dense) is read and written at the
    /// index wherever the access is, so it is walked still.
    fn around_declaration(&self, t: usize, m: usize, name: &str) -> bool {
        let declared = self.declared_at.get(&t).copied().unwrap_or(0);
        let Some(depth) = self.loops.iter().position(|(n, _)| n == name) else {
            return false;
        };
        let info = &self.tensors[t];
        let modes = info.format.ndims();
        depth < declared
            && info
                .levels
                .iter()
                .take(modes.saturating_sub(m))
                .any(|l| !matches!(l, LevelParams::Dense { .. }))
    }

    /// A write to `t` that needs levels taking writes in any order ([`any_order_or`]).
    fn needs_any_order(&mut self, t: usize, why: String) -> Result<()> {
        any_order_or(&self.tensors[t], &mut self.any_order, why)
    }

    /// A level written in order, once per index (a SparseList, a structured or a recorded
    /// level) is filled in one pass over each of its fibers. A loop that does not index
    /// the tensor, inside the tensor's declaration and around the loop over the level's
    /// own index, would come back to the same fibers on every iteration (between the
    /// levels' loops, or around a Dense parent's: `for k, j, i` writing `C[i, j]`) and
    /// start them again, losing what the earlier passes wrote, so it is refused.
    /// `depths[m]` is the depth of the loop over mode `m`.
    fn check_single_pass(
        &mut self,
        t: usize,
        depths: &[usize],
        a: &notation::Access,
    ) -> Result<()> {
        let info = &self.tensors[t];
        let ndims = depths.len();
        let declared = self.declared_at.get(&t).copied().unwrap_or(0);
        for (k, level) in info.levels.iter().take(ndims).enumerate() {
            let m = ndims - 1 - k;
            let d = depths[m];
            // A SparsePoint keeps its fiber's index and value in its buffers, so a later
            // pass adds to them (or conflicts) rather than starting over.
            let restarts =
                is_extruded(level) && !matches!(level, LevelParams::SparsePointOut { .. });
            if restarts {
                if let Some(between) = (declared..d).find(|&b| !depths.contains(&b)) {
                    return self.needs_any_order(t, format!(
                        "writing `{}[{}]` inside the loop over `{}`, which does not index `{}`: each of its iterations would write mode {} of `{}` ({}) again from the start, but that level is written in order, once per index; make `{}` an inner loop, or write into Dense, SparseByteMap or SparseHash levels (which take writes in any order) and convert",
                        a.tensor,
                        a.indices.iter().map(notation::print_expr).collect::<Vec<_>>().join(", "),
                        self.loops[between].0,
                        a.tensor,
                        m + 1,
                        a.tensor,
                        info.format,
                        self.loops[between].0
                    ));
                }
            }
        }
        Ok(())
    }

    fn expr(&mut self, e: &notation::Expr) -> Result<Expr> {
        Ok(match e {
            notation::Expr::Literal(v) => Expr::Lit(*v),
            notation::Expr::Index(i) => Expr::Index(i.clone()),
            notation::Expr::Variable(v) => Expr::Index(format!("let:{v}")),
            notation::Expr::Call { op, args } => Expr::Call(
                *op,
                args.iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>>>()?,
            ),
            notation::Expr::Access(a) => {
                let (t, idx) = self.access(a, false)?;
                Expr::Access(Box::new(t), idx)
            }
            notation::Expr::Permissive(_)
            | notation::Expr::Protocol(..)
            | notation::Expr::Window { .. } => {
                return unsupported(format!(
                    "`{}` outside a tensor index",
                    notation::print_expr(e)
                ))
            }
        })
    }
}

/// Lifecycles of sparse outputs: one, once written, is read back only where its format
/// allows (a SparseList right above the leaf; otherwise the tensor is assembled in any
/// order and read after). The language's own rule, that within one statement a tensor is
/// either read or updated, is checked for every engine when the program is made
/// (`Program::from_ast`).
fn check_lifecycles(
    c: &Converter<'_>,
    body: &notation::Stmt,
    any_order: &mut std::collections::HashSet<String>,
) -> Result<()> {
    let mut written_sparse: Vec<String> = Vec::new();
    each_scoped_statement(body, &mut |_, uses| {
        if let Some(name) = uses.reads.iter().find(|n| {
            written_sparse.contains(n)
                && !c.by_name.get(*n).is_some_and(|&t| {
                    matches!(
                        c.tensors[t].levels.iter().rev().nth(1),
                        Some(LevelParams::SparseListOut { .. })
                    )
                })
        }) {
            // A hash table is read back in the kernel that writes it.
            let why = format!(
                "reading the sparse output `{name}` after writing it (this format is not read back in the kernel that writes it)"
            );
            match c.by_name.get(name) {
                Some(&t) => any_order_or(&c.tensors[t], any_order, why)?,
                None => return unsupported(why),
            }
        }
        for name in &uses.writes {
            // Levels not read back in the kernel that writes them: in-order ones (but a
            // SparseList over the leaf and run-length levels), and SparseByteMap levels
            // below the root.
            let sparse = c.by_name.get(name).is_some_and(|&t| {
                let levels = &c.tensors[t].levels;
                (levels.iter().any(is_extruded) && !readable_runs(&c.tensors[t]))
                    || levels
                        .iter()
                        .skip(1)
                        .any(|l| matches!(l, LevelParams::SparseByteMapOut { .. }))
            });
            if sparse {
                written_sparse.push(name.clone());
            }
        }
        Ok(())
    })
}

/// Does an expression mention the index?
fn mentions_index(e: &notation::Expr, index: &str) -> bool {
    match e {
        notation::Expr::Index(i) => i == index,
        notation::Expr::Call { args, .. } => args.iter().any(|a| mentions_index(a, index)),
        notation::Expr::Access(a) => a.indices.iter().any(|x| mentions_index(x, index)),
        notation::Expr::Permissive(x) | notation::Expr::Protocol(_, x) => mentions_index(x, index),
        notation::Expr::Window { lo, hi, index: i } => {
            [lo, hi, i].into_iter().any(|x| mentions_index(x, index))
        }
        _ => false,
    }
}

/// Calls `f` on every access in a statement.
fn walk_accesses(s: &notation::Stmt, f: &mut dyn FnMut(&notation::Access)) {
    fn in_expr(e: &notation::Expr, f: &mut dyn FnMut(&notation::Access)) {
        match e {
            notation::Expr::Access(a) => {
                f(a);
                a.indices.iter().for_each(|x| in_expr(x, f));
            }
            notation::Expr::Call { args, .. } => args.iter().for_each(|x| in_expr(x, f)),
            notation::Expr::Permissive(x) | notation::Expr::Protocol(_, x) => in_expr(x, f),
            notation::Expr::Window { lo, hi, index } => {
                [lo, hi, index].into_iter().for_each(|x| in_expr(x, f))
            }
            _ => {}
        }
    }
    each_stmt(s, &mut |s| match s {
        notation::Stmt::Assign { lhs, rhs, .. } => {
            f(lhs);
            lhs.indices.iter().for_each(|x| in_expr(x, f));
            in_expr(rhs, f);
        }
        notation::Stmt::Declare { init, .. } => in_expr(init, f),
        notation::Stmt::Sieve { cond, .. } => in_expr(cond, f),
        notation::Stmt::Define { value, .. } => in_expr(value, f),
        _ => {}
    });
}
