#!/bin/sh
# Lines of library code (tests aside) outside the level modules (formats/<level>.rs),
# the registry (formats/registry.rs, with format.rs, level.rs and output.rs, which ask
# it) and the named formats (formats/named.rs: CSC, dense arrays) that name a particular
# inner level: a LevelKind variant (by default), or with `all` also a level's own
# LevelParams variant (the lowering's parameters of a level are `Structured`, `Read` or
# `Written`, from the level's module; `Dense`, positions `p * shape + i`, is the
# lowering's lookup) and LevelStorage variants. (The two leaves, Element and Pattern,
# end every fiber tree and are named freely.) Issue #28 asks for none; this counts what
# is left.
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
exec python3 - "${1:-}" <<'EOF'
import glob, re, sys
levels = ('Dense|SparseList|SparseCoo|SparsePoint|SparseInterval|SparseBand|SparseBlockList|'
          'RunList|SparseRunList|SparseByteMap|SparseHash')
pattern = rf'LevelKind::({levels})\b'
if sys.argv[1] == 'all':
    pattern += rf'|LevelParams::([A-Z][A-Za-z]*(Out|List|Coo)|Hash|Band|Point|Interval|ByteMap)\b|LevelStorage::({levels})\b'
# The level modules, the registry, and the named formats (CSC, dense arrays).
exempt = re.compile(r'crates/finch-tensor/src/(formats/(dense|element|pattern|run_list|sparse_[a-z_]*|'
                    r'format|level|output|named|registry))\.rs$')
for path in sorted(glob.glob('crates/finch-tensor/src/**/*.rs', recursive=True)):
    if exempt.search(path):
        continue
    for n, line in enumerate(open(path), 1):
        if line.strip() == '#[cfg(test)]':
            break  # a file's tests come last
        if re.search(pattern, line) and not line.lstrip().startswith('//'):
            print(f'{path}:{n}:{line.rstrip()}')
EOF
