#!/bin/sh
# Runs test binaries of finch-tensor with every generated C kernel built under
# AddressSanitizer and UndefinedBehaviorSanitizer, stopping at the first report.
#   scripts/sanitize.sh                      (the kernel tests: see TESTS below)
#   scripts/sanitize.sh regressions ...      (the named test binaries only)
# The kernels are compiled with `-fsanitize=address,undefined -fno-sanitize-recover=all`
# (FINCH_CFLAGS) into a cache of their own, and the sanitizers' run times are preloaded
# into the test process, which loads them. The Rust code itself is not instrumented
# (that needs a nightly toolchain), but its heap goes through AddressSanitizer's
# allocator, which catches double frees and frees of foreign pointers. An allocation too
# large for the machine returns null, as without the sanitizer (tests of fallible
# allocation expect the error).
set -eu
cd "$(dirname "$0")/.."
# The kernel tests: compile_oracle and the binaries split from it share tests/common/.
KERNEL_TESTS="regressions compile_paper compile_language backend_kernels reassociate_scalar reassociate_avx2
  compile_oracle kernel_size c_text compile_work compile_semantics compile_errors"
TESTS=${*:-$KERNEL_TESTS}
CC=${CC:-cc}
ASAN=$($CC -print-file-name=libasan.so)
UBSAN=$($CC -print-file-name=libubsan.so)
if [ ! -e "$ASAN" ] || [ ! -e "$UBSAN" ]; then
  echo "sanitize.sh: $CC has no AddressSanitizer or UBSan run time (libasan.so, libubsan.so)" >&2
  exit 2
fi
CACHE=$(mktemp -d "${TMPDIR:-/tmp}/finch-sanitize.XXXXXX")
trap 'rm -rf "$CACHE"' EXIT

# A canary: the flags must make an out-of-bounds read stop the process, or a clean run
# below would mean nothing.
cat > "$CACHE/canary.c" <<'EOF'
#include <stdlib.h>
int main(int argc, char **argv) { int *a = malloc(4 * sizeof *a); (void)argv; return a[argc + 3]; }
EOF
$CC -O1 -fsanitize=address,undefined -fno-sanitize-recover=all "$CACHE/canary.c" -o "$CACHE/canary"
if ASAN_OPTIONS=detect_leaks=0 "$CACHE/canary" 2>/dev/null; then
  echo "sanitize.sh: AddressSanitizer did not stop an out-of-bounds read" >&2
  exit 2
fi

bins=""
for t in $TESTS; do
  bin=$(cargo test -p finch-tensor --test "$t" --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
  if [ -z "$bin" ]; then
    echo "sanitize.sh: no test binary \`$t\` in finch-tensor" >&2
    exit 2
  fi
  bins="$bins $t=$bin"
done

status=0
for tb in $bins; do
  t=${tb%%=*}
  bin=${tb#*=}
  echo "== $t (kernels under -fsanitize=address,undefined)"
  start=$(date +%s)
  if ! LD_PRELOAD="$ASAN $UBSAN" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    FINCH_CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
    FINCH_CACHE_DIR="$CACHE/kernels" \
    "$bin" -q; then
    echo "sanitize.sh: $t failed or a sanitizer reported (above)" >&2
    status=1
  fi
  echo "   $t: $(($(date +%s) - start)) s"
done
exit $status
