//! The last phase of a run: the kernel's output buffers frozen into tensors (counts into
//! offsets, buffers trimmed, fills dropped, recorded entries built in the declared
//! format), and the conflicts a written level flags.

use std::collections::HashMap;

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::{Format, LevelFormat, ScalarStorage};
use crate::kernel::LocalId;
use crate::lower::{LeafParams, LevelParams, TensorInfo};
use crate::notation::DeclKind;
use crate::tensor::{Tensor, TensorStorage};

use super::outputs::{output_storage, OutBufs};
use crate::formats::output::FreezeAt;

/// The tensors of a run's outputs (and of the inputs it updates), built from their
/// buffers and the kernel's output scalars; each is validated.
pub(super) fn freeze_outputs(
    infos: &[TensorInfo],
    out_vals: &mut HashMap<usize, OutBufs>,
    shape_of: &HashMap<usize, Vec<usize>>,
    out_scalars: &HashMap<LocalId, Value>,
) -> Result<Vec<(String, Tensor)>> {
    // Built first, stored once every one is built.
    let mut results = Vec::new();
    for (k, info) in infos.iter().enumerate() {
        if info.kind == DeclKind::Input && !(info.written && info.scalar.is_none()) {
            continue;
        }
        // A temporary is not stored: its format is how the kernel holds it where its
        // writes allow (one written in any order is a hash table or a bytemap), and
        // what it held is in the outputs.
        if info.kind == DeclKind::Temp {
            continue;
        }
        let tensor = match (&info.format, info.scalar) {
            (Format::Scalar(kind, fill), Some(l)) => {
                let val = out_scalars.get(&l).copied().unwrap_or(*fill);
                Tensor::from_parts(
                    info.format.clone(),
                    vec![],
                    TensorStorage::Scalar(ScalarStorage {
                        kind: *kind,
                        fill: *fill,
                        val,
                        // Written, and to something other than the fill (as a
                        // SparseScalar built from its value is): a write of the fill
                        // leaves it clean.
                        dirty: info
                            .dirty
                            .and_then(|d| out_scalars.get(&d))
                            .is_some_and(|v| *v == Value::Bool(true))
                            && !val.same(fill),
                    }),
                )?
            }
            (Format::Levels(_), None) if hash_count(&info.levels).is_some() => {
                let bufs = out_vals
                    .remove(&k)
                    .ok_or_else(|| Error::Program("internal: output values".into()))?;
                let count = hash_count(&info.levels)
                    .and_then(|c| out_scalars.get(&c))
                    .and_then(|v| v.as_i128())
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| Error::Program("internal: SparseHash count".into()))?;
                freeze_entries(info, &shape_of[&k], &bufs, count)?
            }
            (Format::Levels(_), None) if rebuilt(&info.levels) => {
                let bufs = out_vals
                    .remove(&k)
                    .ok_or_else(|| Error::Program("internal: output values".into()))?;
                // Entries per fiber, in order: their total is the sum of the counts.
                let count = bufs.ptr.iter().sum();
                freeze_entries(info, &shape_of[&k], &bufs, count)?
            }
            (Format::Levels(lf), None) => {
                let bufs = out_vals
                    .remove(&k)
                    .ok_or_else(|| Error::Program("internal: output values".into()))?;
                freeze_levels(info, lf, bufs, &shape_of[&k], out_scalars)?
            }
            _ => return Err(Error::Program("internal: output kind".into())),
        };
        results.push((info.name.clone(), tensor));
    }
    Ok(results)
}

/// An output whose top levels the kernel assembled: its buffers frozen in place
/// ([`freeze_written_levels`]), then stored in its declared format (through a bytemap
/// where the kernel wrote one for another format).
fn freeze_levels(
    info: &TensorInfo,
    lf: &LevelFormat,
    mut bufs: OutBufs,
    shape: &[usize],
    out_scalars: &HashMap<LocalId, Value>,
) -> Result<Tensor> {
    let byte_map = freeze_written_levels(info, &mut bufs, shape, out_scalars)?;
    // A vector the compiler wrote as a SparseByteMap for another format
    // (written in an order that format cannot take) is built as the
    // bytemap, then stored in the declared format.
    let counted = info.levels.iter().find(|l| l.entry_count().is_some());
    let byte_map_kind = counted.and_then(LevelParams::written_kind);
    let declared_byte_map = byte_map_kind.is_some_and(|k| lf.has_level(k));
    // A Pattern leaf written with a flag per entry (stores that may clear
    // an index) is built over those flags, then stored without the false
    // ones.
    let flags = matches!(lf.leaf(), LevelFormat::Pattern)
        && matches!(info.levels.last(), Some(LevelParams::Element { .. }));
    if byte_map.is_some() && (!declared_byte_map || flags) {
        let leaf = match info.levels.last().and_then(LevelParams::as_leaf) {
            Some(LeafParams::Element { fill, .. }) => LevelFormat::Element(fill),
            // (Over a Pattern leaf the set flags are the entries.)
            Some(LeafParams::Pattern) | None => LevelFormat::Pattern,
        };
        let written = match byte_map_kind {
            Some(kind) if !declared_byte_map => LevelFormat::inner(kind, leaf),
            _ => lf.with_leaf(leaf),
        };
        let t = Tensor::from_parts(
            Format::Levels(written.clone()),
            shape.to_vec(),
            TensorStorage::Levels(output_storage(&written, shape, bufs)?),
        )?;
        let fill = info.format.fill_value();
        let all = t.to_coo();
        let mut coo = crate::tensor::Coo::new(all.ty, shape);
        for q in 0..all.len() {
            if !all.vals[q].same(&fill) {
                let at: Vec<usize> = all.coords.iter().map(|c| c[q]).collect();
                coo.push(&at, all.vals[q])?;
            }
        }
        store_result(info, &coo)
    } else {
        // `from_parts` validates: a kernel that broke the extrude contract
        // (an index written out of order) yields an error, not a malformed
        // tensor.
        Tensor::from_parts(
            info.format.clone(),
            shape.to_vec(),
            TensorStorage::Levels(output_storage(lf, shape, bufs)?),
        )
    }
}

