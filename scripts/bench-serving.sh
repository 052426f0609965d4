#!/usr/bin/env bash
# The standard serving benchmark: makes a 110M-parameter llama model (dim 768,
# 12 layers, 12 heads, ffn 2048, 32000-token Llama-2 vocabulary, f16, tied
# head), starts tessera-server on it and runs tessera-bench at several
# concurrencies, printing one table per run, then the machine's memory read
# bandwidth measured right after (decode speed follows it).
#   scripts/bench-serving.sh [concurrency ...]     (default: 1 4 16 32)
# Environment: TESSERA_BENCH_REQUESTS_PER_STREAM (2), TESSERA_BENCH_INPUT_LEN
# (128), TESSERA_BENCH_MAX_TOKENS (128), TESSERA_THREADS (all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
CONCURRENCIES=("$@")
[ ${#CONCURRENCIES[@]} -gt 0 ] || CONCURRENCIES=(1 4 16 32)
PER_STREAM=${TESSERA_BENCH_REQUESTS_PER_STREAM:-2}
INPUT_LEN=${TESSERA_BENCH_INPUT_LEN:-128}
MAX_TOKENS=${TESSERA_BENCH_MAX_TOKENS:-128}

WORK=$(mktemp -d)
MODEL=$WORK/llama-110m-f16.gguf
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BUILD_DIR/tools/tessera-make-model" --arch llama --dim 768 --layers 12 --heads 12 --ffn 2048 \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --dtype f16 --tied --out "$MODEL"
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BUILD_DIR/server/tessera-server" --model "$MODEL" --port "$PORT" --metrics-port 0 --http-port 0 \
  --threads "${TESSERA_THREADS:-0}" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
"$BUILD_DIR/client/tessera-cli" --server "127.0.0.1:$PORT" info --wait 60 > /dev/null

for c in "${CONCURRENCIES[@]}"; do
  echo
  echo "== concurrency $c: $((c * PER_STREAM)) requests, $INPUT_LEN prompt tokens, $MAX_TOKENS output tokens"
  "$BUILD_DIR/client/bench/tessera-bench" --server "127.0.0.1:$PORT" --concurrency "$c" \
    --num-requests $((c * PER_STREAM)) --input-len "$INPUT_LEN" --max-tokens "$MAX_TOKENS" \
    --ignore-eos --warmup 2
done

# Decode reads every weight once per step, so tokens/s follow the memory
# bandwidth, which moves with the machine's other load: print it next to the
# tables.
if [ -x "$BUILD_DIR/bench/tessera-microbench" ]; then
  echo
  echo "== memory read bandwidth now (BM_MemoryRead/256, median of 3)"
  "$BUILD_DIR/bench/tessera-microbench" --benchmark_filter='BM_MemoryRead/256/' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
    awk '$1 ~ /_median$/ { for (i = 1; i <= NF; ++i) if ($i ~ /bytes_per_second=/) print $1, $i }'
fi
