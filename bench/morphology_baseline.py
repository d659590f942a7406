"""Erosion baseline for finch-bench morphology: OpenCV's cv2.erode with a 3x3 rectangle and
its default border (a pixel outside the image does not erode), single-threaded, output
preallocated. Reads a listing of `<file> <w> <h>` lines (raw bytes 0/1, row-major) and
prints one line per image: `<min_seconds> <foreground_pixels>`, after a first line
`overhead <min_seconds>`: the same call on a 1x1 image (the cost of calling OpenCV from
Python, which every image's time includes)."""
import os
import sys
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np
import cv2


def main():
    listing, repeat = sys.argv[1], int(sys.argv[2])
    cv2.setNumThreads(1)
    kernel = np.ones((3, 3), np.uint8)
    one, one_out = np.ones((1, 1), np.uint8), np.empty((1, 1), np.uint8)
    best = float("inf")
    for _ in range(1000):
        t = time.perf_counter()
        cv2.erode(one, kernel, dst=one_out)
        best = min(best, time.perf_counter() - t)
    print(f"overhead {best:.9f}", flush=True)
    with open(listing) as f:
        for line in f:
            path, w, h = line.split()
            img = np.fromfile(path, dtype=np.uint8).reshape(int(h), int(w))
            out = np.empty_like(img)
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                cv2.erode(img, kernel, dst=out)
                best = min(best, time.perf_counter() - t)
            print(f"{best:.9f} {int(np.count_nonzero(out))}", flush=True)


if __name__ == "__main__":
    main()
