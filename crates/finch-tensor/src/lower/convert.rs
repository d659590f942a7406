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

/// The kernel parameters of one level of a tensor.
#[derive(Clone, Debug)]
pub enum LevelParams {
    /// `shape` as an `i64` input local.
    Dense {
        /// Size of the mode.
        shape: LocalId,
    },
    /// `ptr` and `idx` buffers and the shape.
    SparseList {
        /// Size of the mode.
        shape: LocalId,
        /// Fiber boundaries.
        ptr: BufId,
        /// Stored indices (0-based).
        idx: BufId,
    },
    /// A SparseList level of an output, written in order (extrude): `ptr` holds per-fiber
    /// counts until the run time prefix-sums it; `idx` grows by doubling.
    SparseListOut {
        /// Size of the mode.
        shape: LocalId,
        /// Per-fiber counts (`P + 1` entries, prefix-summed after the kernel).
        ptr: BufId,
        /// Stored indices (0-based), growable.
        idx: BufId,
        /// The next free position.
        qos: LocalId,
        /// Whether the current index was written.
        dirty: LocalId,
    },
    /// One mode of a SparseCOO{N} level read by a kernel: the level has `modes` entries in
    /// the tensor's levels, outermost mode (`mode == 0`) first, sharing `ptr` and `tbl`.
    /// Mode 0 walks fiber `p`'s tuples `ptr[p] .. ptr[p+1]`; each further mode walks the
    /// run of tuples its parent mode hands down (the fiber's `end`).
    Coo {
        /// Size of this mode.
        shape: LocalId,
        /// Fiber boundaries into the tuples.
        ptr: BufId,
        /// Coordinates per mode (0-based), innermost mode first, as stored.
        tbl: Vec<BufId>,
        /// Which mode of the level, 0 = outermost.
        mode: usize,
        /// How many modes the level spans.
        modes: usize,
    },
    /// One mode of a SparseCOO{N} level of an output, written in order (extrude): the
    /// modes above the last pass a linear position down (as Dense levels do), and the last
    /// records each written entry's linear position in `idx`, which the run time splits
    /// into coordinates at freeze. Mode 0 counts the fiber's entries into `ptr`.
    CooOut {
        /// Size of this mode.
        shape: LocalId,
        /// Per-fiber counts (`P + 1` entries, prefix-summed after the kernel).
        ptr: BufId,
        /// Linear positions of the written entries (over every mode down to this level),
        /// growable.
        idx: BufId,
        /// The next free position.
        qos: LocalId,
        /// Whether the current index was written.
        dirty: LocalId,
        /// Which mode of the level, 0 = outermost.
        mode: usize,
        /// How many modes the level spans.
        modes: usize,
        /// The modes are not one SparseCOO level but every level from a sparse one down to
        /// the leaf, of a format the kernel does not assemble itself (a SparseList above
        /// another level, ...): the run time builds those levels from the recorded entries.
        rebuilt: bool,
    },
    /// One mode of a group of SparseHash levels a kernel writes (laminate: any order,
    /// repeated), from the group's first level down to the Element leaf. The group is one
    /// open-addressing hash table keyed by an entry's linear position over every mode of
    /// the tensor (column-major), so modes above the last pass the linear position down as
    /// Dense levels do. Slot `h` is `table[2h]`, the key + 1 (0 = empty), and
    /// `table[2h + 1]`, the entry (the capacity is a power of two, at most half full);
    /// `keys[q]` is entry `q`'s key and `slot_of[q]` its
    /// slot; entry `q`'s value is at child position `q`. The run time builds the sorted
    /// levels from the entries at freeze.
    HashOut {
        /// Size of this mode.
        shape: LocalId,
        /// Which mode of the group, 0 = outermost.
        mode: usize,
        /// How many modes (SparseHash levels) the group spans.
        modes: usize,
        /// Slots: entry number + 1, or 0 (growable).
        table: BufId,
        /// Key (linear position) per entry, in insertion order (growable).
        keys: BufId,
        /// Slot per entry (growable).
        slot_of: BufId,
        /// Entries so far.
        count: LocalId,
        /// The entry of the index being written.
        at: LocalId,
        /// Whether the current index was written (its entry looked up).
        dirty: LocalId,
        /// Buffers for reading the group back in the kernel.
        view: HashView,
    },
    /// A SparseByteMap level of an output or workspace, written in any order (laminate):
    /// a flag per position, dense child positions `p·shape + i`, and the list `srt` of the
    /// set positions (linear, unsorted while written, grown by doubling) with its length
    /// in `nsrt`. Read back (root level only) after sorting `srt`.
    SparseByteMapOut {
        /// Size of the mode.
        shape: LocalId,
        /// Fiber boundaries into `srt` (set before reads, and by the run time at freeze).
        ptr: BufId,
        /// One flag per position.
        tbl: BufId,
        /// The set positions.
        srt: BufId,
        /// How many positions `srt` lists (a kernel output).
        nsrt: LocalId,
        /// Whether the current index was written.
        dirty: LocalId,
    },
    /// A SparsePoint level of an output, written in order (extrude): `idx` (one per fiber,
    /// `shape` when empty) and dense child positions (one per fiber). A fiber written at
    /// two indices sets `conflict` (the run time reports it).
    SparsePointOut {
        /// Size of the mode.
        shape: LocalId,
        /// The stored index per fiber.
        idx: BufId,
        /// Whether the current index was written.
        dirty: LocalId,
        /// Set when the data does not fit the level (a kernel output).
        conflict: LocalId,
    },
    /// A SparseBand level of an output, written in order (extrude): the first written
    /// index of a fiber fixes its origin, later ones land at `start + (i - origin)` (gaps
    /// hold the fill); `ofs` holds per-fiber widths until the run time prefix-sums it.
    SparseBandOut {
        /// Size of the mode.
        shape: LocalId,
        /// The last index per fiber.
        idx: BufId,
        /// Per-fiber widths (`P + 1` entries, prefix-summed after the kernel).
        ofs: BufId,
        /// The next free child position.
        qos: LocalId,
        /// The fiber's first child position.
        start: LocalId,
        /// The fiber's first written index (`-1` before any).
        origin: LocalId,
        /// The fiber's last written index.
        last: LocalId,
        /// Whether the current index was written.
        dirty: LocalId,
        /// Set when an index is written out of order (a kernel output).
        conflict: LocalId,
    },
    /// A SparseBlockList level of an output, written in order (extrude): values are
    /// appended at `qos` like SparseList's; an index that does not follow the last one
    /// written starts a new block. `ptr` holds per-fiber block counts until the run time
    /// prefix-sums it; `idx` (block last index) and `ofs` (block ends) grow by doubling.
    SparseBlockListOut {
        /// Size of the mode.
        shape: LocalId,
        /// Per-fiber block counts (`P + 1`, prefix-summed after the kernel).
        ptr: BufId,
        /// Last index of each block, growable.
        idx: BufId,
        /// Block boundaries into the values (`blocks + 1`), growable.
        ofs: BufId,
        /// The next free child position.
        qos: LocalId,
        /// The number of blocks so far.
        blocks: LocalId,
        /// The block count when the fiber began.
        first_block: LocalId,
        /// The fiber's last written index (`-1` before any).
        last: LocalId,
        /// Whether the current index was written.
        dirty: LocalId,
        /// Set when an index is written out of order (a kernel output).
        conflict: LocalId,
    },
    /// A RunList or SparseRunList level of an output, written in order through AcceptRun:
    /// each written run (a whole extent where the value is constant, else one index) gets
    /// a child position; a RunList also fills the gaps with fill runs so its runs tile the
    /// fiber. `ptr` holds per-fiber run counts until the run time prefix-sums it (and
    /// merges touching runs of equal values); `left`/`right` grow by doubling.
    RunsOut {
        /// RunList (tiling) or SparseRunList.
        dense: bool,
        /// Size of the mode.
        shape: LocalId,
        /// Per-fiber run counts (`P + 1`, prefix-summed after the kernel).
        ptr: BufId,
        /// First index of each run (SparseRunList), growable.
        left: Option<BufId>,
        /// Last index of each run, growable.
        right: BufId,
        /// The next free run (= child position).
        qos: LocalId,
        /// The run count when the fiber began.
        start: LocalId,
        /// The fiber's last covered index (`-1` before any).
        last: LocalId,
        /// Whether the current run was written.
        dirty: LocalId,
        /// Set when a run is written out of order (a kernel output).
        conflict: LocalId,
    },
    /// A SparseInterval level of an output, written in order through AcceptRun: a written
    /// run lands in a scratch position (the last value slot); after it, the first run of
    /// a fiber becomes its interval, a touching run of the same value extends it, and
    /// anything else sets `conflict`.
    SparseIntervalOut {
        /// Size of the mode.
        shape: LocalId,
        /// First index per fiber (`1` when empty).
        left: BufId,
        /// Last index per fiber (`0` when empty).
        right: BufId,
        /// Whether the current run was written.
        dirty: LocalId,
        /// Set when the data is not one run per fiber (a kernel output).
        conflict: LocalId,
    },
    /// A read-only structured level (SparsePoint, SparseInterval, SparseBand,
    /// SparseBlockList, RunList, SparseRunList, SparseByteMap, SparseHash): its kind and
    /// its buffers in the order of the storage's `BUFFERS`.
    Structured {
        /// Which level.
        kind: LevelKind,
        /// Size of the mode.
        shape: LocalId,
        /// The level's buffers.
        bufs: Vec<BufId>,
    },
    /// The value buffer.
    Element {
        /// Values.
        val: BufId,
        /// Fill value.
        fill: Value,
    },
    /// Nothing stored.
    Pattern,
}

