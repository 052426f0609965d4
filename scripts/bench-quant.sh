#!/usr/bin/env bash
# Quantized models side by side with llama.cpp: makes the 110M llama model of
# bench-serving.sh in f16, quantizes it with llama.cpp's llama-quantize, and
# for each type serves the same file with tessera-server and with llama.cpp's
# llama-server (flash attention on, 16 slots, 2 threads), back to back, and
# runs the same tessera-bench load against each over the OpenAI HTTP API
# (streamed /v1/completions, prompts as token ids, with a seed of their own
# per repetition and concurrency, so that no run finds its prompts in either
# server's prefix cache). Prints one line per run
# and a table of medians: output tokens/s and TTFT p50, and their ratios.
#   scripts/bench-quant.sh [concurrency ...]              (default: 1 4 16 32)
# Environment: LLAMA_CPP_DIR (../shared/tools/llama.cpp), TYPES ("f16 Q8_0
# Q4_K_M"), REPS (3), TESSERA_BENCH_REQUESTS_PER_STREAM (2), INPUT_LEN (128),
# MAX_TOKENS (128), KV_CACHE (f16: both servers' default; int8: Tessera's
# --kv-cache-dtype int8 against llama.cpp's -ctk q8_0 -ctv q8_0; int8-f16:
# Tessera's int8 cache against llama.cpp's default f16 one),
# TESSERA_BUILD_DIR (build), LLAMA_SKIP_VARIANTS (see
# scripts/lib/llama-view.sh: on CPUs with AMX, llama.cpp runs without its
# "sapphirerapids" variant, which stops with SIGILL on quantized models).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
LLAMA=${LLAMA_CPP_DIR:-../shared/tools/llama.cpp}
TYPES=${TYPES:-f16 Q8_0 Q4_K_M}
REPS=${REPS:-3}
PER_STREAM=${TESSERA_BENCH_REQUESTS_PER_STREAM:-2}
INPUT_LEN=${INPUT_LEN:-128}
MAX_TOKENS=${MAX_TOKENS:-128}
KV_CACHE=${KV_CACHE:-f16}
case $KV_CACHE in
  f16) TESSERA_KV=() LLAMA_KV=() ;;
  int8) TESSERA_KV=(--kv-cache-dtype int8) LLAMA_KV=(-ctk q8_0 -ctv q8_0) ;;
  int8-f16) TESSERA_KV=(--kv-cache-dtype int8) LLAMA_KV=() ;;
  *) echo "KV_CACHE is f16, int8 or int8-f16, not '$KV_CACHE'" >&2; exit 2 ;;
esac
CONCURRENCIES=("$@")
[ ${#CONCURRENCIES[@]} -gt 0 ] || CONCURRENCIES=(1 4 16 32)
[ -x "$LLAMA/bin/llama-server" ] || { echo "no llama.cpp at $LLAMA (set LLAMA_CPP_DIR)" >&2; exit 2; }

# shellcheck source=lib/bench_common.sh
source scripts/lib/bench_common.sh
LLAMA=$(scripts/lib/llama-view.sh "$LLAMA" "$WORK/llama")
wait_http() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$1/health" > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on port $1 did not come up" >&2; return 1
}

"$BUILD_DIR/tools/tessera-make-model" --arch llama --dim 768 --layers 12 --heads 12 --ffn 2048 \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --dtype f16 --tied \
  --out "$WORK/f16.gguf" > /dev/null
for t in $TYPES; do
  [ "$t" = f16 ] && continue
  "$LLAMA/bin/llama-quantize" "$WORK/f16.gguf" "$WORK/$t.gguf" "$t" 2 > /dev/null 2>&1
done

run_bench() {  # server type rep port concurrency
  "$BUILD_DIR/client/bench/tessera-bench" --backend openai-completions \
    --base-url "http://127.0.0.1:$4" --concurrency "$5" --num-requests $(($5 * PER_STREAM)) \
    --input-len "$INPUT_LEN" --max-tokens "$MAX_TOKENS" --ignore-eos --warmup 2 --json \
    --seed $(($3 * 1000 + $5)) |
    /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"server": sys.argv[1], "type": sys.argv[2], "rep": int(sys.argv[3]),
                  "concurrency": int(sys.argv[4]),
                  "tok_s": d["output_tokens_per_second"],
                  "ttft_p50_ms": 1000 * d["ttft_seconds"]["p50"], "failed": d["failed"]}))
' "$1" "$2" "$3" "$5" | tee -a "$WORK/results.jsonl"
}

for rep in $(seq "$REPS"); do
  for t in $TYPES; do
    model="$WORK/$t.gguf"
    port=$(free_port)
    "$BUILD_DIR/server/tessera-server" --model "$model" --port "$(free_port)" --http-port "$port" \
      --metrics-port 0 --threads 2 ${TESSERA_KV[@]+"${TESSERA_KV[@]}"} > "$WORK/tessera.log" 2>&1 &
    PID=$!
    wait_http "$port"
    for c in "${CONCURRENCIES[@]}"; do run_bench tessera "$t" "$rep" "$port" "$c"; done
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
    port=$(free_port)
    "$LLAMA/bin/llama-server" -m "$model" --port "$port" -fa on -np 16 -c $((16 * 2 * (INPUT_LEN + MAX_TOKENS))) \
      -t 2 ${LLAMA_KV[@]+"${LLAMA_KV[@]}"} > "$WORK/llama.log" 2>&1 &
    PID=$!
    wait_http "$port"
    for c in "${CONCURRENCIES[@]}"; do run_bench llama.cpp "$t" "$rep" "$port" "$c"; done
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
  done
done

/usr/bin/python3 - "$WORK/results.jsonl" "$KV_CACHE" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
kv = {"f16": "f16 both", "int8": "Tessera int8, llama.cpp q8_0",
      "int8-f16": "Tessera int8, llama.cpp f16"}[sys.argv[2]]
keys = sorted({(r["type"], r["concurrency"]) for r in rows}, key=lambda k: (k[0], k[1]))
med = lambda s, t, c, f: statistics.median(r[f] for r in rows if r["server"] == s and r["type"] == t and r["concurrency"] == c)
print()
print(f"KV cache: {kv}")
print(f"{'type':8} {'conc':>4} | {'tessera tok/s':>13} {'llama tok/s':>11} {'ratio':>6} | {'tessera TTFT':>12} {'llama TTFT':>10} {'ratio':>6}")
for t, c in keys:
    a, b = med("tessera", t, c, "tok_s"), med("llama.cpp", t, c, "tok_s")
    ta, tb = med("tessera", t, c, "ttft_p50_ms"), med("llama.cpp", t, c, "ttft_p50_ms")
    print(f"{t:8} {c:>4} | {a:13.1f} {b:11.1f} {a / b:6.2f} | {ta:10.0f}ms {tb:8.0f}ms {ta / tb:6.2f}")
PY
