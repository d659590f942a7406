"""SciPy SpMV baseline for finch-bench: reads CSR arrays written by finch-bench (raw
little-endian int64 indptr/indices, float64 data and x) and times y = A @ x single-threaded.
Prints one line: `scipy <min_seconds> <median_seconds> <checksum>`."""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
import scipy.sparse as sp

def main():
    d, m, n, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    indptr = np.fromfile(os.path.join(d, "indptr.bin"), dtype=np.int64)
    indices = np.fromfile(os.path.join(d, "indices.bin"), dtype=np.int64)
    data = np.fromfile(os.path.join(d, "data.bin"), dtype=np.float64)
    x = np.fromfile(os.path.join(d, "x.bin"), dtype=np.float64)
    a = sp.csr_matrix((data, indices.astype(np.int32) if n < 2**31 else indices, indptr.astype(np.int32) if len(data) < 2**31 else indptr), shape=(m, n))
    times = []
    y = None
    for _ in range(repeat):
        t = time.perf_counter()
        y = a @ x
        times.append(time.perf_counter() - t)
    times.sort()
    print(f"scipy {times[0]:.9f} {times[len(times)//2]:.9f} {float(np.sum(y)):.17g}")

main()
