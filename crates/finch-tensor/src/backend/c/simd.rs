//! AVX-512 code for counted reduction loops, in kernels compiled with `reassociate`.
//!
//! The loop Finch makes of a SparseList walk against dense operands,
//!
//! ```text
//! while (q < q_stop) { t = idx[q] + 1; acc = acc + val[q] * x[t - 1]; q = q + 1 }
//! ```
//!
//! runs eight positions at a time: loads at `q` become masked vector loads, loads at
//! computed positions become masked gathers, and `acc` gets eight partial sums added up
//! after the loop (hence `reassociate` only). The mask covers the last, partial group, so
//! no position at or past `q_stop` is read and no scalar remainder loop is needed; short
//! fibers (a graph's rows) gain as much as long ones. Contiguous loads that move on
//! through memory (a level's positions) are prefetched two kilobytes ahead.
//!
//! A loop qualifies when its condition is `q < bound` with `bound` unchanged by the body,
//! its body is assignments only with one `q = q + 1` (nothing after it reads `q`), exactly one `i64`/`f64` local
//! accumulates (`acc = acc + e`, `e` free of `acc`), every other assigned local is set
//! before it is read in an iteration and is not read outside the loop (nor a kernel
//! output, which the caller reads), and the expressions are `+ - *` over `i64`/`f64`
//! values, loop-invariant locals, literals and loads from `f64`, `i64` or 32-bit index
//! buffers the kernel does not resize. Anything else keeps the scalar loop.
//!
//! A second instruction set, AVX2 with FMA, serves CPUs without AVX-512 (AMD before Zen 4,
//! Intel's client cores): four lanes, unmasked loads in groups of eight positions (two
//! vectors of partial sums, so that the fused multiply-adds do not wait on each other),
//! then one of four, then the last one to three positions as one group with masked loads
//! (`vmaskmovpd`, which reads no lane it leaves out) whose other lanes keep their partial
//! sums. A loop of fewer than four positions in all runs as a scalar loop instead. Its
//! loops take contiguous loads only: AVX2 gathers are slower than scalar loads where AVX2
//! is the widest vector a CPU has (`bench/block_list_limit.c` on Zen 3: CSR 0.72 ms
//! with gathers against 0.48 scalar; a block list's contiguous loads 0.24 against 0.47).

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use crate::algebra::{Op, ScalarType, Value};
use crate::kernel::passes::strips::PREFETCH_AHEAD;
use crate::kernel::{count_reads, mentions_any, BufId, KExpr, KStmt, Kernel, LocalId};

/// The vector instruction set a vectorized copy of a kernel is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    /// AVX-512 F, DQ and VL: eight 64-bit lanes, masked loads and gathers.
    Avx512,
    /// AVX2 and FMA: four 64-bit lanes, contiguous loads, the last group masked.
    Avx2,
}

impl Isa {
    /// The suffix of the kernel's copy and the C attribute that declares it.
    pub(super) fn copy(self) -> (&'static str, &'static str) {
        match self {
            Isa::Avx512 => (
                "avx512",
                "__attribute__((target(\"avx512f,avx512dq,avx512vl\"))) static ",
            ),
            Isa::Avx2 => ("avx2", "__attribute__((target(\"avx2,fma\"))) static "),
        }
    }