/// Freezes the written level of an output in place (its module's `freeze_output`:
/// counts become offsets, buffers are trimmed, runs and blocks closed, fills dropped, a
/// SparseByteMap's set positions sorted into fibers). Returns the SparseByteMap's count
/// local, if the output has one.
fn freeze_written_levels(
    info: &TensorInfo,
    bufs: &mut OutBufs,
    shape: &[usize],
    out_scalars: &HashMap<LocalId, Value>,
) -> Result<Option<LocalId>> {
    let byte_map = info.levels.iter().find_map(LevelParams::entry_count);
    let written = info
        .levels
        .iter()
        .zip(shape.iter().rev())
        .find_map(|(l, &size)| l.written_kind().map(|kind| (kind, size)));
    if let Some((kind, size)) = written {
        let count = byte_map
            .and_then(|n| out_scalars.get(&n))
            .and_then(|v| v.as_i128())
            .and_then(|n| usize::try_from(n).ok());
        let at = FreezeAt {
            size,
            fill: info.format.fill_value(),
            count,
            frozen_in_kernel: info.frozen_in_kernel,
        };
        kind.freeze_output(bufs, &at)?;
    }
    Ok(byte_map)
}

/// A written level's conflict flag, set by the kernel for data the level cannot hold,
/// with what that data was (`None`: the level takes anything).
fn conflict_flag(l: &LevelParams) -> Option<(LocalId, &'static str)> {
    let what = l.written_kind()?.write_conflict()?;
    Some((l.conflict_flag()?, what))
}

/// What a written output's levels could not take, if its kernel flagged a conflict.
pub(super) fn conflict(
    info: &TensorInfo,
    out_scalars: &HashMap<LocalId, Value>,
) -> Option<&'static str> {
    info.levels
        .iter()
        .filter_map(conflict_flag)
        .find_map(|(flag, what)| {
            (out_scalars.get(&flag) == Some(&Value::Bool(true))).then_some(what)
        })
}

/// Whether a tensor's written levels include one that flags conflicts.
pub(super) fn may_conflict(info: &TensorInfo) -> bool {
    info.levels.iter().any(|l| conflict_flag(l).is_some())
}

/// The local counting a written SparseHash group's entries, if the tensor has one.
fn hash_count(levels: &[LevelParams]) -> Option<LocalId> {
    levels.iter().find_map(LevelParams::hash_entry_count)
}

/// Whether the kernel records the entries of levels the run time builds (a written format
/// it does not assemble itself).
fn rebuilt(levels: &[LevelParams]) -> bool {
    levels.iter().any(LevelParams::rebuilt_from_entries)
}

/// Freezes a tensor whose levels the kernel wrote as recorded entries (a SparseHash
/// group, or levels the run time builds): entry `q`'s key (its linear position,
/// column-major) and value become a coordinate entry, values equal to the fill are
/// dropped (as a level that stores only what differs from its fill would), and the tensor
/// is built sorted from them; a format that cannot hold the data (two indices in one
/// SparsePoint fiber) is an error.
fn freeze_entries(
    info: &TensorInfo,
    shape: &[usize],
    bufs: &OutBufs,
    count: usize,
) -> Result<Tensor> {
    let format = &info.format;
    // A Pattern leaf records no values: every recorded entry is `true`.
    let pattern = format.element_type() == ScalarType::Bool && bufs.val.is_empty();
    if count > bufs.idx.len() || (count > bufs.val.len() && !pattern) {
        return Err(Error::Program("internal: recorded entries".into()));
    }
    let fill = format.fill_value();
    let mut coo = crate::tensor::Coo::new(bufs.val.scalar_type(), shape);
    let mut coord = vec![0; shape.len()];
    for q in 0..count {
        let mut rest = bufs.idx[q];
        for (c, &n) in coord.iter_mut().zip(shape) {
            *c = rest % n.max(1);
            rest /= n.max(1);
        }
        let v = if pattern {
            Value::Bool(true)
        } else {
            bufs.val
                .get(q)
                .ok_or_else(|| Error::Program("internal: recorded values".into()))?
        };
        if !v.same(&fill) {
            coo.push(&coord, v)?;
        }
    }
    store_result(info, &coo)
}

/// A result the kernel recorded as entries (fills already dropped), built in the declared
/// `format`; a format that cannot hold the data is an error.
fn store_result(info: &TensorInfo, coo: &crate::tensor::Coo) -> Result<Tensor> {
    Tensor::from_coo_with(&info.format, coo, crate::algebra::Op::Overwrite).map_err(|e| {
        Error::Program(format!(
            "cannot store the result in `{}` ({}): {e}",
            info.name, info.format
        ))
    })
}
