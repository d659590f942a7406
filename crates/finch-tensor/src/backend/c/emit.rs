//! Kernel IR to C99. The generated function has the ABI
//!
//! ```text
//! int NAME(finch_buf *bufs, void **scalars, void *ctx, finch_resize_fn resize);
//! ```
//!
//! `bufs[k]` holds buffer `k`'s data pointer and length; `scalars` points at the kernel's
//! inputs then outputs (8-byte slots); `resize(ctx, k, n)` grows or shrinks buffer `k` and
//! updates `bufs[k]`. The return value is 0 or an error code (`ErrorCode`).
//!
//! Every operator is emitted with the semantics of `Op::eval` for equal argument types:
//! integers wrap (arithmetic is done in `uint64_t`), shifts past the width are defined,
//! integer division by zero and negative integer powers return an error code instead of
//! invoking undefined behaviour, `min`/`max` propagate NaN, float-to-integer casts
//! truncate and wrap like `Value::convert_wrapping`. In `Checked` mode every load, store
//! and search range is bounds-checked against the buffer's current length.

use std::collections::HashMap;
use std::fmt::Write;

use crate::algebra::{Op, ScalarType, Value};
use crate::error::{Error, Result};
use crate::kernel::{op_type, BufId, BufParam, Hint, KExpr, KStmt, Kernel, LocalId};

use super::simd::Isa;

/// Whether generated code checks buffer bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckMode {
    /// Every access is checked; a violation returns `ErrorCode::OutOfBounds`. Makes any
    /// verified kernel safe to run on any buffers.
    Checked,
    /// No checks: only for kernels whose accesses the compiler derived from validated
    /// tensors.
    Trusted,
}

/// Error codes returned by generated kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum ErrorCode {
    /// Integer division (or remainder) by zero.
    DivideByZero = 1,
    /// An integer raised to a negative power.
    NegativePower = 2,
    /// `sqrt` or `log` of a negative number.
    Domain = 3,
    /// A buffer could not be resized.
    Resize = 4,
    /// A load, store or search outside a buffer (checked mode).
    OutOfBounds = 5,
    /// A value stored into a tensor of a narrower type that does not convert exactly.
    Inexact = 6,
}

/// A computed index (indirect, shifted by a run-time value, or read out of loop order)
/// outside its tensor: the kernel fails with this base plus the tensor's number.
pub const INDEX_OUT_OF_RANGE_BASE: i32 = 100;

/// A window computed from loop indices that does not fit its tensor's mode or the other
/// ranges of its index: this base plus the tensor's number.
pub const WINDOW_MISMATCH_BASE: i32 = 1_000_000;

/// An expression indexing a permissive window (`x[~(lo:hi)(i + 1)]`) outside the window's
/// indices `1:hi-lo+1`: this base plus the tensor's number.
pub const OUTSIDE_WINDOW_BASE: i32 = 2_000_000;

impl ErrorCode {
    /// The error a code stands for.
    pub fn to_error(code: i32, kernel: &str) -> Error {
        if code >= OUTSIDE_WINDOW_BASE {
            return Error::OutsideWindow {
                tensor: (code - OUTSIDE_WINDOW_BASE) as usize,
            };
        }
        if code >= WINDOW_MISMATCH_BASE {
            return Error::WindowMismatch {
                tensor: (code - WINDOW_MISMATCH_BASE) as usize,
            };
        }
        if code >= INDEX_OUT_OF_RANGE_BASE {
            return Error::IndexOutOfRange {
                tensor: (code - INDEX_OUT_OF_RANGE_BASE) as usize,
            };
        }
        let what = match code {
            1 => "integer division by zero",
            2 => "integer power with a negative exponent",
            3 => "sqrt or log of a negative number",
            4 => "a buffer could not be resized",
            5 => "a buffer access out of bounds",
            6 => "a value stored into a tensor of a narrower type does not convert exactly",
            _ => "an unknown failure",
        };
        Error::Eval(format!("kernel `{kernel}`: {what} (code {code})"))
    }
}

/// The C type of a scalar type.
pub fn c_type(t: ScalarType) -> &'static str {
    match t {
        ScalarType::F64 => "double",
        ScalarType::F32 => "float",
        ScalarType::I64 => "int64_t",
        ScalarType::I32 => "int32_t",
        ScalarType::I16 => "int16_t",
        ScalarType::I8 => "int8_t",
        ScalarType::U64 => "uint64_t",
        ScalarType::U32 => "uint32_t",
        ScalarType::U16 => "uint16_t",
        ScalarType::U8 => "uint8_t",
        ScalarType::Bool => "bool",
    }
}

