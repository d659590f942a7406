//! Binding a run to the kernel: its scalar inputs (sizes, scalars, written flags) and one
//! argument per kernel buffer, read from an input tensor's storage or lent by an output's
//! buffers.

use std::collections::HashMap;

use crate::algebra::Value;
use crate::backend::BufArg;
use crate::error::{Error, Result};
use crate::formats::KernelBuf;
use crate::kernel::{BufId, LocalId};
use crate::lower::{LevelParams, Lowered, OutArray};
use crate::notation::DeclKind;
use crate::tensor::{Buffer, Tensor, TensorStorage};

use super::outputs::OutBufs;

/// Where each kernel buffer comes from.
enum Source<'a> {
    /// A buffer of an input tensor.
    Read(KernelBuf<'a>),
    Output(usize),
    OutputPtr(usize),
    OutputIdx(usize),
    OutputFlags(usize),
    OutputAux(usize),
    /// A kernel's own growable index buffer (a SparseHash group's sorted view).
    Scratch,
}

/// The kernel's inputs and buffer arguments: input tensors' storage read in place, output
/// buffers lent mutably, `scratch` holding the kernel's own growable buffers.
pub(super) fn bind_kernel<'a>(
    lowered: &Lowered,
    shape_of: &HashMap<usize, Vec<usize>>,
    tensors: &'a HashMap<String, Tensor>,
    out_vals: &'a mut HashMap<usize, OutBufs>,
    scratch: &'a mut Vec<Vec<usize>>,
) -> Result<(Vec<Value>, Vec<BufArg<'a>>)> {
    let kernel = &lowered.kernel;
    let (local_values, mut sources) = values_and_sources(lowered, shape_of, tensors)?;
    let inputs: Vec<Value> = kernel
        .inputs
        .iter()
        .map(|l| {
            local_values
                .get(l)
                .copied()
                .ok_or_else(|| Error::Program(format!("internal: no value for kernel input {l}")))
        })
        .collect::<Result<_>>()?;
    // Borrow output buffers mutably, in kernel buffer order.
    let mut vals: HashMap<usize, &mut Buffer> = HashMap::new();
    let mut ptrs: HashMap<usize, &mut Vec<usize>> = HashMap::new();
    let mut idxs: HashMap<usize, &mut Vec<usize>> = HashMap::new();
    let mut flags: HashMap<usize, &mut Buffer> = HashMap::new();
    let mut auxs: HashMap<usize, &mut Vec<usize>> = HashMap::new();
    for (k, o) in out_vals.iter_mut() {
        vals.insert(*k, &mut o.val);
        ptrs.insert(*k, &mut o.ptr);
        idxs.insert(*k, &mut o.idx);
        flags.insert(*k, &mut o.flags);
        auxs.insert(*k, &mut o.aux);
    }
    let internal = |what: &str| Error::Program(format!("internal: output {what}"));
    let scratch_count = sources
        .values()
        .filter(|s| matches!(s, Source::Scratch))
        .count();
    *scratch = vec![Vec::new(); scratch_count];
    let mut scratch = scratch.iter_mut();
    let mut args: Vec<BufArg> = Vec::with_capacity(kernel.bufs.len());
    for b in 0..kernel.bufs.len() {
        let id = BufId(b as u32);
        args.push(match sources.remove(&id) {
            Some(Source::Read(KernelBuf::Indices(v))) => BufArg::ReadIndices(v),
            Some(Source::Read(KernelBuf::NarrowIndices(v))) => BufArg::ReadNarrowIndices(v),
            Some(Source::Read(KernelBuf::Values(v))) => BufArg::ReadValues(v),
            Some(Source::Output(k)) => {
                BufArg::Values(vals.remove(&k).ok_or_else(|| internal("values"))?)
            }
            Some(Source::OutputPtr(k)) => {
                BufArg::Indices(ptrs.remove(&k).ok_or_else(|| internal("counts"))?)
            }
            Some(Source::OutputIdx(k)) => {
                BufArg::Indices(idxs.remove(&k).ok_or_else(|| internal("indices"))?)
            }
            Some(Source::OutputFlags(k)) => {
                BufArg::Values(flags.remove(&k).ok_or_else(|| internal("flags"))?)
            }
            Some(Source::Scratch) => {
                BufArg::Indices(scratch.next().ok_or_else(|| internal("scratch"))?)
            }
            Some(Source::OutputAux(k)) => {
                BufArg::Indices(auxs.remove(&k).ok_or_else(|| internal("block ends"))?)
            }
            None => {
                return Err(Error::Program(format!(
                    "internal: no source for kernel buffer {id}"
                )))
            }
        });
    }
    Ok((inputs, args))
}

