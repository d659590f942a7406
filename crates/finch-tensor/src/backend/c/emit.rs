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
use crate::kernel::{op_type, BufId, BufParam, KExpr, KStmt, Kernel, LocalId};

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

const PRELUDE: &str = r#"#include <stdint.h>
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

struct Emitter<'k> {
    k: &'k Kernel,
    mode: CheckMode,
    out: String,
    /// The vectorized copy being emitted (its instruction set), or `None`: the scalar code.
    /// A vectorized copy emits vector code for the loops `simd::vectorize` takes.
    isa: Option<Isa>,
    /// Reads of each local in the whole kernel (for `simd::vectorize` and `jam`; empty
    /// otherwise).
    reads: HashMap<LocalId, usize>,
    /// Loops emitted as vector code.
    vectorized: usize,
    /// Accumulators an enclosing loop holds as a vector of partial sums (the C name of the
    /// vector), for the vectorized loops inside it.
    deferred: HashMap<LocalId, String>,
    /// Which of the rows emitted together (see `jam`) is being emitted (0: the first, or
    /// none).
    row: usize,
    /// While rows are emitted together: the locals each row has its own copy of (named
    /// `w{row}_{n}` past the first row).
    row_own: std::collections::HashSet<LocalId>,
    /// Emitting the plain copy of a loop that runs several rows at a time.
    plain_rows: bool,
    /// In the joint loop of rows emitted together: the inner loop's variable, which reads
    /// as the row's first value plus the iteration's position in C (`k_`, or `k_ + s_` in
    /// a strip, whose loop then counts from 0 and which cc runs with vectors of products).
    counter: Option<(LocalId, &'static str)>,
    /// In the joint loop of rows emitted together, per row: the loads read through a
    /// pointer of the row's own (buffer, index, the pointer's C name), as `name[position]`.
    based: Vec<Vec<(BufId, KExpr, String)>>,
    /// The loops around the statement being emitted, outermost first (`true`: a `for`
    /// loop, `false`: a `while` loop): whether a loop has none around it (see `prefetch`),
    /// and whether it sits directly in a `for` loop (see `prefetch::SCALAR_REST`).
    loops: Vec<bool>,
}

/// Emits the C source of a kernel (`name` is the exported symbol).
pub fn emit(k: &Kernel, name: &str, mode: CheckMode) -> Result<String> {
    crate::kernel::verify(k)?;
    let mut e = Emitter::new(k, mode, None);
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

/// The C element type a buffer is stored as (`uint32_t` for a narrow index buffer).
fn storage_type(b: &BufParam) -> &'static str {
    if b.narrow {
        "uint32_t"
    } else {
        c_type(b.elem)
    }
}

/// The fewest iterations the first, middle or last row's inner loop must have for a row
/// loop to run [`ROWS`] rows at a time (see `jam`): shorter rows overlap with each other
/// anyway. Zen 3, strict, generated, against the plain loop in one process: SpMV over a
/// band of 11 per row 0.052 -> 0.042 ms; a 1-D convolution of 1M outputs, 9 taps 3.8 ->
/// 2.9 ms, 13 taps 5.6 -> 4.0 ms (5 taps stay plain).
const JAM_MIN: usize = 8;

/// The fewest iterations a probed row's inner loop must have for the joint loop to run in
/// strips with prefetch (see [`Emitter::rows`]): shorter rows never fill two strips, and
/// the strip loop in front of the joint loop slows them.
const STRIPS_MIN: usize = 16;

/// The fewest iterations the probed rows' inner loops must have on average for a row loop
/// whose rows walk over steps (a SparseBlockList row's blocks) to run several rows at a
/// time (see `Emitter::walk_rows`): each stretch the rows run together ends in a branch
/// the predictor misses, so short steps lose more than the interleaved chains gain.
/// Zen 3, strict SpMV, generated, four rows against the plain loop in one process: blocks
/// of 32 on average (synthetic) 0.66 -> 0.48 ms, qc324 (33) 0.017 -> 0.009 ms, bcsstk16
/// (7.8) 0.214 -> 0.185 ms, bcsstk38 (6.6) 0.42 -> 0.53 ms (slower), mbeacxc (3.5) 0.080
/// -> 0.083 ms.
const WALK_MIN: usize = 8;

/// The most inner-loop iterations, estimated from the probed rows, over which a row loop
/// runs along its walks [`ROWS`] rows at a time (see [`WALK_MIN`]); over more, it runs
/// [`WALK_FAR_ROWS`] at a time with prefetching strips. With the rows' data in cache four
/// rows gain most (strict SpMV on Zen 3, generated, against the plain loop: qc324, 26730
/// entries, 0.017 -> 0.009 ms, two rows 0.015; bcsstk16, 290378, 0.27 -> 0.19-0.25 ms),
/// but from further away four rows' streams outrun their prefetches (rows of three blocks
/// of 32 entries on average: 10000 rows 0.66 -> 0.45 ms run after run, but slower when the
/// other variants of `finch-bench structure` ran in between; 20000 rows 1.40 -> 1.54 ms,
/// 40000 rows 3.1 -> 4.2-4.5 ms, with prefetching strips too).
const WALK_MAX: usize = 1 << 19;