    /// The C condition that the running CPU has the instruction set.
    pub(super) fn cpu_check(self) -> &'static str {
        match self {
            Isa::Avx512 => {
                "__builtin_cpu_supports(\"avx512f\") && __builtin_cpu_supports(\"avx512dq\") && __builtin_cpu_supports(\"avx512vl\")"
            }
            Isa::Avx2 => "__builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\")",
        }
    }

    /// The macro that leaves the copy out (`FINCH_CFLAGS="-O3 -DFINCH_NO_AVX512"`).
    pub(super) fn opt_out(self) -> &'static str {
        match self {
            Isa::Avx512 => "FINCH_NO_AVX512",
            Isa::Avx2 => "FINCH_NO_AVX2",
        }
    }

    /// C the copy needs before it (helpers for the sums across lanes, declared with the
    /// copy's own target attribute).
    pub(super) fn helpers(self) -> String {
        let (_, target) = self.copy();
        match self {
            Isa::Avx512 => String::new(),
            Isa::Avx2 => format!(
                "{target}inline double finch_hsum4_pd(__m256d v) {{\n\
                 \x20 __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));\n\
                 \x20 return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));\n}}\n\
                 {target}inline int64_t finch_hsum4_epi64(__m256i v) {{\n\
                 \x20 __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));\n\
                 \x20 return (int64_t)((uint64_t)_mm_cvtsi128_si64(s) + (uint64_t)_mm_extract_epi64(s, 1));\n}}\n"
            ),
        }
    }

    /// The C vector type of `f64` (`true`) or `i64` lanes.
    fn vector(self, float: bool) -> &'static str {
        match (self, float) {
            (Isa::Avx512, true) => "__m512d",
            (Isa::Avx512, false) => "__m512i",
            (Isa::Avx2, true) => "__m256d",
            (Isa::Avx2, false) => "__m256i",
        }
    }

    /// A vector of `f64` (`true`) or `i64` zeros.
    fn zero(self, float: bool) -> &'static str {
        match (self, float) {
            (Isa::Avx512, true) => "_mm512_setzero_pd()",
            (Isa::Avx512, false) => "_mm512_setzero_si512()",
            (Isa::Avx2, true) => "_mm256_setzero_pd()",
            (Isa::Avx2, false) => "_mm256_setzero_si256()",
        }
    }

    /// The function that adds up the lanes of an `f64` (`true`) or `i64` vector.
    fn reduce(self, float: bool) -> &'static str {
        match (self, float) {
            (Isa::Avx512, true) => "_mm512_reduce_add_pd",
            (Isa::Avx512, false) => "_mm512_reduce_add_epi64",
            (Isa::Avx2, true) => "finch_hsum4_pd",
            (Isa::Avx2, false) => "finch_hsum4_epi64",
        }
    }

    /// The intrinsic for `op` (`+`, `-` or `*`) over `f64` (`float`) or `i64` lanes, unmasked;
    /// `None` where the instruction set has none (AVX2: no 64-bit multiply).
    fn arith(self, op: Op, float: bool) -> Option<&'static str> {
        Some(match (self, op, float) {
            (Isa::Avx512, Op::Add, true) => "_mm512_add_pd",
            (Isa::Avx512, Op::Sub, true) => "_mm512_sub_pd",
            (Isa::Avx512, _, true) => "_mm512_mul_pd",
            (Isa::Avx512, Op::Add, false) => "_mm512_add_epi64",
            (Isa::Avx512, Op::Sub, false) => "_mm512_sub_epi64",
            (Isa::Avx512, _, false) => "_mm512_mullo_epi64",
            (Isa::Avx2, Op::Add, true) => "_mm256_add_pd",
            (Isa::Avx2, Op::Sub, true) => "_mm256_sub_pd",
            (Isa::Avx2, _, true) => "_mm256_mul_pd",
            (Isa::Avx2, Op::Add, false) => "_mm256_add_epi64",
            (Isa::Avx2, Op::Sub, false) => "_mm256_sub_epi64",
            (Isa::Avx2, _, false) => return None,
        })
    }

    /// The declaration of a held vector of `f64` partial sums named `name`.
    pub(super) fn declare_sums(self, name: &str) -> String {
        format!("{} {name} = {};", self.vector(true), self.zero(true))
    }

    /// C adding up the lanes of the held vector `name`.
    pub(super) fn sum_of(self, name: &str) -> String {
        format!("{}({name})", self.reduce(true))
    }
}

/// A translated expression: the same value in every lane (scalar C), or one per lane.
enum V {
    Uniform(String, ScalarType),
    Lanes(String, ScalarType),
}

impl V {
    fn ty(&self) -> ScalarType {
        match self {
            V::Uniform(_, t) | V::Lanes(_, t) => *t,
        }
    }

    /// As a vector (a uniform value broadcast).
    fn lanes(&self, isa: Isa) -> String {
        match (self, isa) {
            (V::Lanes(s, _), _) => s.clone(),
            (V::Uniform(s, ScalarType::F64), Isa::Avx512) => format!("_mm512_set1_pd({s})"),
            (V::Uniform(s, _), Isa::Avx512) => format!("_mm512_set1_epi64({s})"),
            (V::Uniform(s, ScalarType::F64), Isa::Avx2) => format!("_mm256_set1_pd({s})"),
            (V::Uniform(s, _), Isa::Avx2) => format!("_mm256_set1_epi64x({s})"),
        }
    }
}

struct Vectorizer<'a> {
    k: &'a Kernel,
    isa: Isa,
    q: LocalId,
    acc: LocalId,
    /// Locals the body assigns (other than `q` and `acc`), and those assigned so far.
    assigned: HashSet<LocalId>,
    done: HashMap<LocalId, V>,
    temps: usize,
    /// The addresses (C) of the contiguous loads, their element sizes in bytes, and
    /// whether they are offset from the loop's variable by a local.
    streams: Vec<(String, usize, bool)>,
    /// AVX2 code for the last positions: loads read only the lanes `m_` selects.
    masked: bool,
}

/// What the vectorizer needs from the emitter.
pub(super) struct Context<'a> {
    /// The kernel.
    pub k: &'a Kernel,
    /// The instruction set of the copy being emitted.
    pub isa: Isa,
    /// Every read of each local in the whole kernel.
    pub reads: &'a HashMap<LocalId, usize>,
    /// Accumulators an enclosing loop holds as vectors of partial sums (their C names).
    pub deferred: &'a HashMap<LocalId, String>,
    /// C for a literal.
    pub lit: &'a dyn Fn(&Value) -> String,
    /// C for an expression the loop does not change.
    pub invariant: &'a dyn Fn(&KExpr) -> String,
}

