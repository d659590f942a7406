#!/bin/sh
# Lines of library code outside the level modules (formats/<level>.rs) and the registry
# (formats/format.rs, level.rs, output.rs, and the lowering's enum of level parameters,
# lower/convert/level_params.rs) that name a particular level: a LevelKind
# variant (by default), or with `all` also the lowering's LevelParams variants and
# LevelStorage variants. Issue #28 asks for none; this counts what is left.
#   scripts/level_sites.sh            the lines
#   scripts/level_sites.sh all        ... including LevelParams and LevelStorage variants
#   scripts/level_sites.sh wildcards  matches over levels with a `_ =>` arm (anywhere)
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = wildcards ]; then
  exec python3 - <<'EOF'
import glob, re
for path in sorted(glob.glob('crates/finch-tensor/src/**/*.rs', recursive=True)):
    src = open(path).read()
    for m in re.finditer(r'\bmatch\b[^{;]*\{', src):
        depth, i = 0, m.end() - 1
        while i < len(src):
            depth += {'{': 1, '}': -1}.get(src[i], 0)
            if depth == 0:
                break
            i += 1
        top, d = [], 0
        for ch in src[m.end():i]:
            d += {'{': 1, '}': -1}.get(ch, 0)
            if d == 0 and ch not in '{}':
                top.append(ch)
        top = ''.join(top)
        if re.search(r'Level(Kind|Params|Storage)::', top) and re.search(r'(^|\n|,)\s*_\s*=>', top):
            print(f"{path}:{src[:m.start()].count(chr(10)) + 1}")
EOF
fi
levels='Dense|SparseList|SparseCoo|SparsePoint|SparseInterval|SparseBand|SparseBlockList|RunList|SparseRunList|SparseByteMap|SparseHash'
pattern="LevelKind::($levels)"
if [ "${1:-}" = all ]; then
  pattern="$pattern|LevelParams::[A-Z][A-Za-z]*(Out|List|Coo)\\b|LevelStorage::[A-Z]"
fi
grep -rnE "$pattern" crates/finch-tensor/src |
  grep -vE '^crates/finch-tensor/src/formats/(dense|element|pattern|run_list|sparse_[a-z_]*|format|level|output)\.rs:' |
  grep -v '^crates/finch-tensor/src/lower/convert/level_params\.rs:' |
  grep -v '^[^:]*:[0-9]*: *//' || true
