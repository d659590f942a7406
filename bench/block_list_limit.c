/* How fast can SpMV over a block list be on a real matrix, written by hand? Reads a Matrix
 * Market file, builds CSR and a block list (maximal runs of consecutive columns per row),
 * and times, in one run: strict scalar CSR, strict scalar blocks, AVX-512 blocks with one
 * accumulator per row or per block, and AVX-512 CSR with gathers (the minimum of 300 runs,
 * 8 past 5 million entries);
 * then the AVX-512 kernels prefetching their value (and CSR index) streams 2 KB ahead, as
 * Finch-RS's generated AVX-512 loops do.
 * On CPUs without AVX-512 (and with AVX2 and FMA), the AVX2 kernels instead: blocks in
 * groups of eight (two accumulators) and four with a scalar rest, as Finch-RS's AVX2 copies
 * run them, with one accumulator and groups of four only, and CSR with AVX2 gathers.
 * Strict order (each row's additions in order, as Finch-RS's default kernels): scalar CSR
 * and blocks in strips of eight with the same prefetching as the generated strict loops,
 * then each with two rows at a time (their additions interleaved, each row's in order),
 * and blocks four rows at a time.
 * Used in bench/results/structure.md to show where the SparseBlockList format can win.
 *   cc -O3 -ffp-contract=off -o /tmp/block_list_limit bench/block_list_limit.c
 *   (no contraction: a fused multiply-add would change the strict sums, and lengthen
 *   their chains of additions from 2 to 4 cycles)
 *   /tmp/block_list_limit ../shared/data/matrices/bcsstk16.mtx
 *   /tmp/block_list_limit synthetic   (finch-bench's 10000 x 10000, three blocks of 16-48)
 *   /tmp/block_list_limit synthetic 400000   (the same rows, 400000 of them: 38.4 million
 *   entries, read from memory rather than cache)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <immintrin.h>
typedef struct { long i, j; double v; } E;
static int cmp(const void *a, const void *b) { const E *x = a, *y = b; if (x->i != y->i) return x->i < y->i ? -1 : 1; if (x->j != y->j) return x->j < y->j ? -1 : 1; return 0; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
long n, nnz, *ptr, *idx, *bptr, *bidx, *bofs, nb; double *val, *x, *y;
void csr(void) { for (long i = 0; i < n; i++) { double s = y[i]; for (long q = ptr[i]; q < ptr[i+1]; q++) s += val[q] * x[idx[q]]; y[i] = s; } }
void blk(void) { for (long i = 0; i < n; i++) { double s = y[i]; for (long b = bptr[i]; b < bptr[i+1]; b++) { long last = bidx[b], len = bofs[b+1] - bofs[b]; const double *v = val + bofs[b]; const double *xx = x + last - len + 1; for (long k = 0; k < len; k++) s += v[k] * xx[k]; } y[i] = s; } }
__attribute__((target("avx512f,avx512dq,avx512vl")))
void blk512(void) { for (long i = 0; i < n; i++) { __m512d acc = _mm512_setzero_pd(); for (long b = bptr[i]; b < bptr[i+1]; b++) { long last = bidx[b], len = bofs[b+1] - bofs[b]; const double *v = val + bofs[b]; const double *xx = x + last - len + 1; for (long k = 0; k < len; k += 8) { long r = len - k; __mmask8 m = r >= 8 ? 0xFF : (__mmask8)((1u << r) - 1); acc = _mm512_mask3_fmadd_pd(_mm512_maskz_loadu_pd(m, v + k), _mm512_maskz_loadu_pd(m, xx + k), acc, m); } } y[i] += _mm512_reduce_add_pd(acc); } }
__attribute__((target("avx512f,avx512dq,avx512vl")))
void blk512b(void) { for (long i = 0; i < n; i++) { double s = y[i]; for (long b = bptr[i]; b < bptr[i+1]; b++) { long last = bidx[b], len = bofs[b+1] - bofs[b]; const double *v = val + bofs[b]; const double *xx = x + last - len + 1; __m512d acc = _mm512_setzero_pd(); for (long k = 0; k < len; k += 8) { long r = len - k; __mmask8 m = r >= 8 ? 0xFF : (__mmask8)((1u << r) - 1); acc = _mm512_mask3_fmadd_pd(_mm512_maskz_loadu_pd(m, v + k), _mm512_maskz_loadu_pd(m, xx + k), acc, m); } s += _mm512_reduce_add_pd(acc); } y[i] = s; } }
__attribute__((target("avx512f,avx512dq,avx512vl")))
void csr512(void) { for (long i = 0; i < n; i++) { __m512d acc = _mm512_setzero_pd(); long q0 = ptr[i], e = ptr[i+1]; for (long q = q0; q < e; q += 8) { long r = e - q; __mmask8 m = r >= 8 ? 0xFF : (__mmask8)((1u << r) - 1); __m512i ix = _mm512_maskz_loadu_epi64(m, idx + q); acc = _mm512_mask3_fmadd_pd(_mm512_maskz_loadu_pd(m, val + q), _mm512_mask_i64gather_pd(_mm512_setzero_pd(), m, ix, x, 8), acc, m); } y[i] += _mm512_reduce_add_pd(acc); } }
#define AHEAD(p) __builtin_prefetch((const void *)((uintptr_t)(p) + 2048))
__attribute__((target("avx512f,avx512dq,avx512vl")))
void blk512p(void) { for (long i = 0; i < n; i++) { __m512d acc = _mm512_setzero_pd(); for (long b = bptr[i]; b < bptr[i+1]; b++) { long last = bidx[b], len = bofs[b+1] - bofs[b]; const double *v = val + bofs[b]; const double *xx = x + last - len + 1; for (long k = 0; k < len; k += 8) { AHEAD(v + k); long r = len - k; __mmask8 m = r >= 8 ? 0xFF : (__mmask8)((1u << r) - 1); acc = _mm512_mask3_fmadd_pd(_mm512_maskz_loadu_pd(m, v + k), _mm512_maskz_loadu_pd(m, xx + k), acc, m); } } y[i] += _mm512_reduce_add_pd(acc); } }
__attribute__((target("avx512f,avx512dq,avx512vl")))
void csr512p(void) { for (long i = 0; i < n; i++) { __m512d acc = _mm512_setzero_pd(); long q0 = ptr[i], e = ptr[i+1]; for (long q = q0; q < e; q += 8) { AHEAD(val + q); AHEAD(idx + q); long r = e - q; __mmask8 m = r >= 8 ? 0xFF : (__mmask8)((1u << r) - 1); __m512i ix = _mm512_maskz_loadu_epi64(m, idx + q); acc = _mm512_mask3_fmadd_pd(_mm512_maskz_loadu_pd(m, val + q), _mm512_mask_i64gather_pd(_mm512_setzero_pd(), m, ix, x, 8), acc, m); } y[i] += _mm512_reduce_add_pd(acc); } }
#define STRIPS(q, end, body, ...) while ((end) - (q) >= 8) { __VA_ARGS__; for (int k_ = 0; k_ < 8; k_++, (q)++) { body; } } for (; (q) < (end); (q)++) { __asm__(""); body; }
/* Block `b`'s first and end positions `q`, `e` and its `x` aligned to positions `xx`. */
#define BLOCK(b, q, e, xx) do { q = bofs[b]; e = bofs[b+1]; xx = x + bidx[b] - (e - 1); } while (0)
void csr_strict(void) { for (long i = 0; i < n; i++) { double s = y[i]; long q = ptr[i], e = ptr[i+1]; STRIPS(q, e, s += val[q] * x[idx[q]], AHEAD(val + q); AHEAD(idx + q)) y[i] = s; } }
void blk_strict(void) { for (long i = 0; i < n; i++) { double s = y[i]; for (long b = bptr[i]; b < bptr[i+1]; b++) { long q, e; const double *xx; BLOCK(b, q, e, xx); STRIPS(q, e, s += val[q] * xx[q], AHEAD(val + q)) } y[i] = s; } }
void csr_pair(void) { long i = 0; for (; i + 1 < n; i += 2) { double sa = y[i], sb = y[i+1]; long qa = ptr[i], ea = ptr[i+1], qb = ptr[i+1], eb = ptr[i+2];
  while (ea - qa >= 8 && eb - qb >= 8) { AHEAD(val + qa); AHEAD(idx + qa); AHEAD(val + qb); AHEAD(idx + qb); for (int k = 0; k < 8; k++, qa++, qb++) { sa += val[qa] * x[idx[qa]]; sb += val[qb] * x[idx[qb]]; } }
  STRIPS(qa, ea, sa += val[qa] * x[idx[qa]], AHEAD(val + qa); AHEAD(idx + qa)) STRIPS(qb, eb, sb += val[qb] * x[idx[qb]], AHEAD(val + qb); AHEAD(idx + qb)) y[i] = sa; y[i+1] = sb; }
  for (; i < n; i++) { double s = y[i]; long q = ptr[i], e = ptr[i+1]; STRIPS(q, e, s += val[q] * x[idx[q]], AHEAD(val + q); AHEAD(idx + q)) y[i] = s; } }