/// The vector code of `while (cond) { body }` in `cx.isa`, or `None` when the loop does not
/// qualify. The vector code runs the whole loop and leaves `q` at the bound.
pub(super) fn vectorize(cx: &Context, cond: &KExpr, body: &[KStmt]) -> Option<String> {
    let KExpr::Op(Op::Lt, c) = cond else {
        return None;
    };
    let (KExpr::Local(q), bound) = (&c[0], &c[1]) else {
        return None;
    };
    // One `q = q + 1`; nothing after it reads `q`.
    let is_step = |s: &KStmt| {
        matches!(s, KStmt::Assign(l, KExpr::Op(Op::Add, a))
            if l == q && matches!(a.as_slice(), [KExpr::Local(x), KExpr::Lit(Value::I64(1))] if x == q))
    };
    let at = body.iter().position(is_step)?;
    let rest: Vec<KStmt> = body
        .iter()
        .enumerate()
        .filter(|&(n, _)| n != at)
        .map(|(_, s)| s.clone())
        .collect();
    let mut after = HashMap::new();
    count_reads(&body[at + 1..], &mut after);
    if after.contains_key(q) {
        return None;
    }
    let mut in_cond = HashMap::new();
    count_reads(&[KStmt::Assign(*q, cond.clone())], &mut in_cond);
    reduction(cx, *q, None, bound, &rest, &in_cond)
}

/// The vector code of `for var = lo; var < hi; var++ { body }`, or `None` when the loop
/// does not qualify (the conditions of [`vectorize`], with `var` as `q`).
pub(super) fn vectorize_for(
    cx: &Context,
    var: LocalId,
    lo: &KExpr,
    hi: &KExpr,
    body: &[KStmt],
) -> Option<String> {
    let mut bounds = HashMap::new();
    count_reads(
        &[
            KStmt::Assign(var, lo.clone()),
            KStmt::Assign(var, hi.clone()),
        ],
        &mut bounds,
    );
    if bounds.contains_key(&var) {
        return None;
    }
    reduction(cx, var, Some(lo), hi, body, &bounds)
}

/// The shared part: `body` (without the step of `q`) over `q` from its value (or `start`)
/// up to `bound`. `extra` counts the reads of the loop's own bounds or condition.
fn reduction(
    cx: &Context,
    q: LocalId,
    start: Option<&KExpr>,
    bound: &KExpr,
    rest: &[KStmt],
    extra: &HashMap<LocalId, usize>,
) -> Option<String> {
    let Context {
        k,
        isa,
        reads,
        deferred,
        lit,
        invariant,
    } = *cx;
    let (acc, assigned) = accumulator(k, reads, q, bound, rest, extra)?;
    let float = k.locals[acc.0 as usize].ty == ScalarType::F64;
    let vectorizer = |masked| Vectorizer {
        k,
        isa,
        q,
        acc,
        assigned: assigned.clone(),
        done: HashMap::new(),
        temps: 0,
        streams: Vec::new(),
        masked,
    };
    let mut v = vectorizer(false);
    let step = v.step(rest, lit, invariant)?;
    // AVX2: the last positions (fewer than four) as one group with masked loads.
    let last = match isa {
        Isa::Avx2 => vectorizer(true).step(rest, lit, invariant)?,
        Isa::Avx512 => String::new(),
    };
    let (zero, reduce, vt) = (isa.zero(float), isa.reduce(float), isa.vector(float));
    let (qv, a) = (format!("v{}", q.0), format!("v{}", acc.0));
    let mut code = String::new();
    let _ = match isa {
        Isa::Avx512 => writeln!(code, "{{ /* AVX-512: 8 positions of {qv} at a time */"),
        Isa::Avx2 => writeln!(
            code,
            "{{ /* AVX2: 8, then 4 positions of {qv} at a time, the last ones masked */"
        ),
    };
    if let Some(lo) = start {
        let _ = writeln!(code, "  {qv} = {};", invariant(lo));
    }
    let _ = writeln!(
        code,
        "  const int64_t e_ = {}; const int64_t q0_ = {qv};",
        invariant(bound)
    );
    // An accumulator an enclosing loop defers keeps its partial sums in that loop's
    // vector, reduced once after it (a row of blocks: one reduction per row).
    let held = deferred.get(&acc).filter(|_| float);
    // The partial sums added into the accumulator (after the loop, or after the groups).
    let reduced = if float {
        format!("  {a} = {a} + {reduce}(vacc_);\n")
    } else {
        format!("  {a} = (int64_t)((uint64_t){a} + (uint64_t){reduce}(vacc_));\n")
    };
    let declare = format!("  {vt} vacc_ = {zero};\n");
    if held.is_none() && isa == Isa::Avx512 {
        code.push_str(&declare);
    }
    let prefetches = stream_prefetches(&v.streams, start.is_none());
    // The loop's length; AVX-512 counts from zero along it (the compiler keeps the loads'
    // bases out of the loop), AVX2 runs scalar code below four positions.
    let _ = writeln!(code, "  const int64_t len_ = e_ - q0_;");
    let groups = Groups {
        qv: &qv,
        step: &step,
        last: &last,
        prefetches: &prefetches,
        declare: &declare,
        reduced: &reduced,
        own_sums: held.is_none(),
        float,
    };
    match isa {
        Isa::Avx512 => avx512_groups(&mut code, &groups),
        Isa::Avx2 => avx2_groups(&mut code, &groups, rest, invariant)?,
    }
    if let Some(name) = held {
        code.push('}');
        return Some(code.replace("vacc_", name));
    }
    if isa == Isa::Avx512 {
        code.push_str(&reduced);
    }
    code.push('}');
    Some(code)
}

