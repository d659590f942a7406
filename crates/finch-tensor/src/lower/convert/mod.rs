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

mod access;
mod extents;
mod level_params;
mod shared_reads;
mod stmts;
mod tensor_table;

pub(crate) use level_params::{LeafParams, ReadLevel, WriteTraits, WrittenLevel};
pub use level_params::{LevelParams, OutArray, Read, TensorInfo, Written};
use shared_reads::*;
pub(crate) use tensor_table::readable_runs;
use tensor_table::*;
pub(crate) use tensor_table::{mode_shapes, structured_read_params, LevelAt};

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
            let w = level.write_traits();
            let restarts = w.extruded && !w.keeps_fibers;
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
                    c.tensors[t]
                        .levels
                        .iter()
                        .rev()
                        .nth(1)
                        .is_some_and(|l| l.write_traits().freezes_in_kernel)
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
                        .any(|l| l.write_traits().marks_dense_children)
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