/// A written SparseHash group read back in the kernel: its entries sorted by key into
/// `order`, split into coordinates `tbl` (outermost mode first) and into fibers of the
/// levels above (`ptr`), with `posmap[r]` the entry (child position) of sorted position
/// `r`; walked like a SparseCOO level. Built by the first read after an insertion
/// (`frozen` says it is current). Scratch buffers of the run.
#[derive(Clone, Debug)]
pub struct HashView {
    /// Sorted keys.
    pub order: BufId,
    /// Fiber boundaries per position of the levels above (`P + 1` entries).
    pub ptr: BufId,
    /// Whether the view matches the table (no insertion since it was built).
    pub frozen: LocalId,
    /// Coordinates (0-based) per mode, outermost first.
    pub tbl: Vec<BufId>,
    /// Entry per sorted position.
    pub posmap: BufId,
}

/// Which run-time array of an output's buffers (`engine::OutBufs`) a written level's
/// kernel buffer is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutArray {
    /// Per-fiber counts or offsets (SparseList, SparseBlockList, run lists, SparseByteMap),
    /// SparseBand widths, SparseInterval right ends.
    Ptr,
    /// Indices (SparseList), set positions (SparseByteMap), per-fiber indices (SparsePoint,
    /// SparseBand), block or run ends, SparseInterval left ends.
    Idx,
    /// SparseByteMap flags.
    Flags,
    /// SparseBlockList block ends, SparseRunList run starts.
    Aux,
}

impl LevelParams {
    /// Is this a sparse level being written (any `*Out` variant)?
    pub fn is_sparse_out(&self) -> bool {
        is_extruded(self)
            || matches!(
                self,
                LevelParams::SparseByteMapOut { .. } | LevelParams::HashOut { .. }
            )
    }

    /// The local holding the size of the mode the level indexes (`None` for a leaf).
    pub fn shape(&self) -> Option<LocalId> {
        match self {
            LevelParams::Dense { shape }
            | LevelParams::SparseList { shape, .. }
            | LevelParams::Structured { shape, .. }
            | LevelParams::SparseListOut { shape, .. }
            | LevelParams::Coo { shape, .. }
            | LevelParams::CooOut { shape, .. }
            | LevelParams::HashOut { shape, .. }
            | LevelParams::SparseByteMapOut { shape, .. }
            | LevelParams::SparsePointOut { shape, .. }
            | LevelParams::SparseBandOut { shape, .. }
            | LevelParams::SparseBlockListOut { shape, .. }
            | LevelParams::RunsOut { shape, .. }
            | LevelParams::SparseIntervalOut { shape, .. } => Some(*shape),
            LevelParams::Element { .. } | LevelParams::Pattern => None,
        }
    }

    /// The kernel buffers of a written sparse level, each with the output array it is
    /// bound to (empty for other levels).
    pub fn output_arrays(&self) -> Vec<(BufId, OutArray)> {
        use OutArray::{Aux, Flags, Idx, Ptr};
        match self {
            LevelParams::SparseListOut { ptr, idx, .. } => vec![(*ptr, Ptr), (*idx, Idx)],
            LevelParams::CooOut {
                ptr, idx, mode: 0, ..
            } => vec![(*ptr, Ptr), (*idx, Idx)],
            LevelParams::HashOut {
                table,
                keys,
                slot_of,
                mode: 0,
                ..
            } => vec![(*slot_of, Ptr), (*keys, Idx), (*table, Aux)],
            LevelParams::SparseByteMapOut { ptr, tbl, srt, .. } => {
                vec![(*ptr, Ptr), (*tbl, Flags), (*srt, Idx)]
            }
            LevelParams::SparsePointOut { idx, .. } => vec![(*idx, Idx)],
            LevelParams::SparseBandOut { idx, ofs, .. } => vec![(*idx, Idx), (*ofs, Ptr)],
            LevelParams::SparseBlockListOut { ptr, idx, ofs, .. } => {
                vec![(*ptr, Ptr), (*idx, Idx), (*ofs, Aux)]
            }
            LevelParams::RunsOut {
                ptr, left, right, ..
            } => {
                let mut v = vec![(*ptr, Ptr), (*right, Idx)];
                v.extend(left.map(|l| (l, Aux)));
                v
            }
            LevelParams::SparseIntervalOut { left, right, .. } => {
                vec![(*left, Idx), (*right, Ptr)]
            }
            _ => vec![],
        }
    }
}

/// A tensor of the program as the kernel sees it.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// Declared name.
    pub name: String,
    /// Declaration kind.
    pub kind: DeclKind,
    /// Format.
    pub format: Format,
    /// One entry per level, root first (empty for scalars).
    pub levels: Vec<LevelParams>,
    /// For scalars: the local holding the value (an input and an output of the kernel).
    pub scalar: Option<LocalId>,
    /// For a SparseScalar: the local that is true once it was written since declared (an
    /// input and an output too).
    pub dirty: Option<LocalId>,
    /// Written by the program.
    pub written: bool,
    /// Initial value from a top-level `X .= v` (outputs and temporaries).
    pub init: Option<Value>,
    /// A sparse output the kernel itself freezes (read by a later statement), so the run
    /// time must not prefix-sum it again.
    pub frozen_in_kernel: bool,
}

impl TensorInfo {
    /// Whether the tensor's levels below its leading Dense ones can be written as one
    /// SparseHash group instead (see `any_order_or`): an output or temporary over an
    /// Element or Pattern leaf, not an input updated in place.
    pub fn records_in_any_order(&self) -> bool {
        self.written
            && self.kind != DeclKind::Input
            && matches!(&self.format, Format::Levels(lf) if matches!(lf.leaf(), LevelFormat::Element(_) | LevelFormat::Pattern))
    }

    /// Every level takes writes in any order, repeated (laminate): Dense, SparseByteMap
    /// and SparseHash levels over an Element or Pattern leaf (a Pattern leaf is written
    /// only under a sparse level).
    pub fn takes_writes_in_any_order(&self) -> bool {
        self.levels.iter().all(|l| {
            matches!(
                l,
                LevelParams::Dense { .. }
                    | LevelParams::Element { .. }
                    | LevelParams::Pattern
                    | LevelParams::SparseByteMapOut { .. }
                    | LevelParams::HashOut { .. }
            )
        })
    }
}