/// Whether `rest` (the body of a loop over `q` up to `bound`, without the step of `q`)
/// qualifies for vector code: assignments only, none to `q`, exactly one `i64`/`f64`
/// local accumulating, a loop-invariant `bound`, and temporaries dead after the loop
/// (`extra`: the reads of the loop's own bounds or condition). Returns the accumulator
/// and the other locals the body assigns.
fn accumulator(
    k: &Kernel,
    reads: &HashMap<LocalId, usize>,
    q: LocalId,
    bound: &KExpr,
    rest: &[KStmt],
    extra: &HashMap<LocalId, usize>,
) -> Option<(LocalId, HashSet<LocalId>)> {
    // Assignments only; one accumulator.
    let mut assigned = HashSet::new();
    let mut acc = None;
    for s in rest {
        let KStmt::Assign(l, e) = s else {
            return None;
        };
        if *l == q {
            return None;
        }
        if accumulation(*l, e).is_some() {
            if acc.replace(*l).is_some() {
                return None;
            }
        } else {
            assigned.insert(*l);
        }
    }
    let acc = acc?;
    let acc_ty = k.locals[acc.0 as usize].ty;
    if !matches!(acc_ty, ScalarType::F64 | ScalarType::I64) || assigned.contains(&acc) {
        return None;
    }
    // The bound is loop-invariant; temporaries are dead after the loop.
    if mentions_any(bound, &assigned) || mentions(bound, acc) || mentions(bound, q) {
        return None;
    }
    let mut inside = HashMap::new();
    count_reads(rest, &mut inside);
    for t in &assigned {
        let here = inside.get(t).copied().unwrap_or(0) + extra.get(t).copied().unwrap_or(0);
        if reads.get(t).copied().unwrap_or(0) > here {
            return None;
        }
    }
    Some((acc, assigned))
}

/// The prefetches of a vector loop's contiguous loads (`streams`, see `Vectorizer`),
/// each address once; `walk`: the loop walks over positions (it has no start of its
/// own).
///
/// Loads that move on through memory are prefetched: all of a walk over positions, and
/// in a loop over a coordinate those offset by a local (positions in a level). A load
/// at the coordinate itself plus a constant (`x[j - 1]`) is read again by each
/// enclosing iteration and stays cached. Integer arithmetic: the address ahead may lie
/// past the buffer, which a prefetch (a hint that never faults) may name but C pointer
/// arithmetic may not.
fn stream_prefetches(streams: &[(String, usize, bool)], walk: bool) -> String {
    let mut prefetches = String::new();
    let mut seen = HashSet::new();
    for (at, size, moves) in streams {
        if (walk || *moves) && seen.insert(at) {
            let _ = writeln!(
                prefetches,
                "    __builtin_prefetch((const void *)((uintptr_t)({at}) + {}u));",
                PREFETCH_AHEAD * size
            );
        }
    }
    prefetches
}

/// The C pieces of a vectorized reduction loop that its instruction set's groups of
/// positions are arranged from (see [`reduction`]).
struct Groups<'a> {
    /// The C name of the loop's variable.
    qv: &'a str,
    /// One group of positions, adding into the partial sums `vacc_`.
    step: &'a str,
    /// AVX2: the last positions as one group with masked loads.
    last: &'a str,
    /// The prefetches of the loop's streams, once per group (of eight in AVX2).
    prefetches: &'a str,
    /// The declaration of the partial sums `vacc_`.
    declare: &'a str,
    /// The partial sums added into the accumulator.
    reduced: &'a str,
    /// The loop keeps its own partial sums (no enclosing loop holds them).
    own_sums: bool,
    /// The accumulator is `f64` (else `i64`).
    float: bool,
}

