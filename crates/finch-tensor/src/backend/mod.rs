//! Backends run kernel IR on tensor buffers: `interp` (always available) and `c`
//! (generated C compiled with the system compiler, loaded and cached). Both follow the
//! semantics of `Op::eval`, so results are identical.

pub mod c;
pub mod interp;

use crate::algebra::Value;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::tensor::Buffer;

/// One buffer argument of a kernel call.
#[derive(Debug)]
pub enum BufArg<'a> {
    /// A value buffer the kernel may write (and, if growable, resize).
    Values(&'a mut Buffer),
    /// An index buffer (`i64` in the kernel) the kernel may write or resize.
    Indices(&'a mut Vec<usize>),
    /// A read-only value buffer.
    ReadValues(&'a Buffer),
    /// A read-only index buffer.
    ReadIndices(&'a [usize]),
    /// A read-only index buffer stored as `u32` (a `SparseList{UInt32}` level); the kernel
    /// reads it as `i64`.
    ReadNarrowIndices(&'a [u32]),
}

/// Checks that arguments match a kernel's signature (count, element types, writability).
pub(crate) fn check_args(k: &Kernel, bufs: &[BufArg<'_>], inputs: &[Value]) -> Result<()> {
    if bufs.len() != k.bufs.len() {
        return Err(Error::Program(format!(
            "kernel `{}` takes {} buffers, got {}",
            k.name,
            k.bufs.len(),
            bufs.len()
        )));
    }
    for (n, (p, a)) in k.bufs.iter().zip(bufs).enumerate() {
        if p.narrow != matches!(a, BufArg::ReadNarrowIndices(_)) {
            return Err(Error::Program(format!(
                "kernel `{}`: buffer b{n} ({}) is compiled for {}-bit indices",
                k.name,
                p.name,
                if p.narrow { 32 } else { 64 }
            )));
        }
        if p.elem != a.elem() {
            return Err(Error::Program(format!(
                "kernel `{}`: buffer b{n} ({}) holds {}, got {}",
                k.name,
                p.name,
                p.elem,
                a.elem()
            )));
        }
        let writable = matches!(a, BufArg::Values(_) | BufArg::Indices(_));
        if (p.writable || p.growable) && !writable {
            return Err(Error::Program(format!(
                "kernel `{}`: buffer b{n} ({}) is written but was passed read-only",
                k.name, p.name
            )));
        }
    }
    if inputs.len() != k.inputs.len() {
        return Err(Error::Program(format!(
            "kernel `{}` takes {} scalar inputs, got {}",
            k.name,
            k.inputs.len(),
            inputs.len()
        )));
    }
    for (l, v) in k.inputs.iter().zip(inputs) {
        let want = k.locals[l.0 as usize].ty;
        if v.scalar_type() != Some(want) {
            return Err(Error::Program(format!(
                "kernel `{}`: input {l} is {want}, got {v}",
                k.name
            )));
        }
    }
    Ok(())
}
