//! Output buffers: allocated before the kernel runs (dense values filled with the initial
//! value; for a sparse output, per-fiber counts and the buffers its written level starts
//! with), and assembled into level storage after it.

use std::collections::HashMap;

use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::formats::output::{index_vec, AllocateAt};
use crate::lower::{LevelParams, TensorInfo};
use crate::notation::DeclKind;
use crate::tensor::{checked_len, fmt_shape, Buffer, Tensor};

pub(super) use crate::formats::output::{assemble as output_storage, OutBufs};

/// The buffers of every output, and of every input the program updates, by tensor index.
pub(super) fn allocate_outputs(
    infos: &[TensorInfo],
    shape_of: &HashMap<usize, Vec<usize>>,
    tensors: &mut HashMap<String, Tensor>,
) -> Result<HashMap<usize, OutBufs>> {
    // Output buffers: dense values filled with the declared initial value; for a sparse
    // output, per-fiber counts (one per parent position, plus one) and empty idx/val.
    let mut out_vals: HashMap<usize, OutBufs> = HashMap::new();
    // Inputs the program updates (Dense levels over an Element leaf) are written like
    // an output starting from a copy of their values, and replaced after a successful
    // run (a failed run leaves them as they were).
    for (k, info) in infos.iter().enumerate() {
        if info.kind == DeclKind::Input && info.written && info.scalar.is_none() {
            let val = tensors
                .get(&info.name)
                .cloned()
                .and_then(Tensor::into_dense_values)
                .ok_or_else(|| {
                    Error::Program(format!("internal: the updated input `{}`", info.name))
                })?;
            out_vals.insert(k, OutBufs::values(val));
        }
    }
    for (k, info) in infos.iter().enumerate() {
        if info.kind != DeclKind::Input && info.scalar.is_none() {
            let ty = info.format.element_type();
            let init = info.init.unwrap_or(info.format.fill_value());
            let init = init.convert_exact(ty).ok_or_else(|| {
                Error::Program(format!("`{}` cannot be initialized with {init}", info.name))
            })?;
            let shape = &shape_of[&k];
            let bufs = allocate_output(info, shape, ty, init, tensors).map_err(|e| {
                match e {
                    // The budget's refusal, said of the output.
                    Error::Program(m) if m.contains("would take") => Error::Program(format!(
                        "the output `{}` ({}) of shape {}: {m}",
                        info.name,
                        info.format,
                        fmt_shape(shape)
                    )),
                    e => e,
                }
            })?;
            out_vals.insert(k, bufs);
        }
    }
    Ok(out_vals)
}

/// The buffers of output `info` of `shape` before the kernel runs: dense values filled
/// with the initial value `init` (reusing the buffer of an output of the same format and
/// shape left in `tensors` by an earlier run); for a sparse output, per-fiber counts (one
/// per parent position, plus one) and the buffers its level starts with.
fn allocate_output(
    info: &TensorInfo,
    shape: &[usize],
    ty: ScalarType,
    init: Value,
    tensors: &mut HashMap<String, Tensor>,
) -> Result<OutBufs> {
    let sparse_depth = info.levels.iter().position(LevelParams::is_sparse_out);
    Ok(match sparse_depth {
        None => {
            // An output left in the map by an earlier run, of the same format
            // and shape, lends its value buffer (refilled, not reallocated).
            let reusable = tensors.get(&info.name).is_some_and(|t| {
                info.kind == DeclKind::Output && t.format() == &info.format && t.shape() == shape
            });
            let mut val = reusable
                .then(|| tensors.remove(&info.name))
                .flatten()
                .and_then(Tensor::into_dense_values)
                .unwrap_or_else(|| Buffer::new(ty));
            val.resize_filled(checked_len(shape)?, init)?;
            OutBufs::values(val)
        }
        Some(d) => {
            // Parent positions (the product of the Dense sizes above the level)
            // and the level's size; buffers a written level grows start empty.
            let outer: Vec<usize> = shape.iter().rev().take(d).copied().collect();
            let parents = checked_len(&outer)?;
            let n = shape[shape.len() - d - 1];
            let mut b = OutBufs {
                val: Buffer::new(ty),
                ptr: index_vec(parents.saturating_add(1), 0)?,
                idx: Vec::new(),
                flags: Buffer::new(ScalarType::Bool),
                aux: Vec::new(),
            };
            let level = &info.levels[d];
            // Entries are recorded by their linear position over every mode from the
            // root down to the group's last, which must fit the kernel's `i64`.
            if let Some((modes, hash)) = level.recorded_modes() {
                let below = shape.len() - d - modes;
                let fits = checked_len(&shape[below..])
                    .ok()
                    .is_some_and(|n| i64::try_from(n).is_ok());
                if !fits {
                    return Err(Error::Program(format!(
                        "`{}` ({}) of shape {} is too large to be written: its {} levels record entries by their position in 64 bits",
                        info.name,
                        info.format,
                        fmt_shape(shape),
                        if hash { "SparseHash" } else { "sparse" }
                    )));
                }
                if hash {
                    b.ptr = Vec::new();
                }
            } else if let Some(kind) = level.written_kind() {
                let at = AllocateAt {
                    parents,
                    size: n,
                    positions: &shape[shape.len() - d - 1..],
                    ty,
                    init,
                    has_values: matches!(info.levels.last(), Some(LevelParams::Element { .. })),
                };
                kind.allocate_output(&mut b, &at)?;
            }
            b
        }
    })
}