/// AVX-512: eight positions at a time, counted from zero along the loop, the last group
/// masked.
fn avx512_groups(code: &mut String, g: &Groups) {
    let qv = g.qv;
    let _ = writeln!(
        code,
        "  const __m512i lane_ = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);"
    );
    let _ = writeln!(code, "  for (int64_t o_ = 0; o_ < len_; o_ += 8) {{");
    let _ = writeln!(code, "    {qv} = q0_ + o_;");
    let _ = writeln!(code, "    const int64_t r_ = len_ - o_;");
    let _ = writeln!(
        code,
        "    const __mmask8 m_ = r_ >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << r_) - 1u);"
    );
    let _ = writeln!(
        code,
        "    const __m512i qv_ = _mm512_add_epi64(_mm512_set1_epi64({qv}), lane_); (void)qv_;"
    );
    code.push_str(g.prefetches);
    code.push_str(g.step);
    let _ = writeln!(code, "  }}");
    let _ = writeln!(code, "  if (q0_ < e_) {qv} = e_;");
}

/// AVX2: groups of eight positions into two vectors of partial sums, then one of four,
/// then the last one to three as a masked group; fewer than four positions in all run
/// `rest` as a scalar loop instead. `None` where the instruction set cannot add the
/// partial sums.
fn avx2_groups(
    code: &mut String,
    g: &Groups,
    rest: &[KStmt],
    invariant: &dyn Fn(&KExpr) -> String,
) -> Option<()> {
    let isa = Isa::Avx2;
    let (qv, float) = (g.qv, g.float);
    let (zero, vt) = (isa.zero(float), isa.vector(float));
    // Fewer than four positions in all run in scalar code (blocks of 3.5 entries,
    // mbeacxc, reassociated SpMV on Zen 3: 0.039 ms when they too run as masked
    // groups, 0.030 ms scalar).
    let _ = writeln!(code, "  if (len_ >= 4) {{");
    if g.own_sums {
        code.push_str(g.declare);
    }
    // Two vectors of partial sums in the groups of eight: a fused multiply-add
    // waits four cycles for the one before it (`bench/block_list_limit.c` on Zen 3,
    // the synthetic block rows: 0.28 -> 0.24 ms).
    let _ = writeln!(code, "  {vt} vodd_ = {zero};");
    let _ = writeln!(
        code,
        "  const __m256i lane_ = _mm256_set_epi64x(3, 2, 1, 0);"
    );
    // Four positions from the loop's variable into `sums`, after `before`. The
    // variable itself steps (`e_ - q >= 8; q += 8`), with no count from zero beside
    // it (reassociated SpMV on Zen 3: bcsstk16's blocks 0.129 -> 0.118 ms, a band
    // of 11 per row 0.043 -> 0.036 ms).
    let group = |sums: &str, before: &str, step: &str| {
        let mut text = format!(
            "    {{ const __m256i qv_ = _mm256_add_epi64(_mm256_set1_epi64x({qv}), lane_); (void)qv_;\n{before}"
        );
        text.push_str(&step.replace("vacc_", sums));
        text.push_str("    }\n");
        text
    };
    let _ = writeln!(code, "  while (e_ - {qv} >= 8) {{");
    code.push_str(&group("vacc_", g.prefetches, g.step));
    let _ = writeln!(code, "    {qv} += 4;");
    code.push_str(&group("vodd_", "", g.step));
    let _ = writeln!(code, "    {qv} += 4;");
    let _ = writeln!(code, "  }}");
    let _ = writeln!(code, "  if (e_ - {qv} >= 4) {{");
    code.push_str(&group("vacc_", "", g.step));
    let _ = writeln!(code, "    {qv} += 4;");
    let _ = writeln!(code, "  }}");
    // The last one to three positions: one group with masked loads, which read
    // nothing at or past the bound, rather than a scalar loop after the vectors
    // (a band of 11 entries per row, reassociated SpMV on Zen 3: 0.052 -> 0.043 ms).
    let _ = writeln!(code, "  if ({qv} < e_) {{");
    let _ = writeln!(
        code,
        "    const __m256i m_ = _mm256_cmpgt_epi64(_mm256_set1_epi64x(e_ - {qv}), lane_);"
    );
    // The mask of 32-bit lanes, for loads from narrow index buffers.
    if g.last.contains("m32_") {
        let _ = writeln!(
            code,
            "    const __m128i m32_ = _mm_cmpgt_epi32(_mm_set1_epi32((int)(e_ - {qv})), _mm_set_epi32(3, 2, 1, 0));"
        );
    }
    code.push_str(&group("vodd_", "", g.last));
    let _ = writeln!(code, "    {qv} = e_;");
    let _ = writeln!(code, "  }}");
    let _ = writeln!(
        code,
        "  vacc_ = {}(vacc_, vodd_);",
        isa.arith(Op::Add, float)?
    );
    if g.own_sums {
        code.push_str(g.reduced);
    }
    // The short loop in scalar code, which the `asm` keeps GCC from running with
    // vectors of its own (their set-up costs more than three positions: with a
    // scalar rest after the groups, reassociated SpMV on Zen 3, bcsstk16's blocks
    // of 7.8, 0.164 -> 0.135 ms).
    let _ = writeln!(code, "  }} else {{");
    let _ = writeln!(
        code,
        "  for (; {qv} < e_; {qv}++) {{ {}",
        super::emit::SCALAR_REST
    );
    for s in rest {
        if let KStmt::Assign(l, e) = s {
            let _ = writeln!(code, "    v{} = {};", l.0, invariant(e));
        }
    }
    let _ = writeln!(code, "  }}");
    let _ = writeln!(code, "  }}");
    Some(())
}