/// The rows a row loop runs at a time along its walks over more than [`WALK_MAX`]
/// iterations, in strips that prefetch each row's streams once a cache line (hand-written,
/// against the plain loop, Zen 3: 20000 rows of three blocks of 32 entries 1.40 -> 1.19-1.32
/// ms, 40000 rows 3.1 -> 2.9 ms; without the prefetches 2.5 and 5.3 ms).
const WALK_FAR_ROWS: usize = 2;

/// The rows, evenly spaced, whose walks decide whether and how many at a time a row loop
/// runs along its walks (see [`WALK_MIN`] and [`WALK_MAX`]).
const WALK_PROBES: usize = 16;

/// The rows a row loop runs at a time (see `jam`): four chains of additions in order
/// cover the adder's latency where two do not (strict SpMV on Zen 3, hand-written, against
/// two at a time: a band of 61 per row 0.25 -> 0.19 ms, a 1024 x 1024 triangle 0.25 ->
/// 0.15 ms).
const ROWS: usize = 4;

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
            row: 0,
            row_own: Default::default(),
            plain_rows: false,
            counter: None,
            based: Vec::new(),
            loops: Vec::new(),
        };
        // The vectorizer and running rows together (`jam`) ask whether a local is read outside a loop.
        if isa.is_some() || e.in_order_scalar() {
            super::simd::count_reads(&k.body, &mut e.reads);
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
    fn ptr(&self, b: BufId) -> String {
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

    fn ty(&self, e: &KExpr) -> ScalarType {
        match e {
            KExpr::Lit(v) => v.scalar_type().unwrap_or(ScalarType::I64),
            KExpr::Local(l) => self.k.locals[l.0 as usize].ty,
            KExpr::Load(b, _) => self.elem(*b),
            KExpr::Len(_) | KExpr::Search { .. } => ScalarType::I64,
            KExpr::Op(op, args) => {
                let tys: Vec<ScalarType> = args.iter().map(|a| self.ty(a)).collect();
                op_type(*op, &tys).unwrap_or(ScalarType::I64)
            }
        }
    }

    /// Does evaluating `e` possibly set `err`?
    fn fallible(&self, e: &KExpr) -> bool {
        match e {
            KExpr::Lit(_) | KExpr::Local(_) | KExpr::Len(_) => false,
            KExpr::Load(_, i) => self.mode == CheckMode::Checked || self.fallible(i),
            KExpr::Search { .. } => true,
            KExpr::Op(op, args) => {
                let int_args = args.first().is_some_and(|a| !self.ty(a).is_float());
                let risky = match op {
                    Op::IntDiv | Op::RemFn | Op::Rem | Op::Mod | Op::Fld | Op::Pow => int_args,
                    Op::Sqrt | Op::Log => true,
                    _ => false,
                };
                risky || args.iter().any(|a| self.fallible(a))
            }
        }
    }

    fn expr(&self, e: &KExpr) -> String {
        match e {
            KExpr::Lit(v) => lit(v),
            KExpr::Local(l) => match self.counter {
                Some((j, at)) if j == *l => format!(
                    "((int64_t)((uint64_t){} + (uint64_t)({at})))",
                    self.local(*l)
                ),
                _ => self.local(*l),
            },
            KExpr::Len(b) => self.len(*b),
            KExpr::Load(b, i) => {
                if let Some(name) = self.based_pointer(*b, i) {
                    let at = self.counter.map_or("k_", |(_, at)| at);
                    return if self.k.bufs[b.0 as usize].narrow {
                        format!("((int64_t){name}[{at}])")
                    } else {
                        format!("{name}[{at}]")
                    };
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

    /// Emitting trusted scalar code, which keeps its floating-point order (a reassociating
    /// kernel's too): where loops run in prefetching strips and long rows several at a time.
    fn in_order_scalar(&self) -> bool {
        self.isa.is_none() && self.mode == CheckMode::Trusted
    }

    /// In the joint loop of rows emitted together: the C name of the current row's own
    /// pointer for the load `b[index]`, if it has one.
    fn based_pointer(&self, b: BufId, index: &KExpr) -> Option<&str> {
        self.based
            .get(self.row)?
            .iter()
            .find(|(x, at, _)| *x == b && at == index)
            .map(|(_, _, name)| name.as_str())
    }

    /// A local's C name (`w{row}_{n}` past the first of the rows emitted together).
    fn local(&self, l: LocalId) -> String {
        if self.row > 0 && self.row_own.contains(&l) {
            format!("w{}_{}", self.row, l.0)
        } else {
            format!("v{}", l.0)
        }
    }

    /// In a kernel that keeps its floating-point order (trusted, scalar): the parts of a
    /// row loop that can run several rows at a time (see `jam`), when nothing in it can fail.
    fn joint_rows<'b>(
        &self,
        var: LocalId,
        lo: &KExpr,
        hi: &KExpr,
        body: &'b [KStmt],
    ) -> Option<super::jam::Rows<'b>> {
        if !self.in_order_scalar()
            || self.plain_rows
            || !self.row_own.is_empty()
            || self.fallible(lo)
            || self.fallible(hi)
        {
            return None;
        }
        let mut fallible = false;
        crate::kernel::visit_exprs(body, &mut |e| fallible |= self.fallible(e));
        if fallible {
            return None;
        }
        super::jam::rows(self.k, &self.reads, var, body)
    }

    /// The loop `row_loop` (`for var = lo; var < hi; var++ { body }`) [`ROWS`] rows at a
    /// time (see `jam`) where its first, middle or last row's inner loop has at least
    /// [`JAM_MIN`] iterations, else plain (rows of a band or triangle are about as long as
    /// their neighbours; a loop of very short rows gains nothing from the shared setup).
    /// The joint loop sets up [`ROWS`] rows, runs their inner loops together while all have
    /// entries left (where a probed row has [`STRIPS_MIN`] iterations, in strips of eight
    /// with prefetch while all have two strips left), then each row its rest, then the
    /// rows' stores; the last rows (fewer than [`ROWS`] left) run alone after it.
    fn rows(&mut self, row_loop: &KStmt, rows: &super::jam::Rows, level: usize) -> Result<()> {
        let pad = "  ".repeat(level);
        let (v, _) = self.open_rows(row_loop, rows, "", &pad)?;
        // The first, the middle and the last row's setups (assignments only) decide: a
        // band's first and last rows hold half a row (half-bandwidth 30: 31 entries, where
        // the rows between hold 61).
        let _ = writeln!(self.out, "{pad}int64_t most_ = 0;");
        for (row, end) in [
            (format!("lo_{v}"), "ef_"),
            (format!("lo_{v} + (hi_{v} - lo_{v}) / 2"), "em_"),
            (format!("hi_{v} - 1"), "el_"),
        ] {
            let _ = writeln!(
                self.out,
                "{pad}if (most_ < {STRIPS_MIN} && lo_{v} < hi_{v}) {{\n{pad}  v{v} = {row};"
            );
            let jf = self.row_setup(rows, end, rows.inner.2, level + 1)?;
            let _ = writeln!(
                self.out,
                "{pad}  if ({end} - {jf} > most_) most_ = {end} - {jf};\n{pad}}}"
            );
        }
        let _ = writeln!(self.out, "{pad}if (most_ < {JAM_MIN}) {{");
        self.plain_copy(row_loop, level + 1)?;
        // Strips before the joint loop slow rows that never fill them (generated, strict
        // SpMV over a band of 11 per row on Zen 3: 0.042 ms without, 0.052 with).
        let _ = writeln!(self.out, "{pad}}} else if (most_ < {STRIPS_MIN}) {{");
        self.joint_rows_loop(rows, v, false, level + 1)?;
        let _ = writeln!(self.out, "{pad}}} else {{");
        self.joint_rows_loop(rows, v, true, level + 1)?;
        let _ = writeln!(self.out, "{pad}}} }}");
        self.row_own.clear();
        Ok(())
    }

    /// The row loop `row_loop` one row at a time, where the rows' probe decides against
    /// running them together.
    fn plain_copy(&mut self, row_loop: &KStmt, level: usize) -> Result<()> {
        self.plain_rows = true;
        let done = self.stmt(row_loop, level);
        self.plain_rows = false;
        done
    }

    /// A row's setup and its inner loop's bounds in C: the prefix, then the inner
    /// variable at its first value and the C local `end` at `bound` (its end, or its count
    /// of iterations; both 0 where the guard fails); returns the inner variable's C name.
    fn row_setup(
        &mut self,
        rows: &super::jam::Rows,
        end: &str,
        bound: &KExpr,
        level: usize,
    ) -> Result<String> {
        let pad = "  ".repeat(level);
        let (j, jlo, _, _) = rows.inner;
        self.block(rows.prefix, level)?;
        let (jn, a, b) = (self.local(j), self.expr(jlo), self.expr(bound));
        let _ = match rows.guard {
            Some(g) => writeln!(
                self.out,
                "{pad}int64_t {end} = 0; {jn} = 0;\n{pad}if ({}) {{ {jn} = {a}; {end} = {b}; }}",
                self.expr(g)
            ),
            None => writeln!(self.out, "{pad}{jn} = {a}; int64_t {end} = {b};"),
        };
        Ok(jn)
    }

    /// The opening of rows run together (`how`: a note for the comment): the row loop's
    /// bounds as `lo_{v}` and `hi_{v}` in a new C block, and the rows' own locals; returns
    /// `v` and the row loop's body.
    fn open_rows<'b>(
        &mut self,
        row_loop: &'b KStmt,
        rows: &super::jam::Rows,
        how: &str,
        pad: &str,
    ) -> Result<(u32, &'b [KStmt])> {
        let KStmt::For { var, lo, hi, body } = row_loop else {
            return Err(Error::Program(
                "internal: rows of a loop that is not a for".into(),
            ));
        };
        let v = var.0;
        let (l, h) = (self.expr(lo), self.expr(hi));
        let _ = writeln!(
            self.out,
            "{pad}{{ /* {ROWS} rows at a time{how} */ int64_t lo_{v} = {l}; int64_t hi_{v} = {h};"
        );
        self.own_copies(rows, pad);
        Ok((v, body))
    }

    /// The copies of a row's own locals for the rows past the first (see `jam`), from
    /// here on named `w{row}_{n}`.
    fn own_copies(&mut self, rows: &super::jam::Rows, pad: &str) {
        self.row_own = rows.own.iter().copied().collect();
        for r in 1..ROWS {
            self.row = r;
            for x in &rows.own {
                let (t, name) = (c_type(self.k.locals[x.0 as usize].ty), self.local(*x));
                let _ = writeln!(self.out, "{pad}{t} {name} = 0; (void){name};");
            }
        }
        self.row = 0;
    }

    /// A row's count of inner iterations and the offsets of its loads at consecutive
    /// positions (`based`) at its inner loop's first iteration, simplified through the
    /// definitions of `setup` (what runs right before the inner loop), so that the C
    /// compiler sees each row's base as the few loads it is (a band row's values start at
    /// its `ofs`, not at `last - 1 - ofs_end + (last - len + 1)`).
    fn count_and_offsets(
        &self,
        rows: &super::jam::Rows,
        based: &[(BufId, KExpr)],
        setup: &[KStmt],
    ) -> (KExpr, Vec<KExpr>) {
        let (j, jlo, jhi, _) = rows.inner;
        let defs = super::jam::setup_definitions(self.k, setup);
        let is_i64 = |e: &KExpr| self.ty(e) == ScalarType::I64;
        let simplified = |e: &KExpr| {
            super::jam::affine(e, &defs, &is_i64).map_or_else(|| e.clone(), |f| f.to_expr())
        };
        let count = simplified(&KExpr::Op(Op::Sub, vec![jhi.clone(), jlo.clone()]));
        let offsets = based
            .iter()
            .map(|(_, i)| simplified(&super::jam::substitute(i, j, jlo)))
            .collect();
        (count, offsets)
    }

    /// The loop `row_loop` several rows at a time along their walks (see `jam::Walk`)
    /// where the inner loops of [`WALK_PROBES`] rows evenly spaced have [`WALK_MIN`]
    /// iterations or more on average, else plain: [`ROWS`] at a time where all rows, so
    /// estimated, have at most [`WALK_MAX`], else [`WALK_FAR_ROWS`] in prefetching strips.
    fn walk_rows(
        &mut self,
        row_loop: &KStmt,
        rows: &super::jam::Rows,
        walk: &super::jam::Walk,
        level: usize,
    ) -> Result<()> {
        let pad = "  ".repeat(level);
        let how = format!(", along their walks ({WALK_FAR_ROWS} over {WALK_MAX} iterations)");
        let (v, body) = self.open_rows(row_loop, rows, &how, &pad)?;
        let (count, _) = self.count_and_offsets(rows, &[], walk.head);
        let count = self.expr(&count);
        // Up to [`WALK_PROBES`] rows, evenly spaced, walked once more (assignments only,
        // so running them again changes nothing), count their steps and iterations.
        let _ = writeln!(
            self.out,
            "{pad}int64_t ent_ = 0, runs_ = 0, probed_ = 0;\n{pad}if (lo_{v} < hi_{v}) {{\n{pad}  int64_t step_ = (int64_t)(((uint64_t)hi_{v} - (uint64_t)lo_{v}) / {WALK_PROBES}u) + 1;\n{pad}  for (v{v} = lo_{v}; v{v} < hi_{v}; v{v} = (uint64_t)hi_{v} - (uint64_t)v{v} > (uint64_t)step_ ? v{v} + step_ : hi_{v}) {{\n{pad}    probed_++;"
        );
        self.block(rows.prefix, level + 2)?;
        if let Some(g) = rows.guard {
            let _ = writeln!(self.out, "{pad}    if ({}) {{", self.expr(g));
        }
        self.block(walk.preloop, level + 3)?;
        let _ = writeln!(self.out, "{pad}      while ({}) {{", self.expr(walk.cond));
        self.block(walk.head, level + 4)?;
        let _ = writeln!(
            self.out,
            "{pad}        int64_t c_ = {count}; if (c_ > 0) ent_ += c_; runs_++;"
        );
        self.block(walk.tail, level + 4)?;
        let _ = writeln!(self.out, "{pad}      }}");
        if rows.guard.is_some() {
            let _ = writeln!(self.out, "{pad}    }}");
        }
        let _ = writeln!(self.out, "{pad}  }}\n{pad}}}");
        let _ = writeln!(
            self.out,
            "{pad}if (runs_ == 0 || ent_ < {WALK_MIN} * runs_) {{"
        );
        self.plain_copy(row_loop, level + 1)?;
        let _ = writeln!(
            self.out,
            "{pad}}} else if ((double)ent_ / (double)probed_ * ((double)hi_{v} - (double)lo_{v}) <= {WALK_MAX}.0) {{"
        );
        self.joint_walks_loop(rows, walk, (v, ROWS), false, level + 1)?;
        self.last_rows(v, body, level + 1)?;
        let _ = writeln!(self.out, "{pad}}} else {{");
        self.joint_walks_loop(rows, walk, (v, WALK_FAR_ROWS), true, level + 1)?;
        self.last_rows(v, body, level + 1)?;
        let _ = writeln!(self.out, "{pad}}} }}");
        self.row_own.clear();
        Ok(())
    }

    /// The rows a joint loop over `v{v}` left (fewer than it runs at a time), one at a
    /// time.
    fn last_rows(&mut self, v: u32, body: &[KStmt], level: usize) -> Result<()> {
        let pad = "  ".repeat(level);
        let _ = writeln!(self.out, "{pad}for (; v{v} < hi_{v}; v{v}++) {{");
        self.block(body, level + 1)?;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// The rows of the row loop over `v{v}` (from `lo_{v}` to `hi_{v}`) `group` at a time
    /// along their walks (each stretch in prefetching strips where `strips`): each row's
    /// setup and first step; then, while every row is in a
    /// step, the rows' inner loops together up to the nearest end of one (a stretch), after
    /// which each row whose inner loop ended takes its step's tail and its next step's head
    /// (or leaves the walk); then each row alone: the rest of its inner loop, its tail, the
    /// rest of its walk, and its stores. Each row runs its statements in its own order, so
    /// results are those of the plain loop bit for bit.
    fn joint_walks_loop(
        &mut self,
        rows: &super::jam::Rows,
        walk: &super::jam::Walk,
        (v, group): (u32, usize),
        strips: bool,
        level: usize,
    ) -> Result<()> {
        use super::prefetch::STRIP;
        let pad = "  ".repeat(level);
        let (j, _, _, inner) = rows.inner;
        let based = super::jam::based_loads(self.k, j, inner);
        let (count, offsets) = self.count_and_offsets(rows, &based, walk.head);
        let streams = super::prefetch::streams(self.k, j, None, inner, false).unwrap_or_default();
        let _ = writeln!(
            self.out,
            "{pad}for (v{v} = lo_{v}; hi_{v} - v{v} >= {group}; v{v} += {group}) {{"
        );
        let mut names: Vec<Vec<(BufId, KExpr, String)>> = Vec::new();
        for r in 0..group {
            self.row = r;
            if r > 0 {
                let _ = writeln!(self.out, "{pad}  {} = v{v} + {r};", self.local(rows.var));
            }
            self.block(rows.prefix, level + 1)?;
            let _ = writeln!(
                self.out,
                "{pad}  int64_t n{v}_{r} = 0; bool a{v}_{r} = false;"
            );
            let mut row_names = Vec::new();
            for (x, (b, i)) in based.iter().enumerate() {
                let name = format!("b{v}_{r}_{x}");
                let (t, p) = (storage_type(&self.k.bufs[b.0 as usize]), self.ptr(*b));
                let _ = writeln!(self.out, "{pad}  const {t} *{name} = {p};");
                row_names.push((*b, i.clone(), name));
            }
            names.push(row_names);
            if let Some(g) = rows.guard {
                let _ = writeln!(self.out, "{pad}  if ({}) {{", self.expr(g));
            }
            self.block(walk.preloop, level + 2)?;
            let _ = writeln!(
                self.out,
                "{pad}    a{v}_{r} = {};\n{pad}    if (a{v}_{r}) {{",
                self.expr(walk.cond)
            );
            self.step_entry((walk, rows), (&count, &offsets), &names[r], v, level + 3)?;
            let _ = writeln!(self.out, "{pad}    }}");
            if rows.guard.is_some() {
                let _ = writeln!(self.out, "{pad}  }}");
            }
        }
        self.row = 0;
        let all: Vec<String> = (0..group).map(|r| format!("a{v}_{r}")).collect();
        let _ = writeln!(self.out, "{pad}  while ({}) {{", all.join(" && "));
        self.least_count(v, group, &format!("{pad}    "));
        // A stretch: where `strips`, in strips with a prefetch per row and stream that
        // moves on (once a cache line of `f64`), then the rest.
        self.based = names.clone();
        let _ = writeln!(self.out, "{pad}    int64_t k_ = 0;");
        let strip_streams = if strips { streams.as_slice() } else { &[] };
        self.together((j, inner), strip_streams, (group, STRIP), level + 2)?;
        self.based.clear();
        self.counter = None;
        for (r, row_names) in names.iter().enumerate() {
            self.row = r;
            let jn = self.local(j);
            let _ = writeln!(
                self.out,
                "{pad}    {jn} = (int64_t)((uint64_t){jn} + (uint64_t)m_); n{v}_{r} -= m_;"
            );
            for (_, _, name) in row_names {
                let _ = writeln!(self.out, "{pad}    {name} += m_;");
            }
            let _ = writeln!(self.out, "{pad}    if (n{v}_{r} == 0) {{");
            self.block(walk.tail, level + 3)?;
            let _ = writeln!(
                self.out,
                "{pad}      a{v}_{r} = {};\n{pad}      if (a{v}_{r}) {{",
                self.expr(walk.cond)
            );
            self.step_entry((walk, rows), (&count, &offsets), row_names, v, level + 4)?;
            let _ = writeln!(self.out, "{pad}      }}\n{pad}    }}");
        }
        let _ = writeln!(self.out, "{pad}  }}");
        // Each row alone: the rest of its inner loop, its tail and the rest of its walk.
        for (r, row_names) in names.iter().enumerate() {
            self.row = r;
            let _ = writeln!(
                self.out,
                "{pad}  if (a{v}_{r}) {{\n{pad}    for (int64_t k_ = 0; k_ < n{v}_{r}; k_++) {{"
            );
            self.based = vec![Vec::new(); r];
            self.based.push(row_names.clone());
            self.counter = Some((j, "k_"));
            self.block(inner, level + 3)?;
            self.based.clear();
            self.counter = None;
            let _ = writeln!(self.out, "{pad}    }}");
            self.block(walk.tail, level + 2)?;
            self.stmt(walk.looped, level + 2)?;
            let _ = writeln!(self.out, "{pad}  }}");
        }
        for r in 0..group {
            self.row = r;
            self.block(rows.suffix, level + 1)?;
        }
        self.row = 0;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// A row's next step, in its walk's joint loop: the step's head, then its inner
    /// loop's first value, count (`n{v}_{row}`, at least 0) and pointers (`names`, at
    /// their buffers' start where the count is 0: the offsets may lie anywhere then).
    fn step_entry(
        &mut self,
        (walk, rows): (&super::jam::Walk, &super::jam::Rows),
        (count, offsets): (&KExpr, &[KExpr]),
        names: &[(BufId, KExpr, String)],
        v: u32,
        level: usize,
    ) -> Result<()> {
        let pad = "  ".repeat(level);
        let r = self.row;
        let (j, jlo, _, _) = rows.inner;
        self.block(walk.head, level)?;
        let _ = writeln!(
            self.out,
            "{pad}{} = {};\n{pad}n{v}_{r} = {};\n{pad}if (n{v}_{r} < 0) n{v}_{r} = 0;",
            self.local(j),
            self.expr(jlo),
            self.expr(count)
        );
        for ((b, _, name), off) in names.iter().zip(offsets) {
            let _ = writeln!(
                self.out,
                "{pad}{name} = {} + (n{v}_{r} > 0 ? {} : 0);",
                self.ptr(*b),
                self.expr(off)
            );
        }
        Ok(())
    }

    /// The rows of the row loop over `v{v}` (from `lo_{v}` to `hi_{v}`) [`ROWS`] at a time
    /// (see [`Self::rows`]), `strips` with prefetch in the joint loop or not, then the last
    /// rows one at a time.
    fn joint_rows_loop(
        &mut self,
        rows: &super::jam::Rows,
        v: u32,
        strips: bool,
        level: usize,
    ) -> Result<()> {
        use super::prefetch::STRIP;
        let pad = "  ".repeat(level);
        let (j, _, jhi, inner) = rows.inner;
        let streams = if strips {
            super::prefetch::streams(self.k, j, None, inner, false).unwrap_or_default()
        } else {
            Vec::new()
        };
        let _ = writeln!(
            self.out,
            "{pad}for (v{v} = lo_{v}; hi_{v} - v{v} >= {ROWS}; v{v} += {ROWS}) {{"
        );
        // Each row's setup, its count of iterations and a pointer per load it reads at
        // consecutive positions (from the first); the counts and offsets simplified, so
        // that the C compiler sees each row's base as the few loads it is (a band row's
        // values start at its `ofs`, not at `last - 1 - ofs_end + (last - len + 1)`).
        let based = super::jam::based_loads(self.k, j, inner);
        let (count, offsets) = self.count_and_offsets(rows, &based, rows.prefix);
        let mut names: Vec<Vec<(BufId, KExpr, String)>> = Vec::new();
        for r in 0..ROWS {
            self.row = r;
            if r > 0 {
                let _ = writeln!(self.out, "{pad}  {} = v{v} + {r};", self.local(rows.var));
            }
            self.row_setup(rows, &format!("n{v}_{r}"), &count, level + 1)?;
            // A row without iterations points at its buffer's start: its offset may lie
            // anywhere.
            let mut row_names = Vec::new();
            for (x, ((b, i), off)) in based.iter().zip(&offsets).enumerate() {
                let name = format!("b{v}_{r}_{x}");
                let (t, p) = (storage_type(&self.k.bufs[b.0 as usize]), self.ptr(*b));
                let _ = writeln!(
                    self.out,
                    "{pad}  const {t} *{name} = {p} + (n{v}_{r} > 0 ? {} : 0);",
                    self.expr(off)
                );
                row_names.push((*b, i.clone(), name));
            }
            names.push(row_names);
        }
        self.row = 0;
        self.least_count(v, ROWS, &format!("{pad}  "));
        let _ = writeln!(
            self.out,
            "{pad}  if (m_ < 0) m_ = 0;\n{pad}  int64_t k_ = 0;"
        );
        // The inner variable of each row reads as its first value plus `k_`, the loads of
        // `based` as `base[k_]`; strips while all rows have two left.
        self.based = names;
        self.together((j, inner), &streams, (ROWS, 2 * STRIP), level + 1)?;
        // Each row's own rest (a few iterations in a band or triangle), then its stores.
        // The rests sit behind one test that some row has any (rows of equal length have
        // none): four empty loops, each tested, cost the band of 11 per row 8% (strict
        // SpMV on Zen 3: 0.042 -> 0.039 ms with the test).
        let differ: Vec<String> = (0..ROWS).map(|r| format!("(n{v}_{r} - m_)")).collect();
        let _ = writeln!(self.out, "{pad}  if (({}) != 0) {{", differ.join(" | "));
        for r in 0..ROWS {
            self.row = r;
            let _ = writeln!(self.out, "{pad}  for (k_ = m_; k_ < n{v}_{r}; k_++) {{");
            self.block(inner, level + 2)?;
            let _ = writeln!(self.out, "{pad}  }}");
        }
        let _ = writeln!(self.out, "{pad}  }}");
        self.based.clear();
        self.counter = None;
        for r in 0..ROWS {
            self.row = r;
            self.block(rows.suffix, level + 1)?;
        }
        self.row = 0;
        let _ = writeln!(self.out, "{pad}}}");
        // The last rows, one at a time: strips with prefetch, then the rest.
        let _ = writeln!(self.out, "{pad}for (; v{v} < hi_{v}; v{v}++) {{");
        let end = format!("e{v}_");
        let jn = self.row_setup(rows, &end, jhi, level + 1)?;
        if !streams.is_empty() {
            self.strips(&end, j, &streams, inner, level + 1)?;
        }
        let _ = writeln!(self.out, "{pad}  for (; {jn} < {end}; {jn}++) {{");
        if !streams.is_empty() {
            let _ = writeln!(self.out, "{pad}    {}", super::prefetch::SCALAR_REST);
        }
        self.block(inner, level + 2)?;
        let _ = writeln!(self.out, "{pad}  }}");
        self.block(rows.suffix, level + 1)?;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// `m_`, the least of the first `group` rows' counts `n{v}_{row}`, in C.
    fn least_count(&mut self, v: u32, group: usize, pad: &str) {
        let _ = writeln!(self.out, "{pad}int64_t m_ = n{v}_0;");
        for r in 1..group {
            let _ = writeln!(self.out, "{pad}if (n{v}_{r} < m_) m_ = n{v}_{r};");
        }
    }

    /// The first `group` rows' inner loops `(j, inner)` together from `k_` to `m_` (C
    /// locals), each row reading through its pointers in `self.based`: while `strip_min`
    /// iterations are left and there are `streams` to prefetch, in strips, one prefetch
    /// per stream and row, then the strip's iterations, kept a loop (cc's full unrolling
    /// slows it: hand-written, SpMV over a band of 61 per row on Zen 3, 0.19 ms as a loop,
    /// 0.22 unrolled); the rows move through storage together, a band's or a dense
    /// matrix's one after another, so each prefetches `group` times as far ahead as one
    /// row would: past the rows that follow (hand-written, a band of 201 per row on Zen 3,
    /// 1.1 ms -> 0.65 ms). Then the rest, a loop cc may run with vectors of products (each
    /// row's additions stay in order). The inner variable reads as the row's first value
    /// plus `k_` after it.
    fn together(
        &mut self,
        (j, inner): (LocalId, &[KStmt]),
        streams: &[(BufId, KExpr)],
        (group, strip_min): (usize, usize),
        level: usize,
    ) -> Result<()> {
        use super::prefetch::STRIP;
        let pad = "  ".repeat(level);
        if !streams.is_empty() {
            let _ = writeln!(self.out, "{pad}while (m_ - k_ >= {strip_min}) {{");
            for r in 0..group {
                self.row = r;
                self.prefetches(streams, &format!("{pad}  "), group, "k_");
            }
            self.row = 0;
            let _ = writeln!(
                self.out,
                "{pad}  _Pragma(\"GCC unroll 1\")\n{pad}  for (int s_ = 0; s_ < {STRIP}; s_++) {{"
            );
            self.counter = Some((j, "k_ + s_"));
            self.rows_in_turn(inner, group, level + 2)?;
            let _ = writeln!(self.out, "{pad}  }}\n{pad}  k_ += {STRIP};\n{pad}}}");
        }
        let _ = writeln!(self.out, "{pad}for (; k_ < m_; k_++) {{");
        self.counter = Some((j, "k_"));
        self.rows_in_turn(inner, group, level + 1)?;
        let _ = writeln!(self.out, "{pad}}}");
        Ok(())
    }

    /// `body` for each of the first `group` rows in turn.
    fn rows_in_turn(&mut self, body: &[KStmt], group: usize, level: usize) -> Result<()> {
        for r in 0..group {
            self.row = r;
            self.block(body, level)?;
        }
        self.row = 0;
        Ok(())
    }

    /// In a kernel that keeps its floating-point order (trusted, scalar): the loads a loop
    /// over `var` prefetches as it runs in strips (see `prefetch`); `walk` is the bound of
    /// a `while` loop.
    fn prefetched(
        &self,
        var: LocalId,
        walk: Option<&KExpr>,
        body: &[KStmt],
    ) -> Option<Vec<(BufId, KExpr)>> {
        if self.mode != CheckMode::Trusted {
            return None;
        }
        let outermost = walk.is_none() && self.loops.is_empty();
        super::prefetch::streams(self.k, var, walk, body, outermost)
    }

    /// Strips of the loop over `var` while at least a strip of iterations
    /// ([`super::prefetch::strip_len`]) remain before `end` (C): the prefetches, then that
    /// many iterations of `body` (a `for` loop's variable advanced after each, a walk's by
    /// its body). The loop that follows runs the rest.
    fn strips(
        &mut self,
        end: &str,
        var: LocalId,
        streams: &[(BufId, KExpr)],
        body: &[KStmt],
        level: usize,
    ) -> Result<()> {
        let strip = super::prefetch::strip_len(self.k, streams);
        let pad = "  ".repeat(level);
        let v = self.local(var);
        let _ = writeln!(self.out, "{pad}while ({end} - {v} >= {strip}) {{");
        self.prefetches(streams, &format!("{pad}  "), 1, "k_");
        let walk = body
            .iter()
            .any(|s| matches!(s, KStmt::Assign(l, _) if *l == var));
        let step = if walk {
            String::new()
        } else {
            format!(", {v}++")
        };
        let _ = writeln!(
            self.out,
            "{pad}  for (int k_ = 0; k_ < {strip}; k_++{step}) {{"
        );
        self.block(body, level + 2)?;
        let _ = writeln!(self.out, "{pad}  }}\n{pad}}}");
        Ok(())
    }

    /// One prefetch per stream, `rows` times [`super::prefetch::PREFETCH_BYTES`] past its
    /// position now (`rows`: the rows that move through the storage together, see `jam`;
    /// `at`: the position in C of a stream read through a row's own pointer).
    fn prefetches(&mut self, streams: &[(BufId, KExpr)], pad: &str, rows: usize, at: &str) {
        use super::prefetch::{elem_bytes, PREFETCH_AHEAD, PREFETCH_BYTES};
        for (b, index) in streams {
            // In the joint loop of rows, a stream the row reads through its own pointer
            // is prefetched through it (the row's offsets need not stay in registers).
            let (p, i) = match self.based_pointer(*b, index) {
                Some(name) => (name.to_string(), at.to_string()),
                None => (self.ptr(*b), self.expr(index)),
            };
            let ahead = rows
                * self.k.bufs.get(b.0 as usize).map_or(PREFETCH_AHEAD, |buf| {
                    PREFETCH_BYTES / elem_bytes(buf.elem, buf.narrow)
                });
            let _ = writeln!(
                self.out,
                "{pad}__builtin_prefetch((const void *)((uintptr_t)({p} + ({i})) + {ahead}u * sizeof(*{p})));"
            );
        }
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

    fn block(&mut self, body: &[KStmt], level: usize) -> Result<()> {
        for s in body {
            self.stmt(s, level)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &KStmt, level: usize) -> Result<()> {
        let pad = "  ".repeat(level);
        match s {
            KStmt::Assign(l, e) => {
                let code = self.expr(e);
                let _ = writeln!(self.out, "{pad}{} = {code};", self.local(*l));
                self.check(level, self.fallible(e));
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
                if self.vectorized(&pad, |cx| {
                    super::simd::vectorize_for(cx, *var, lo, hi, body)
                }) {
                    return Ok(());
                }
                if let Some(rows) = self.joint_rows(*var, lo, hi, body) {
                    return match &rows.walk {
                        Some(walk) => self.walk_rows(s, &rows, walk, level),
                        None => self.rows(s, &rows, level),
                    };
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
                let streams = self.prefetched(*var, None, body);
                self.loops.push(true);
                // A row's own copy where rows run together (see `jam`).
                let name = self.local(*var);
                let mut start = format!("{name} = lo_{v}");
                if let Some(streams) = streams {
                    let _ = writeln!(self.out, "{pad}{name} = lo_{v};");
                    self.strips(&format!("hi_{v}"), *var, &streams, body, level)?;
                    start.clear();
                }
                let _ = writeln!(self.out, "{pad}for ({start}; {name} < hi_{v}; {name}++) {{");
                if start.is_empty() && in_for {
                    let _ = writeln!(self.out, "{pad}  {}", super::prefetch::SCALAR_REST);
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
                if let KExpr::Op(Op::Lt, a) = cond {
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
        }
        Ok(())
    }
}