/// Reads of `e` that [`common_scope_reads`] may bind to a `let`: of a
/// tensor not in `written`, at plain loop indices (not at computed, shifted or permissive
/// ones, which may be out of range where a branch would not evaluate them), keyed by their
/// text.
fn plain_reads(
    e: &Expr,
    written: &HashSet<usize>,
    inner: &[String],
    out: &mut Vec<(String, Expr)>,
) {
    match e {
        Expr::Access(t, idx) => {
            if let Tensor::Fiber(f) = &**t {
                let plain = idx.iter().all(
                    |x| matches!(x, Expr::Index(n) if !n.starts_with("let:") && !inner.contains(n)),
                );
                if plain && !written.contains(&f.tensor) && !idx.is_empty() {
                    out.push((format!("{e:?}"), e.clone()));
                }
            }
        }
        Expr::Call(_, args) => args
            .iter()
            .for_each(|a| plain_reads(a, written, inner, out)),
        _ => {}
    }
}

/// `e` with the read keyed `key` (see [`plain_reads`]) replaced by the variable `var`.
fn replace_read(e: Expr, key: &str, var: &str) -> Expr {
    match e {
        Expr::Access(..) if format!("{e:?}") == key => Expr::Index(var.to_string()),
        Expr::Call(op, args) => Expr::Call(
            op,
            args.into_iter()
                .map(|a| replace_read(a, key, var))
                .collect(),
        ),
        other => other,
    }
}

/// `body` inside one `let` per read, each bound to a fresh variable `let:read#{n}` (`#`
/// cannot be in a program's names, so a user's `let read0 = ...` inside is not confused
/// with it).
fn bind_reads(body: Stmt, reads: Vec<(String, Expr)>, count: &mut usize) -> Stmt {
    let mut body = body;
    let mut lets = Vec::new();
    for (key, e) in reads {
        let var = format!("let:read#{count}");
        *count += 1;
        body = replace_in_stmt(body, &key, &var);
        lets.push((var, e));
    }
    for (var, value) in lets.into_iter().rev() {
        body = Stmt::Define {
            var,
            value,
            body: Box::new(body),
        };
    }
    body
}

/// The reads [`common_scope_reads`] may bind in `s`: in assignments, `let`s, branches and
/// blocks, and in loops inside them where the read does not use a loop's index (`inner`:
/// the indices of the loops entered so far).
fn each_read(
    s: &Stmt,
    written: &HashSet<usize>,
    inner: &mut Vec<String>,
    out: &mut Vec<(String, Expr)>,
) {
    match s {
        Stmt::Assign { rhs, .. } => plain_reads(rhs, written, inner, out),
        Stmt::Define { value, body, .. } => {
            plain_reads(value, written, inner, out);
            each_read(body, written, inner, out);
        }
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => {
            plain_reads(cond, written, inner, out);
            each_read(then, written, inner, out);
            each_read(otherwise, written, inner, out);
        }
        Stmt::Loop { index, body, .. } => {
            inner.push(index.clone());
            each_read(body, written, inner, out);
            inner.pop();
        }
        Stmt::Block(v) => v.iter().for_each(|s| each_read(s, written, inner, out)),
        _ => {}
    }
}

/// `s` with the read keyed `key` replaced by `var` exactly where [`each_read`] finds reads
/// (loops included: no loop inside rebinds one of the read's indices, which the parser
/// refuses).
fn replace_in_stmt(s: Stmt, key: &str, var: &str) -> Stmt {
    let sub = |s: Box<Stmt>| Box::new(replace_in_stmt(*s, key, var));
    match s {
        Stmt::Assign { lhs, op, rhs } => Stmt::Assign {
            lhs,
            op,
            rhs: replace_read(rhs, key, var),
        },
        Stmt::Define {
            var: v,
            value,
            body,
        } => Stmt::Define {
            var: v,
            value: replace_read(value, key, var),
            body: sub(body),
        },
        Stmt::Sieve {
            cond,
            then,
            otherwise,
        } => Stmt::Sieve {
            cond: replace_read(cond, key, var),
            then: sub(then),
            otherwise: sub(otherwise),
        },
        Stmt::Loop {
            index,
            lo,
            hi,
            body,
        } => Stmt::Loop {
            index,
            lo,
            hi,
            body: sub(body),
        },
        Stmt::Block(v) => Stmt::Block(
            v.into_iter()
                .map(|s| replace_in_stmt(s, key, var))
                .collect(),
        ),
        other => other,
    }
}

/// Repeated identical reads (Finch's common subexpressions): a read made twice or more in
/// a statement's value, or across a block's statements or a branch's or `let`'s parts
/// inside a loop, at plain loop indices, of a tensor that scope does not write, is read
/// once into a `let` around it (`y[i] = A[i] * A[i]` walks `A` once, not twice in
/// lockstep). Reads at computed, shifted or permissive indices (which may be out of range
/// where a branch would not evaluate them) are left alone. `s[] += x[i] * z[i]; w[i] =
/// x[i] - z[i] + s[]` then walks `x` and `z` once, as two operands rather than four (whose
/// combinations multiply the code: a tenth of the size with two galloped operands), `if
/// x[i] > 0.5; w[i] = x[i]; end` walks `x` once, and so does `if x[j] != 0; for i = _;
/// y[i] += A[i, j] * x[j]; end; end` (a loop under the scope counts where the read does
/// not use its index).
fn common_scope_reads(s: Stmt, count: &mut usize) -> Stmt {
    let mut written = HashSet::new();
    written_tensors(&s, &mut written);
    let mut found = Vec::new();
    each_read(&s, &written, &mut Vec::new(), &mut found);
    let mut shared: Vec<(String, Expr)> = Vec::new();
    for (k, (key, e)) in found.iter().enumerate() {
        let again = found[k + 1..].iter().any(|(other, _)| other == key);
        if again && !shared.iter().any(|(r, _)| r == key) {
            shared.push((key.clone(), e.clone()));
        }
    }
    bind_reads(s, shared, count)
}

/// Every tensor `s` writes, declares or resets, anywhere inside it.
fn written_tensors(s: &Stmt, out: &mut HashSet<usize>) {
    match s {
        Stmt::Assign { lhs, .. } => {
            if let Tensor::Fiber(f) = &lhs.0 {
                out.insert(f.tensor);
            }
        }
        Stmt::SetScalar(t, _) | Stmt::Reset(t, _) | Stmt::Freeze(t) => {
            out.insert(*t);
        }
        Stmt::Loop { body, .. } | Stmt::Define { body, .. } => written_tensors(body, out),
        Stmt::Sieve {
            then, otherwise, ..
        } => {
            written_tensors(then, out);
            written_tensors(otherwise, out);
        }
        Stmt::Block(v) => v.iter().for_each(|s| written_tensors(s, out)),
        Stmt::SetLocal(..) | Stmt::Check(..) => {}
    }
}

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