/// The `f64` locals a loop can hold as a vector of partial sums across its iterations:
/// every mention of one in `body` (and none in `head`, the loop's condition or bounds) is
/// an accumulation `a = a + e`, at least one of them inside a nested loop (which may then
/// run eight positions at a time into the vector).
pub(super) fn deferrable(k: &Kernel, head: &[&KExpr], body: &[KStmt]) -> Vec<LocalId> {
    fn walk(s: &[KStmt], nested: bool, seen: &mut HashMap<LocalId, (bool, bool)>) {
        for st in s {
            match st {
                KStmt::Assign(l, e) => {
                    if let Some(t) = accumulation(*l, e) {
                        let entry = seen.entry(*l).or_insert((true, false));
                        entry.1 |= nested;
                        note(t, seen);
                    } else {
                        seen.entry(*l).or_insert((true, false)).0 = false;
                        note(e, seen);
                    }
                }
                KStmt::For { var, lo, hi, body } => {
                    seen.entry(*var).or_insert((true, false)).0 = false;
                    note(lo, seen);
                    note(hi, seen);
                    walk(body, true, seen);
                }
                KStmt::While { cond, body } => {
                    note(cond, seen);
                    walk(body, true, seen);
                }
                KStmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    note(cond, seen);
                    walk(then, nested, seen);
                    walk(otherwise, nested, seen);
                }
                other => {
                    crate::kernel::visit_exprs(std::slice::from_ref(other), &mut |e| note(e, seen))
                }
            }
        }
    }
    // Any other read disqualifies a local.
    fn note(e: &KExpr, seen: &mut HashMap<LocalId, (bool, bool)>) {
        let mut reads = HashMap::new();
        count_reads(&[KStmt::Assign(LocalId(u32::MAX), e.clone())], &mut reads);
        for l in reads.keys() {
            seen.entry(*l).or_insert((true, false)).0 = false;
        }
    }
    let mut seen = HashMap::new();
    walk(body, false, &mut seen);
    for e in head {
        note(e, &mut seen);
    }
    let mut out: Vec<LocalId> = seen
        .into_iter()
        .filter(|(l, (only, nested))| {
            *only && *nested && k.locals[l.0 as usize].ty == ScalarType::F64
        })
        .map(|(l, _)| l)
        .collect();
    out.sort_by_key(|l| l.0);
    out
}

/// `e` as `acc + term` or `term + acc` (the term free of `acc`).
fn accumulation(acc: LocalId, e: &KExpr) -> Option<&KExpr> {
    let KExpr::Op(Op::Add, a) = e else {
        return None;
    };
    match a.as_slice() {
        [KExpr::Local(x), t] | [t, KExpr::Local(x)] if *x == acc && !mentions(t, acc) => Some(t),
        _ => None,
    }
}

fn mentions(e: &KExpr, l: LocalId) -> bool {
    mentions_any(e, &HashSet::from([l]))
}