void blk_pair(void) { long i = 0; for (; i + 1 < n; i += 2) { double sa = y[i], sb = y[i+1];
  long ba = bptr[i], bea = bptr[i+1], bb = bptr[i+1], beb = bptr[i+2];
  long qa = 0, ea = 0, qb = 0, eb = 0; const double *xa = x, *xb = x;
  if (ba < bea) BLOCK(ba, qa, ea, xa);
  if (bb < beb) BLOCK(bb, qb, eb, xb);
  while (ba < bea && bb < beb) {
    long m = ea - qa < eb - qb ? ea - qa : eb - qb;
    long stop = qa + m;
    while (stop - qa >= 8) { AHEAD(val + qa); AHEAD(val + qb); for (int k = 0; k < 8; k++, qa++, qb++) { sa += val[qa] * xa[qa]; sb += val[qb] * xb[qb]; } }
    for (; qa < stop; qa++, qb++) { __asm__(""); sa += val[qa] * xa[qa]; sb += val[qb] * xb[qb]; }
    if (qa == ea && ++ba < bea) BLOCK(ba, qa, ea, xa);
    if (qb == eb && ++bb < beb) BLOCK(bb, qb, eb, xb);
  }
  while (ba < bea) { STRIPS(qa, ea, sa += val[qa] * xa[qa], AHEAD(val + qa)) if (++ba < bea) BLOCK(ba, qa, ea, xa); }
  while (bb < beb) { STRIPS(qb, eb, sb += val[qb] * xb[qb], AHEAD(val + qb)) if (++bb < beb) BLOCK(bb, qb, eb, xb); }
  y[i] = sa; y[i+1] = sb; }
  for (; i < n; i++) { double s = y[i]; for (long b = bptr[i]; b < bptr[i+1]; b++) { long q, e; const double *xx; BLOCK(b, q, e, xx); STRIPS(q, e, s += val[q] * xx[q], AHEAD(val + q)) } y[i] = s; } }
