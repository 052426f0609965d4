#!/usr/bin/env bash
# Load-to-first-token of a ~1 GB bf16 Hugging Face folder against reading its
# files once from the page cache, with the same model as a GGUF file for
# comparison. Usage: bench/hf-load.sh [BUILD_DIR] [WORK_DIR] [THREADS]
# The models are written to WORK_DIR (default /tmp/tessera-hf-bench) once.
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-/tmp/tessera-hf-bench}
THREADS=${3:-0}
SHAPE=(--dim 2048 --layers 8 --heads 16 --kv-heads 4 --ffn 5632 --vocab-size 32000 --dtype bf16)
mkdir -p "$WORK"
[ -d "$WORK/hf" ] || "$BUILD/tools/tessera-make-model" "${SHAPE[@]}" --format hf --out "$WORK/hf"
[ -f "$WORK/model.gguf" ] || "$BUILD/tools/tessera-make-model" "${SHAPE[@]}" --out "$WORK/model.gguf"
cat "$WORK"/hf/* "$WORK/model.gguf" > /dev/null  # warm the page cache
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
echo "folder size: $(du -sb "$WORK/hf" | cut -f1) bytes"
for run in 1 2 3; do
  echo "run $run: read folder once $(seconds cat "$WORK"/hf/*) s, gguf $(seconds cat "$WORK/model.gguf") s"
  "$BUILD/tools/tessera-load-bench" "$WORK/hf" "$THREADS"
  "$BUILD/tools/tessera-load-bench" "$WORK/model.gguf" "$THREADS"
done
