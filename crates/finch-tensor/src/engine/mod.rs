//! Compiled programs: `Program::compile` lowers a program to a kernel once (for the
//! formats it declares); `CompiledProgram::run` runs it in phases: check the inputs and
//! infer every shape (`shapes`), allocate the outputs (`outputs`), bind the kernel's
//! arguments (`bind`), run the kernel on the chosen backend, and freeze the outputs into
//! tensors (`freeze`).
//!
//! Trust boundary: tensors reach `run` only as `Tensor`s, which are valid by construction
//! or validated when built from outside buffers; `run` checks that each one has exactly the
//! declared format and that all sizes agree, so the kernel never sees a malformed or
//! mismatched tensor, and no O(nnz) check is paid per call.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::algebra::Value;
use crate::backend::{c, interp, BufArg};
use crate::error::{Error, Result};
use crate::kernel::{Kernel, LocalId};
use crate::lower::{lower_program_any_order, Lowered};
use crate::tensor::Tensor;

mod bind;
mod call;
mod freeze;
mod outputs;
mod shapes;

pub use call::Outputs;
use freeze::{conflict, may_conflict};

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
    /// The kernel the interpreter runs: the lowered one after the kernel passes
    /// (`kernel::passes::run`), as the C engine's trusted code runs it; made on the first
    /// interpreted run, so a program the C engine runs never makes it.
    passed: OnceLock<Kernel>,
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
        on_a_deep_stack(|| self.compile_on_this_thread(engine, options, any_order))
    }

    fn compile_on_this_thread(
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
            passed: OnceLock::new(),
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
        shapes::check_inputs(infos, tensors)?;
        let shape_of = shapes::infer_shapes(&self.lowered, tensors, shapes)?;
        let mut out_vals = outputs::allocate_outputs(infos, &shape_of, tensors)?;
        let (outs, stats, kernel_time) = {
            let mut scratch = Vec::new();
            let (inputs, mut args) = bind::bind_kernel(
                &self.lowered,
                &shape_of,
                tensors,
                &mut out_vals,
                &mut scratch,
            )?;
            self.run_kernel(&mut args, &inputs)?
        };
        let kernel = &self.lowered.kernel;
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
        let results = freeze::freeze_outputs(infos, &mut out_vals, &shape_of, &out_scalars)?;
        tensors.extend(results);
        Ok(RunReport { kernel_time, stats })
    }

    /// Runs the kernel on its arguments, on the engine compiled for; returns its output
    /// scalars, the interpreter's counts and the time in the kernel.
    fn run_kernel(
        &self,
        args: &mut [BufArg],
        inputs: &[Value],
    ) -> Result<(Vec<Value>, Option<interp::InterpStats>, Duration)> {
        let infos = &self.lowered.tensors;
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
            Some(ck) => (ck.run(args, inputs).map_err(named)?, None),
            None => {
                // The passes run on the first interpreted call (the C engine runs them
                // while it emits), once.
                let passed = self
                    .passed
                    .get_or_init(|| crate::kernel::passes::run(&self.lowered.kernel));
                let (o, s) =
                    on_a_deep_stack(|| interp::run(passed, args, inputs)).map_err(named)?;
                (o, Some(s))
            }
        };
        let kernel_time = start.elapsed();
        Ok((outs, stats, kernel_time))
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

/// The stack of the threads that lower programs and interpret kernels.
const DEEP_STACK: usize = 64 << 20;

/// Runs `f` on a thread of its own with a [`DEEP_STACK`]: lowering and interpreting
/// recurse over expressions and nested statements (up to the parser's limits), deeper
/// than the 2 MiB stacks of spawned threads, a test harness's or a Python thread's, hold.
/// The stack is reserved, not touched: only the depth used costs memory. A panic in `f`
/// continues in the caller.
fn on_a_deep_stack<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("finch-compile".into())
            .stack_size(DEEP_STACK)
            .spawn_scoped(scope, f)
            .map_err(|cause| Error::Os {
                path: "a thread for the compiler".into(),
                cause,
            })?;
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