/// Builds the tensor table and kernel parameters.
/// The tensor table. Outputs named in `any_order` (written in a loop order their
/// in-order levels cannot take) keep their leading Dense levels, and the levels below
/// become one SparseHash group: written in any order, repeated, and built into the
/// declared format when frozen.
fn tensor_table(
    program: &crate::Program,
    kernel: &mut Kernel,
    any_order: &std::collections::HashSet<String>,
) -> Result<Vec<TensorInfo>> {
    let mut written = std::collections::HashSet::new();
    each_stmt(&program.ast().body, &mut |s| match s {
        notation::Stmt::Assign { lhs, .. } => {
            written.insert(lhs.tensor.clone());
        }
        notation::Stmt::Declare { tensor, .. } => {
            written.insert(tensor.clone());
        }
        _ => {}
    });
    let mut tensors = Vec::new();
    for d in program.decls() {
        let is_written = written.contains(&d.name);
        let mut info = TensorInfo {
            name: d.name.clone(),
            kind: d.kind,
            format: d.format.clone(),
            levels: Vec::new(),
            scalar: None,
            dirty: None,
            written: is_written,
            init: None,
            frozen_in_kernel: false,
        };
        match &d.format {
            Format::Scalar(kind, fill) => {
                let ty = fill.scalar_type().unwrap_or(ScalarType::F64);
                let l = kernel.local(d.name.to_string(), ty);
                kernel.inputs.push(l);
                kernel.outputs.push(l);
                info.scalar = Some(l);
                if kind.tracks_writes() {
                    let dirty = kernel.local(format!("{}_dirty", d.name), ScalarType::Bool);
                    kernel.inputs.push(dirty);
                    kernel.outputs.push(dirty);
                    info.dirty = Some(dirty);
                }
            }
            Format::Levels(lf) => {
                let mut level = lf;
                let mut depth = 1;
                loop {
                    match level {
                        LevelFormat::Inner { kind, index, child } => {
                            let shape = kernel
                                .local(format!("{}_lvl{depth}_shape", d.name), ScalarType::I64);
                            kernel.inputs.push(shape);
                            // The levels below an output's leading Dense ones, as one
                            // SparseHash group (see above).
                            let hashed = (*kind != LevelKind::Dense
                                && is_written
                                && any_order.contains(&d.name)
                                && matches!(
                                    level.leaf(),
                                    LevelFormat::Element(_) | LevelFormat::Pattern
                                ))
                            .then(|| modes_below(level));
                            // A vector (one mode, no Dense parent) takes a SparseByteMap
                            // instead: a flag per index beats a hash table (its dense flags
                            // and values cost only the vector's length).
                            let byte_map = hashed == Some(1) && depth == 1;
                            match kind {
                                LevelKind::Dense => info.levels.push(LevelParams::Dense { shape }),
                                _ if byte_map => {
                                    info.levels.push(byte_map_out(kernel, &d.name, depth, shape));
                                    level = level.leaf();
                                    depth += 1;
                                    continue;
                                }
                                _ if hashed.is_some() || (*kind == LevelKind::SparseHash && is_written && hash_group(level).is_some()) => {
                                    let modes = hashed.or(hash_group(level)).unwrap_or(1);
                                    let shapes = mode_shapes(kernel, &d.name, depth, shape, modes);
                                    let mut buf = |what: &str| kernel.buf(format!("{}_lvl{depth}_{what}", d.name), ScalarType::I64, true, true);
                                    let (table, keys, slot_of) = (buf("table"), buf("keys"), buf("slot_of"));
                                    let (order, ptr, posmap) = (buf("order"), buf("fiber_ptr"), buf("posmap"));
                                    let tbl = (0..modes).map(|m| buf(&format!("coord{}", m + 1))).collect();
                                    let frozen = kernel.local(format!("{}_lvl{depth}_frozen", d.name), ScalarType::Bool);
                                    let view = HashView { order, ptr, frozen, tbl, posmap };
                                    let mut local = |what: &str, ty| kernel.local(format!("{}_lvl{depth}_{what}", d.name), ty);
                                    let (count, at, dirty) = (local("count", ScalarType::I64), local("at", ScalarType::I64), local("dirty", ScalarType::Bool));
                                    kernel.outputs.push(count);
                                    for (mode, &shape) in shapes.iter().enumerate() {
                                        info.levels.push(LevelParams::HashOut { shape, mode, modes, table, keys, slot_of, count, at, dirty, view: view.clone() });
                                    }
                                    // Skip the group's further levels (a forced group runs down
                                    // to the leaf).
                                    let mut last = child;
                                    for _ in 1..modes {
                                        if let LevelFormat::Inner { child, .. } = &**last {
                                            last = child;
                                        }
                                    }
                                    level = if hashed.is_some() { level.leaf() } else { last };
                                    depth += modes;
                                    continue;
                                }
                                LevelKind::SparseCoo(modes) if !is_written || matches!(**child, LevelFormat::Element(_) | LevelFormat::Pattern) => {
                                    // One entry per mode; the first mode's shape local is `shape`.
                                    let shapes = mode_shapes(kernel, &d.name, depth, shape, *modes);
                                    if is_written {
                                        info.levels.extend(recorded_levels(kernel, &d.name, depth, &shapes, false));
                                    } else {
                                        let ptr = kernel.buf(format!("{}_lvl{depth}_ptr", d.name), ScalarType::I64, false, false);
                                        let tbl: Vec<BufId> = (0..*modes).map(|k| kernel.buf(format!("{}_lvl{depth}_tbl{}", d.name, k + 1), ScalarType::I64, false, false)).collect();
                                        for (mode, &shape) in shapes.iter().enumerate() {
                                            info.levels.push(LevelParams::Coo { shape, ptr, tbl: tbl.clone(), mode, modes: *modes });
                                        }
                                    }
                                    depth += modes - 1;
                                }
                                LevelKind::SparseList if !is_written => {
                                    let ptr = kernel.index_buf(format!("{}_lvl{depth}_ptr", d.name), *index);
                                    let idx = kernel.index_buf(format!("{}_lvl{depth}_idx", d.name), *index);
                                    info.levels.push(LevelParams::SparseList { shape, ptr, idx });
                                }
                                LevelKind::SparseList if matches!(**child, LevelFormat::Element(_) | LevelFormat::Pattern) => {
                                    let ptr = kernel.buf(format!("{}_lvl{depth}_ptr", d.name), ScalarType::I64, true, false);
                                    let idx = kernel.buf(format!("{}_lvl{depth}_idx", d.name), ScalarType::I64, true, true);
                                    let qos = kernel.local(format!("{}_lvl{depth}_qos", d.name), ScalarType::I64);
                                    let dirty = kernel.local(format!("{}_lvl{depth}_dirty", d.name), ScalarType::Bool);
                                    info.levels.push(LevelParams::SparseListOut { shape, ptr, idx, qos, dirty });
                                }
                                LevelKind::SparseByteMap if is_written && matches!(**child, LevelFormat::Element(_) | LevelFormat::Pattern) => {
                                    info.levels.push(byte_map_out(kernel, &d.name, depth, shape));
                                }
                                LevelKind::SparsePoint if is_written && matches!(**child, LevelFormat::Element(_)) => {
                                    let idx = kernel.buf(format!("{}_lvl{depth}_idx", d.name), ScalarType::I64, true, false);
                                    let dirty = kernel.local(format!("{}_lvl{depth}_dirty", d.name), ScalarType::Bool);
                                    let conflict = kernel.local(format!("{}_lvl{depth}_conflict", d.name), ScalarType::Bool);
                                    kernel.outputs.push(conflict);
                                    info.levels.push(LevelParams::SparsePointOut { shape, idx, dirty, conflict });
                                }
                                LevelKind::SparseBand if is_written && matches!(**child, LevelFormat::Element(_)) => {
                                    let idx = kernel.buf(format!("{}_lvl{depth}_idx", d.name), ScalarType::I64, true, false);
                                    let ofs = kernel.buf(format!("{}_lvl{depth}_ofs", d.name), ScalarType::I64, true, false);
                                    let mut local = |what: &str, ty| kernel.local(format!("{}_lvl{depth}_{what}", d.name), ty);
                                    let (qos, start, origin, last) = (local("qos", ScalarType::I64), local("start", ScalarType::I64), local("origin", ScalarType::I64), local("last", ScalarType::I64));
                                    let (dirty, conflict) = (local("dirty", ScalarType::Bool), local("conflict", ScalarType::Bool));
                                    kernel.outputs.push(conflict);
                                    info.levels.push(LevelParams::SparseBandOut { shape, idx, ofs, qos, start, origin, last, dirty, conflict });
                                }
                                LevelKind::SparseBlockList if is_written && matches!(**child, LevelFormat::Element(_)) => {
                                    let ptr = kernel.buf(format!("{}_lvl{depth}_ptr", d.name), ScalarType::I64, true, false);
                                    let idx = kernel.buf(format!("{}_lvl{depth}_idx", d.name), ScalarType::I64, true, true);
                                    let ofs = kernel.buf(format!("{}_lvl{depth}_ofs", d.name), ScalarType::I64, true, true);
                                    let mut local = |what: &str, ty| kernel.local(format!("{}_lvl{depth}_{what}", d.name), ty);
                                    let (qos, blocks, first_block, last) = (local("qos", ScalarType::I64), local("blocks", ScalarType::I64), local("first_block", ScalarType::I64), local("last", ScalarType::I64));
                                    let (dirty, conflict) = (local("dirty", ScalarType::Bool), local("conflict", ScalarType::Bool));
                                    kernel.outputs.push(conflict);
                                    info.levels.push(LevelParams::SparseBlockListOut { shape, ptr, idx, ofs, qos, blocks, first_block, last, dirty, conflict });
                                }
                                LevelKind::RunList | LevelKind::SparseRunList if is_written && matches!(**child, LevelFormat::Element(_)) => {
                                    let dense = *kind == LevelKind::RunList;
                                    let ptr = kernel.buf(format!("{}_lvl{depth}_ptr", d.name), ScalarType::I64, true, false);
                                    let left = (!dense).then(|| kernel.buf(format!("{}_lvl{depth}_left", d.name), ScalarType::I64, true, true));
                                    let right = kernel.buf(format!("{}_lvl{depth}_right", d.name), ScalarType::I64, true, true);
                                    let mut local = |what: &str, ty| kernel.local(format!("{}_lvl{depth}_{what}", d.name), ty);
                                    let (qos, start, last) = (local("qos", ScalarType::I64), local("start", ScalarType::I64), local("last", ScalarType::I64));
                                    let (dirty, conflict) = (local("dirty", ScalarType::Bool), local("conflict", ScalarType::Bool));
                                    kernel.outputs.push(conflict);
                                    info.levels.push(LevelParams::RunsOut { dense, shape, ptr, left, right, qos, start, last, dirty, conflict });
                                }
                                LevelKind::SparseInterval if is_written && matches!(**child, LevelFormat::Element(_)) => {
                                    let left = kernel.buf(format!("{}_lvl{depth}_left", d.name), ScalarType::I64, true, false);
                                    let right = kernel.buf(format!("{}_lvl{depth}_right", d.name), ScalarType::I64, true, false);
                                    let dirty = kernel.local(format!("{}_lvl{depth}_dirty", d.name), ScalarType::Bool);
                                    let conflict = kernel.local(format!("{}_lvl{depth}_conflict", d.name), ScalarType::Bool);
                                    kernel.outputs.push(conflict);
                                    info.levels.push(LevelParams::SparseIntervalOut { shape, left, right, dirty, conflict });
                                }
                                // Any other written format whose levels from here down end in
                                // an Element leaf: entries are recorded in order (extrude) like
                                // a SparseCOO level spanning those modes, and the run time
                                // builds the levels from them.
                                _ if is_written && matches!(level.leaf(), LevelFormat::Element(_) | LevelFormat::Pattern) => {
                                    let modes = level.ndims();
                                    let shapes = mode_shapes(kernel, &d.name, depth, shape, modes);
                                    info.levels.extend(recorded_levels(kernel, &d.name, depth, &shapes, true));
                                    level = level.leaf();
                                    depth += modes;
                                    continue;
                                }
                                kind if !is_written && structured_buffers(*kind).is_some() => {
                                    let bufs = structured_buffers(*kind)
                                        .unwrap_or_default()
                                        .iter()
                                        .map(|(name, ty)| kernel.buf(format!("{}_lvl{depth}_{name}", d.name), *ty, false, false))
                                        .collect();
                                    info.levels.push(LevelParams::Structured { kind: *kind, shape, bufs });
                                }
                                other => {
                                    return unsupported(format!(
                                        "compiling {} `{}` as {} (this release compiles reads of every level, and writes over an Element leaf into Dense, SparseByteMap and SparseHash levels in any order and into SparseList, SparseCOO, SparsePoint, SparseInterval, SparseBand, SparseBlockList, RunList and SparseRunList levels in order)",
                                        if is_written { "writes to" } else { "reads of" },
                                        d.name,
                                        other.name()
                                    ))
                                }
                            }
                            level = child;
                            depth += 1;
                        }
                        LevelFormat::Element(fill) => {
                            let ty = fill.scalar_type().unwrap_or(ScalarType::F64);
                            // Under a sparse output level the values grow with the entries.
                            let sparse_out = matches!(
                                info.levels.last(),
                                Some(
                                    LevelParams::SparseListOut { .. }
                                        | LevelParams::CooOut { .. }
                                        | LevelParams::HashOut { .. }
                                        | LevelParams::SparseBandOut { .. }
                                        | LevelParams::SparseBlockListOut { .. }
                                        | LevelParams::RunsOut { .. }
                                )
                            );
                            let val = kernel.buf(
                                format!("{}_lvl{depth}_val", d.name),
                                ty,
                                is_written,
                                sparse_out,
                            );
                            info.levels.push(LevelParams::Element { val, fill: *fill });
                            break;
                        }
                        LevelFormat::Pattern => {
                            // Under levels that take repeated writes, a store of anything
                            // but `true` may clear an index set before: such a leaf keeps
                            // a flag per entry (an `Element(false)` leaf; entries left
                            // `false` are dropped when frozen).
                            let repeated = matches!(
                                info.levels.last(),
                                Some(
                                    LevelParams::SparseByteMapOut { .. }
                                        | LevelParams::HashOut { .. }
                                )
                            );
                            if is_written && repeated && may_clear(&program.ast().body, &d.name) {
                                let sparse_out =
                                    matches!(info.levels.last(), Some(LevelParams::HashOut { .. }));
                                let val = kernel.buf(
                                    format!("{}_lvl{depth}_val", d.name),
                                    ScalarType::Bool,
                                    true,
                                    sparse_out,
                                );
                                info.levels.push(LevelParams::Element {
                                    val,
                                    fill: Value::Bool(false),
                                });
                                break;
                            }
                            // Otherwise a written Pattern leaf stores nothing: writing `true`
                            // claims the index, which the level above records (flags, or a
                            // list of indices or entries).
                            if is_written
                                && !matches!(
                                    info.levels.last(),
                                    Some(
                                        LevelParams::SparseByteMapOut { .. }
                                            | LevelParams::SparseListOut { .. }
                                            | LevelParams::CooOut { .. }
                                            | LevelParams::HashOut { .. }
                                    )
                                )
                            {
                                if matches!(
                                    info.levels.last(),
                                    Some(LevelParams::Dense { .. }) | None
                                ) {
                                    // (Only an all-`true` result fits; the reference
                                    // engine stores one.)
                                    return unsupported(format!(
                                        "writing `{}` ({}): a Pattern leaf under a Dense level (or at the root) is `true` everywhere and stores nothing to write; put a sparse level above the leaf",
                                        d.name, d.format
                                    ));
                                }
                                return unsupported(format!(
                                    "writes to the Pattern tensor `{}` other than under a SparseByteMap, SparseList, SparseCOO or SparseHash level, or levels built from recorded entries",
                                    d.name
                                ));
                            }
                            info.levels.push(LevelParams::Pattern);
                            break;
                        }
                    }
                }
            }
        }
        tensors.push(info);
    }
    Ok(tensors)
}

