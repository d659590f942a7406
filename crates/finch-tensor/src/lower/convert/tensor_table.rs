//! The tensor table: each tensor's levels as kernel parameters (buffers, sizes, the
//! parameters of written levels), and whether an output is written in order, recorded
//! as entries, or through a hash table or bytemap.

use super::*;

/// The tensor table. Outputs named in `any_order` (written in a loop order their
/// in-order levels cannot take) keep their leading Dense levels, and the levels below
/// become one SparseHash group: written in any order, repeated, and built into the
/// declared format when frozen.
pub(super) fn tensor_table(
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
        let mut info = TensorInfo {
            name: d.name.clone(),
            kind: d.kind,
            format: d.format.clone(),
            levels: Vec::new(),
            scalar: None,
            dirty: None,
            written: written.contains(&d.name),
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
                while let LevelFormat::Inner { .. } = level {
                    let (next, modes) = inner_level(kernel, &mut info, any_order, level, depth)?;
                    level = next;
                    depth += modes;
                }
                leaf_level(program, kernel, &mut info, level, depth)?;
            }
        }
        tensors.push(info);
    }
    Ok(tensors)
}

/// The kernel parameters of the inner level `level` at `depth`: where the walk down the
/// format goes on, and how many modes it passed.
fn inner_level<'f>(
    kernel: &mut Kernel,
    info: &mut TensorInfo,
    any_order: &std::collections::HashSet<String>,
    level: &'f LevelFormat,
    depth: usize,
) -> Result<(&'f LevelFormat, usize)> {
    let LevelFormat::Inner { kind, index, child } = level else {
        return Err(Error::Program("internal: a leaf as an inner level".into()));
    };
    let (name, is_written) = (info.name.clone(), info.written);
    let name = name.as_str();
    let shape = kernel.local(format!("{name}_lvl{depth}_shape"), ScalarType::I64);
    kernel.inputs.push(shape);
    // The levels below an output's leading Dense ones, as one SparseHash group (see
    // `tensor_table`).
    let hashed = (!kind.is_dense()
        && is_written
        && any_order.contains(name)
        && matches!(level.leaf(), LevelFormat::Element(_) | LevelFormat::Pattern))
    .then(|| modes_below(level));
    // A vector (one mode, no Dense parent) takes a SparseByteMap instead: a flag per index
    // beats a hash table (its dense flags and values cost only the vector's length).
    let byte_map = hashed == Some(1) && depth == 1;
    let at = LevelAt { name, depth, shape };
    let levels = &mut info.levels;
    if byte_map {
        let vector = LevelKind::ANY_ORDER_VECTOR.any_order_params(kernel, &at, 1);
        levels.extend(vector.ok_or_else(|| internal_any_order(name))?);
        return Ok((level.leaf(), 1));
    }
    // A group the kernel writes as one table: the levels below the leading Dense ones,
    // or a group declared so (SparseHash levels down to the leaf).
    let declared_group = (is_written && *kind == LevelKind::ANY_ORDER_GROUP)
        .then(|| LevelKind::ANY_ORDER_GROUP.any_order_modes(level))
        .flatten();
    if let Some(modes) = hashed.or(declared_group) {
        let group = LevelKind::ANY_ORDER_GROUP.any_order_params(kernel, &at, modes);
        levels.extend(group.ok_or_else(|| internal_any_order(name))?);
        // Skip the group's further levels (a declared group runs down to the leaf).
        let mut last = child;
        for _ in 1..modes {
            if let LevelFormat::Inner { child, .. } = &**last {
                last = child;
            }
        }
        return Ok((if hashed.is_some() { level.leaf() } else { last }, modes));
    }
    if !is_written {
        levels.extend(kind.read_params(kernel, &at, *index));
        return Ok((child, kind.modes()));
    }
    if let Some(params) = kind.written_params(kernel, &at, child) {
        levels.extend(params);
        return Ok((child, kind.modes()));
    }
    if matches!(level.leaf(), LevelFormat::Element(_) | LevelFormat::Pattern) {
        // Any other written format whose levels from here down end in an Element leaf:
        // entries are recorded in order (extrude) like a SparseCOO level spanning those
        // modes, and the run time builds the levels from them.
        let modes = level.ndims();
        levels.extend(LevelKind::recorded_params(kernel, &at, modes));
        return Ok((level.leaf(), modes));
    }
    Err(not_compiled(kind, name, is_written))
}

/// The any-order levels of the registry did not give their parameters.
fn internal_any_order(name: &str) -> Error {
    Error::Program(format!("internal: the any-order levels of `{name}`"))
}

/// A level the compiled engines do not read or write this way.
fn not_compiled(kind: &LevelKind, name: &str, is_written: bool) -> Error {
    Error::Unsupported(format!(
        "compiling {} `{}` as {} (this release compiles reads of every level, and writes over an Element leaf into Dense, SparseByteMap and SparseHash levels in any order and into SparseList, SparseCOO, SparsePoint, SparseInterval, SparseBand, SparseBlockList, RunList and SparseRunList levels in order)",
        if is_written { "writes to" } else { "reads of" },
        name,
        kind.name()
    ))
}

