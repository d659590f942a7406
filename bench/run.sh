#!/usr/bin/env bash
# Runs the benchmarks with their baselines. Creates a Python virtual environment with
# SciPy (from PyPI) on first use; never needed by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x bench/.venv/bin/python ]; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet numpy scipy
fi
cargo run --release -p finch-bench -- "${@:-spmv}"