/// The shape locals of a level spanning `modes` modes from `depth` (the first is `first`,
/// already a kernel input; the others become inputs too).
fn mode_shapes(
    kernel: &mut Kernel,
    name: &str,
    depth: usize,
    first: LocalId,
    modes: usize,
) -> Vec<LocalId> {
    let mut shapes = vec![first];
    for m in 1..modes {
        let s = kernel.local(format!("{name}_lvl{}_shape", depth + m), ScalarType::I64);
        kernel.inputs.push(s);
        shapes.push(s);
    }
    shapes
}

/// Calls `f` on `s` and on every statement nested in it.
fn each_stmt(s: &notation::Stmt, f: &mut dyn FnMut(&notation::Stmt)) {
    f(s);
    match s {
        notation::Stmt::Loop { body, .. } | notation::Stmt::Define { body, .. } => {
            each_stmt(body, f)
        }
        notation::Stmt::Sieve {
            then, otherwise, ..
        } => {
            each_stmt(then, f);
            if let Some(o) = otherwise {
                each_stmt(o, f);
            }
        }
        notation::Stmt::Block(v) => v.iter().for_each(|s| each_stmt(s, f)),
        _ => {}
    }
}

/// Whether `s` updates `name` with anything but `|=`, `<<||>>=` or a store of the literal
/// `true`, which may clear an index of a Pattern tensor set before (`&=`, `<<xor>>=`, a
/// store of a computed value).
fn may_clear(s: &notation::Stmt, name: &str) -> bool {
    let mut clears = false;
    each_stmt(s, &mut |s| {
        if let notation::Stmt::Assign { lhs, op, rhs } = s {
            let sets = match op {
                notation::AssignOp::Store => *rhs == notation::Expr::Literal(Value::Bool(true)),
                notation::AssignOp::Reduce(op) => matches!(op, Op::Or | Op::BitOr),
            };
            clears |= lhs.tensor == name && !sets;
        }
    });
    clears
}

