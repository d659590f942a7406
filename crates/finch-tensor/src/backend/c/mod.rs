//! The C backend: kernel IR to C99 (`emit`, after the kernel passes for trusted code;
//! vector copies in `simd`, their scalar loops' strips in `emit_strips`), compiled by the
//! system C compiler with a
//! disk cache (`compile`, `cache`), loaded with `libloading` from a private copy (`load`)
//! and kept loaded for the life of the process (an in-memory cache by key; libraries are never unloaded, so function pointers
//! stay valid).
//!
//! Safety: this module holds the crate's only `unsafe` code, the call into a compiled
//! kernel. Kernels compiled through the public [`compile`] are emitted in
//! [`CheckMode::Checked`], so every buffer access is bounds-checked in C against the
//! lengths passed alongside the pointers, and the signature (buffer element types,
//! writability, scalar types) is checked before the call.

mod cache;
mod compile;
mod emit;
mod emit_strips;
mod load;
mod simd;

pub use compile::{cache_dir, cache_key, compiler, Compiler};
pub use emit::{
    c_type, emit, CheckMode, ErrorCode, INDEX_OUT_OF_RANGE_BASE, OUTSIDE_WINDOW_BASE,
    WINDOW_MISMATCH_BASE,
};
// For the golden tests of the emitted C, which leave out what every kernel shares.
#[doc(hidden)]
pub use emit::PRELUDE;

use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::BufArg;
use crate::algebra::{ScalarType, Value};
use crate::error::{Error, Result};
use crate::kernel::Kernel;

// Index buffers (`Vec<usize>`) are passed to C as `int64_t *`.
const _: () = assert!(
    std::mem::size_of::<usize>() == 8,
    "the C backend needs a 64-bit target"
);

/// The exported symbol of every generated library.
const SYMBOL: &str = "finch_kernel";

#[repr(C)]
struct FinchBuf {
    data: *mut c_void,
    len: i64,
}

type ResizeFn = unsafe extern "C" fn(*mut c_void, i32, i64) -> i32;
type KernelFn = unsafe extern "C" fn(*mut FinchBuf, *mut *mut c_void, *mut c_void, ResizeFn) -> i32;

/// How a kernel was obtained (for latency measurements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Compiled now.
    Compiled,
    /// Loaded from the disk cache.
    Disk,
    /// Already loaded in this process.
    Memory,
}

/// A compiled, loaded kernel.
#[derive(Clone)]
pub struct CKernel {
    kernel: Kernel,
    func: KernelFn,
    /// The library `func` lives in: held as long as the kernel (and its clones) live, so
    /// the entry point stays valid; unloaded once neither a kernel nor the process's
    /// memory cache holds it.
    _lib: Arc<libloading::Library>,
    /// The cache key (SHA-256 of source, compiler and flags).
    pub key: String,
    /// Where it came from.
    pub outcome: CacheOutcome,
    /// Time spent obtaining it.
    pub latency: Duration,
    /// What went wrong with the disk cache on the way (see `compile::Built`).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for CKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CKernel")
            .field("kernel", &self.kernel.name)
            .field("key", &self.key)
            .field("outcome", &self.outcome)
            .finish()
    }
}

/// How many loaded kernels the process keeps in memory beyond those its compiled
/// programs hold, the most recently used first: a program compiled again soon (the array
/// layer's operations, a test suite) is not loaded again. Each costs about 20 kB
/// resident (the library's mapping); a library neither a kernel nor this cache holds is
/// unloaded, so a process compiling many distinct programs keeps its memory bounded
/// (before, every library stayed loaded: a fuzzing process grew by 21.7 kB a kernel and
/// ran out of its 2 GB after about 80,000 runs).
const MEMORY_KERNELS: usize = 256;

/// The kernels loaded in this process that the memory cache keeps: by cache key, the
/// entry point and its library (`L`).
type Loaded<L = libloading::Library> = crate::recent::Recent<String, (KernelFn, Arc<L>)>;

fn loaded() -> &'static Mutex<Loaded> {
    static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
    LOADED.get_or_init(|| Mutex::new(Loaded::new(MEMORY_KERNELS)))
}

/// True when a C compiler is available.
pub fn available() -> bool {
    compiler().is_some()
}

/// Compiles (or fetches from the caches) a verified kernel, with bounds checks.
pub fn compile(k: &Kernel) -> Result<CKernel> {
    compile_with(k, CheckMode::Checked)
}

/// Expressions a kernel's statements may hold (conditions, bounds, values; about 200
/// bytes of C each) for the C compiler: past it, the kernel is refused, since `cc -O3`
/// takes minutes over one function this large (the interpreter runs it). The lowering's
/// own budget counts its work, not the code it leaves, which per statement lowered varies
/// with the levels (a SparseBlockList searched at a bound index makes more). The largest
/// example program holds 3170 (500 KB of C, 2 s of `cc -O3`); fuzzed kernels of
/// 5200-7300 took 6-20 s, and of 9400-11100, 43-207 s.
const KERNEL_BUDGET: usize = 8000;

