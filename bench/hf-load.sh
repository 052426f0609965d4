#!/usr/bin/env bash
# Load-to-first-token of a ~1 GB bf16 Hugging Face folder against reading its
# files once from the page cache, with the same model as a GGUF file for
# comparison. Each of RUNS rounds (default 5) times `cat` of the folder and
# one tessera-load-bench of each format, back to back; the summary is the
# medians and the folder's ratio to cat (the goal: at most 2).
# Usage: bench/hf-load.sh [BUILD_DIR] [WORK_DIR] [THREADS] [CPU_MATMUL]
# The models are written to WORK_DIR (default /tmp/tessera-hf-bench) once.
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-/tmp/tessera-hf-bench}
THREADS=${3:-0}
MATMUL=${4:-auto}
RUNS=${RUNS:-5}
SHAPE=(--dim 2048 --layers 8 --heads 16 --kv-heads 4 --ffn 5632 --vocab-size 32000 --dtype bf16)
mkdir -p "$WORK"
[ -d "$WORK/hf" ] || "$BUILD/tools/tessera-make-model" "${SHAPE[@]}" --format hf --out "$WORK/hf"
[ -f "$WORK/model.gguf" ] || "$BUILD/tools/tessera-make-model" "${SHAPE[@]}" --out "$WORK/model.gguf"
cat "$WORK"/hf/* "$WORK/model.gguf" > /dev/null  # warm the page cache
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
first_token() { "$BUILD/tools/tessera-load-bench" "$1" "$THREADS" "$MATMUL" 2> /dev/null | sed -n 's/.*first_token=//p'; }
echo "folder size: $(du -sb "$WORK/hf" | cut -f1) bytes"
results=()
for run in $(seq "$RUNS"); do
  c=$(seconds cat "$WORK"/hf/*)
  h=$(first_token "$WORK/hf")
  g=$(first_token "$WORK/model.gguf")
  echo "run $run: cat folder $c s, folder to first token $h s, gguf to first token $g s"
  results+=("$c $h $g")
done
printf '%s\n' "${results[@]}" | /usr/bin/python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
c, h, g = (statistics.median(r[i] for r in rows) for i in range(3))
ratios = statistics.median(r[1] / r[0] for r in rows)
print(f"medians: cat {c:.3f} s, folder {h:.3f} s, gguf {g:.3f} s; "
      f"folder / cat (median of each run'"'"'s ratio) {ratios:.2f} (goal <= 2)")'