/// The levels of a written group recorded as entries (a SparseCOO level, or levels the run
/// time builds), one per mode, sharing their buffers and cursor.
fn recorded_levels(
    kernel: &mut Kernel,
    name: &str,
    depth: usize,
    shapes: &[LocalId],
    rebuilt: bool,
) -> Vec<LevelParams> {
    let ptr = kernel.buf(
        format!("{name}_lvl{depth}_ptr"),
        ScalarType::I64,
        true,
        false,
    );
    let idx = kernel.buf(
        format!("{name}_lvl{depth}_idx"),
        ScalarType::I64,
        true,
        true,
    );
    let qos = kernel.local(format!("{name}_lvl{depth}_qos"), ScalarType::I64);
    let dirty = kernel.local(format!("{name}_lvl{depth}_dirty"), ScalarType::Bool);
    let modes = shapes.len();
    shapes
        .iter()
        .enumerate()
        .map(|(mode, &shape)| LevelParams::CooOut {
            shape,
            ptr,
            idx,
            qos,
            dirty,
            mode,
            modes,
            rebuilt,
        })
        .collect()
}

/// An output that needs levels taking writes in any order, or read back where it is
/// written: over an Element or Pattern leaf its levels below the leading Dense ones can be
/// one SparseHash group, so it is recorded in `any_order` (the conversion is done again);
/// anything else (an input) is refused with `why`.
fn any_order_or(
    info: &TensorInfo,
    any_order: &mut std::collections::HashSet<String>,
    why: String,
) -> Result<()> {
    if !info.records_in_any_order() {
        return unsupported(why);
    }
    any_order.insert(info.name.clone());
    Ok(())
}

/// A written SparseByteMap level `depth` of `name`: its buffers and cursors.
fn byte_map_out(kernel: &mut Kernel, name: &str, depth: usize, shape: LocalId) -> LevelParams {
    let mut buf = |what: &str, ty, growable| {
        kernel.buf(format!("{name}_lvl{depth}_{what}"), ty, true, growable)
    };
    let ptr = buf("ptr", ScalarType::I64, false);
    let tbl = buf("tbl", ScalarType::Bool, false);
    let srt = buf("srt", ScalarType::I64, true);
    let nsrt = kernel.local(format!("{name}_lvl{depth}_nsrt"), ScalarType::I64);
    kernel.outputs.push(nsrt);
    let dirty = kernel.local(format!("{name}_lvl{depth}_dirty"), ScalarType::Bool);
    LevelParams::SparseByteMapOut {
        shape,
        ptr,
        tbl,
        srt,
        nsrt,
        dirty,
    }
}

/// How many modes `level` and the levels below it index.
fn modes_below(level: &LevelFormat) -> usize {
    match level {
        LevelFormat::Inner { kind, child, .. } => kind.modes() + modes_below(child),
        _ => 0,
    }
}

/// How many SparseHash levels `level` starts that run down to an Element or Pattern leaf
/// (a group the compiler writes as one hash table), or `None`.
fn hash_group(level: &LevelFormat) -> Option<usize> {
    let mut n = 0;
    let mut l = level;
    loop {
        match l {
            LevelFormat::Inner {
                kind: LevelKind::SparseHash,
                child,
                ..
            } => {
                n += 1;
                l = child;
            }
            LevelFormat::Element(_) | LevelFormat::Pattern => return (n > 0).then_some(n),
            _ => return None,
        }
    }
}

/// A run-length vector workspace (a temporary whose only level is RunList or
/// SparseRunList): read back in the kernel after its writes.
pub(crate) fn readable_runs(info: &TensorInfo) -> bool {
    info.kind == DeclKind::Temp
        && matches!(
            info.levels.as_slice(),
            [LevelParams::RunsOut { .. }, LevelParams::Element { .. }]
        )
}

/// Levels written in order, once (extrude): a second statement, or a read after the
/// write, is refused.
fn is_extruded(l: &LevelParams) -> bool {
    matches!(
        l,
        LevelParams::SparseListOut { .. }
            | LevelParams::CooOut { .. }
            | LevelParams::SparsePointOut { .. }
            | LevelParams::SparseBandOut { .. }
            | LevelParams::SparseBlockListOut { .. }
            | LevelParams::RunsOut { .. }
            | LevelParams::SparseIntervalOut { .. }
    )
}