/// Why a kernel is too large to hand to the C compiler (past [`KERNEL_BUDGET`]), if it is.
pub(crate) fn too_large(k: &Kernel) -> Option<String> {
    let size = crate::kernel::expr_count(&k.body);
    (size > KERNEL_BUDGET).then(|| {
        format!(
            "a kernel this large in C: {size} expressions (over {KERNEL_BUDGET}; megabytes of C, minutes of `cc`)"
        )
    })
}

/// Compiles with a check mode. `Trusted` is only for kernels whose every access the
/// compiler derived from validated tensors.
pub(crate) fn compile_with(k: &Kernel, mode: CheckMode) -> Result<CKernel> {
    let start = Instant::now();
    if let Some(why) = too_large(k) {
        return Err(Error::Unsupported(format!(
            "{why}; `--engine interp` runs it, or split the statement (coiterating many sparse operands in one loop multiplies the code)"
        )));
    }
    let cc = compiler().ok_or_else(|| {
        Error::Unsupported("no C compiler found (set CC, or use the interpreter backend)".into())
    })?;
    let source = emit(k, SYMBOL, mode)?;
    let key = cache_key(&source, cc);
    let mut map = loaded()
        .lock()
        .map_err(|_| Error::Program("kernel cache lock poisoned".into()))?;
    if let Some((func, lib)) = map.get(&key).map(|(f, l)| (*f, Arc::clone(l))) {
        return Ok(CKernel {
            kernel: k.clone(),
            func,
            _lib: lib,
            key,
            outcome: CacheOutcome::Memory,
            latency: start.elapsed(),
            warnings: Vec::new(),
        });
    }
    let built = compile::compile(&source, cc)?;
    let lib = Arc::new(load::load_private_copy(&built.bytes, &cache_dir())?);
    // SAFETY: `finch_kernel` is emitted by `emit` with exactly the `KernelFn` signature;
    // the pointer is used only through a `CKernel`, which holds `lib` (so the library
    // stays loaded while the pointer can be called).
    let func: KernelFn = unsafe { lib.get::<KernelFn>(SYMBOL.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| Error::Program(format!("compiled kernel lacks `{SYMBOL}`: {e}")))?;
    map.insert(key.clone(), (func, Arc::clone(&lib)));
    Ok(CKernel {
        kernel: k.clone(),
        func,
        _lib: lib,
        key,
        outcome: if built.fresh {
            CacheOutcome::Compiled
        } else {
            CacheOutcome::Disk
        },
        latency: start.elapsed(),
        warnings: built.warnings,
    })
}

/// What the resize callback needs: the Rust buffers and the C views of them.
struct ResizeCtx<'a, 'b> {
    bufs: &'a mut [BufArg<'b>],
    views: *mut FinchBuf,
}

fn view_of(b: &mut BufArg<'_>) -> FinchBuf {
    let (data, len) = match b {
        BufArg::Values(v) => (v.as_mut_c_ptr(), v.len()),
        BufArg::Indices(v) => (v.as_mut_ptr() as *mut c_void, v.len()),
        // Read-only buffers are never stored to: the verifier allows stores only to
        // writable buffers and `check_args` requires those to be passed mutably.
        BufArg::ReadValues(v) => (v.as_c_ptr() as *mut c_void, v.len()),
        BufArg::ReadIndices(v) => (v.as_ptr() as *mut c_void, v.len()),
        // The generated C declares a narrow buffer `const uint32_t *` (`check_args`
        // matched the buffer's `narrow` flag to this variant).
        BufArg::ReadNarrowIndices(v) => (v.as_ptr() as *mut c_void, v.len()),
    };
    FinchBuf {
        data,
        len: len as i64,
    }
}

unsafe extern "C" fn resize_callback(ctx: *mut c_void, buf: i32, len: i64) -> i32 {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `ctx` is the `ResizeCtx` that `CKernel::run` passed to this very call,
        // alive and exclusively ours for its duration.
        let ctx = unsafe { &mut *(ctx as *mut ResizeCtx) };
        let (Ok(k), Ok(n)) = (usize::try_from(buf), usize::try_from(len)) else {
            return 1;
        };
        let Some(b) = ctx.bufs.get_mut(k) else {
            return 1;
        };
        let fill = Value::zero_of(b.elem());
        if b.resize(n, fill).is_err() {
            return 1;
        }
        // SAFETY: `views` points at `bufs.len()` entries and `k` is in range.
        unsafe { *ctx.views.add(k) = view_of(b) };
        0
    }));
    r.unwrap_or(1)
}