/// The value of every kernel input local (sizes of modes, scalars, written flags) and the
/// source of every kernel buffer: an input tensor's storage, an output's array, or the
/// kernel's scratch.
fn values_and_sources<'a>(
    lowered: &Lowered,
    shape_of: &HashMap<usize, Vec<usize>>,
    tensors: &'a HashMap<String, Tensor>,
) -> Result<(HashMap<LocalId, Value>, HashMap<BufId, Source<'a>>)> {
    let infos = &lowered.tensors;
    let mut local_values: HashMap<LocalId, Value> = HashMap::new();
    let mut sources: HashMap<BufId, Source> = HashMap::new();
    for (k, info) in infos.iter().enumerate() {
        if let Some(l) = info.scalar {
            let v = match (info.kind, tensors.get(&info.name)) {
                (DeclKind::Input, Some(t)) => t.get(&[])?,
                _ => info.init.unwrap_or(info.format.fill_value()),
            };
            local_values.insert(l, v);
            if let Some(d) = info.dirty {
                // An input keeps its written flag; a declared scalar starts clean.
                let written = match (info.kind, tensors.get(&info.name).map(Tensor::storage)) {
                    (DeclKind::Input, Some(TensorStorage::Scalar(s))) => s.dirty,
                    _ => false,
                };
                local_values.insert(d, Value::Bool(written));
            }
            continue;
        }
        let shape = &shape_of[&k];
        // (An input the program updates is bound like an output, from its copy.)
        let storage = tensors
            .get(&info.name)
            .filter(|_| info.kind == DeclKind::Input && !info.written)
            .map(|t| t.storage());
        let mut level = match storage {
            Some(TensorStorage::Levels(l)) => Some(l),
            _ => None,
        };
        for (depth, lp) in info.levels.iter().enumerate() {
            let mode_size = shape
                .get(shape.len().wrapping_sub(1 + depth))
                .copied()
                .unwrap_or(0);
            if let Some(shape) = lp.shape() {
                local_values.insert(shape, Value::I64(mode_size as i64));
            }
            for b in lp.scratch_buffers() {
                sources.insert(b, Source::Scratch);
            }
            // A written sparse level's buffers are the output's arrays.
            for (b, array) in lp.output_arrays() {
                sources.insert(
                    b,
                    match array {
                        OutArray::Ptr => Source::OutputPtr(k),
                        OutArray::Idx => Source::OutputIdx(k),
                        OutArray::Flags => Source::OutputFlags(k),
                        OutArray::Aux => Source::OutputAux(k),
                    },
                );
            }
            let mismatch = || {
                Error::Program(format!(
                    "internal: the storage of `{}` does not match its levels",
                    info.name
                ))
            };
            let Some(l) = level else {
                // An output: its leaf's values are the output's; its other levels are
                // Dense or written.
                if let LevelParams::Element { val, .. } = lp {
                    sources.insert(*val, Source::Output(k));
                } else if !(lp.is_dense() || lp.is_sparse_out() || lp.is_leaf()) {
                    return Err(mismatch());
                }
                continue;
            };
            // A tensor passed in: the level's buffers as its storage lists them.
            let (bufs, descends) = lp.read_buffers().ok_or_else(mismatch)?;
            let stored = l.kernel_buffers();
            if !bufs.is_empty() && bufs.len() != stored.len() {
                return Err(mismatch());
            }
            for (b, kb) in bufs.into_iter().zip(stored) {
                sources.insert(b, Source::Read(kb));
            }
            if descends {
                level = l.child();
            }
        }
    }
    Ok((local_values, sources))
}
