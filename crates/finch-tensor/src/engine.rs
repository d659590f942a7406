//! Compiled programs: `Program::compile` lowers a program to a kernel once (for the
//! formats it declares); `CompiledProgram::run` binds stored tensors to the kernel's
//! buffers, checks dimensions, allocates outputs, runs the kernel on the chosen backend
//! and returns the outputs as tensors.
//!
//! Trust boundary: tensors reach `run` only as `Tensor`s, which are valid by construction
//! or validated when built from outside buffers; `run` checks that each one has exactly the
//! declared format and that all sizes agree, so the kernel never sees a malformed or
//! mismatched tensor, and no O(nnz) check is paid per call.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::algebra::ScalarType;
use crate::algebra::Value;
use crate::backend::{c, interp, BufArg};
use crate::error::{Error, Result};
use crate::formats::KernelBuf;
use crate::formats::{
    DenseStorage, ElementStorage, Format, LevelFormat, LevelStorage, ScalarStorage,
};
use crate::kernel::{BufId, Kernel, LocalId};
use crate::lower::{
    lower_program_any_order, Bound, LevelParams, Lowered, OutArray, RangeCheck, Size, TensorInfo,
};
use crate::notation::DeclKind;
use crate::tensor::{checked_len, fmt_shape, Buffer, IndexVec, Tensor, TensorStorage};

/// Which backend runs a compiled program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Generated C (falls back to `Interp` when no C compiler is found, or when the kernel
    /// is too large for one, with a warning; see [`CompiledProgram::engine`]).
    C,
    /// The kernel-IR interpreter.
    Interp,
}

/// A program lowered to a kernel, ready to run.
pub struct CompiledProgram {
    lowered: Lowered,
    engine: Engine,
    ckernel: Option<c::CKernel>,
    /// Time spent lowering and (for C) compiling or fetching from the caches.
    pub compile_time: Duration,
    /// The program and how it was compiled, for [`Self::fallback`].
    program: crate::Program,
    options: CompileOptions,
    /// Outputs this kernel records as entries (written in any order).
    any_order: HashSet<String>,
    /// The program compiled again with every output that can flag a conflict recorded
    /// as entries, compiled on the first run that needs it.
    fallback: OnceLock<Box<CompiledProgram>>,
}

impl std::fmt::Debug for CompiledProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledProgram")
            .field("kernel", &self.lowered.kernel.name)
            .field("engine", &self.engine)
            .field("compile_time", &self.compile_time)
            .finish()
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Time in the kernel itself.
    pub kernel_time: Duration,
    /// Interpreter counts (interpreter engine only).
    pub stats: Option<interp::InterpStats>,
}

/// How to compile a program beyond the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// Let the C compiler reassociate floating-point arithmetic (sums and products in
    /// reductions get several partial results and vector instructions, as MKL's kernels
    /// do). Results may differ from the interpreter and the reference engine in rounding
    /// and in the sign of a zero (`0.0 + -0.0` may give `-0.0`); `NaN` and infinities keep
    /// their meaning. Off by default.
    pub reassociate: bool,
    /// Lower compactly: every two or more coiterated terms of a sum share one loop (levels
    /// of consecutive indices walked segment by segment, leaves read as selects) rather
    /// than loops specialized for each combination of up to four of them. Smaller code,
    /// quicker to compile, possibly slower; a kernel whose specialized code is large is
    /// lowered compactly anyway. Off by default.
    pub compact: bool,
}

impl crate::Program {
    /// Lowers the program for its declared formats and prepares it for `engine` (a C
    /// kernel is compiled or fetched from the caches now; without a C compiler the
    /// interpreter is used).
    pub fn compile(&self, engine: Engine) -> Result<CompiledProgram> {
        self.compile_with(engine, &CompileOptions::default())
    }

    /// [`compile`](crate::Program::compile) with options.
    pub fn compile_with(
        &self,
        engine: Engine,
        options: &CompileOptions,
    ) -> Result<CompiledProgram> {
        self.compile_any_order(engine, options, HashSet::new())
    }