/// An 8-byte slot holding a scalar in its native representation at offset 0.
fn slot_of(v: Value) -> u64 {
    let mut bytes = [0u8; 8];
    match v {
        Value::F64(x) => bytes.copy_from_slice(&x.to_ne_bytes()),
        Value::F32(x) => bytes[..4].copy_from_slice(&x.to_ne_bytes()),
        Value::I64(x) => bytes.copy_from_slice(&x.to_ne_bytes()),
        Value::U64(x) => bytes.copy_from_slice(&x.to_ne_bytes()),
        Value::I32(x) => bytes[..4].copy_from_slice(&x.to_ne_bytes()),
        Value::U32(x) => bytes[..4].copy_from_slice(&x.to_ne_bytes()),
        Value::I16(x) => bytes[..2].copy_from_slice(&x.to_ne_bytes()),
        Value::U16(x) => bytes[..2].copy_from_slice(&x.to_ne_bytes()),
        Value::I8(x) => bytes[0] = x as u8,
        Value::U8(x) => bytes[0] = x,
        Value::Bool(b) => bytes[0] = b as u8,
        Value::Missing => {}
    }
    u64::from_ne_bytes(bytes)
}

fn value_of(slot: u64, ty: ScalarType) -> Value {
    let b = slot.to_ne_bytes();
    let b2 = [b[0], b[1]];
    let b4 = [b[0], b[1], b[2], b[3]];
    match ty {
        ScalarType::F64 => Value::F64(f64::from_ne_bytes(b)),
        ScalarType::F32 => Value::F32(f32::from_ne_bytes(b4)),
        ScalarType::I64 => Value::I64(i64::from_ne_bytes(b)),
        ScalarType::U64 => Value::U64(u64::from_ne_bytes(b)),
        ScalarType::I32 => Value::I32(i32::from_ne_bytes(b4)),
        ScalarType::U32 => Value::U32(u32::from_ne_bytes(b4)),
        ScalarType::I16 => Value::I16(i16::from_ne_bytes(b2)),
        ScalarType::U16 => Value::U16(u16::from_ne_bytes(b2)),
        ScalarType::I8 => Value::I8(b[0] as i8),
        ScalarType::U8 => Value::U8(b[0]),
        ScalarType::Bool => Value::Bool(b[0] != 0),
    }
}

impl CKernel {
    /// The kernel this was compiled from.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Runs the kernel on buffers and input scalars; returns the output scalars.
    pub fn run(&self, bufs: &mut [BufArg<'_>], inputs: &[Value]) -> Result<Vec<Value>> {
        super::check_args(&self.kernel, bufs, inputs)?;
        let k = &self.kernel;
        let mut views: Vec<FinchBuf> = bufs.iter_mut().map(view_of).collect();
        let mut slots: Vec<u64> = inputs.iter().map(|&v| slot_of(v)).collect();
        slots.extend(std::iter::repeat_n(0u64, k.outputs.len()));
        let mut slot_ptrs: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s as *mut u64 as *mut c_void)
            .collect();
        let views_ptr = views.as_mut_ptr();
        let mut ctx = ResizeCtx {
            bufs,
            views: views_ptr,
        };
        // SAFETY: the kernel was verified and emitted with bounds checks (or, in trusted
        // mode, from validated tensors); `views` holds a pointer and the length of every
        // buffer, read-only buffers are never written (verifier + `check_args`), growable
        // buffers are only resized through `resize_callback`, which updates `views`;
        // `slot_ptrs` point at 8-byte slots for every input and output; `ctx` outlives
        // the call and is used by no one else meanwhile.
        let code = unsafe {
            (self.func)(
                views_ptr,
                slot_ptrs.as_mut_ptr(),
                &mut ctx as *mut ResizeCtx as *mut c_void,
                resize_callback,
            )
        };
        if code != 0 {
            return Err(ErrorCode::to_error(code, &k.name));
        }
        Ok(k.outputs
            .iter()
            .enumerate()
            .map(|(n, l)| value_of(slots[inputs.len() + n], k.locals[l.0 as usize].ty))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn entry(
        _: *mut FinchBuf,
        _: *mut *mut c_void,
        _: *mut c_void,
        _: ResizeFn,
    ) -> i32 {
        0
    }

    /// The memory cache keeps the most recently used kernels up to its bound and lets the
    /// others' libraries go (here a library is an `Arc<usize>`, its number).
    #[test]
    fn the_memory_cache_keeps_the_recently_used_and_drops_the_rest() {
        let mut cache: Loaded<usize> = Loaded::new(MEMORY_KERNELS);
        let libs: Vec<Arc<usize>> = (0..=MEMORY_KERNELS).map(Arc::new).collect();
        for (n, lib) in libs.iter().take(MEMORY_KERNELS).enumerate() {
            cache.insert(format!("k{n}"), (entry, Arc::clone(lib)));
        }
        // Using the first keeps it: the second is now the least recently used.
        let key = |n: usize| format!("k{n}");
        assert_eq!(cache.get(&key(0)).map(|(_, l)| **l), Some(0));
        cache.insert(
            key(MEMORY_KERNELS),
            (entry, Arc::clone(&libs[MEMORY_KERNELS])),
        );
        assert_eq!(cache.len(), MEMORY_KERNELS);
        assert!(cache.get(&key(1)).is_none());
        assert!(cache.get(&key(0)).is_some());
        // Only the test holds the dropped library; the cache holds each kept one once.
        assert_eq!(Arc::strong_count(&libs[1]), 1);
        assert_eq!(Arc::strong_count(&libs[2]), 2);
    }
}