/* Four block rows at a time: all four rows' blocks run together for the stretch up to the
 * first row's block end, then that row moves to its next block. */
void blk_quad(void) { long i = 0; for (; i + 3 < n; i += 4) { double s[4]; long b[4], be[4], q[4], e[4]; const double *xr[4];
  for (int r = 0; r < 4; r++) { s[r] = y[i+r]; b[r] = bptr[i+r]; be[r] = bptr[i+r+1]; q[r] = e[r] = 0; xr[r] = x; if (b[r] < be[r]) BLOCK(b[r], q[r], e[r], xr[r]); }
  double s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3]; long q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3]; const double *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
  while (b[0] < be[0] && b[1] < be[1] && b[2] < be[2] && b[3] < be[3]) {
    long m = e[0] - q0; if (e[1] - q1 < m) m = e[1] - q1; if (e[2] - q2 < m) m = e[2] - q2; if (e[3] - q3 < m) m = e[3] - q3;
    for (long k = 0; k < m; k++, q0++, q1++, q2++, q3++) { s0 += val[q0] * x0[q0]; s1 += val[q1] * x1[q1]; s2 += val[q2] * x2[q2]; s3 += val[q3] * x3[q3]; }
    if (q0 == e[0] && ++b[0] < be[0]) BLOCK(b[0], q0, e[0], x0);
    if (q1 == e[1] && ++b[1] < be[1]) BLOCK(b[1], q1, e[1], x1);
    if (q2 == e[2] && ++b[2] < be[2]) BLOCK(b[2], q2, e[2], x2);
    if (q3 == e[3] && ++b[3] < be[3]) BLOCK(b[3], q3, e[3], x3);
  }
  s[0] = s0; s[1] = s1; s[2] = s2; s[3] = s3; q[0] = q0; q[1] = q1; q[2] = q2; q[3] = q3; xr[0] = x0; xr[1] = x1; xr[2] = x2; xr[3] = x3;
  for (int r = 0; r < 4; r++) { while (b[r] < be[r]) { long qq = q[r], ee = e[r]; const double *xx = xr[r]; double ss = s[r]; STRIPS(qq, ee, ss += val[qq] * xx[qq], AHEAD(val + qq)) s[r] = ss; if (++b[r] < be[r]) BLOCK(b[r], q[r], e[r], xr[r]); } y[i+r] = s[r]; } }
  for (; i < n; i++) { double s = y[i]; for (long b = bptr[i]; b < bptr[i+1]; b++) { long q, e; const double *xx; BLOCK(b, q, e, xx); STRIPS(q, e, s += val[q] * xx[q], AHEAD(val + q)) } y[i] = s; } }
