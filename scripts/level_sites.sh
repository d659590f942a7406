#!/bin/sh
# Lines of library code outside the level modules (formats/<level>.rs) and the registry
# (formats/format.rs, level.rs, output.rs, and the lowering's enum of level parameters,
# lower/convert/level_params.rs) that name a particular level: a LevelKind
# variant (by default), or with `all` also the lowering's LevelParams variants and
# LevelStorage variants. Issue #28 asks for none; this counts what is left.
#   scripts/level_sites.sh        the lines
#   scripts/level_sites.sh all    ... including LevelParams and LevelStorage variants
set -eu
cd "$(dirname "$0")/.."
levels='Dense|SparseList|SparseCoo|SparsePoint|SparseInterval|SparseBand|SparseBlockList|RunList|SparseRunList|SparseByteMap|SparseHash'
pattern="LevelKind::($levels)"
if [ "${1:-}" = all ]; then
  pattern="$pattern|LevelParams::[A-Z][A-Za-z]*(Out|List|Coo)\\b|LevelStorage::[A-Z]"
fi
grep -rnE "$pattern" crates/finch-tensor/src |
  grep -vE '^crates/finch-tensor/src/formats/(dense|element|pattern|run_list|sparse_[a-z_]*|format|level|output)\.rs:' |
  grep -v '^crates/finch-tensor/src/lower/convert/level_params\.rs:' |
  grep -v '^[^:]*:[0-9]*: *//' || true