/// The helpers every generated C file starts with (before its search helpers and its
/// kernel), the same for every kernel.
pub const PRELUDE: &str = r#"#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <math.h>
static int finch_cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}
typedef struct { void *data; int64_t len; } finch_buf;
typedef int (*finch_resize_fn)(void *ctx, int32_t buf, int64_t len);
static inline uint64_t finch_shl_u(uint64_t x, int64_t s, int bits);
static inline uint64_t finch_shr_u(uint64_t x, int64_t s, int bits) {
  if (s < 0) return finch_shl_u(x, s < -127 ? 128 : -s, bits);
  return s >= bits ? 0 : x >> s;
}
static inline uint64_t finch_shl_u(uint64_t x, int64_t s, int bits) {
  if (s < 0) return finch_shr_u(x, s < -127 ? 128 : -s, bits);
  return s >= bits ? 0 : x << s;
}
static inline int64_t finch_shl_s(int64_t x, int64_t s, int bits);
static inline int64_t finch_shr_s(int64_t x, int64_t s, int bits) {
  if (s < 0) return finch_shl_s(x, s < -127 ? 128 : -s, bits);
  return s >= bits ? (x < 0 ? -1 : 0) : x >> s;
}
static inline int64_t finch_shl_s(int64_t x, int64_t s, int bits) {
  if (s < 0) return finch_shr_s(x, s < -127 ? 128 : -s, bits);
  return s >= bits ? 0 : (int64_t)((uint64_t)x << s);
}
static inline int64_t finch_sdiv(int64_t a, int64_t b, int kind, int *err) {
  /* kind: 0 div (trunc), 1 rem, 2 fld (floor), 3 mod (floored remainder) */
  if (b == 0) { *err = 1; return 0; }
  int64_t q, r;
  if (b == -1) { q = (int64_t)(0 - (uint64_t)a); r = 0; } else { q = a / b; r = a % b; }
  switch (kind) {
    case 0: return q;
    case 1: return r;
    case 2: return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
    default: return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
}
static inline uint64_t finch_udiv(uint64_t a, uint64_t b, int kind, int *err) {
  if (b == 0) { *err = 1; return 0; }
  return (kind == 0 || kind == 2) ? a / b : a % b;
}
static inline uint64_t finch_pow(uint64_t base, uint64_t e, int e_negative, int is_signed, int *err) {
  /* e is the exponent's magnitude when e_negative is set (only its parity matters then). */
  if (e_negative) {
    if (base == 1) return 1;
    if (is_signed && base == (uint64_t)-1) return (e % 2 == 0) ? 1 : (uint64_t)-1;
    *err = 2; return 0;
  }
  uint64_t r = 1;
  while (e > 0) { if (e & 1) r *= base; base *= base; e >>= 1; }
  return r;
}
static inline double finch_check_domain(double x, int *err) {
  if (x < 0) *err = 3;
  return x;
}
static inline double finch_fmod_floor(double x, double y) {
  double r = fmod(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
static inline bool finch_f2b(double x) { return x == x && trunc(x) != 0; }
static inline double finch_min_f(double a, double b) { return a != a ? a : (b != b ? b : (a <= b ? a : b)); }
static inline double finch_max_f(double a, double b) { return a != a ? a : (b != b ? b : (a >= b ? a : b)); }
static inline int64_t finch_min_s(int64_t a, int64_t b) { return a <= b ? a : b; }
static inline int64_t finch_max_s(int64_t a, int64_t b) { return a >= b ? a : b; }
static inline uint64_t finch_min_u(uint64_t a, uint64_t b) { return a <= b ? a : b; }
static inline uint64_t finch_max_u(uint64_t a, uint64_t b) { return a >= b ? a : b; }
static inline uint64_t finch_f2u(double x) {
  /* Value::convert_wrapping: truncate toward zero, saturate at the i128 range, wrap to 64 bits. */
  if (x != x) return 0;
  double t = trunc(x);
  if (t >= 1.7014118346046923e38) return UINT64_MAX;
  if (t <= -1.7014118346046923e38) return 0;
  /* fmod is exact; reduce the magnitude, then negate in unsigned (mod 2^64) arithmetic. */
  double m = fmod(fabs(t), 18446744073709551616.0);
  uint64_t u = (uint64_t)m;
  return t < 0 ? 0 - u : u;
}
"#;

/// The first statement of the loop that runs a `for` loop's last iterations after its
/// strips (fewer than a strip), when that loop is a row's, directly in another `for`
/// loop's body ([`crate::kernel::Hint::ScalarRest`]). An empty `asm` keeps the C compiler
/// from vectorizing it: GCC otherwise multiplies pairs of a sum's terms in vectors (the
/// additions stay in order) behind a dozen instructions of set-up and tail, which spill
/// the row loop's registers. Measured on strict SpMV (`finch-bench structure`, the kernels
/// built with and without it): a band of 11 per row 0.040 -> 0.036 ms (with `cc -O3
/// -fno-tree-vectorize` on the whole kernel, 0.037 ms). A loop over a block in a walk over
/// blocks keeps GCC's pairs, which take fewer exits over blocks of varying length
/// (generated strict kernel, standalone: bcsstk16's blocks of 7.8 entries 0.154 ms with
/// the `asm`, 0.145 without; mbeacxc's of 3.5, 0.107 and 0.082 ms). The scalar loop an
/// AVX2 copy runs instead of vectors over fewer than four positions (`simd.rs`) starts
/// with it too.
pub(super) const SCALAR_REST: &str = "__asm__(\"\"); /* the rest: scalar */";

pub(super) struct Emitter<'k> {
    pub(super) k: &'k Kernel,
    pub(super) mode: CheckMode,
    pub(super) out: String,
    /// The vectorized copy being emitted (its instruction set), or `None`: the scalar code.
    /// A vectorized copy emits vector code for the loops `simd::vectorize` takes.
    isa: Option<Isa>,
    /// Reads of each local in the whole kernel (for `simd::vectorize` and `jam`; empty
    /// otherwise).
    pub(super) reads: HashMap<LocalId, usize>,
    /// Loops emitted as vector code.
    vectorized: usize,
    /// Accumulators an enclosing loop holds as a vector of partial sums (the C name of the
    /// vector), for the vectorized loops inside it.
    deferred: HashMap<LocalId, String>,
    /// The loops around the statement being emitted, outermost first (`true`: a `for`
    /// loop, `false`: a `while` loop): whether a loop has none around it (see `prefetch`),
    /// and whether it sits directly in a `for` loop (see [`SCALAR_REST`]).
    pub(super) loops: Vec<bool>,
    /// A [`Hint::NoUnroll`] came: the next `for` loop gets the pragma.
    no_unroll: bool,
    /// The C pointers kept beside offset locals ([`Hint::RowPointer`]): by offset, each
    /// buffer and the pointer's name.
    row_pointers: HashMap<LocalId, Vec<(BufId, String)>>,
}

/// Emits the C source of a kernel (`name` is the exported symbol).
pub fn emit(k: &Kernel, name: &str, mode: CheckMode) -> Result<String> {
    crate::kernel::verify(k)?;
    // Trusted scalar code runs the kernel passes' loops (as the interpreter does); a
    // vectorized copy starts from the lowered loops, which its vectorizer recognises.
    let passed = match mode {
        CheckMode::Trusted => crate::kernel::passes::run(k),
        CheckMode::Checked => k.clone(),
    };
    let mut e = Emitter::new(&passed, mode, None);
    e.out.push_str(PRELUDE);
    e.searches()?;
    // A reassociating kernel with loops that run several positions at a time gets a
    // vectorized copy per instruction set that takes one of its loops (AVX-512, then AVX2
    // with FMA), chosen at run time by what the CPU has. Each is left out when its macro is
    // defined (`FINCH_NO_AVX512`, `FINCH_NO_AVX2`, as by
    // `FINCH_CFLAGS="-O3 -DFINCH_NO_AVX512"`). Those loops are the only reassociation:
    // the C compiler's own (`associative-math` for the whole function) also rewrote
    // expressions such as `(y - w) + w` into `y`, which is not `y` where `w` is infinite
    // or NaN, and gained nothing measurable beside them (reassociated SpMV and structured
    // SpMV on AVX-512, before and after); the rest of the kernel keeps its order.
    if k.reassociate && mode == CheckMode::Trusted {
        let mut copies = Vec::new();
        for isa in [Isa::Avx512, Isa::Avx2] {
            let (suffix, prefix) = isa.copy();
            let mut v = Emitter::new(k, mode, Some(isa));
            v.function(&format!("{name}_{suffix}"), prefix)?;
            if v.vectorized > 0 {
                copies.push((isa, v.out));
            }
        }
        if !copies.is_empty() {
            e.function(&format!("{name}_scalar"), "static ")?;
            const X86: &str = "defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))";
            let _ = writeln!(e.out, "#if {X86}\n#include <immintrin.h>\n#endif");
            let mut dispatch = String::new();
            for (isa, code) in &copies {
                let (suffix, _) = isa.copy();
                let guard = format!("#if {X86} && !defined({})", isa.opt_out());
                let _ = writeln!(e.out, "{guard}\n{}{code}#endif", isa.helpers());
                let _ = writeln!(
                    dispatch,
                    "{guard}\n  if ({}) return {name}_{suffix}(bufs, scalars, ctx, resize);\n#endif",
                    isa.cpu_check()
                );
            }
            let _ = writeln!(
                e.out,
                "int {name}(finch_buf *bufs, void **scalars, void *ctx, finch_resize_fn resize) {{\n{dispatch}  return {name}_scalar(bufs, scalars, ctx, resize);\n}}"
            );
            return Ok(e.out);
        }
    }
    e.function(name, "")?;
    Ok(e.out)
}

/// The pointers the [`Hint::RowPointer`]s of `k` ask for, by offset local: buffers that
/// never move only (a growable one may move at a resize), each named `r{local}_{buf}`. A
/// `for` loop's variable has none: the pointer follows assignments only.
fn row_pointers(k: &Kernel) -> HashMap<LocalId, Vec<(BufId, String)>> {
    type Pointers = HashMap<LocalId, Vec<(BufId, String)>>;
    fn collect(stmts: &[KStmt], k: &Kernel, out: &mut Pointers, vars: &mut Vec<LocalId>) {
        for s in stmts {
            if let KStmt::For { var, .. } = s {
                vars.push(*var);
            }
            match s {
                KStmt::Hint(Hint::RowPointer { local, buf }) => {
                    let growable = k.bufs.get(buf.0 as usize).is_none_or(|b| b.growable);
                    let bufs = out.entry(*local).or_default();
                    if !growable && !bufs.iter().any(|(b, _)| b == buf) {
                        bufs.push((*buf, format!("r{}_{}", local.0, buf.0)));
                    }
                }
                KStmt::For { body, .. } | KStmt::While { body, .. } => collect(body, k, out, vars),
                KStmt::If {
                    then, otherwise, ..
                } => {
                    collect(then, k, out, vars);
                    collect(otherwise, k, out, vars);
                }
                _ => {}
            }
        }
    }
    let (mut out, mut vars) = (HashMap::new(), Vec::new());
    collect(&k.body, k, &mut out, &mut vars);
    out.retain(|l, bufs| !bufs.is_empty() && !vars.contains(l));
    out
}

/// A prefetch of the cache line `ahead` elements past `p + i` (C pointer and position).
pub(super) fn prefetch(p: &str, i: &str, ahead: usize) -> String {
    format!(
        "__builtin_prefetch((const void *)((uintptr_t)({p} + ({i})) + {ahead}u * sizeof(*{p})));"
    )
}

/// The C element type a buffer is stored as (`uint32_t` for a narrow index buffer).
pub(super) fn storage_type(b: &BufParam) -> &'static str {
    if b.narrow {
        "uint32_t"
    } else {
        c_type(b.elem)
    }
}

fn lit(v: &Value) -> String {
    match *v {
        Value::F64(x) if x.is_nan() => "((double)NAN)".into(),
        Value::F64(x) if x.is_infinite() => {
            if x > 0.0 {
                "((double)INFINITY)".into()
            } else {
                "(-(double)INFINITY)".into()
            }
        }
        Value::F64(x) => format!("{x:?}"),
        Value::F32(x) if x.is_nan() => "((float)NAN)".into(),
        Value::F32(x) if x.is_infinite() => {
            if x > 0.0 {
                "((float)INFINITY)".into()
            } else {
                "(-(float)INFINITY)".into()
            }
        }
        Value::F32(x) => format!("{x:?}f"),
        Value::Bool(b) => b.to_string(),
        Value::I64(i64::MIN) => "INT64_MIN".into(),
        Value::I64(n) => format!("INT64_C({n})"),
        Value::U64(n) => format!("UINT64_C({n})"),
        v => {
            let t = v.scalar_type().map_or("int64_t", c_type);
            format!("(({t}){})", v.as_i128().unwrap_or(0))
        }
    }
}

impl<'k> Emitter<'k> {
    /// An emitter of kernel `k` (`isa`: of its vectorized copy in that instruction set).
    fn new(k: &'k Kernel, mode: CheckMode, isa: Option<Isa>) -> Self {
        let mut e = Emitter {
            k,
            mode,
            out: String::new(),
            isa,
            reads: HashMap::new(),
            vectorized: 0,
            deferred: HashMap::new(),
            loops: Vec::new(),
            no_unroll: false,
            row_pointers: HashMap::new(),
        };
        if mode == CheckMode::Trusted {
            e.row_pointers = row_pointers(k);
        }
        // The vectorizer asks whether a local is read outside a loop.
        if isa.is_some() {
            crate::kernel::count_reads(&k.body, &mut e.reads);
            // The caller reads every output after the body: a vector loop must not take an
            // output it assigns for a temporary that dies with the loop (`y2[] = x[i]`
            // beside a reduction kept only the reduction, and `y2` its old value).
            for o in &k.outputs {
                *e.reads.entry(*o).or_default() += 1;
            }
        }
        e
    }

    /// The kernel as the C function `name` (declared with `prefix`).
    fn function(&mut self, name: &str, prefix: &str) -> Result<()> {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "{prefix}int {name}(finch_buf *bufs, void **scalars, void *ctx, finch_resize_fn resize) {{\n  int err = 0;\n  (void)ctx; (void)resize; (void)scalars;"
        );
        for (n, b) in k.bufs.iter().enumerate() {
            if !b.growable {
                let t = storage_type(b);
                let c = if b.writable { "" } else { "const " };
                let _ = writeln!(
                    self.out,
                    "  {c}{t} *restrict p{n} = ({c}{t} *)bufs[{n}].data; const int64_t n{n} = bufs[{n}].len; (void)p{n}; (void)n{n}; /* {} */",
                    b.name
                );
            }
        }
        for (n, l) in k.locals.iter().enumerate() {
            let _ = writeln!(self.out, "  {} v{n} = 0; /* {} */", c_type(l.ty), l.name);
        }
        for (slot, l) in k.inputs.iter().enumerate() {
            let t = c_type(k.locals[l.0 as usize].ty);
            let _ = writeln!(self.out, "  v{} = *({t} *)scalars[{slot}];", l.0);
        }
        let mut pointers: Vec<_> = self.row_pointers.iter().collect();
        pointers.sort_by_key(|(l, _)| l.0);
        for (l, bufs) in pointers {
            for (b, name) in bufs {
                let t = storage_type(&k.bufs[b.0 as usize]);
                let _ = writeln!(
                    self.out,
                    "  const {t} *{name} = p{} + v{}; (void){name};",
                    b.0, l.0
                );
            }
        }
        self.block(&k.body, 1)?;
        let _ = writeln!(self.out, "finish:");
        for (slot, l) in k.outputs.iter().enumerate() {
            let t = c_type(k.locals[l.0 as usize].ty);
            let _ = writeln!(
                self.out,
                "  *({t} *)scalars[{}] = v{};",
                k.inputs.len() + slot,
                l.0
            );
        }
        self.out.push_str("  return err;\n}\n");
        Ok(())
    }

    fn elem(&self, b: BufId) -> ScalarType {
        self.k.bufs[b.0 as usize].elem
    }

    /// The C pointer expression for a buffer: a `restrict` local for buffers that never
    /// move (distinct Rust vectors never alias), the descriptor for growable ones (a resize
    /// may move them).
    pub(super) fn ptr(&self, b: BufId) -> String {
        if self.k.bufs[b.0 as usize].growable {
            format!("(({} *)bufs[{}].data)", c_type(self.elem(b)), b.0)
        } else {
            format!("p{}", b.0)
        }
    }

    /// The C expression for a buffer's length.
    fn len(&self, b: BufId) -> String {
        if self.k.bufs[b.0 as usize].growable {
            format!("bufs[{}].len", b.0)
        } else {
            format!("n{}", b.0)
        }
    }

    fn searches(&mut self) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        fn collect(e: &KExpr, out: &mut std::collections::BTreeSet<BufId>) {
            match e {
                KExpr::Search { buf, value, lo, hi } => {
                    out.insert(*buf);
                    collect(value, out);
                    collect(lo, out);
                    collect(hi, out);
                }
                KExpr::Load(_, i) => collect(i, out),
                KExpr::Op(_, args) => args.iter().for_each(|a| collect(a, out)),
                KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => {}
            }
        }
        crate::kernel::visit_exprs(&self.k.body, &mut |e| collect(e, &mut seen));
        for b in seen {
            let t = c_type(self.elem(b));
            let s = storage_type(&self.k.bufs[b.0 as usize]);
            let _ = writeln!(
                self.out,
                "static inline int64_t finch_search_b{}(const {s} *p, {t} v, int64_t lo, int64_t hi) {{\n  while (lo < hi) {{ int64_t mid = lo + (hi - lo) / 2; if (p[mid] < v) lo = mid + 1; else hi = mid; }}\n  return lo;\n}}",
                b.0
            );
        }
        Ok(())
    }

    /// `buf[index]` through a row pointer, where `index` is an offset with one (plus a
    /// term).
    fn row_pointer_load(&self, buf: BufId, index: &KExpr) -> Option<String> {
        let pointer = |l: &LocalId| {
            let bufs = self.row_pointers.get(l)?;
            bufs.iter().find(|(b, _)| *b == buf).map(|(_, name)| name)
        };
        let (name, rest) = match index {
            KExpr::Local(l) => (pointer(l)?, "0".to_string()),
            KExpr::Op(Op::Add, args) if args.len() == 2 => match (&args[0], &args[1]) {
                (KExpr::Local(l), e) | (e, KExpr::Local(l)) if pointer(l).is_some() => {
                    (pointer(l)?, self.expr(e))
                }
                _ => return None,
            },
            _ => return None,
        };
        Some(if self.k.bufs[buf.0 as usize].narrow {
            format!("((int64_t){name}[{rest}])")
        } else {
            format!("{name}[{rest}]")
        })
    }

    pub(super) fn ty(&self, e: &KExpr) -> ScalarType {
        self.k.expr_type(e)
    }

    /// Does evaluating `e` possibly set `err`?
    pub(super) fn fallible(&self, e: &KExpr) -> bool {
        self.k.may_fail(e, self.mode == CheckMode::Checked)
    }

    pub(super) fn expr(&self, e: &KExpr) -> String {
        match e {
            KExpr::Lit(v) => lit(v),
            KExpr::Local(l) => self.local(*l),
            KExpr::Len(b) => self.len(*b),
            KExpr::Load(b, i) => {
                if let Some(load) = self.row_pointer_load(*b, i) {
                    return load;
                }
                let i = self.expr(i);
                if self.k.bufs[b.0 as usize].narrow {
                    // Widen at the load, so no `uint32_t` arithmetic follows.
                    return match self.mode {
                        CheckMode::Trusted => format!("((int64_t){}[{i}])", self.ptr(*b)),
                        CheckMode::Checked => format!(
                            "(((uint64_t)({i}) < (uint64_t){n}) ? (int64_t){p}[{i}] : (err = 5, (int64_t)0))",
                            n = self.len(*b),
                            p = self.ptr(*b),
                        ),
                    };
                }
                match self.mode {
                    CheckMode::Trusted => format!("{}[{i}]", self.ptr(*b)),
                    CheckMode::Checked => {
                        // Out of bounds: no access, `err` is set and the statement's
                        // `if (err) goto finish` leaves before the dummy value is used.
                        format!(
                            "(((uint64_t)({i}) < (uint64_t){n}) ? {p}[{i}] : (err = 5, ({t})0))",
                            n = self.len(*b),
                            p = self.ptr(*b),
                            t = c_type(self.elem(*b))
                        )
                    }
                }
            }
            KExpr::Search { buf, value, lo, hi } => {
                let (lo, hi) = (self.expr(lo), self.expr(hi));
                format!(
                    "((0 <= ({lo}) && ({lo}) <= ({hi}) && ({hi}) <= {n}) ? finch_search_b{b}({p}, {v}, {lo}, {hi}) : (err = 5, (int64_t)0))",
                    n = self.len(*buf),
                    b = buf.0,
                    p = self.ptr(*buf),
                    v = self.expr(value)
                )
            }
            KExpr::Op(op, args) => self.op(*op, args),
        }
    }

    fn op(&self, op: Op, args: &[KExpr]) -> String {
        let tys: Vec<ScalarType> = args.iter().map(|a| self.ty(a)).collect();
        let r = op_type(op, &tys).unwrap_or(ScalarType::I64);
        let rt = c_type(r);
        let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
        let t0 = tys.first().copied().unwrap_or(ScalarType::I64);
        let fold = |f: &dyn Fn(&str, &str) -> String| -> String {
            let mut acc = format!("(({rt})({}))", a[0]);
            for x in &a[1..] {
                acc = f(&acc, &format!("(({rt})({x}))"));
            }
            acc
        };
        match op {
            Op::Add | Op::Mul | Op::Sub => {
                let sym = op.symbol();
                if r.is_float() {
                    fold(&|x, y| format!("({x} {sym} {y})"))
                } else {
                    fold(&|x, y| format!("(({rt})((uint64_t){x} {sym} (uint64_t){y}))"))
                }
            }
            Op::Neg => {
                if r.is_float() {
                    format!("(-({}))", a[0])
                } else {
                    format!("(({rt})(0 - (uint64_t)({rt})({})))", a[0])
                }
            }
            Op::Abs => {
                if r == ScalarType::F64 {
                    format!("fabs({})", a[0])
                } else if r == ScalarType::F32 {
                    format!("fabsf({})", a[0])
                } else {
                    format!(
                        "(({rt})({0}) < 0 ? ({rt})(0 - (uint64_t)({rt})({0})) : ({rt})({0}))",
                        a[0]
                    )
                }
            }
            Op::Div => format!("(({rt})((double)({}) / (double)({})))", a[0], a[1]),
            Op::Min | Op::Max => {
                if r.is_float() {
                    let f = if op == Op::Min {
                        "finch_min_f"
                    } else {
                        "finch_max_f"
                    };
                    fold(&|x, y| format!("(({rt}){f}({x}, {y}))"))
                } else {
                    let cmp = if op == Op::Min { "<=" } else { ">=" };
                    let f = match (op == Op::Min, r == ScalarType::U64) {
                        (true, false) => "finch_min_s",
                        (false, false) => "finch_max_s",
                        (true, true) => "finch_min_u",
                        (false, true) => "finch_max_u",
                    };
                    // A conditional operand is not repeated (a fold of `n` of them would
                    // grow as `2^n`): it goes through a function.
                    fold(&|x, y| {
                        if x.contains('?') || y.contains('?') {
                            format!("(({rt}){f}({x}, {y}))")
                        } else {
                            format!("({x} {cmp} {y} ? {x} : {y})")
                        }
                    })
                }
            }
            Op::BitAnd | Op::BitOr | Op::Xor => {
                let sym = match op {
                    Op::BitAnd => "&",
                    Op::BitOr => "|",
                    _ => "^",
                };
                fold(&|x, y| format!("(({rt})({x} {sym} {y}))"))
            }
            Op::And | Op::Or => {
                // Branch-free `&`/`|`, unless a later argument can fail (a division that
                // an earlier one guards): then C's short-circuit `&&`/`||`.
                let guards = args.iter().skip(1).any(|x| self.fallible(x));
                let sym = match (op == Op::And, guards) {
                    (true, false) => "&",
                    (true, true) => "&&",
                    (false, false) => "|",
                    (false, true) => "||",
                };
                fold(&|x, y| format!("((bool)({x} {sym} {y}))"))
            }
            Op::Not => {
                if r == ScalarType::Bool {
                    format!("(!({}))", a[0])
                } else {
                    format!("(({rt})(~({})))", a[0])
                }
            }
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                format!("(({}) {} ({}))", a[0], op.symbol(), a[1])
            }
            Op::Shl | Op::Shr => {
                let bits = r.bits();
                let dir = if op == Op::Shl { "shl" } else { "shr" };
                let s = if tys[1].is_signed_integer() {
                    format!("(int64_t)({})", a[1])
                } else {
                    format!(
                        "((uint64_t)({0}) > 127 ? (int64_t)128 : (int64_t)({0}))",
                        a[1]
                    )
                };
                if r.is_signed_integer() {
                    format!(
                        "(({rt})finch_{dir}_s((int64_t)({rt})({}), {s}, {bits}))",
                        a[0]
                    )
                } else {
                    format!(
                        "(({rt})finch_{dir}_u((uint64_t)({rt})({}), {s}, {bits}))",
                        a[0]
                    )
                }
            }
            Op::Pow => {
                if r.is_float() {
                    format!("(({rt})pow((double)({}), (double)({})))", a[0], a[1])
                } else {
                    // The exponent as (magnitude, is negative).
                    let e = if tys[1].is_signed_integer() {
                        format!("({0}) < 0 ? 0 - (uint64_t)(int64_t)({0}) : (uint64_t)(int64_t)({0}), ({0}) < 0", a[1])
                    } else {
                        format!("(uint64_t)({}), 0", a[1])
                    };
                    format!(
                        "(({rt})finch_pow((uint64_t)(int64_t)({rt})({}), {e}, {}, &err))",
                        a[0],
                        r.is_signed_integer() as u8
                    )
                }
            }
            Op::IntDiv | Op::RemFn | Op::Rem | Op::Mod | Op::Fld => {
                let kind = match op {
                    Op::IntDiv => 0,
                    Op::RemFn | Op::Rem => 1,
                    Op::Fld => 2,
                    _ => 3,
                };
                if r.is_float() {
                    let (x, y) = (format!("(double)({})", a[0]), format!("(double)({})", a[1]));
                    let v = match kind {
                        0 => format!("trunc({x} / {y})"),
                        1 => format!("fmod({x}, {y})"),
                        2 => format!("floor({x} / {y})"),
                        _ => format!("finch_fmod_floor({x}, {y})"),
                    };
                    format!("(({rt}){v})")
                } else if r.is_signed_integer() {
                    format!(
                        "(({rt})finch_sdiv((int64_t)({}), (int64_t)({}), {kind}, &err))",
                        a[0], a[1]
                    )
                } else {
                    format!(
                        "(({rt})finch_udiv((uint64_t)({}), (uint64_t)({}), {kind}, &err))",
                        a[0], a[1]
                    )
                }
            }
            Op::Sqrt | Op::Log => {
                let f = if op == Op::Sqrt { "sqrt" } else { "log" };
                format!("(({rt}){f}(finch_check_domain((double)({}), &err)))", a[0])
            }
            Op::Exp | Op::Sin | Op::Cos => format!("(({rt}){}((double)({})))", op.symbol(), a[0]),
            Op::IfElse => format!("(({}) ? ({}) : ({}))", a[0], a[1], a[2]),
            Op::Choose(z) => match z.convert_exact(t0) {
                Some(zv) if !(zv.as_f64().is_some_and(f64::is_nan)) => {
                    format!("((({}) == {}) ? ({}) : ({}))", a[0], lit(&zv), a[1], a[0])
                }
                _ => format!("((void)({}), ({}))", a[1], a[0]),
            },
            Op::Overwrite => format!("((void)({}), ({}))", a[0], a[1]),
            Op::Cast(t) => self.cast(&a[0], t0, t),
            Op::Coalesce => a[0].clone(), // rejected by the verifier
        }
    }

    /// `Value::convert_wrapping` from `from` to `to`.
    fn cast(&self, x: &str, from: ScalarType, to: ScalarType) -> String {
        let tt = c_type(to);
        match (from.is_float(), to) {
            (_, t) if t.is_float() => format!("(({tt})({x}))"),
            (true, ScalarType::Bool) => format!("finch_f2b((double)({x}))"),
            (true, _) => format!("(({tt})finch_f2u((double)({x})))"),
            (false, ScalarType::Bool) => format!("((bool)(({x}) != 0))"),
            (false, _) => format!("(({tt})({x}))"),
        }
    }

    fn check(&mut self, level: usize, fallible: bool) {
        if fallible {
            let pad = "  ".repeat(level);
            let _ = writeln!(self.out, "{pad}if (err) goto finish;");
        }
    }

    /// In a vectorized copy: emits the loop as vector code if `vectorize` takes it (then
    /// `true`: the vector code runs the whole loop).
    fn vectorized(
        &mut self,
        pad: &str,
        vectorize: impl FnOnce(&super::simd::Context) -> Option<String>,
    ) -> bool {
        let Some(isa) = self.isa else {
            return false;
        };
        let invariant = |e: &KExpr| self.expr(e);
        let cx = super::simd::Context {
            k: self.k,
            isa,
            reads: &self.reads,
            deferred: &self.deferred,
            lit: &lit,
            invariant: &invariant,
        };
        let Some(code) = vectorize(&cx) else {
            return false;
        };
        for line in code.lines() {
            let _ = writeln!(self.out, "{pad}{line}");
        }
        self.vectorized += 1;
        true
    }

    /// A local's C name.
    pub(super) fn local(&self, l: LocalId) -> String {
        format!("v{}", l.0)
    }

    /// In a vectorized copy: the accumulators a loop (condition or bounds `head`, `body`)
    /// can hold as vectors of partial sums across its iterations get one, declared before
    /// the loop; the vectorized loops inside add into it.
    fn hold_sums(&mut self, head: &[&KExpr], body: &[KStmt], pad: &str) -> Vec<LocalId> {
        let Some(isa) = self.isa else {
            return vec![];
        };
        let held: Vec<LocalId> = super::simd::deferrable(self.k, head, body)
            .into_iter()
            .filter(|a| !self.deferred.contains_key(a))
            .collect();
        for a in &held {
            let name = format!("vsum{}_", a.0);
            let _ = writeln!(self.out, "{pad}{}", isa.declare_sums(&name));
            self.deferred.insert(*a, name);
        }
        held
    }

    /// After the loop: each held vector of partial sums added into its accumulator.
    fn release_sums(&mut self, held: Vec<LocalId>, pad: &str) {
        let Some(isa) = self.isa else {
            return;
        };
        for a in held {
            if let Some(name) = self.deferred.remove(&a) {
                let _ = writeln!(
                    self.out,
                    "{pad}v{n} = v{n} + {};",
                    isa.sum_of(&name),
                    n = a.0
                );
            }
        }
    }

    pub(super) fn block(&mut self, body: &[KStmt], level: usize) -> Result<()> {
        for s in body {
            self.stmt(s, level)?;
        }
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &KStmt, level: usize) -> Result<()> {
        let pad = "  ".repeat(level);
        match s {
            KStmt::Assign(l, e) => {
                let code = self.expr(e);
                let _ = writeln!(self.out, "{pad}{} = {code};", self.local(*l));
                self.check(level, self.fallible(e));
                for (b, name) in self.row_pointers.get(l).into_iter().flatten() {
                    let _ = writeln!(self.out, "{pad}{name} = p{} + v{};", b.0, l.0);
                }
            }
            KStmt::Store { buf, index, value } => {
                let (i, v) = (self.expr(index), self.expr(value));
                let p = self.ptr(*buf);
                match self.mode {
                    CheckMode::Trusted => {
                        let _ = writeln!(self.out, "{pad}{p}[{i}] = {v};");
                        self.check(level, self.fallible(index) || self.fallible(value));
                    }
                    CheckMode::Checked => {
                        let t = c_type(self.elem(*buf));
                        let _ = writeln!(
                            self.out,
                            "{pad}{{ int64_t i_ = {i}; {t} x_ = {v}; if (err) goto finish; if ((uint64_t)i_ >= (uint64_t){n}) {{ err = 5; goto finish; }} {p}[i_] = x_; }}",
                            n = self.len(*buf)
                        );
                    }
                }
            }
            KStmt::Resize { buf, len, fill } => {
                let n = self.expr(len);
                let p = self.ptr(*buf);
                let _ = writeln!(
                    self.out,
                    "{pad}{{ int64_t n_ = {n}; if (err) goto finish; int64_t old_ = bufs[{b}].len; if (n_ < 0 || resize(ctx, {b}, n_) != 0) {{ err = 4; goto finish; }} for (int64_t k_ = old_; k_ < n_; k_++) {p}[k_] = {f}; }}",
                    b = buf.0,
                    f = lit(fill)
                );
            }
            KStmt::Sort { buf, lo, hi } => {
                let (l, h) = (self.expr(lo), self.expr(hi));
                let (p, n) = (self.ptr(*buf), self.len(*buf));
                // Bounds are checked in both modes: a sort is rare and touches many elements.
                let _ = writeln!(
                    self.out,
                    "{pad}{{ int64_t lo_ = {l}; int64_t hi_ = {h}; if (err) goto finish; if (lo_ < 0 || lo_ > hi_ || hi_ > {n}) {{ err = 5; goto finish; }} qsort({p} + lo_, (size_t)(hi_ - lo_), sizeof(int64_t), finch_cmp_i64); }}"
                );
            }
            KStmt::For { var, lo, hi, body } => {
                let no_unroll = std::mem::take(&mut self.no_unroll);
                if self.vectorized(&pad, |cx| {
                    super::simd::vectorize_for(cx, *var, lo, hi, body)
                }) {
                    return Ok(());
                }
                let held = self.hold_sums(&[lo, hi], body, &pad);
                let (l, h) = (self.expr(lo), self.expr(hi));
                let v = var.0;
                let _ = writeln!(
                    self.out,
                    "{pad}{{ int64_t lo_{v} = {l}; int64_t hi_{v} = {h};"
                );
                self.check(level, self.fallible(hi) || self.fallible(lo));
                // Asked before this loop joins `loops`.
                let in_for = self.loops.last() == Some(&true);
                let streams = self
                    .strips_here()
                    .then(|| self.prefetched(*var, None, body))
                    .flatten();
                self.loops.push(true);
                // A row's own copy where rows run together (see `jam`).
                let name = self.local(*var);
                let mut start = format!("{name} = lo_{v}");
                if let Some(streams) = streams {
                    let _ = writeln!(self.out, "{pad}{name} = lo_{v};");
                    self.strips(&format!("hi_{v}"), *var, &streams, body, level)?;
                    start.clear();
                }
                if no_unroll {
                    let _ = writeln!(self.out, "{pad}_Pragma(\"GCC unroll 1\")");
                }
                let _ = writeln!(self.out, "{pad}for ({start}; {name} < hi_{v}; {name}++) {{");
                if start.is_empty() && in_for {
                    let _ = writeln!(self.out, "{pad}  {}", super::emit::SCALAR_REST);
                }
                self.block(body, level + 1)?;
                let _ = writeln!(self.out, "{pad}}} }}");
                self.loops.pop();
                self.release_sums(held, &pad);
            }
            KStmt::While { cond, body } => {
                if self.vectorized(&pad, |cx| super::simd::vectorize(cx, cond, body)) {
                    return Ok(());
                }
                let held = self.hold_sums(&[cond], body, &pad);
                self.loops.push(false);
                if let (true, KExpr::Op(Op::Lt, a)) = (self.strips_here(), cond) {
                    if let [KExpr::Local(q), bound] = a.as_slice() {
                        if let Some(streams) = self.prefetched(*q, Some(bound), body) {
                            let b = self.expr(bound);
                            self.strips(&b, *q, &streams, body, level)?;
                        }
                    }
                }
                let c = self.expr(cond);
                let fallible = self.fallible(cond);
                let _ = writeln!(self.out, "{pad}while (1) {{");
                let _ = writeln!(self.out, "{pad}  bool c_ = {c};");
                self.check(level + 1, fallible);
                let _ = writeln!(self.out, "{pad}  if (!c_) break;");
                self.block(body, level + 1)?;
                let _ = writeln!(self.out, "{pad}}}");
                self.loops.pop();
                self.release_sums(held, &pad);
            }
            KStmt::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(cond);
                let fallible = self.fallible(cond);
                let _ = writeln!(self.out, "{pad}{{ bool c_ = {c};");
                self.check(level, fallible);
                let _ = writeln!(self.out, "{pad}if (c_) {{");
                self.block(then, level + 1)?;
                if otherwise.is_empty() {
                    let _ = writeln!(self.out, "{pad}}} }}");
                } else {
                    let _ = writeln!(self.out, "{pad}}} else {{");
                    self.block(otherwise, level + 1)?;
                    let _ = writeln!(self.out, "{pad}}} }}");
                }
            }
            KStmt::Fail(code) => {
                let _ = writeln!(self.out, "{pad}err = {code}; goto finish;");
            }
            KStmt::Break => {
                let _ = writeln!(self.out, "{pad}break;");
            }
            KStmt::Hint(Hint::Prefetch { buf, index, ahead }) => {
                let (p, i) = (self.ptr(*buf), self.expr(index));
                let _ = writeln!(self.out, "{pad}{}", prefetch(&p, &i, *ahead));
            }
            KStmt::Hint(Hint::ScalarRest) => {
                let _ = writeln!(self.out, "{pad}{SCALAR_REST}");
            }
            KStmt::Hint(Hint::NoUnroll) => self.no_unroll = true,
            // Declared with the locals and kept at every assignment of the offset.
            KStmt::Hint(Hint::RowPointer { .. }) => {}
        }
        Ok(())
    }

    /// Whether this emitter runs loops in prefetching strips itself: in a vectorized copy,
    /// which starts from the lowered loops (elsewhere the strips pass has).
    fn strips_here(&self) -> bool {
        self.isa.is_some()
    }
}