/* AVX2 (no AVX-512): blocks as Finch-RS's AVX2 copy runs them (a block of fewer than four
 * entries scalar, else groups of eight into two accumulators, then four, then the last one
 * to three as one masked group), as it ran them before 2026-11-27 (the same groups, then a
 * scalar rest), the same with one accumulator and groups of four, and CSR with AVX2
 * gathers. */
#define HSUM4(v) ({ __m128d s_ = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1)); _mm_cvtsd_f64(_mm_add_sd(s_, _mm_unpackhi_pd(s_, s_))); })
__attribute__((target("avx2,fma")))
void blk256(void) { for (long i = 0; i < n; i++) { __m256d acc = _mm256_setzero_pd(), odd = _mm256_setzero_pd(); double s = 0; for (long b = bptr[i]; b < bptr[i+1]; b++) { long q, e; const double *xx; BLOCK(b, q, e, xx);
  for (; e - q >= 8; q += 8) { AHEAD(val + q); acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + q), _mm256_loadu_pd(xx + q), acc); odd = _mm256_fmadd_pd(_mm256_loadu_pd(val + q + 4), _mm256_loadu_pd(xx + q + 4), odd); }
  if (e - q >= 4) { acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + q), _mm256_loadu_pd(xx + q), acc); q += 4; }
  for (; q < e; q++) { __asm__(""); s += val[q] * xx[q]; } }
  acc = _mm256_add_pd(acc, odd); y[i] += s + HSUM4(acc); } }
__attribute__((target("avx2,fma")))
void blk256m(void) { const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0); for (long i = 0; i < n; i++) { __m256d acc = _mm256_setzero_pd(), odd = _mm256_setzero_pd(); double s = 0; for (long b = bptr[i]; b < bptr[i+1]; b++) { long q, e; const double *xx; BLOCK(b, q, e, xx);
  if (e - q < 4) { for (; q < e; q++) { __asm__(""); s += val[q] * xx[q]; } continue; }
  for (; e - q >= 8; q += 8) { AHEAD(val + q); acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + q), _mm256_loadu_pd(xx + q), acc); odd = _mm256_fmadd_pd(_mm256_loadu_pd(val + q + 4), _mm256_loadu_pd(xx + q + 4), odd); }
  if (e - q >= 4) { acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + q), _mm256_loadu_pd(xx + q), acc); q += 4; }
  if (q < e) { __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(e - q), lane); odd = _mm256_blendv_pd(odd, _mm256_fmadd_pd(_mm256_maskload_pd(val + q, m), _mm256_maskload_pd(xx + q, m), odd), _mm256_castsi256_pd(m)); } }
  acc = _mm256_add_pd(acc, odd); y[i] += s + HSUM4(acc); } }
__attribute__((target("avx2,fma")))
void blk256one(void) { for (long i = 0; i < n; i++) { __m256d acc = _mm256_setzero_pd(); double s = 0; for (long b = bptr[i]; b < bptr[i+1]; b++) { long q, e; const double *xx; BLOCK(b, q, e, xx);
  for (; e - q >= 4; q += 4) { AHEAD(val + q); acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + q), _mm256_loadu_pd(xx + q), acc); }
  for (; q < e; q++) { __asm__(""); s += val[q] * xx[q]; } }
  y[i] += s + HSUM4(acc); } }
__attribute__((target("avx2,fma")))
void csr256(void) { const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0); for (long i = 0; i < n; i++) { __m256d acc = _mm256_setzero_pd(); long q = ptr[i], e = ptr[i+1];
  for (; e - q >= 4; q += 4) { AHEAD(val + q); AHEAD(idx + q); acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + q), _mm256_i64gather_pd(x, _mm256_loadu_si256((const __m256i *)(idx + q)), 8), acc); }
  if (q < e) { __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(e - q), lane); acc = _mm256_blendv_pd(acc, _mm256_fmadd_pd(_mm256_maskload_pd(val + q, m), _mm256_mask_i64gather_pd(_mm256_setzero_pd(), x, _mm256_maskload_epi64((const long long *)(idx + q), m), _mm256_castsi256_pd(m), 8), acc), _mm256_castsi256_pd(m)); }
  y[i] += HSUM4(acc); } }
/* CSR with the compiler's own code under reassociation (what a SparseList row gets
 * without AVX-512). */