    /// [`compile_with`](crate::Program::compile_with), with the outputs in `any_order`
    /// recorded as entries and stored in their declared formats when frozen.
    fn compile_any_order(
        &self,
        engine: Engine,
        options: &CompileOptions,
        any_order: HashSet<String>,
    ) -> Result<CompiledProgram> {
        let start = Instant::now();
        let mut lowered = lower_program_any_order(self, options.compact, &any_order)?;
        lowered.kernel.reassociate = options.reassociate;
        let (engine, ckernel) = match engine {
            // Trusted (unchecked) C: every buffer position in a lowered kernel is derived
            // from level invariants that `Tensor` guarantees (validated at construction)
            // and from sizes `run` checks against each other before the call; programs
            // whose indices are not bare loop indices are rejected by `lower`. The
            // interpreter, which always checks bounds, runs the same kernels in the oracle
            // tests, so a lowering bug shows up there as an error.
            Engine::C if c::available() => match c::too_large(&lowered.kernel) {
                // Minutes of `cc` (or a refusal) help no one: the interpreter runs it.
                Some(why) => {
                    lowered.warnings.push(format!(
                        "{why}: it runs in the kernel interpreter instead (slower; splitting the statement keeps the code small)"
                    ));
                    (Engine::Interp, None)
                }
                None => match c::compile_with(&lowered.kernel, c::CheckMode::Trusted) {
                    Ok(mut k) => {
                        lowered.warnings.append(&mut k.warnings);
                        (Engine::C, Some(k))
                    }
                    // The file system refused (a full disk, no temporary directory):
                    // the interpreter needs no files.
                    Err(e @ crate::Error::Os { .. }) => {
                        lowered.warnings.push(format!(
                            "the C kernel could not be built ({e}): it runs in the kernel interpreter instead (slower)"
                        ));
                        (Engine::Interp, None)
                    }
                    Err(e) => return Err(e),
                },
            },
            _ => (Engine::Interp, None),
        };
        Ok(CompiledProgram {
            lowered,
            engine,
            ckernel,
            compile_time: start.elapsed(),
            program: self.clone(),
            options: *options,
            any_order,
            fallback: OnceLock::new(),
        })
    }
}

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

/// The buffers of an output: values, and for a sparse output its counts and indices (for
/// a SparseByteMap: `ptr`, the flags and the set positions in `idx`).
struct OutBufs {
    val: Buffer,
    ptr: Vec<usize>,
    idx: Vec<usize>,
    flags: Buffer,
    /// A second index array (a SparseBlockList's block ends).
    aux: Vec<usize>,
}

impl OutBufs {
    /// Only values (the leaf below a sparse level).
    fn values(val: Buffer) -> OutBufs {
        OutBufs {
            val,
            ptr: vec![],
            idx: vec![],
            flags: Buffer::new(ScalarType::Bool),
            aux: vec![],
        }
    }
}

impl CompiledProgram {
    /// The kernel IR.
    pub fn kernel(&self) -> &Kernel {
        &self.lowered.kernel
    }

    /// Warnings from compiling (e.g. a read out of loop order over a sparse level).
    pub fn warnings(&self) -> &[String] {
        &self.lowered.warnings
    }

    /// The engine actually used.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The C source of the kernel: `Trusted` is what the C engine runs, `Checked` the
    /// bounds-checked form.
    pub fn c_source(&self, mode: c::CheckMode) -> Result<String> {
        c::emit(&self.lowered.kernel, "finch_kernel", mode)
    }

