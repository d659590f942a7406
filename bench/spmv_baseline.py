"""SpMV baselines for finch-bench: reads CSR arrays written by finch-bench (raw little-endian
int64 indptr/indices, float64 data and x) and times y = A @ x single-threaded with SciPy,
Intel MKL (sparse_dot_mkl) and SuiteSparse:GraphBLAS (python-graphblas), each on the same
arrays. Prints one line per baseline that ran: `<name> <min_seconds> <median_seconds>
<checksum>`; a baseline that cannot run is reported on stderr and skipped."""
import os
import sys
import time

# One thread everywhere; set before the libraries load.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np
import scipy.sparse as sp


def timed(f, repeat):
    times = []
    y = None
    for _ in range(repeat):
        t = time.perf_counter()
        y = f()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[0], times[len(times) // 2], y


def report(name, result):
    best, median, y = result
    print(f"{name} {best:.9f} {median:.9f} {float(np.sum(y)):.17g}", flush=True)


def main():
    d, m, n, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    indptr = np.fromfile(os.path.join(d, "indptr.bin"), dtype=np.int64)
    indices = np.fromfile(os.path.join(d, "indices.bin"), dtype=np.int64)
    data = np.fromfile(os.path.join(d, "data.bin"), dtype=np.float64)
    x = np.fromfile(os.path.join(d, "x.bin"), dtype=np.float64)
    small = n < 2**31 and len(data) < 2**31
    itype = np.int32 if small else np.int64
    a = sp.csr_matrix((data, indices.astype(itype), indptr.astype(itype)), shape=(m, n))
    report("scipy", timed(lambda: a @ x, repeat))

    try:
        # The `mkl` wheel installs libmkl_rt.so.N into the environment's lib folder, where
        # sparse_dot_mkl does not look by itself.
        import glob

        rt = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")))
        if rt and "MKL_RT" not in os.environ:
            os.environ["MKL_RT"] = rt[0]
        from sparse_dot_mkl import dot_product_mkl

        # The MKL handle wraps the CSR arrays (int32 indices, no copy per call).
        report("mkl", timed(lambda: dot_product_mkl(a, x), repeat))
    except Exception as e:  # noqa: BLE001 - any failure means "baseline unavailable"
        print(f"note: mkl baseline unavailable: {e}", file=sys.stderr)

    try:
        import graphblas as gb

        gb.ss.config["nthreads"] = 1
        ga = gb.io.from_scipy_sparse(a)
        gx = gb.Vector.from_dense(x)
        report("graphblas", timed(lambda: (ga @ gx).new().to_dense(fill_value=0.0), repeat))
    except Exception as e:  # noqa: BLE001
        print(f"note: graphblas baseline unavailable: {e}", file=sys.stderr)


main()