#pragma GCC push_options
#pragma GCC optimize("associative-math", "no-signed-zeros", "no-trapping-math")
void csr_reassoc(void) { for (long i = 0; i < n; i++) { double s = 0; for (long q = ptr[i]; q < ptr[i+1]; q++) s += val[q] * x[idx[q]]; y[i] += s; } }
#pragma GCC pop_options
double bench(void (*f)(void)) { double best = 1e9; for (int r = 0; r < (nnz > 5000000 ? 8 : 300); r++) { memset(y, 0, n * sizeof(double)); double t = now(); f(); t = now() - t; if (t < best) best = t; } return best * 1e3; }
static void build(E *es, long ne);
static void report(void);
/* finch-bench's synthetic rows (crates/finch-bench/src/structure.rs, long_blocks). */
static void synthetic(long rows) {
  long blocks = 3, lo = 16, hi = 48, span; n = rows; span = n / blocks;
  E *es = malloc(sizeof(E) * n * blocks * hi); long ne = 0;
  for (long i = 0; i < n; i++) for (long b = 0; b < blocks; b++) {
    unsigned long h = ((unsigned long)i * 2654435761ul + (unsigned long)b * 40503ul) % 1000003ul;
    long len = lo + (long)(h % (unsigned long)(hi - lo + 1)), room = span - len > 1 ? span - len : 1;
    long start = b * span + (long)((h / 7) % (unsigned long)room);
    for (long j = start; j < start + len && j < n; j++) es[ne++] = (E){i, j, (double)((i + 3 * j) % 17) - 8.0};
  }
  build(es, ne);
}
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "synthetic") == 0) { synthetic(argc > 2 ? atol(argv[2]) : 10000); report(); return 0; }
  FILE *fp = fopen(argv[1], "r"); char line[512]; int sym = 0;
  fgets(line, sizeof line, fp); sym = strstr(line, "symmetric") != NULL;
  while (fgets(line, sizeof line, fp) && line[0] == '%');
  long m, L; sscanf(line, "%ld %ld %ld", &n, &m, &L);
  E *es = malloc(sizeof(E) * L * 2); long ne = 0;
  for (long k = 0; k < L; k++) { long i, j; double v = 1; fgets(line, sizeof line, fp); sscanf(line, "%ld %ld %lf", &i, &j, &v); es[ne++] = (E){i-1, j-1, v}; if (sym && i != j) es[ne++] = (E){j-1, i-1, v}; }
  build(es, ne); report();
}
static void build(E *es, long ne) {
  qsort(es, ne, sizeof(E), cmp); nnz = ne;
  ptr = calloc(n + 1, 8); idx = malloc(8 * nnz); val = malloc(8 * nnz); x = malloc(8 * n); y = malloc(8 * n);
  for (long k = 0; k < nnz; k++) { ptr[es[k].i + 1]++; idx[k] = es[k].j; val[k] = es[k].v; }
  for (long i = 0; i < n; i++) ptr[i+1] += ptr[i];
  for (long i = 0; i < n; i++) x[i] = 1.0 + (i % 7);
  bptr = calloc(n + 1, 8); bidx = malloc(8 * nnz); bofs = malloc(8 * (nnz + 1)); nb = 0; bofs[0] = 0;
  for (long i = 0; i < n; i++) { for (long q = ptr[i]; q < ptr[i+1]; q++) { if (q == ptr[i] || idx[q] != idx[q-1] + 1) { nb++; } bidx[nb-1] = idx[q]; bofs[nb] = q + 1; } bptr[i+1] = nb; }
}
static void report(void) {
  printf("n %ld nnz %ld blocks %ld (%.1f per block)\n", n, nnz, nb, (double)nnz / nb);
  printf("csr %.3f\nblk %.3f\n", bench(csr), bench(blk));
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    printf("blk512 row-acc %.3f\nblk512 block-acc %.3f\ncsr512 %.3f\n", bench(blk512), bench(blk512b), bench(csr512));
    printf("blk512 row-acc, prefetch %.3f\ncsr512, prefetch %.3f\n", bench(blk512p), bench(csr512p));
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    printf("blk256 masked last group %.3f\n", bench(blk256m));
    printf("blk256 eight and four, scalar rest %.3f\nblk256 four %.3f\ncsr256 gathers %.3f\ncsr reassociated (compiler) %.3f\n", bench(blk256), bench(blk256one), bench(csr256), bench(csr_reassoc));
  }
  printf("strict csr, strips %.3f\nstrict blk, strips %.3f\n", bench(csr_strict), bench(blk_strict));
  printf("strict csr, two rows %.3f\nstrict blk, two rows %.3f\n", bench(csr_pair), bench(blk_pair));
  printf("strict blk, four rows %.3f\n", bench(blk_quad));
}
