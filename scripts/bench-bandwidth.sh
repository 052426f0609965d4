#!/usr/bin/env bash
# Batch-1 decode against the machine's memory bandwidth: makes a 1.1B model
# shaped like TinyLlama (dim 2048, 22 layers, 32 heads, 4 KV heads, ffn
# 5632, untied output head) in f16, quantizes it with llama.cpp's
# llama-quantize (Q4_K_M by default), serves it with tessera-server and
# decodes one stream with tessera-bench, REPS times. Prints the median
# tokens/s, the weight bytes a decode step reads (the file's tensors but the
# token embedding, of which one row is read), the read rate that implies,
# and its share of BM_MemoryRead/1024 (tessera-microbench, median of 3)
# measured in the same run. The goal for Q4_K_M: at least 80%.
#   scripts/bench-bandwidth.sh [type]
# Environment: LLAMA_CPP_DIR (../shared/tools/llama.cpp), REPS (3),
# MAX_TOKENS (64), INPUT_LEN (32), TESSERA_BUILD_DIR (build),
# TESSERA_BENCH_MODEL_FLAGS (tessera-make-model shape flags).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
LLAMA=${LLAMA_CPP_DIR:-../shared/tools/llama.cpp}
TYPE=${1:-Q4_K_M}
REPS=${REPS:-3}
MAX_TOKENS=${MAX_TOKENS:-64}
INPUT_LEN=${INPUT_LEN:-32}
read -r -a SHAPE <<< "${TESSERA_BENCH_MODEL_FLAGS:---dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632}"
[ -x "$LLAMA/bin/llama-quantize" ] || { echo "no llama.cpp at $LLAMA (set LLAMA_CPP_DIR)" >&2; exit 2; }
for bin in tools/tessera-make-model server/tessera-server client/tessera-cli client/bench/tessera-bench bench/tessera-microbench; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "bench-bandwidth: build $BUILD_DIR/$bin first" >&2; exit 1; }
done

# shellcheck source=lib/bench_common.sh
source scripts/lib/bench_common.sh
LLAMA=$(scripts/lib/llama-view.sh "$LLAMA" "$WORK/llama")  # AMX CPUs: see there

"$BUILD_DIR/tools/tessera-make-model" --arch llama "${SHAPE[@]}" \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --dtype f16 --out "$WORK/f16.gguf" > /dev/null
model="$WORK/f16.gguf"
if [ "$TYPE" != f16 ]; then
  LD_LIBRARY_PATH="$LLAMA/lib:${LD_LIBRARY_PATH:-}" "$LLAMA/bin/llama-quantize" "$WORK/f16.gguf" \
    "$WORK/$TYPE.gguf" "$TYPE" "$(nproc)" > /dev/null 2>&1
  rm "$WORK/f16.gguf"
  model="$WORK/$TYPE.gguf"
fi
BYTES=$(/usr/bin/python3 scripts/gguf_weight_bytes.py "$model")

port=$(free_port)
"$BUILD_DIR/server/tessera-server" --model "$model" --port "$port" --http-port 0 --metrics-port 0 \
  --no-prefix-caching --threads "$(nproc)" > "$WORK/server.log" 2>&1 &
PID=$!
"$BUILD_DIR/client/tessera-cli" --server "127.0.0.1:$port" info --wait 300 > /dev/null
for rep in $(seq "$REPS"); do
  "$BUILD_DIR/client/bench/tessera-bench" --server "127.0.0.1:$port" --concurrency 1 --num-requests 2 \
    --input-len "$INPUT_LEN" --max-tokens "$MAX_TOKENS" --ignore-eos --warmup 1 --seed "$rep" --json |
    /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["tpot_seconds"]["p50"])' \
    >> "$WORK/tpot.txt"
done
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""

READ=$("$BUILD_DIR/bench/tessera-microbench" --benchmark_filter='BM_MemoryRead/1024' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json |
  /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(next(b["bytes_per_second"] for b in d["benchmarks"] if b.get("aggregate_name") == "median"))')

/usr/bin/python3 - "$WORK/tpot.txt" "$BYTES" "$READ" "$TYPE" <<'PY'
import statistics, sys
tpots = [float(l) for l in open(sys.argv[1])]
weight_bytes, read_bps, kind = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
tpot = statistics.median(tpots)
rate = weight_bytes / tpot
print(f"{kind}: {1 / tpot:.2f} tokens/s (median of {len(tpots)} runs, time per output token "
      f"{1000 * tpot:.1f} ms); weights read per token {weight_bytes / 1e6:.0f} MB -> {rate / 1e9:.2f} GB/s; "
      f"BM_MemoryRead/1024 {read_bps / 1e9:.2f} GB/s; share {100 * rate / read_bps:.0f}% (goal 80%)")
PY