/// The kernel buffers (name, element type) of a structured level read by a kernel, in
/// the order of its storage's `BUFFERS`; `None` for levels with their own parameters.
fn structured_buffers(kind: LevelKind) -> Option<Vec<(&'static str, ScalarType)>> {
    use crate::formats as f;
    let names: &[&str] = match kind {
        LevelKind::SparsePoint => f::SparsePointStorage::BUFFERS,
        LevelKind::SparseInterval => f::SparseIntervalStorage::BUFFERS,
        LevelKind::SparseBand => f::SparseBandStorage::BUFFERS,
        LevelKind::SparseBlockList => f::SparseBlockListStorage::BUFFERS,
        LevelKind::RunList => f::RunListStorage::BUFFERS,
        LevelKind::SparseRunList => f::SparseRunListStorage::BUFFERS,
        LevelKind::SparseByteMap => f::SparseByteMapStorage::BUFFERS,
        LevelKind::SparseHash => f::SparseHashStorage::BUFFERS,
        LevelKind::Dense | LevelKind::SparseList | LevelKind::SparseCoo(_) => return None,
    };
    Some(
        names
            .iter()
            .map(|&n| {
                (
                    n,
                    if n == "tbl" {
                        ScalarType::Bool
                    } else {
                        ScalarType::I64
                    },
                )
            })
            .collect(),
    )
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

    /// Finds the size of every mode indexed by bare `index` in `s`: (tensor, mode).
    fn bare_uses(&self, index: &str, s: &notation::Stmt, out: &mut Vec<(usize, usize)>) {
        let mut visit = |a: &notation::Access| {
            if let Some(&t) = self.by_name.get(&a.tensor) {
                for (m, e) in a.indices.iter().enumerate() {
                    let bare = match e {
                        notation::Expr::Index(i) => i == index,
                        notation::Expr::Protocol(_, x) => {
                            matches!(&**x, notation::Expr::Index(i) if i == index)
                        }
                        _ => false,
                    };
                    if bare {
                        out.push((t, m));
                    }
                }
            }
        };
        walk_accesses(s, &mut visit);
    }

    /// A fresh `i64` kernel local.
    fn kernel_local(&mut self, name: &str) -> LocalId {
        self.kernel.local(name.to_string(), ScalarType::I64)
    }

    /// How deep the loop binding `name` is (0 = outermost), for an access to `tensor`.
    fn loop_depth(&self, name: &str, tensor: &str) -> Result<usize> {
        self.loops
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| {
                Error::Unsupported(format!("`{name}` in `{tensor}[...]` is not a loop index"))
            })
    }

    /// Windows `A[(lo:hi)(i)]` of the loop index in `s`: the span each gives `i`.
    /// Windows whose bounds are known when tensors are bound give a [`Size::Span`]; those
    /// whose bounds use enclosing loop indices are returned apart, to be computed and
    /// checked in the kernel.
    fn window_uses(
        &self,
        index: &str,
        s: &notation::Stmt,
    ) -> Result<(Vec<Size>, Vec<DynamicWindow>)> {
        let mut found: Vec<(String, usize, notation::Expr, notation::Expr, bool)> = Vec::new();
        walk_accesses(s, &mut |a: &notation::Access| {
            for (m, e) in a.indices.iter().enumerate() {
                let (e, permissive) = match e {
                    notation::Expr::Permissive(x) => (&**x, true),
                    e => (e, false),
                };
                if let notation::Expr::Window { lo, hi, index: i } = e {
                    if matches!(&**i, notation::Expr::Index(n) if n == index) {
                        found.push((
                            a.tensor.clone(),
                            m,
                            (**lo).clone(),
                            (**hi).clone(),
                            permissive,
                        ));
                    }
                }
            }
        });
        let (mut known, mut dynamic) = (Vec::new(), Vec::new());
        for (name, m, lo, hi, permissive) in found {
            match (self.bound(&lo), self.bound(&hi)) {
                (Ok(lo), Ok(hi)) => known.push(Size::Span(lo, hi)),
                _ if self.known_at_loop(&lo) && self.known_at_loop(&hi) => {
                    dynamic.push(DynamicWindow {
                        tensor: self.tensor(&name)?,
                        mode: m,
                        lo,
                        hi,
                        permissive,
                    })
                }
                (lo, hi) => {
                    lo?;
                    hi?;
                }
            }
        }
        Ok((known, dynamic))
    }

    /// An integer expression of literals, enclosing loop indices and scalars the program
    /// does not write (`+`, `-`, `*`): known when a loop inside those indices starts.
    fn known_at_loop(&self, e: &notation::Expr) -> bool {
        let mut used = Vec::new();
        self.index_terms(e, true, &mut used)
            && used.iter().all(|i| self.loops.iter().any(|(n, _)| n == i))
    }

    /// Whether `e` is built from loop indices (collected into `out`), literals, `+ - *`
    /// and reads of scalars the program never writes (`n[]`); with `integer`, literals and
    /// scalars must be integers.
    fn index_terms(&self, e: &notation::Expr, integer: bool, out: &mut Vec<String>) -> bool {
        let integer_typed = |t: Option<ScalarType>| !integer || t.is_some_and(|t| t.is_integer());
        match e {
            notation::Expr::Index(i) => {
                out.push(i.clone());
                true
            }
            notation::Expr::Literal(v) => integer_typed(v.scalar_type()),
            notation::Expr::Access(a) if a.indices.is_empty() => {
                self.by_name.get(&a.tensor).is_some_and(|&t| {
                    let info = &self.tensors[t];
                    info.scalar.is_some()
                        && !info.written
                        && integer_typed(Some(info.format.element_type()))
                })
            }
            notation::Expr::Call {
                op: Op::Add | Op::Sub | Op::Mul,
                args,
            } => args.iter().all(|a| self.index_terms(a, integer, out)),
            _ => false,
        }
    }

    /// A bound of a loop range or window: an integer literal, or an integer input scalar
    /// the program does not write plus or minus a literal, so it is known when tensors are
    /// bound.
    fn bound(&self, e: &notation::Expr) -> Result<Bound> {
        fn literal(e: &notation::Expr) -> Option<i64> {
            match e {
                notation::Expr::Literal(v) if v.scalar_type().is_some_and(|t| t.is_integer()) => {
                    v.as_i128().and_then(|n| i64::try_from(n).ok())
                }
                _ => None,
            }
        }
        let scalar = |e: &notation::Expr| match e {
            notation::Expr::Access(a) if a.indices.is_empty() => {
                self.by_name.get(&a.tensor).copied().filter(|&t| {
                    let info = &self.tensors[t];
                    info.kind == DeclKind::Input
                        && !info.written
                        && info.scalar.is_some()
                        && info.format.element_type().is_integer()
                })
            }
            _ => None,
        };
        let found = match e {
            e if literal(e).is_some() => literal(e).map(Bound::Const),
            e if scalar(e).is_some() => scalar(e).map(|t| Bound::Scalar(t, 0)),
            notation::Expr::Call { op: Op::Add, args } if args.len() == 2 => {
                match (
                    scalar(&args[0]),
                    literal(&args[1]),
                    scalar(&args[1]),
                    literal(&args[0]),
                ) {
                    (Some(t), Some(c), _, _) | (_, _, Some(t), Some(c)) => {
                        Some(Bound::Scalar(t, c))
                    }
                    _ => None,
                }
            }
            notation::Expr::Call { op: Op::Sub, args } if args.len() == 2 => scalar(&args[0])
                .zip(literal(&args[1]).and_then(|c| c.checked_neg()))
                .map(|(t, c)| Bound::Scalar(t, c)),
            _ => None,
        };
        found.map_or_else(
            || {
                unsupported(format!(
                    "the bound `{}`: compiled loop ranges and windows take integer literals and integer input scalars the program does not write, plus or minus a literal (`n[]`, `n[] + 1`)",
                    notation::print_expr(e)
                ))
            },
            Ok,
        )
    }

    /// The `i64` kernel expression of a window bound.
    fn bound_value(&self, b: Bound) -> Result<KExpr> {
        match b {
            Bound::Const(n) => Ok(KExpr::int(n)),
            Bound::Scalar(t, c) => {
                let l = self.tensors[t].scalar.ok_or_else(|| {
                    Error::Program(format!(
                        "internal: `{}` is not a scalar",
                        self.tensors[t].name
                    ))
                })?;
                let ty = self.tensors[t].format.element_type();
                let v = if ty == ScalarType::I64 {
                    KExpr::Local(l)
                } else {
                    KExpr::Op(Op::Cast(ScalarType::I64), vec![KExpr::Local(l)])
                };
                Ok(crate::kernel::tidy_expr(KExpr::bin(
                    Op::Add,
                    v,
                    KExpr::int(c),
                )))
            }
        }
    }

    /// Non-permissive offset reads `A[i + c]` (`c != 0`) of the loop index in `s`.
    fn offset_uses(&self, index: &str, s: &notation::Stmt, out: &mut Vec<(usize, usize, i64)>) {
        let mut visit = |a: &notation::Access| {
            if let Some(&t) = self.by_name.get(&a.tensor) {
                for (m, e) in a.indices.iter().enumerate() {
                    if let Some((i, c)) = crate::reference::dims::offset_index(e) {
                        if i == index && c != 0 {
                            out.push((t, m, c));
                        }
                    }
                }
            }
        };
        walk_accesses(s, &mut visit);
    }

    /// The uses of a loop index (`(tensor, mode, offset)`: bare ones at offset 0) must
    /// agree on the range `1 - c : n - c` over which each is in bounds (Finch's
    /// OffsetArray); returns the use that gives it (an input first: outputs are sized by
    /// the loops that write them) and ties the others' sizes to it. `extent` is the
    /// loop's, for the message.
    fn agreeing_uses(
        &mut self,
        index: &str,
        extent: &str,
        mut uses: Vec<(usize, usize, i64)>,
    ) -> Result<Option<(usize, usize, i64)>> {
        uses.sort_by_key(|&(t, _, _)| self.tensors[t].kind != DeclKind::Input);
        let Some(&(t, m, c)) = uses.first() else {
            return Ok(None);
        };
        for &(t2, m2, c2) in &uses[1..] {
            if c2 != c {
                let shown = |t: usize, m: usize, c: i64| {
                    let name = &self.tensors[t].name;
                    match c {
                        0 => format!("`{name}` (mode {}) as `{index}`", m + 1),
                        c if c > 0 => format!("`{name}` (mode {}) as `{index} + {c}`", m + 1),
                        c => format!("`{name}` (mode {}) as `{index} - {}`", m + 1, -(c as i128)),
                    }
                };
                let hint = if extent == "_" {
                    " or give the loop a range"
                } else {
                    ""
                };
                return Err(Error::Program(format!(
                    "the loop `for {index} = {extent}` reads {} and {}, whose in-bounds ranges of `{index}` differ; make one permissive (`~`){hint}",
                    shown(t, m, c),
                    shown(t2, m2, c2)
                )));
            }
            self.constraints
                .push((Size::Mode(t, m), Size::Mode(t2, m2), index.to_string()));
        }
        Ok(Some((t, m, c)))
    }

    /// A loop `for index = lo:hi` whose body uses no offset of `index`: its size, tied to
    /// the modes `index` indexes directly, and its own bounds if it does not start at 1.
    fn plain_range(
        &mut self,
        index: &str,
        (lo, hi): (Bound, Bound),
        body: &notation::Stmt,
    ) -> Result<(Size, Option<(KExpr, KExpr)>)> {
        let mut uses = Vec::new();
        self.bare_uses(index, body, &mut uses);
        // A bare read or write of a tensor at the index spans its whole mode, so the
        // range starts at 1 (the reference's rule).
        if let (Some(&(t, m)), false) = (uses.first(), lo == Bound::Const(1)) {
            let name = &self.tensors[t].name;
            return match lo {
                Bound::Const(c) => Err(Error::Program(format!(
                    "the loop `for {index} = {c}:...` indexes `{name}` (mode {}) directly, so it must run over the whole mode from 1; use a window `{name}[(lo:hi)({index})]` to restrict it",
                    m + 1
                ))),
                Bound::Scalar(..) => unsupported(format!(
                    "a loop range starting at a scalar over `{index}`, which indexes `{name}` directly (start it at 1, or read `{name}` through a window)"
                )),
            };
        }
        let size = match (lo, hi) {
            (Bound::Const(1), Bound::Const(n)) => Size::Const(n),
            (lo, hi) => Size::Span(lo, hi),
        };
        for &(t, m) in &uses {
            self.constraints
                .push((size.clone(), Size::Mode(t, m), index.to_string()));
        }
        let own = if lo != Bound::Const(1) {
            Some((self.bound_value(lo)?, self.bound_value(hi)?))
        } else {
            None
        };
        Ok((size, own))
    }

    /// A loop `for index = lo:hi` whose body reads (or writes) tensors at `index + c`
    /// (`shifted`, `c != 0`). As in Finch.jl, where `A[i + c]` is `OffsetArray(A, c)[i]`
    /// whose extent `1 - c : n - c` `dimensionalize!` checks against the loop's (both
    /// limits), and in the reference, the range must equal that extent; checked when
    /// tensors are bound ([`RangeCheck`]). The loop then runs over the offset's range, as
    /// `for index = _` does, so the read needs no check of its own in the kernel. A bare
    /// use or a window of `index` (in bounds from 1) cannot agree with it.
    fn shifted_range(
        &mut self,
        index: &str,
        extent: &str,
        (lo, hi): (Bound, Bound),
        body: &notation::Stmt,
        shifted: Vec<(usize, usize, i64)>,
        windowed: bool,
    ) -> Result<(usize, usize, i64)> {
        let mut bare = Vec::new();
        self.bare_uses(index, body, &mut bare);
        let mut uses: Vec<(usize, usize, i64)> = bare.into_iter().map(|(t, m)| (t, m, 0)).collect();
        uses.extend(shifted);
        let Some((t, m, c)) = self.agreeing_uses(index, extent, uses)? else {
            return Err(Error::Program(format!(
                "internal: no offset read of `{index}`"
            )));
        };
        if windowed {
            return Err(Error::Program(format!(
                "the loop `for {index} = {extent}` reads `{}` at an offset of `{index}` and a window indexed by `{index}`, whose in-bounds ranges differ (the window's starts at 1); read one of them permissively (`~`)",
                self.tensors[t].name
            )));
        }
        let span = match (lo, hi) {
            (Bound::Const(1), Bound::Const(n)) => Size::Const(n),
            (lo, hi) => Size::Span(lo, hi),
        };
        self.constraints
            .push((span, Size::Mode(t, m), index.to_string()));
        self.ranges.push(RangeCheck {
            index: index.to_string(),
            lo,
            hi,
            tensor: t,
            mode: m,
            offset: c,
        });
        Ok((t, m, c))
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
                        Some(Size::Span(lo, hi)) => {
                            Some(Expr::Code(crate::kernel::tidy_expr(KExpr::bin(
                                Op::Add,
                                KExpr::bin(Op::Sub, self.bound_value(*hi)?, self.bound_value(*lo)?),
                                KExpr::int(1),
                            ))))
                        }
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
                        crate::kernel::tidy_expr(KExpr::bin(
                            Op::Add,
                            KExpr::bin(Op::Sub, self.bound_value(hi)?, self.bound_value(lo)?),
                            KExpr::int(1),
                        )),
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

    /// The `i64` kernel expression for the size of mode `m` of tensor `t`.
    fn mode_size(&self, t: usize, m: usize) -> Result<KExpr> {
        let info = &self.tensors[t];
        let ndims = info.format.ndims();
        let depth = ndims - 1 - m;
        match info.levels.get(depth).and_then(LevelParams::shape) {
            Some(shape) => Ok(KExpr::Local(shape)),
            None => Err(Error::Program(format!(
                "`{}` has no mode {}",
                info.name,
                m + 1
            ))),
        }
    }

    /// `i + rest` where `i` is the most deeply bound loop index of `x` (once, added) and
    /// `rest` only uses indices of loops around `i`'s, constants and scalars the program
    /// does not write: `(i, rest)`.
    fn toeplitz(&self, x: &notation::Expr) -> Option<(String, notation::Expr)> {
        fn terms(e: &notation::Expr, sign: bool, out: &mut Vec<(bool, notation::Expr)>) {
            match e {
                notation::Expr::Call { op: Op::Add, args } if args.len() == 2 => {
                    terms(&args[0], sign, out);
                    terms(&args[1], sign, out);
                }
                notation::Expr::Call { op: Op::Sub, args } if args.len() == 2 => {
                    terms(&args[0], sign, out);
                    terms(&args[1], !sign, out);
                }
                other => out.push((sign, other.clone())),
            }
        }
        let depth = |n: &str| self.loops.iter().position(|(l, _)| l == n);
        let mut ts = Vec::new();
        terms(x, true, &mut ts);
        let mut used = Vec::new();
        if !ts
            .iter()
            .all(|(_, t)| self.index_terms(t, false, &mut used))
        {
            return None;
        }
        let deepest = used.iter().max_by_key(|n| depth(n))?.clone();
        depth(&deepest)?;
        // `i` occurs once, as a term of its own with a plus sign; other indices are outer.
        let own = ts
            .iter()
            .position(|(s, t)| *s && matches!(t, notation::Expr::Index(n) if *n == deepest))?;
        if used.iter().filter(|n| **n == deepest).count() != 1 || ts.len() < 2 {
            return None;
        }
        if !used
            .iter()
            .all(|n| *n == deepest || depth(n) < depth(&deepest))
        {
            return None;
        }
        let mut rest: Option<notation::Expr> = None;
        for (k, (sign, t)) in ts.into_iter().enumerate() {
            if k == own {
                continue;
            }
            rest = Some(match (rest, sign) {
                (None, true) => t,
                (None, false) => notation::Expr::Call {
                    op: Op::Sub,
                    args: vec![notation::Expr::Literal(Value::I64(0)), t],
                },
                (Some(r), s) => notation::Expr::Call {
                    op: if s { Op::Add } else { Op::Sub },
                    args: vec![r, t],
                },
            });
        }
        // A constant remainder is the plain offset case, handled before this.
        let rest = rest?;
        if matches!(rest, notation::Expr::Literal(_)) {
            return None;
        }
        Some((deepest, rest))
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