impl Vectorizer<'_> {
    /// The C of one group of lanes: the body's temporaries, then the accumulation into
    /// `vacc_`. Masked AVX2 code reads only the lanes `m_` selects and leaves `vacc_` as it
    /// is in the others (AVX-512 code is masked throughout, by its own `m_`).
    fn step(
        &mut self,
        rest: &[KStmt],
        lit: &dyn Fn(&Value) -> String,
        invariant: &dyn Fn(&KExpr) -> String,
    ) -> Option<String> {
        let (isa, acc, masked) = (self.isa, self.acc, self.masked);
        let acc_ty = self.k.locals[acc.0 as usize].ty;
        let float = acc_ty == ScalarType::F64;
        // Masked AVX2 lanes keep the partial sums they had.
        let keep = |sum: String| match (masked, float) {
            (false, _) => sum,
            (true, true) => format!("_mm256_blendv_pd(vacc_, {sum}, _mm256_castsi256_pd(m_))"),
            (true, false) => format!("_mm256_blendv_epi8(vacc_, {sum}, m_)"),
        };
        let mut step = String::new();
        for s in rest {
            let KStmt::Assign(l, e) = s else {
                return None;
            };
            if *l == acc {
                let term = accumulation(acc, e)?;
                // A product of floats adds in one fused multiply-add (one rounding fewer, as a
                // reassociating kernel may; `bench/block_list_limit.c`: blocks of 7.8 entries
                // 0.114 -> 0.111 ms).
                if let (KExpr::Op(Op::Mul, f), true) = (term, float) {
                    if let [a, b] = f.as_slice() {
                        let (a, b) = (self.expr(a, lit, invariant)?, self.expr(b, lit, invariant)?);
                        if a.ty() != acc_ty || b.ty() != acc_ty {
                            return None;
                        }
                        let (a, b) = (a.lanes(isa), b.lanes(isa));
                        let sum = match isa {
                            Isa::Avx512 => format!("_mm512_mask3_fmadd_pd({a}, {b}, vacc_, m_)"),
                            Isa::Avx2 => keep(format!("_mm256_fmadd_pd({a}, {b}, vacc_)")),
                        };
                        let _ = writeln!(step, "    vacc_ = {sum};");
                        continue;
                    }
                }
                let t = self.expr(term, lit, invariant)?;
                if t.ty() != acc_ty {
                    return None;
                }
                let t = t.lanes(isa);
                let sum = match (isa, float) {
                    (Isa::Avx512, true) => format!("_mm512_mask_add_pd(vacc_, m_, vacc_, {t})"),
                    (Isa::Avx512, false) => {
                        format!("_mm512_mask_add_epi64(vacc_, m_, vacc_, {t})")
                    }
                    (Isa::Avx2, _) => keep(format!("{}(vacc_, {t})", isa.arith(Op::Add, float)?)),
                };
                let _ = writeln!(step, "    vacc_ = {sum};");
            } else {
                let x = self.expr(e, lit, invariant)?;
                if x.ty() != self.k.locals[l.0 as usize].ty {
                    return None;
                }
                let x = match x {
                    V::Lanes(s, t) => {
                        let name = format!("t{}_", self.temps);
                        self.temps += 1;
                        let vt = isa.vector(t == ScalarType::F64);
                        let _ = writeln!(step, "    {vt} {name} = {s}; (void){name};");
                        V::Lanes(name, t)
                    }
                    u => u,
                };
                self.done.insert(*l, x);
            }
        }
        Some(step)
    }

    fn expr(
        &mut self,
        e: &KExpr,
        lit: &dyn Fn(&Value) -> String,
        invariant: &dyn Fn(&KExpr) -> String,
    ) -> Option<V> {
        Some(match e {
            KExpr::Lit(x @ (Value::F64(_) | Value::I64(_))) => V::Uniform(lit(x), x.scalar_type()?),
            KExpr::Lit(_) | KExpr::Len(_) | KExpr::Search { .. } => return None,
            KExpr::Local(l) if *l == self.q => V::Lanes("qv_".into(), ScalarType::I64),
            KExpr::Local(l) if *l == self.acc => return None,
            KExpr::Local(l) if self.assigned.contains(l) => match self.done.get(l)? {
                V::Lanes(s, t) => V::Lanes(s.clone(), *t),
                V::Uniform(s, t) => V::Uniform(s.clone(), *t),
            },
            KExpr::Local(l) => {
                let ty = self.k.locals[l.0 as usize].ty;
                if !matches!(ty, ScalarType::F64 | ScalarType::I64) {
                    return None;
                }
                V::Uniform(invariant(e), ty)
            }
            KExpr::Load(b, i) => self.load(*b, i, lit, invariant)?,
            KExpr::Op(op @ (Op::Add | Op::Sub | Op::Mul), args) if args.len() == 2 => {
                let x = self.expr(&args[0], lit, invariant)?;
                let y = self.expr(&args[1], lit, invariant)?;
                let ty = x.ty();
                if y.ty() != ty {
                    return None;
                }
                match (&x, &y) {
                    (V::Uniform(a, _), V::Uniform(b, _)) => {
                        let c = match op {
                            Op::Add => "+",
                            Op::Sub => "-",
                            _ => "*",
                        };
                        if ty == ScalarType::F64 {
                            V::Uniform(format!("(({a}) {c} ({b}))"), ty)
                        } else {
                            V::Uniform(
                                format!("((int64_t)((uint64_t)({a}) {c} (uint64_t)({b})))"),
                                ty,
                            )
                        }
                    }
                    _ => {
                        let f = self.isa.arith(*op, ty == ScalarType::F64)?;
                        let (x, y) = (x.lanes(self.isa), y.lanes(self.isa));
                        V::Lanes(format!("{f}({x}, {y})"), ty)
                    }
                }
            }
            KExpr::Op(..) => return None,
        })
    }

    /// `c` (C code) when `e` is `q + c` with `c` the same in every lane.
    fn offset_of_q(
        &mut self,
        e: &KExpr,
        lit: &dyn Fn(&Value) -> String,
        invariant: &dyn Fn(&KExpr) -> String,
    ) -> Option<String> {
        let uniform = |v: &mut Self, x: &KExpr| match v.expr(x, lit, invariant) {
            Some(V::Uniform(u, ScalarType::I64)) => Some(u),
            _ => None,
        };
        match e {
            KExpr::Local(l) if *l == self.q => Some("0".into()),
            KExpr::Op(Op::Add, a) if a.len() == 2 => {
                if let Some(o) = self.offset_of_q(&a[0], lit, invariant) {
                    uniform(self, &a[1]).map(|u| format!("({o}) + ({u})"))
                } else {
                    let o = self.offset_of_q(&a[1], lit, invariant)?;
                    uniform(self, &a[0]).map(|u| format!("({o}) + ({u})"))
                }
            }
            KExpr::Op(Op::Sub, a) if a.len() == 2 => {
                let o = self.offset_of_q(&a[0], lit, invariant)?;
                uniform(self, &a[1]).map(|u| format!("({o}) - ({u})"))
            }
            _ => None,
        }
    }

    /// `buf[i]`: a masked load where `i` is `q + c`, a masked gather where it varies
    /// otherwise, a scalar load where it is the same in every lane.
    fn load(
        &mut self,
        b: BufId,
        i: &KExpr,
        lit: &dyn Fn(&Value) -> String,
        invariant: &dyn Fn(&KExpr) -> String,
    ) -> Option<V> {
        let p = self.k.bufs.get(b.0 as usize)?;
        if p.growable || p.writable {
            return None;
        }
        let ty = p.elem;
        if !matches!(ty, ScalarType::F64 | ScalarType::I64) {
            return None;
        }
        let ptr = format!("p{}", b.0);
        // `q + c`, `c` the same in every lane: contiguous.
        if let Some(c) = self.offset_of_q(i, lit, invariant) {
            let at = format!("{ptr} + v{} + ({c})", self.q.0);
            let mut locals = HashMap::new();
            count_reads(&[KStmt::Assign(self.q, i.clone())], &mut locals);
            let moves = locals.keys().any(|l| *l != self.q);
            self.streams.push((
                at.clone(),
                crate::kernel::passes::strips::elem_bytes(ty, p.narrow),
                moves,
            ));
            return Some(V::Lanes(
                match (self.isa, ty, p.narrow) {
                    (Isa::Avx2, ScalarType::F64, _) if self.masked => {
                        format!("_mm256_maskload_pd({at}, m_)")
                    }
                    (Isa::Avx2, _, true) if self.masked => format!(
                        "_mm256_cvtepu32_epi64(_mm_maskload_epi32((const int *)({at}), m32_))"
                    ),
                    (Isa::Avx2, _, false) if self.masked => {
                        format!("_mm256_maskload_epi64((const long long *)({at}), m_)")
                    }
                    (Isa::Avx512, ScalarType::F64, _) => {
                        format!("_mm512_maskz_loadu_pd(m_, {at})")
                    }
                    (Isa::Avx512, _, true) => {
                        format!("_mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(m_, {at}))")
                    }
                    (Isa::Avx512, _, false) => format!("_mm512_maskz_loadu_epi64(m_, {at})"),
                    (Isa::Avx2, ScalarType::F64, _) => format!("_mm256_loadu_pd({at})"),
                    (Isa::Avx2, _, true) => {
                        format!("_mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)({at})))")
                    }
                    (Isa::Avx2, _, false) => {
                        format!("_mm256_loadu_si256((const __m256i *)({at}))")
                    }
                },
                ty,
            ));
        }
        Some(match self.expr(i, lit, invariant)? {
            V::Uniform(s, ScalarType::I64) => {
                let load = format!("{ptr}[{s}]");
                V::Uniform(if p.narrow { format!("((int64_t){load})") } else { load }, ty)
            }
            // AVX2 gathers lose to scalar loads (see the module's documentation).
            V::Lanes(_, ScalarType::I64) if self.isa == Isa::Avx2 => return None,
            V::Lanes(s, ScalarType::I64) => V::Lanes(
                match (ty, p.narrow) {
                    (ScalarType::F64, _) => {
                        format!("_mm512_mask_i64gather_pd(_mm512_setzero_pd(), m_, {s}, {ptr}, 8)")
                    }
                    (_, true) => format!(
                        "_mm512_cvtepu32_epi64(_mm512_mask_i64gather_epi32(_mm256_setzero_si256(), m_, {s}, {ptr}, 4))"
                    ),
                    _ => format!(
                        "_mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m_, {s}, {ptr}, 8)"
                    ),
                },
                ty,
            ),
            _ => return None,
        })
    }
}
