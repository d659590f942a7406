#!/usr/bin/env bash
# Runs the benchmarks with their baselines. Creates a Python virtual environment with
# SciPy, MKL (sparse_dot_mkl) and python-graphblas (from PyPI) on first use, and OpenCV
# for `morphology`; never needed by the tests. A baseline whose package is missing is
# skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x bench/.venv/bin/python ]; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet numpy scipy
fi
if ! bench/.venv/bin/python -c "import sparse_dot_mkl, graphblas" 2>/dev/null; then
  bench/.venv/bin/pip install --quiet mkl sparse-dot-mkl python-graphblas
fi
if [ "${1:-spmv}" = morphology ] && ! bench/.venv/bin/python -c "import cv2" 2>/dev/null; then
  bench/.venv/bin/pip install --quiet opencv-python-headless
fi
cargo run --release -p finch-bench -- "${@:-spmv}"
