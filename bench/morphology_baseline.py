"""OpenCV baselines for finch-bench morphology, single-threaded, on the pixels finch-bench
writes (raw bytes, row-major). Usage: `morphology_baseline.py MODE LISTING REPEAT`, where
each line of LISTING is `<w> <h> <file>...`:

* `erode`: one file, pixels 0/1; cv2.erode with a 3x3 rectangle and its default border (a
  pixel outside the image does not erode), output preallocated. Prints
  `<min_seconds> <foreground_pixels>` per image.
* `hist`: the 8-bit gray pixels, then the mask (0/1); cv2.calcHist of the masked pixels
  into 16 bins over [0, 256). Prints `<min_seconds> <bin_1> ... <bin_16>` per image.

The first line printed is `overhead <min_seconds>`: the same call on a 1x1 image (the cost
of calling OpenCV from Python, which every image's time includes)."""
import os
import sys
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np
import cv2


def best_of(f, repeat):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = f()
        best = min(best, time.perf_counter() - t)
    return best, result


def main():
    mode, listing, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cv2.setNumThreads(1)
    kernel = np.ones((3, 3), np.uint8)

    def erode(img, out):
        return lambda: cv2.erode(img, kernel, dst=out)

    def hist(img, mask):
        return lambda: cv2.calcHist([img], [0], mask, [16], [0, 256])

    one = np.ones((1, 1), np.uint8)
    call = erode(one, np.empty_like(one)) if mode == "erode" else hist(one, one)
    print(f"overhead {best_of(call, 1000)[0]:.9f}", flush=True)
    with open(listing) as f:
        for line in f:
            w, h, *files = line.split()
            planes = [np.fromfile(p, dtype=np.uint8).reshape(int(h), int(w)) for p in files]
            if mode == "erode":
                out = np.empty_like(planes[0])
                secs, _ = best_of(erode(planes[0], out), repeat)
                numbers = [int(np.count_nonzero(out))]
            elif mode == "hist":
                secs, bins = best_of(hist(planes[0], planes[1]), repeat)
                numbers = [int(b) for b in bins.ravel()]
            else:
                sys.exit(f"unknown mode {mode}")
            print(f"{secs:.9f} " + " ".join(map(str, numbers)), flush=True)


if __name__ == "__main__":
    main()
