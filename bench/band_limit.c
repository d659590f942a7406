/* How fast can strict SpMV over a band be, written by hand? Builds an n x n band of
 * half-width h (2h + 1 entries per row; n = 10000, h = 5 is finch-bench's band of 11) in
 * the SparseBand layout (per row: the last column and the row's start in the values) and
 * as CSR, then times, in one process with the kernels taking turns (so that a slow stretch
 * of a VM hits them alike), the minimum of 20 turns of 20 runs:
 *   csr       CSR, one row at a time, each row's additions in order;
 *   band1     the band, one row at a time (no column index to load);
 *   band4     the band four rows at a time: the rows' additions interleaved, each row's
 *             still in order, along one shared position counter, every row reading its
 *             values and x through base pointers of its own;
 *   band4len  as band4, x's base computed from the row's length instead of its end (the
 *             same address): on Zen 3, 17% slower, as much as any change of the loop;
 *   band4col  as band4, but each row's values and x indexed by column, the way the
 *             level's lowering writes them (x[j - 1], values at j + the row's offset);
 *             the generated joint loop reads as band4 does, its offsets simplified.
 * Every kernel adds each row's terms in the same order, so all results are bit for bit
 * equal; the program checks that.
 * Used in bench/results/structure.md for what the strict band of 11 can gain over CSR.
 *   cc -O3 -ffp-contract=off -o /tmp/band_limit bench/band_limit.c
 *   /tmp/band_limit            (n = 10000, h = 5)
 *   /tmp/band_limit 10000 30   (the band of 61)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long n, *last_, *ofs_, *ptr_, *idx_;
static double *val_, *x_, *y_;
/* Each kernel reads the arrays through restrict locals, as the generated kernels do. */
#define ARRAYS const long *restrict last = last_, *restrict ofs = ofs_, *restrict ptr = ptr_, *restrict idx = idx_; \
  const double *restrict val = val_, *restrict x = x_; double *restrict y = y_; \
  (void)last; (void)ofs; (void)ptr; (void)idx;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void csr(void) {
  ARRAYS
  for (long i = 0; i < n; i++) {
    double s = y[i];
    for (long q = ptr[i]; q < ptr[i + 1]; q++) s += val[q] * x[idx[q]];
    y[i] = s;
  }
}

/* The row's entry q holds column last - (e - 1 - q). */
static void band1(void) {
  ARRAYS
  for (long i = 0; i < n; i++) {
    double s = y[i];
    long q = ofs[i], e = ofs[i + 1];
    const double *xx = x + last[i] + 1 - e;
    for (; q < e; q++) s += val[q] * xx[q];
    y[i] = s;
  }
}

static void band_rows(long i) {
  ARRAYS
  double s = y[i];
  for (long q = ofs[i]; q < ofs[i + 1]; q++) s += val[q] * x[last[i] - (ofs[i + 1] - 1 - q)];
  y[i] = s;
}

/* Four rows at a time: each row's setup (ROW), the iterations all four have (TERM), each
 * row's rest and store (REST); then the last rows one at a time. */
#define FOUR_ROWS(name, ROW, TERM, REST) static void name(void) { \
  ARRAYS \
  long i = 0; \
  for (; i + 3 < n; i += 4) { \
    long m = INT64_MAX; \
    ROW(0) ROW(1) ROW(2) ROW(3) \
    long k = 0; \
    for (; k < m; k++) { TERM(0) TERM(1) TERM(2) TERM(3) } \
    REST(0) REST(1) REST(2) REST(3) \
  } \
  for (; i < n; i++) band_rows(i); \
}

#define ROW4(r) double s##r = y[i + r]; long q##r = ofs[i + r], e##r = ofs[i + r + 1], l##r = e##r - q##r; \
  const double *v##r = val + q##r, *x##r = x + last[i + r] + 1 - e##r + q##r; if (l##r < m) m = l##r;
#define TERM4(r) s##r += v##r[k] * x##r[k];
#define REST4(r) for (long kk = k; kk < l##r; kk++) s##r += v##r[kk] * x##r[kk]; y[i + r] = s##r;
FOUR_ROWS(band4, ROW4, TERM4, REST4)