    /// Runs on `tensors`: inputs are read from it (each must have the declared format),
    /// outputs are inserted into it. `shapes` gives outputs their dimensions where no
    /// write determines them.
    pub fn run(
        &self,
        tensors: &mut HashMap<String, Tensor>,
        shapes: &HashMap<String, Vec<usize>>,
    ) -> Result<RunReport> {
        let infos = &self.lowered.tensors;
        // Inputs: present, with the declared format.
        for info in infos.iter().filter(|t| t.kind == DeclKind::Input) {
            let t = tensors
                .get(&info.name)
                .ok_or_else(|| Error::Program(format!("missing input: {}", info.name)))?;
            if t.format() != &info.format {
                return Err(Error::Program(format!(
                    "the input `{}` is stored as {} but the program declares {}",
                    info.name,
                    t.format(),
                    info.format
                )));
            }
        }
        // Shapes of inputs, then outputs from the sizes of the loops that write them.
        let mut shape_of: HashMap<usize, Vec<usize>> = HashMap::new();
        for (k, info) in infos.iter().enumerate() {
            if info.kind == DeclKind::Input {
                if let Some(t) = tensors.get(&info.name) {
                    shape_of.insert(k, t.shape().to_vec());
                }
            }
        }
        // Sizes of every (tensor, mode): inputs and given shapes first, then propagated
        // through the dimension constraints and the loops that write outputs, to a fixpoint
        // (a workspace can size an output and the other way round).
        let mut known: HashMap<(usize, usize), usize> = HashMap::new();
        for (k, sh) in &shape_of {
            for (m, &n) in sh.iter().enumerate() {
                known.insert((*k, m), n);
            }
        }
        for (k, info) in infos.iter().enumerate() {
            if let Some(sh) = shapes.get(&info.name) {
                if sh.len() != info.format.ndims() {
                    return Err(Error::Program(format!(
                        "a shape of {} modes was given for `{}`, which has {}",
                        sh.len(),
                        info.name,
                        info.format.ndims()
                    )));
                }
                for (m, &n) in sh.iter().enumerate() {
                    known.entry((k, m)).or_insert(n);
                }
            }
        }
        // Window bounds that are input scalars, by tensor index.
        let mut scalar_bounds: HashMap<usize, i64> = HashMap::new();
        for (k, info) in infos.iter().enumerate() {
            if info.kind == DeclKind::Input && info.scalar.is_some() {
                if let Some(n) = tensors
                    .get(&info.name)
                    .and_then(|t| t.get(&[]).ok())
                    .and_then(|v| v.as_i128())
                    .and_then(|n| i64::try_from(n).ok())
                {
                    scalar_bounds.insert(k, n);
                }
            }
        }
        let bound = |b: &Bound| match b {
            Bound::Const(n) => Some(*n),
            Bound::Scalar(t, c) => scalar_bounds.get(t).and_then(|v| v.checked_add(*c)),
        };
        let value = |s: &Size, known: &HashMap<(usize, usize), usize>| -> Option<usize> {
            match s {
                Size::Const(n) => usize::try_from(*n).ok(),
                Size::Mode(t, m) => known.get(&(*t, *m)).copied(),
                Size::Span(lo, hi) => bound(hi)
                    .zip(bound(lo))
                    .and_then(|(hi, lo)| hi.checked_sub(lo)?.checked_add(1))
                    .and_then(|n| usize::try_from(n).ok()),
            }
        };
        loop {
            let mut changed = false;
            let mut learn = |from: &Size, to: &Size, known: &mut HashMap<(usize, usize), usize>| {
                if let (Some(n), Size::Mode(t, m)) = (value(from, known), to) {
                    if let std::collections::hash_map::Entry::Vacant(e) = known.entry((*t, *m)) {
                        e.insert(n);
                        changed = true;
                    }
                }
            };
            for (a, b, _) in &self.lowered.constraints {
                learn(a, b, &mut known);
                learn(b, a, &mut known);
            }
            for (k, sizes) in &self.lowered.output_shapes {
                for (m, s) in sizes.iter().enumerate() {
                    if let Some(s) = s {
                        learn(s, &Size::Mode(*k, m), &mut known);
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let show_bound = |b: &Bound| match b {
            Bound::Const(n) => n.to_string(),
            Bound::Scalar(t, 0) => format!("{}[]", infos[*t].name),
            Bound::Scalar(t, c) if *c > 0 => format!("{}[] + {c}", infos[*t].name),
            Bound::Scalar(t, c) => format!("{}[] - {}", infos[*t].name, -(*c as i128)),
        };
        let describe = |s: &Size| match s {
            Size::Const(n) => format!("the loop range 1:{n}"),
            Size::Mode(t, m) => format!("`{}` (mode {})", infos[*t].name, m + 1),
            Size::Span(lo, hi) => format!("the window ({}:{})", show_bound(lo), show_bound(hi)),
        };
        // Every window lies inside its mode (an empty one may start right after it).
        for w in &self.lowered.windows {
            let (lo, hi) = (bound(&w.lo), bound(&w.hi));
            let size = known.get(&(w.tensor, w.mode)).copied();
            if let (Some(lo), Some(hi), Some(n)) = (lo, hi, size) {
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                if lo < 1 || hi > n || hi < lo - 1 {
                    return Err(Error::Program(format!(
                        "the window ({lo}:{hi}) of `{}` (mode {}) is outside its size {n}",
                        infos[w.tensor].name,
                        w.mode + 1
                    )));
                }
            } else if lo.is_none() || hi.is_none() {
                return Err(Error::Program(format!(
                    "the window ({}:{}) of `{}` needs its bounds: bind the scalar inputs",
                    show_bound(&w.lo),
                    show_bound(&w.hi),
                    infos[w.tensor].name
                )));
            }
        }
        // Before the sizes alone, which would blame the lengths.
        check_ranges(&self.lowered.ranges, infos, &bound, &known)?;
        for (a, b, index) in &self.lowered.constraints {
            if let (Some(x), Some(y)) = (value(a, &known), value(b, &known)) {
                if x != y {
                    return Err(Error::Program(format!(
                        "the loop index `{index}` ranges over {} of size {x} and over {} of size {y}; the sizes must be equal",
                        describe(a),
                        describe(b)
                    )));
                }
            }
        }
        for (k, info) in infos.iter().enumerate() {
            if info.kind == DeclKind::Input || info.scalar.is_some() {
                continue;
            }
            let mut sh = Vec::with_capacity(info.format.ndims());
            for m in 0..info.format.ndims() {
                match known.get(&(k, m)) {
                    Some(&n) => sh.push(n),
                    None => {
                        return Err(Error::Program(format!(
                            "cannot determine the size of mode {} of `{}`; give its shape",
                            m + 1,
                            info.name
                        )))
                    }
                }
            }
            shape_of.insert(k, sh);
        }
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
        // Kernel inputs (shapes and scalars) and buffer sources.
        let kernel = &self.lowered.kernel;
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
                if let LevelParams::HashOut { view, mode: 0, .. } = lp {
                    for b in view
                        .tbl
                        .iter()
                        .chain([&view.order, &view.posmap, &view.ptr])
                    {
                        sources.insert(*b, Source::Scratch);
                    }
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
                match (lp, level) {
                    (LevelParams::Dense { .. }, l) => {
                        level = l.and_then(LevelStorage::child);
                    }
                    (
                        LevelParams::SparseList { ptr, idx, .. },
                        Some(LevelStorage::SparseList(s)),
                    ) => {
                        sources.insert(*ptr, Source::Read(KernelBuf::of(&s.ptr)));
                        sources.insert(*idx, Source::Read(KernelBuf::of(&s.idx)));
                        level = Some(&s.child);
                    }
                    (LevelParams::Element { val, .. }, Some(LevelStorage::Element(e))) => {
                        sources.insert(*val, Source::Read(KernelBuf::Values(&e.val)));
                    }
                    (LevelParams::Element { val, .. }, None) => {
                        sources.insert(*val, Source::Output(k));
                    }
                    (
                        LevelParams::Coo {
                            ptr,
                            tbl,
                            mode,
                            modes,
                            ..
                        },
                        Some(l @ LevelStorage::SparseCoo(s)),
                    ) => {
                        // Every mode of the level shares its buffers; the child follows
                        // the last mode.
                        if *mode == 0 {
                            sources.insert(*ptr, Source::Read(KernelBuf::Indices(&s.ptr)));
                            for (b, coords) in tbl.iter().zip(&s.tbl) {
                                sources.insert(*b, Source::Read(KernelBuf::Indices(coords)));
                            }
                        }
                        if *mode + 1 == *modes {
                            level = l.child();
                        }
                    }
                    (LevelParams::Structured { bufs, .. }, Some(l)) => {
                        for (b, kb) in bufs.iter().zip(l.kernel_buffers()) {
                            sources.insert(*b, Source::Read(kb));
                        }
                        level = l.child();
                    }
                    (l, None) if l.is_sparse_out() => {}
                    (LevelParams::Pattern, _) => {}
                    _ => {
                        return Err(Error::Program(format!(
                            "internal: the storage of `{}` does not match its levels",
                            info.name
                        )))
                    }
                }
            }
        }
        let inputs: Vec<Value> = kernel
            .inputs
            .iter()
            .map(|l| {
                local_values.get(l).copied().ok_or_else(|| {
                    Error::Program(format!("internal: no value for kernel input {l}"))
                })
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
        let mut scratch: Vec<Vec<usize>> = vec![Vec::new(); scratch_count];
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
        let start = Instant::now();
        // A computed index outside a tensor is reported with the tensor's name.
        let named = |e: Error| {
            match e {
            Error::IndexOutOfRange { tensor } => Error::Program(format!(
                "an index computed by the program (indirect, shifted by a run-time value, or read out of loop order) is outside `{}`; give it a larger shape or check the index data",
                infos.get(tensor).map_or("?", |t| t.name.as_str())
            )),
            Error::WindowMismatch { tensor } => Error::Program(format!(
                "a window of `{0}` computed from the loop indices does not fit: it lies outside `{0}`, or its length differs from another range of its loop index; check the window bounds",
                infos.get(tensor).map_or("?", |t| t.name.as_str())
            )),
            Error::OutsideWindow { tensor } => Error::Program(format!(
                "an index of a window of `{}` is outside the window: the window `(lo:hi)` is indexed from 1 to hi - lo + 1",
                infos.get(tensor).map_or("?", |t| t.name.as_str())
            )),
            other => other,
        }
        };
        let (outs, stats) = match &self.ckernel {
            Some(ck) => (ck.run(&mut args, &inputs).map_err(named)?, None),
            None => {
                let (o, s) = interp::run(kernel, &mut args, &inputs).map_err(named)?;
                (o, Some(s))
            }
        };
        let kernel_time = start.elapsed();
        drop(args);
        // Outputs back into tensors.
        let out_scalars: HashMap<LocalId, Value> =
            kernel.outputs.iter().copied().zip(outs).collect();
        // An output whose in-order levels could not take what the program wrote (a second
        // index of a SparsePoint fiber, ...) is run again recorded as entries, then stored
        // without the values equal to its fill, as the reference engine stores it: the
        // result is refused only if that cannot hold it either.
        if let Some((info, what)) = infos
            .iter()
            .find_map(|info| conflict(info, &out_scalars).map(|what| (info, what)))
        {
            let refused = || {
                Error::Program(format!(
                    "cannot store the result in `{}` ({}): {what}",
                    info.name, info.format
                ))
            };
            return match self.fallback() {
                Some(f) => f.run(tensors, shapes),
                None => Err(refused()),
            };
        }
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
                    let mut bufs = out_vals
                        .remove(&k)
                        .ok_or_else(|| Error::Program("internal: output values".into()))?;
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
                            .ok_or_else(|| {
                                Error::Program("internal: SparseByteMap count".into())
                            })?;
                        let n = info.levels.iter().zip(shape_of[&k].iter().rev()).find_map(
                            |(l, &size)| {
                                matches!(l, LevelParams::SparseByteMapOut { .. }).then_some(size)
                            },
                        );
                        let n = n.unwrap_or(1).max(1);
                        bufs.idx.truncate(count);
                        // A set position whose value ended up the fill is not kept (as
                        // the reference stores its result).
                        let fill = info.format.fill_value();
                        let OutBufs {
                            idx, val, flags, ..
                        } = &mut bufs;
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
                    } else if info
                        .levels
                        .iter()
                        .any(|l| matches!(l, LevelParams::SparseIntervalOut { .. }))
                    {
                        // Drop the scratch value slot.
                        let n = bufs.idx.len();
                        bufs.val.truncate(n);
                    } else if let Some((dense, size)) = info
                        .levels
                        .iter()
                        .zip(shape_of[&k].iter().rev())
                        .find_map(|(l, &size)| match l {
                            LevelParams::RunsOut { dense, .. } => Some((*dense, size)),
                            _ => None,
                        })
                    {
                        freeze_runs(&mut bufs, dense, size, &info.format.fill_value())?;
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
                        drop_block_fills(&mut bufs, &info.format.fill_value())?;
                    } else if info
                        .levels
                        .iter()
                        .any(|l| matches!(l, LevelParams::SparseBandOut { .. }))
                    {
                        // Freeze a SparseBand: widths become offsets, values are trimmed.
                        prefix_sum(&mut bufs.ptr);
                        let n = bufs.ptr.last().copied().unwrap_or(0);
                        bufs.val.truncate(n);
                        drop_band_fills(&mut bufs, &info.format.fill_value())?;
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
                    let shape = shape_of[&k].clone();
                    // A vector the compiler wrote as a SparseByteMap for another format
                    // (written in an order that format cannot take) is built as the
                    // bytemap, then stored in the declared format.
                    fn has_byte_map(l: &LevelFormat) -> bool {
                        match l {
                            LevelFormat::Inner { kind, child, .. } => {
                                *kind == crate::formats::LevelKind::SparseByteMap
                                    || has_byte_map(child)
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
                            shape.clone(),
                            TensorStorage::Levels(output_storage(&written, &shape, bufs)?),
                        )?;
                        let fill = info.format.fill_value();
                        let all = t.to_coo();
                        let mut coo = crate::tensor::Coo::new(all.ty, &shape);
                        for q in 0..all.len() {
                            if !all.vals[q].same(&fill) {
                                let at: Vec<usize> = all.coords.iter().map(|c| c[q]).collect();
                                coo.push(&at, all.vals[q])?;
                            }
                        }
                        store_result(info, &coo)?
                    } else {
                        // `from_parts` validates: a kernel that broke the extrude contract
                        // (an index written out of order) yields an error, not a malformed
                        // tensor.
                        Tensor::from_parts(
                            info.format.clone(),
                            shape.clone(),
                            TensorStorage::Levels(output_storage(lf, &shape, bufs)?),
                        )?
                    }
                }
                _ => return Err(Error::Program("internal: output kind".into())),
            };
            results.push((info.name.clone(), tensor));
        }
        tensors.extend(results);
        Ok(RunReport { kernel_time, stats })
    }

    /// This program compiled again with every output that may flag a conflict (and can be
    /// written in any order: an output over an Element or Pattern leaf) recorded as
    /// entries; `None` if there is none, or if it is this one, or if it does not compile.
    fn fallback(&self) -> Option<&CompiledProgram> {
        if let Some(f) = self.fallback.get() {
            return Some(f);
        }
        let outputs: HashSet<String> = self
            .lowered
            .tensors
            .iter()
            .filter(|info| may_conflict(info) && info.records_in_any_order())
            .map(|info| info.name.clone())
            .collect();
        if outputs.is_empty() || outputs.is_subset(&self.any_order) {
            return None;
        }
        let compiled = self
            .program
            .compile_any_order(self.engine, &self.options, outputs)
            .ok()?;
        let _ = self.fallback.set(Box::new(compiled));
        self.fallback.get().map(|f| &**f)
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
fn conflict(info: &TensorInfo, out_scalars: &HashMap<LocalId, Value>) -> Option<&'static str> {
    info.levels
        .iter()
        .filter_map(conflict_flag)
        .find_map(|(flag, what)| {
            (out_scalars.get(&flag) == Some(&Value::Bool(true))).then_some(what)
        })
}

/// Whether a tensor's written levels include one that flags conflicts.
fn may_conflict(info: &TensorInfo) -> bool {
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
            match &info.levels[d] {
                LevelParams::SparseByteMapOut { .. } => {
                    // Dense child positions (all at the initial value) and a
                    // flag per position: the modes from the root down to this
                    // level (the last `d + 1` of the shape).
                    let total = checked_len(&shape[shape.len() - d - 1..])?;
                    // (A Pattern leaf has no values: the flags are the entries.)
                    if matches!(info.levels.last(), Some(LevelParams::Element { .. })) {
                        b.val = Buffer::filled(ty, total, init)?;
                    }
                    b.flags = Buffer::filled(ScalarType::Bool, total, Value::Bool(false))?;
                }
                LevelParams::SparsePointOut { .. } => {
                    // One child position per fiber; every fiber starts empty.
                    b.val = Buffer::filled(ty, parents, init)?;
                    b.ptr = Vec::new();
                    b.idx = index_vec(parents, n)?;
                }
                // Per-fiber last index and width (in `ptr`).
                LevelParams::SparseBandOut { .. } => b.idx = index_vec(parents, 0)?,
                LevelParams::SparseIntervalOut { .. } => {
                    // Every fiber starts empty (`left = 1`, `right = 0`); one
                    // value slot per fiber plus a scratch slot for the run being
                    // written.
                    b.val = Buffer::filled(ty, parents + 1, init)?;
                    b.ptr = index_vec(parents, 0)?;
                    b.idx = index_vec(parents, 1)?;
                }
                // Block ends start with the first block's start.
                LevelParams::SparseBlockListOut { .. } => b.aux = vec![0],
                // Entries are recorded by their linear position over every
                // mode from the root down to the group's last, which must fit
                // the kernel's `i64`.
                l @ (LevelParams::HashOut { modes, .. } | LevelParams::CooOut { modes, .. }) => {
                    let below = shape.len() - d - modes;
                    let fits = checked_len(&shape[below..])
                        .ok()
                        .is_some_and(|n| i64::try_from(n).is_ok());
                    let hash = matches!(l, LevelParams::HashOut { .. });
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
                }
                // SparseList and run-length levels: per-fiber counts in `ptr`.
                _ => {}
            }
            b
        }
    })
}

/// The storage of an output: Dense levels, possibly one SparseList or SparseByteMap level,
/// an Element leaf.
fn output_storage(lf: &LevelFormat, shape: &[usize], bufs: OutBufs) -> Result<LevelStorage> {
    match lf {
        LevelFormat::Element(fill) => Ok(LevelStorage::Element(ElementStorage {
            fill: *fill,
            val: bufs.val,
        })),
        LevelFormat::Inner { kind, index, child } => {
            let (last, rest) = shape
                .split_last()
                .ok_or_else(|| Error::Program(format!("internal: shape {}", fmt_shape(shape))))?;
            match kind {
                crate::formats::LevelKind::SparseByteMap => {
                    let OutBufs {
                        val,
                        ptr,
                        idx,
                        flags,
                        ..
                    } = bufs;
                    Ok(LevelStorage::SparseByteMap(
                        crate::formats::SparseByteMapStorage {
                            shape: *last,
                            ptr,
                            tbl: flags,
                            srt: idx,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                crate::formats::LevelKind::SparseCoo(modes) => {
                    // The kernel recorded each entry's linear position over the modes
                    // from the root down to the level's last (outermost most significant):
                    // the level's own modes are its last `modes` digits.
                    let split = shape.len().checked_sub(*modes).ok_or_else(|| {
                        Error::Program(format!("internal: shape {}", fmt_shape(shape)))
                    })?;
                    let (rest, own) = shape.split_at(split);
                    let OutBufs { val, ptr, idx, .. } = bufs;
                    let mut tbl = vec![Vec::with_capacity(idx.len()); *modes];
                    for mut lin in idx {
                        for (k, &n) in own.iter().enumerate() {
                            tbl[k].push(lin % n.max(1));
                            lin /= n.max(1);
                        }
                    }
                    Ok(LevelStorage::SparseCoo(crate::formats::SparseCooStorage {
                        shape: own.to_vec(),
                        ptr,
                        tbl,
                        child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                    }))
                }
                crate::formats::LevelKind::SparsePoint => {
                    let OutBufs { val, idx, .. } = bufs;
                    Ok(LevelStorage::SparsePoint(
                        crate::formats::SparsePointStorage {
                            shape: *last,
                            idx,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                crate::formats::LevelKind::SparseInterval => {
                    let OutBufs { val, ptr, idx, .. } = bufs;
                    Ok(LevelStorage::SparseInterval(
                        crate::formats::SparseIntervalStorage {
                            shape: *last,
                            left: idx,
                            right: ptr,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                crate::formats::LevelKind::RunList => {
                    let OutBufs { val, ptr, idx, .. } = bufs;
                    Ok(LevelStorage::RunList(crate::formats::RunListStorage {
                        shape: *last,
                        ptr,
                        right: idx,
                        child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                    }))
                }
                crate::formats::LevelKind::SparseRunList => {
                    let OutBufs {
                        val, ptr, idx, aux, ..
                    } = bufs;
                    Ok(LevelStorage::SparseRunList(
                        crate::formats::SparseRunListStorage {
                            shape: *last,
                            ptr,
                            left: aux,
                            right: idx,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                crate::formats::LevelKind::SparseBlockList => {
                    let OutBufs {
                        val, ptr, idx, aux, ..
                    } = bufs;
                    Ok(LevelStorage::SparseBlockList(
                        crate::formats::SparseBlockListStorage {
                            shape: *last,
                            ptr,
                            idx,
                            ofs: aux,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                crate::formats::LevelKind::SparseBand => {
                    let OutBufs { val, ptr, idx, .. } = bufs;
                    Ok(LevelStorage::SparseBand(
                        crate::formats::SparseBandStorage {
                            shape: *last,
                            idx,
                            ofs: ptr,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                crate::formats::LevelKind::SparseList => {
                    let OutBufs { val, ptr, idx, .. } = bufs;
                    Ok(LevelStorage::SparseList(
                        crate::formats::SparseListStorage {
                            shape: *last,
                            ptr: IndexVec::with_width(ptr, *index, "a SparseList output's ptr")?,
                            idx: IndexVec::with_width(idx, *index, "a SparseList output's idx")?,
                            child: Box::new(output_storage(child, rest, OutBufs::values(val))?),
                        },
                    ))
                }
                _ => Ok(LevelStorage::Dense(DenseStorage {
                    shape: *last,
                    child: Box::new(output_storage(child, rest, bufs)?),
                })),
            }
        }
        // A Pattern leaf stores nothing (its level records the positions).
        LevelFormat::Pattern => Ok(LevelStorage::Pattern(crate::formats::PatternStorage)),
    }
}

/// `n` copies of `x` (an output level's initial positions), or an error when memory
/// cannot hold them: a size taken from a huge input is an error, not an aborted process.
fn index_vec(n: usize, x: usize) -> Result<Vec<usize>> {
    let mut v = Vec::new();
    crate::tensor::resize_fallibly(&mut v, n, x)?;
    Ok(v)
}

/// A loop range that runs over an offset read must be the read's in-bounds range, both
/// limits (the loop runs over that range: the kernel reads no further).
fn check_ranges(
    ranges: &[RangeCheck],
    infos: &[TensorInfo],
    bound: &dyn Fn(&Bound) -> Option<i64>,
    known: &HashMap<(usize, usize), usize>,
) -> Result<()> {
    for r in ranges {
        let (Some(lo), Some(hi), Some(&n)) =
            (bound(&r.lo), bound(&r.hi), known.get(&(r.tensor, r.mode)))
        else {
            continue;
        };
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let (a, b) = (1i64.saturating_sub(r.offset), n.saturating_sub(r.offset));
        if (lo, hi) != (a, b) {
            let name = &infos[r.tensor].name;
            let read = match r.offset {
                c if c > 0 => format!("{} + {c}", r.index),
                c => format!("{} - {}", r.index, -(c as i128)),
            };
            return Err(Error::Program(format!(
                "the loop index `{}` has extent {lo}:{hi} but `{name}` (mode {}, size {n}, shifted by {}) needs {a}:{b}; loop bounds must equal tensor dimensions (a permissive read `{name}[~({read})]` is `missing` outside `{name}`)",
                r.index,
                r.mode + 1,
                -(r.offset as i128),
            )));
        }
    }
    Ok(())
}
