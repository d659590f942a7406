#!/bin/sh
# Runs the coverage-guided fuzz targets of crates/finch-fuzz (libFuzzer through
# `cargo fuzz`, which needs a nightly toolchain for its sanitizer flags).
#   scripts/fuzz.sh                        every target for 60 s
#   scripts/fuzz.sh 3600                   every target for an hour
#   scripts/fuzz.sh 600 frostt raw_arrays  the named targets for 10 minutes each
# Corpora grow in fuzz/corpus/TARGET, starting from the seeds (finch-fuzz-seeds: the
# examples, ../shared/data, generated cases, fuzz/regressions); a crash is written to
# fuzz/artifacts/TARGET and stops its target. One line per target goes to fuzz/runs.log:
# date, commit, target, seconds, executions, corpus size, crashes.
set -eu
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-"program_text format_text matrix_market frostt raw_arrays program_run"}

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

cargo run --quiet --release -p finch-fuzz --bin finch-fuzz-seeds -- fuzz/corpus . >/dev/null
(cd fuzz && cargo +nightly fuzz build -O)
# Kernels compiled by `program_run` go to a cache of their own, removed at the end.
FINCH_CACHE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/finch-fuzz-cache.XXXXXX")
export FINCH_CACHE_DIR
trap 'rm -rf "$FINCH_CACHE_DIR"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
status=0
for t in $TARGETS; do
  log=fuzz/artifacts/$t.log
  mkdir -p "fuzz/artifacts/$t"
  before=$(ls "fuzz/artifacts/$t" | grep -c . || true)
  # A case of `program_run` compiles C (seconds of `cc`, more on a busy machine), and
  # its process holds what AddressSanitizer's allocator keeps of every case's memory:
  # replaying its whole corpus of 1,548 inputs in one process peaks at 301 MB without
  # sanitizers (finch-fuzz-run, 988b1fb) and reaches 2 GB under them, so it gets 4 GB.
  # No single allocation may pass 2 GB in any target.
  timeout=60
  rss=2048
  if [ "$t" = program_run ]; then
    timeout=600
    rss=4096
  fi
  set +e
  (cd fuzz && cargo +nightly fuzz run -O "$t" "corpus/$t" -- \
    -max_total_time="$SECONDS_EACH" -timeout="$timeout" -rss_limit_mb="$rss" \
    -malloc_limit_mb=2048 -max_len=8192 -print_final_stats=1) >"$log" 2>&1
  rc=$?
  set -e
  after=$(ls "fuzz/artifacts/$t" | grep -c . || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(ls "fuzz/corpus/$t" | grep -c . || true)
  crashes=$((after - before))
  echo "$(date -u +%FT%TZ) $commit $t ${SECONDS_EACH}s execs=${execs:-?} corpus=$corpus crashes=$crashes" |
    tee -a fuzz/runs.log
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    echo "fuzz.sh: $t stopped (exit $rc); see $log and fuzz/artifacts/$t" >&2
    status=1
  fi
done
exit $status
