//! The tensor table: each tensor's levels as kernel parameters (buffers, sizes, the
//! parameters of written levels), and whether an output is written in order, recorded
//! as entries, or through a hash table or bytemap.

use super::*;

/// Builds the tensor table and kernel parameters.
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
pub(super) fn mode_shapes(
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

/// The levels of a written group recorded as entries (a SparseCOO level, or levels the run
/// time builds), one per mode, sharing their buffers and cursor.
pub(super) fn recorded_levels(
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

/// A written SparseByteMap level `depth` of `name`: its buffers and cursors.
pub(super) fn byte_map_out(
    kernel: &mut Kernel,
    name: &str,
    depth: usize,
    shape: LocalId,
) -> LevelParams {
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
pub(super) fn modes_below(level: &LevelFormat) -> usize {
    match level {
        LevelFormat::Inner { kind, child, .. } => kind.modes() + modes_below(child),
        _ => 0,
    }
}

/// How many SparseHash levels `level` starts that run down to an Element or Pattern leaf
/// (a group the compiler writes as one hash table), or `None`.
pub(super) fn hash_group(level: &LevelFormat) -> Option<usize> {
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
pub(super) fn is_extruded(l: &LevelParams) -> bool {
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
pub(super) fn structured_buffers(kind: LevelKind) -> Option<Vec<(&'static str, ScalarType)>> {
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
