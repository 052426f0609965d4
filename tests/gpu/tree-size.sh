#!/usr/bin/env bash
# The bytes that travel to a lent GPU machine with the working tree, against
# its limit of 64 MiB: the tracked files, the untracked files git does not
# ignore, .gpu-deps/ when it is there (tests/gpu/pack-deps.sh; carried by
# name) and any other ignored PATH to be carried. Exit status 1 when over.
#   tests/gpu/tree-size.sh [PATH ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
LIMIT=$((64 * 1024 * 1024))

# The total size of the NUL-separated files on stdin (what is missing: 0).
sum_sizes() { xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
# The total size of the files under each PATH given.
sum_paths() { find -L "$@" -type f -print0 2>/dev/null | sum_sizes; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
row() { printf '%-28s %10s  (%d bytes)\n' "$1" "$(mib "$2")" "$2"; }

carried=("$@")
[[ -d .gpu-deps ]] && carried=(.gpu-deps "${carried[@]}")
tracked=$(git ls-files -z | sum_sizes)
untracked=$(git ls-files -z --others --exclude-standard | sum_sizes)
extra=0
[[ ${#carried[@]} -gt 0 ]] && extra=$(sum_paths "${carried[@]}")
total=$((tracked + untracked + extra))

row "tracked files" "$tracked"
row "untracked, not ignored" "$untracked"
row "carried: ${carried[*]:-none}" "$extra"
row "total" "$total"
[[ -d .gpu-deps ]] || echo "(no .gpu-deps: tests/gpu/pack-deps.sh makes it)"
if (( total > LIMIT )); then
  echo "tree-size: OVER the 64 MiB limit by $(mib $((total - LIMIT)))" >&2
  exit 1
fi
echo "tree-size: within the 64 MiB limit, $(mib $((LIMIT - total))) to spare"
