//! The last phase of a run: the kernel's output buffers frozen into tensors (counts into
//! offsets, buffers trimmed, fills dropped, recorded entries built in the declared
//! format), and the conflicts a written level flags.

use std::collections::HashMap;

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::{Format, LevelFormat, ScalarStorage};
use crate::kernel::LocalId;
use crate::lower::{LevelParams, TensorInfo};
use crate::notation::DeclKind;
use crate::tensor::{Buffer, Tensor, TensorStorage};

use super::outputs::{output_storage, OutBufs};

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
    fn has_byte_map(l: &LevelFormat) -> bool {
        match l {
            LevelFormat::Inner { kind, child, .. } => {
                *kind == crate::formats::LevelKind::SparseByteMap || has_byte_map(child)
            }
            _ => false,
        }
    }
    let declared_byte_map = has_byte_map(lf);
    // A Pattern leaf written with a flag per entry (stores that may clear
    // an index) is built over those flags, then stored without the false
    // ones.
    let flags = matches!(lf.leaf(), LevelFormat::Pattern)
        && matches!(info.levels.last(), Some(LevelParams::Element { .. }));
    if byte_map.is_some() && (!declared_byte_map || flags) {
        let leaf = match info.levels.last() {
            Some(LevelParams::Element { fill, .. }) => LevelFormat::Element(*fill),
            // (Over a Pattern leaf the set flags are the entries.)
            _ => LevelFormat::Pattern,
        };
        let written = if declared_byte_map {
            lf.with_leaf(leaf)
        } else {
            LevelFormat::inner(crate::formats::LevelKind::SparseByteMap, leaf)
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

/// Freezes the written level of an output in place: counts become offsets, buffers are
/// trimmed, runs and blocks closed, fills dropped; a SparseByteMap's set positions are
/// sorted into fibers. Returns the SparseByteMap's count local, if the output has one.
fn freeze_written_levels(
    info: &TensorInfo,
    bufs: &mut OutBufs,
    shape: &[usize],
    out_scalars: &HashMap<LocalId, Value>,
) -> Result<Option<LocalId>> {
    let byte_map = info.levels.iter().find_map(|l| match l {
        LevelParams::SparseByteMapOut { nsrt, .. } => Some(*nsrt),
        _ => None,
    });
    if let Some(nsrt) = byte_map {
        // Freeze a SparseByteMap: the set positions (linear, in write order)
        // are sorted and split into fibers.
        let count = out_scalars
            .get(&nsrt)
            .and_then(|v| v.as_i128())
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= bufs.idx.len())
            .ok_or_else(|| Error::Program("internal: SparseByteMap count".into()))?;
        let n = info
            .levels
            .iter()
            .zip(shape.iter().rev())
            .find_map(|(l, &size)| {
                matches!(l, LevelParams::SparseByteMapOut { .. }).then_some(size)
            });
        let n = n.unwrap_or(1).max(1);
        bufs.idx.truncate(count);
        // A set position whose value ended up the fill is not kept (as
        // the reference stores its result).
        let fill = info.format.fill_value();
        let OutBufs {
            idx, val, flags, ..
        } = bufs;
        let mut cleared = Vec::new();
        idx.retain(|&q| {
            let kept = !val.get(q).is_some_and(|v| v.same(&fill));
            if !kept {
                cleared.push(q);
            }
            kept
        });
        for q in cleared {
            flags.set(q, Value::Bool(false))?;
        }
        bufs.idx.sort_unstable();
        bufs.ptr.iter_mut().for_each(|c| *c = 0);
        for q in bufs.idx.iter_mut() {
            let p = *q / n;
            if let Some(c) = bufs.ptr.get_mut(p + 1) {
                *c += 1;
            }
            *q %= n;
        }
        prefix_sum(&mut bufs.ptr);
    } else if let Some(size) = info
        .levels
        .iter()
        .zip(shape.iter().rev())
        .find_map(|(l, &size)| matches!(l, LevelParams::SparsePointOut { .. }).then_some(size))
    {
        drop_point_fills(bufs, size, &info.format.fill_value());
    } else if info
        .levels
        .iter()
        .any(|l| matches!(l, LevelParams::SparseIntervalOut { .. }))
    {
        // Drop the scratch value slot.
        let n = bufs.idx.len();
        bufs.val.truncate(n);
    } else if let Some((dense, size)) =
        info.levels
            .iter()
            .zip(shape.iter().rev())
            .find_map(|(l, &size)| match l {
                LevelParams::RunsOut { dense, .. } => Some((*dense, size)),
                _ => None,
            })
    {
        freeze_runs(bufs, dense, size, &info.format.fill_value())?;
    } else if info
        .levels
        .iter()
        .any(|l| matches!(l, LevelParams::SparseBlockListOut { .. }))
    {
        // Freeze a SparseBlockList: block counts become offsets, the block
        // and value arrays are trimmed.
        prefix_sum(&mut bufs.ptr);
        let blocks = bufs.ptr.last().copied().unwrap_or(0);
        bufs.idx.truncate(blocks);
        bufs.aux.truncate(blocks + 1);
        let n = bufs.aux.get(blocks).copied().unwrap_or(0);
        bufs.val.truncate(n);
        drop_block_fills(bufs, &info.format.fill_value())?;
    } else if info
        .levels
        .iter()
        .any(|l| matches!(l, LevelParams::SparseBandOut { .. }))
    {
        // Freeze a SparseBand: widths become offsets, values are trimmed.
        prefix_sum(&mut bufs.ptr);
        let n = bufs.ptr.last().copied().unwrap_or(0);
        bufs.val.truncate(n);
        drop_band_fills(bufs, &info.format.fill_value())?;
    } else if !bufs.ptr.is_empty() {
        // Freeze a SparseList output: counts become offsets, buffers are
        // trimmed.
        if !info.frozen_in_kernel {
            prefix_sum(&mut bufs.ptr);
        }
        let n = bufs.ptr[bufs.ptr.len() - 1];
        bufs.idx.truncate(n);
        bufs.val.truncate(n);
    }
    Ok(byte_map)
}

/// Empties a written SparsePoint fiber whose one entry ended up the fill (written, then
/// updated back: `y[j] <<xor>>= true` twice), as the reference stores its result: its
/// index becomes `size`, the empty mark, and its value slot already holds the fill the
/// child of an empty fiber must hold. A Pattern leaf has no values: nothing to compare.
fn drop_point_fills(bufs: &mut OutBufs, size: usize, fill: &Value) {
    for (p, i) in bufs.idx.iter_mut().enumerate() {
        if *i != size && bufs.val.get(p).is_some_and(|v| v.same(fill)) {
            *i = size;
        }
    }
}

/// A written level's conflict flag, set by the kernel for data the level cannot hold,
/// with what that data was (`None`: the level takes anything).
fn conflict_flag(l: &LevelParams) -> Option<(LocalId, &'static str)> {
    Some(match l {
        LevelParams::SparsePointOut { conflict, .. } => (*conflict, "a SparsePoint level stores one index per fiber, but the program wrote two indices of one fiber"),
        LevelParams::SparseIntervalOut { conflict, .. } => (*conflict, "a SparseInterval level stores one run of equal values per fiber, but the program wrote another"),
        LevelParams::RunsOut { conflict, .. } => (*conflict, "a run-length level is written in increasing index order, once per index, but the program wrote an index at or before one already written"),
        LevelParams::SparseBlockListOut { conflict, .. } => (*conflict, "a SparseBlockList level is written in increasing index order, once per index, but the program wrote an index at or before one already written"),
        LevelParams::SparseBandOut { conflict, .. } => (*conflict, "a SparseBand level is written in increasing index order, once per index, but the program wrote an index at or before one already written"),
        _ => return None,
    })
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
    levels.iter().find_map(|l| match l {
        LevelParams::HashOut { count, .. } => Some(*count),
        _ => None,
    })
}

/// Whether the kernel records the entries of levels the run time builds (a written format
/// it does not assemble itself).
fn rebuilt(levels: &[LevelParams]) -> bool {
    levels
        .iter()
        .any(|l| matches!(l, LevelParams::CooOut { rebuilt: true, .. }))
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

/// Drops the fill values at the ends of each band of a frozen SparseBand output (`ptr`
/// the value offsets, `idx` each band's last index), so that, as the reference stores its
/// result, each band runs from its first value other than the fill to its last.
fn drop_band_fills(bufs: &mut OutBufs, fill: &Value) -> Result<()> {
    let is_fill = |q: usize| bufs.val.get(q).is_some_and(|v| v.same(fill));
    let mut ptr = vec![0];
    let mut idx = Vec::with_capacity(bufs.idx.len());
    let mut val = Buffer::new(bufs.val.scalar_type());
    for (p, &last) in bufs.idx.iter().enumerate() {
        let (lo, hi) = (bufs.ptr[p], bufs.ptr[p + 1]);
        let first = (lo..hi).find(|&q| !is_fill(q));
        let end = (lo..hi).rev().find(|&q| !is_fill(q));
        match (first, end) {
            (Some(a), Some(b)) => {
                for q in a..=b {
                    let v = bufs
                        .val
                        .get(q)
                        .ok_or_else(|| Error::Program("internal: band values".into()))?;
                    // Inside the band, a value the same as the fill is the fill itself.
                    val.push(if v.same(fill) { *fill } else { v })?;
                }
                // Position `hi - 1` holds index `last`.
                idx.push(last - (hi - 1 - b));
            }
            _ => idx.push(0),
        }
        ptr.push(val.len());
    }
    (bufs.ptr, bufs.idx, bufs.val) = (ptr, idx, val);
    Ok(())
}

/// Rebuilds the blocks of a frozen SparseBlockList output (`ptr` block offsets, `idx`
/// block ends, `aux` value offsets) from its values other than the fill, in maximal runs
/// of consecutive indices, as the reference stores its result.
fn drop_block_fills(bufs: &mut OutBufs, fill: &Value) -> Result<()> {
    let mut ptr = vec![0];
    let (mut ends, mut ofs) = (Vec::new(), vec![0]);
    let mut val = Buffer::new(bufs.val.scalar_type());
    for p in 0..bufs.ptr.len().saturating_sub(1) {
        let mut prev: Option<usize> = None;
        for b in bufs.ptr[p]..bufs.ptr[p + 1] {
            let (lo, hi, last) = (bufs.aux[b], bufs.aux[b + 1], bufs.idx[b]);
            for q in lo..hi {
                let v = bufs
                    .val
                    .get(q)
                    .ok_or_else(|| Error::Program("internal: block values".into()))?;
                if v.same(fill) {
                    continue;
                }
                let i = last - (hi - 1 - q);
                val.push(v)?;
                match (prev, ends.last_mut(), ofs.last_mut()) {
                    // The value extends the current block.
                    (Some(j), Some(end), Some(o)) if j + 1 == i => (*end, *o) = (i, val.len()),
                    _ => {
                        ends.push(i);
                        ofs.push(val.len());
                    }
                }
                prev = Some(i);
            }
        }
        ptr.push(ends.len());
    }
    (bufs.ptr, bufs.idx, bufs.aux, bufs.val) = (ptr, ends, ofs, val);
    Ok(())
}

/// Per-fiber counts to offsets, in place.
fn prefix_sum(counts: &mut [usize]) {
    for p in 1..counts.len() {
        counts[p] += counts[p - 1];
    }
}

/// Freezes a written RunList (`dense`) or SparseRunList: run counts become offsets, the
/// arrays are trimmed, touching runs of equal values are merged (Finch's `merge`), and a
/// SparseRunList drops runs that hold the fill, so the result is canonical.
fn freeze_runs(bufs: &mut OutBufs, dense: bool, size: usize, fill: &Value) -> Result<()> {
    let parents = bufs.ptr.len().saturating_sub(1);
    let mut q = 0;
    let (mut ptr, mut left, mut right) = (vec![0], Vec::new(), Vec::new());
    let mut vals = Buffer::new(bufs.val.scalar_type());
    for p in 0..parents {
        let end = q + bufs.ptr[p + 1];
        let first = right.len();
        while q < end {
            let (l, r) = (if dense { 0 } else { bufs.aux[q] }, bufs.idx[q]);
            let v = bufs
                .val
                .get(q)
                .ok_or_else(|| Error::Program("internal: run values".into()))?;
            if !dense && v.same(fill) {
                q += 1;
                continue;
            }
            // A run of values the same as the fill holds the fill itself (`0.0`, not
            // `-0.0`), as the reference's does.
            let v = if v.same(fill) { *fill } else { v };
            let touches = right.len() > first
                && (dense || right.last().is_some_and(|&prev: &usize| prev + 1 == l))
                && vals.get(vals.len() - 1).is_some_and(|u| u.same(&v));
            if touches {
                if let Some(last) = right.last_mut() {
                    *last = r;
                }
            } else {
                left.push(l);
                right.push(r);
                vals.push(v)?;
            }
            q += 1;
        }
        // A RunList fiber the kernel never reached (its output declared but not written
        // there) is one run of fill.
        if dense && right.len() == first && size > 0 {
            left.push(0);
            right.push(size - 1);
            vals.push(*fill)?;
        }
        ptr.push(right.len());
    }
    bufs.ptr = ptr;
    bufs.idx = right;
    bufs.aux = if dense { Vec::new() } else { left };
    bufs.val = vals;
    Ok(())
}