/// The leaf at `depth`: an Element level's values, or a Pattern leaf (which stores
/// nothing, or a flag per entry where a write may clear an index).
fn leaf_level(
    program: &crate::Program,
    kernel: &mut Kernel,
    info: &mut TensorInfo,
    level: &LevelFormat,
    depth: usize,
) -> Result<()> {
    let is_written = info.written;
    match level {
        LevelFormat::Inner { .. } => {
            return Err(Error::Program("internal: an inner level as a leaf".into()));
        }
        LevelFormat::Element(fill) => {
            let ty = fill.scalar_type().unwrap_or(ScalarType::F64);
            // Under a sparse output level the values grow with the entries.
            let sparse_out = info
                .levels
                .last()
                .is_some_and(|l| l.write_traits().child_grows);
            let val = kernel.buf(
                format!("{}_lvl{depth}_val", info.name),
                ty,
                is_written,
                sparse_out,
            );
            info.levels.push(LevelParams::Element { val, fill: *fill });
        }
        LevelFormat::Pattern => {
            // Under levels that take repeated writes, a store of anything
            // but `true` may clear an index set before: such a leaf keeps
            // a flag per entry (an `Element(false)` leaf; entries left
            // `false` are dropped when frozen).
            let above = info.levels.last().map(LevelParams::write_traits);
            let repeated = above.is_some_and(|w| w.repeated);
            if is_written && repeated && may_clear(&program.ast().body, &info.name) {
                let sparse_out = above.is_some_and(|w| w.child_grows);
                let val = kernel.buf(
                    format!("{}_lvl{depth}_val", info.name),
                    ScalarType::Bool,
                    true,
                    sparse_out,
                );
                info.levels.push(LevelParams::Element {
                    val,
                    fill: Value::Bool(false),
                });
                return Ok(());
            }
            // Otherwise a written Pattern leaf stores nothing: writing `true`
            // claims the index, which the level above records (flags, or a
            // list of indices or entries).
            if is_written && !above.is_some_and(|w| w.records_pattern) {
                if info.levels.last().is_none_or(LevelParams::is_dense) {
                    // (Only an all-`true` result fits; the reference
                    // engine stores one.)
                    return unsupported(format!(
                        "writing `{}` ({}): a Pattern leaf under a Dense level (or at the root) is `true` everywhere and stores nothing to write; put a sparse level above the leaf",
                        info.name, info.format
                    ));
                }
                return unsupported(format!(
                    "writes to the Pattern tensor `{}` other than under a SparseByteMap, SparseList, SparseCOO or SparseHash level, or levels built from recorded entries",
                    info.name
                ));
            }
            info.levels.push(LevelParams::Pattern);
        }
    }
    Ok(())
}

/// Where a level's kernel parameters are named: `{name}_lvl{depth}_...`.
pub(crate) struct LevelAt<'a> {
    pub(crate) name: &'a str,
    pub(crate) depth: usize,
    /// The level's shape local (a kernel input).
    pub(crate) shape: LocalId,
}

impl LevelAt<'_> {
    /// A buffer of `i64`s written by the kernel; `grows` when it grows with the entries.
    pub(crate) fn buf(&self, kernel: &mut Kernel, what: &str, grows: bool) -> BufId {
        kernel.buf(self.named(what), ScalarType::I64, true, grows)
    }

    pub(crate) fn local(&self, kernel: &mut Kernel, what: &str, ty: ScalarType) -> LocalId {
        kernel.local(self.named(what), ty)
    }

    /// The flags of a level written in order that can be given data it cannot hold: whether
    /// the current index was written (`dirty`), and `conflict`, a kernel output the run
    /// time reads.
    pub(crate) fn write_flags(&self, kernel: &mut Kernel) -> (LocalId, LocalId) {
        let dirty = self.local(kernel, "dirty", ScalarType::Bool);
        let conflict = self.local(kernel, "conflict", ScalarType::Bool);
        kernel.outputs.push(conflict);
        (dirty, conflict)
    }

    pub(crate) fn named(&self, what: &str) -> String {
        format!("{}_lvl{}_{what}", self.name, self.depth)
    }
}

/// The shape locals of a level spanning `modes` modes from `depth` (the first is `first`,
/// already a kernel input; the others become inputs too).
pub(crate) fn mode_shapes(
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
pub(super) fn each_stmt(s: &notation::Stmt, f: &mut dyn FnMut(&notation::Stmt)) {
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
pub(super) fn may_clear(s: &notation::Stmt, name: &str) -> bool {
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

/// An output that needs levels taking writes in any order, or read back where it is
/// written: over an Element or Pattern leaf its levels below the leading Dense ones can be
/// one SparseHash group, so it is recorded in `any_order` (the conversion is done again);
/// anything else (an input) is refused with `why`.
pub(super) fn any_order_or(
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

/// How many modes `level` and the levels below it index.
pub(super) fn modes_below(level: &LevelFormat) -> usize {
    match level {
        LevelFormat::Inner { kind, child, .. } => kind.modes() + modes_below(child),
        _ => 0,
    }
}

/// A run-length vector workspace (a temporary whose only level is RunList or
/// SparseRunList): read back in the kernel after its writes.
pub(crate) fn readable_runs(info: &TensorInfo) -> bool {
    info.kind == DeclKind::Temp
        && matches!(
            info.levels.as_slice(),
            [level, LevelParams::Element { .. }] if level.write_traits().vector_read_back
        )
}

/// Levels written in order, once (extrude): a second statement, or a read after the
/// write, is refused.
pub(super) fn is_extruded(l: &LevelParams) -> bool {
    l.write_traits().extruded
}

/// A structured level read by a kernel: its storage's buffers (`BUFFERS`, in that order)
/// as kernel inputs; `tbl` holds flags, the others `i64`s.
pub(crate) fn structured_read_params(
    kernel: &mut Kernel,
    at: &LevelAt,
    kind: LevelKind,
    buffers: &[&str],
) -> LevelParams {
    let bufs = buffers
        .iter()
        .map(|&name| {
            let ty = if name == "tbl" {
                ScalarType::Bool
            } else {
                ScalarType::I64
            };
            kernel.buf(at.named(name), ty, false, false)
        })
        .collect();
    LevelParams::Structured {
        kind,
        shape: at.shape,
        bufs,
    }
}
