#!/usr/bin/env bash
# Disk size of the chunker's grammars: the per-language wheels pinned in pyproject.toml
# against tree-sitter-language-pack 0.13.0 (what gitrag used before), each installed with
# tree-sitter into its own fresh virtualenv, beside a venv with tree-sitter alone.
# Usage: bench/grammar_size.sh [WORKDIR]   (default: a new temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"

# tree-sitter and the grammar lines of pyproject.toml, as written there
mapfile -t wheels < <(python3 - <<'EOF'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if d.startswith("tree-sitter")))
EOF
)
runtime=${wheels[0]}

venv() {  # venv NAME PACKAGE...
    local dir="$work/$1"; shift
    python3 -m venv --without-pip "$dir"
    python3 -m pip --python "$dir/bin/python" install --quiet --no-cache-dir "$@"
}
venv base "$runtime"
venv wheels "${wheels[@]}"
venv pack "$runtime" "tree-sitter-language-pack==0.13.0"

site() { echo "$work/$1/lib/python3"*/site-packages; }
size() { du -sk "$@" | awk '{s += $1} END {print s}'; }
base=$(size "$(site base)")
printf '%-32s %10s %12s\n' venv "total KiB" "grammars KiB"
for v in base wheels pack; do
    total=$(size "$(site "$v")")
    printf '%-32s %10d %12d\n' "$v" "$total" "$((total - base))"
done
printf '\nper grammar wheel (du -sk of its package folder):\n'
(cd "$(site wheels)" && du -sk tree_sitter_*/ | grep -v dist-info | sort -rn)
printf '\ninstalled (wheels venv): '
"$work/wheels/bin/python" -c "import importlib.metadata as m; print(', '.join(sorted(f'{d.name} {d.version}' for d in m.distributions())))"
printf '\nlanguage pack: '
(cd "$(site pack)" && du -sk tree_sitter_language_pack/)