/* As band4, with x's base from the row's length rather than from its end: the same
 * address, computed one subtraction later. */
#define ROWL(r) double s##r = y[i + r]; long q##r = ofs[i + r], l##r = ofs[i + r + 1] - q##r; \
  const double *v##r = val + q##r, *x##r = x + last[i + r] + 1 - l##r; if (l##r < m) m = l##r;
FOUR_ROWS(band4len, ROWL, TERM4, REST4)

/* Columns 1-based as in the kernels: row r runs j = f_r .. L_r, L_r = its last column + 1. */
#define ROWC(r) double s##r = y[i + r]; long q##r = ofs[i + r], e##r = ofs[i + r + 1]; long L##r = last[i + r] + 1; \
  long f##r = L##r - (e##r - q##r) + 1, o##r = q##r - f##r, n##r = L##r + 1 - f##r; if (n##r < m) m = n##r;
#define TERMC(r) { long j = f##r + k; s##r += val[o##r + j] * x[j - 1]; }
#define RESTC(r) for (long kk = k; kk < n##r; kk++) { long j = f##r + kk; s##r += val[o##r + j] * x[j - 1]; } y[i + r] = s##r;
FOUR_ROWS(band4col, ROWC, TERMC, RESTC)

int main(int argc, char **argv) {
  n = argc > 1 ? atol(argv[1]) : 10000;
  long h = argc > 2 ? atol(argv[2]) : 5;
  if (n < 1 || h < 0) { fprintf(stderr, "usage: band_limit [n >= 1] [half-width >= 0]\n"); return 1; }
  long cap = n * (2 * h + 1);
  last_ = malloc(8 * n); ofs_ = calloc(n + 1, 8); ptr_ = ofs_; idx_ = malloc(8 * cap);
  val_ = malloc(8 * cap); x_ = malloc(8 * n); y_ = malloc(8 * n);
  if (!last_ || !ofs_ || !idx_ || !val_ || !x_ || !y_) { fprintf(stderr, "out of memory\n"); return 1; }
  long nnz = 0;
  for (long i = 0; i < n; i++) {
    long a = i - h < 0 ? 0 : i - h, b = i + h >= n ? n - 1 : i + h;
    last_[i] = b;
    for (long j = a; j <= b; j++) { idx_[nnz] = j; val_[nnz++] = (double)((i + 3 * j) % 17) - 8.0 + 1e-3 * (j % 11); }
    ofs_[i + 1] = nnz;
  }
  for (long i = 0; i < n; i++) x_[i] = 1.0 + (i % 7) * 0.37;
  struct { const char *name; void (*f)(void); double best; double *out; } k[] = {
    {"csr", csr, 1e9, 0}, {"band1", band1, 1e9, 0}, {"band4", band4, 1e9, 0}, {"band4len", band4len, 1e9, 0},
    {"band4col", band4col, 1e9, 0}};
  int nk = sizeof k / sizeof k[0];
  for (int t = 0; t < nk; t++) k[t].out = malloc(8 * n);
  for (int turn = 0; turn < 20; turn++)
    for (int t = 0; t < nk; t++)
      for (int r = 0; r < 20; r++) {
        memset(y_, 0, 8 * n);
        double t0 = now();
        k[t].f();
        t0 = now() - t0;
        if (t0 < k[t].best) k[t].best = t0;
        memcpy(k[t].out, y_, 8 * n);
      }
  printf("n = %ld, %ld entries per row (%ld in all)\n", n, 2 * h + 1, nnz);
  int bad = 0;
  for (int t = 0; t < nk; t++) {
    int same = memcmp(k[t].out, k[0].out, 8 * n) == 0;
    bad |= !same;
    printf("%-9s %.4f ms  %.2fx CSR%s\n", k[t].name, k[t].best * 1e3, k[0].best / k[t].best, same ? "" : "  DIFFERENT RESULT");
  }
  return bad;
}
