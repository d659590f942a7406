#!/bin/sh
# Runs the differential tester for as long as asked, then prints and keeps its summary.
#   scripts/difftest.sh 2h [SEED] [JOBS]      (durations: 90s, 10m, 2h)
# Reproducers of the faults found, one per distinct fault, go to difftest-out/<seed>/,
# with summary.txt; the kernels it compiles live in a private cache it removes.
set -eu
DURATION=${1:-10m}
SEED=${2:-$(date +%s)}
JOBS=${3:-2}
cd "$(dirname "$0")/.."
cargo build --release -p finch-difftest
OUT=${DIFFTEST_OUT:-difftest-out}/$SEED
mkdir -p "$OUT"
echo "seed $SEED for $DURATION on $JOBS workers; reproducers in $OUT"
status=0
./target/release/finch-difftest run --seed "$SEED" --duration "$DURATION" --jobs "$JOBS" --out "$OUT" || status=$?
echo "summary: $OUT/summary.txt"
exit $status
