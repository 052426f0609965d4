#!/usr/bin/env bash
# What the HTTP front costs against gRPC: one tessera-server on the 110M llama
# model of bench-serving.sh, serving both fronts, and the same tessera-bench
# load sent alternately over gRPC (streamed Generate) and over HTTP (streamed
# /v1/completions, prompts as token ids), REPS times each. Prints one line
# per run and the medians: output tokens/s and TTFT p50 per front, their
# ratio and difference. The targets: HTTP at most 5% below gRPC in tokens/s
# at 16 streams, and at most 1 ms more TTFT p50.
# TTFT p50 at 16 streams moves by whole engine steps with the order in which
# requests happen to arrive, so the script also reports what each front adds
# on its own: the client's mean TTFT minus the server's mean TTFT over the
# same requests (tessera_time_to_first_token_seconds, from arrival in the
# engine to the first token), i.e. the time spent in the client, the network
# and the front, before and after the engine.
#   scripts/bench-http.sh [concurrency ...]                  (default: 1 16)
# Environment: REPS (5), TESSERA_BENCH_REQUESTS_PER_STREAM (2), INPUT_LEN
# (128), MAX_TOKENS (128), TESSERA_THREADS (all cores), TESSERA_BUILD_DIR
# (build), TESSERA_BENCH_MODEL_FLAGS (tessera-make-model shape flags).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
REPS=${REPS:-5}
PER_STREAM=${TESSERA_BENCH_REQUESTS_PER_STREAM:-2}
INPUT_LEN=${INPUT_LEN:-128}
MAX_TOKENS=${MAX_TOKENS:-128}
CONCURRENCIES=("$@")
[ ${#CONCURRENCIES[@]} -gt 0 ] || CONCURRENCIES=(1 16)
read -r -a SHAPE <<< "${TESSERA_BENCH_MODEL_FLAGS:---dim 768 --layers 12 --heads 12 --ffn 2048}"
for bin in tools/tessera-make-model server/tessera-server client/tessera-cli client/bench/tessera-bench; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "bench-http: build $BUILD_DIR/$bin first (scripts/build.sh)" >&2; exit 1; }
done

# shellcheck source=lib/bench_common.sh
source scripts/lib/bench_common.sh

"$BUILD_DIR/tools/tessera-make-model" --arch llama "${SHAPE[@]}" \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --dtype f16 --tied \
  --out "$WORK/model.gguf" > /dev/null
GRPC_PORT=$(free_port)
HTTP_PORT=$(free_port)
METRICS_PORT=$(free_port)
"$BUILD_DIR/server/tessera-server" --model "$WORK/model.gguf" --port "$GRPC_PORT" \
  --http-port "$HTTP_PORT" --metrics-port "$METRICS_PORT" --no-prefix-caching --threads "${TESSERA_THREADS:-0}" > "$WORK/server.log" 2>&1 &
PID=$!
"$BUILD_DIR/client/tessera-cli" --server "127.0.0.1:$GRPC_PORT" info --wait 120 > /dev/null

# The server's TTFT sum and count, as "sum count".
server_ttft() {
  curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" | awk '
    /^tessera_time_to_first_token_seconds_sum/ { s = $2 }
    /^tessera_time_to_first_token_seconds_count/ { c = $2 }
    END { print s, c }'
}

run_bench() {  # front rep concurrency [warmup]
  local target before after
  if [ "$1" = grpc ]; then
    target=(--server "127.0.0.1:$GRPC_PORT")
  else
    target=(--backend openai-completions --base-url "http://127.0.0.1:$HTTP_PORT")
  fi
  before=$(server_ttft)
  "$BUILD_DIR/client/bench/tessera-bench" "${target[@]}" --concurrency "$3" \
    --num-requests $(($3 * PER_STREAM)) --input-len "$INPUT_LEN" --max-tokens "$MAX_TOKENS" \
    --ignore-eos --warmup 0 --seed "$2" --json > "$WORK/run.json"
  after=$(server_ttft)
  [ "${4:-}" = warmup ] && return 0
  /usr/bin/python3 - "$1" "$2" "$3" "$before" "$after" "$WORK/run.json" <<'PY' | tee -a "$WORK/results.jsonl"
import json, sys
d = json.load(open(sys.argv[6]))
(s0, c0), (s1, c1) = ([float(x) for x in a.split()] for a in sys.argv[4:6])
server_mean = (s1 - s0) / (c1 - c0)
print(json.dumps({"front": sys.argv[1], "rep": int(sys.argv[2]), "concurrency": int(sys.argv[3]),
                  "tok_s": d["output_tokens_per_second"],
                  "ttft_p50_ms": 1000 * d["ttft_seconds"]["p50"],
                  "front_ttft_ms": 1000 * (d["ttft_seconds"]["mean"] - server_mean),
                  "failed": d["failed"]}))
PY
}

# Warm-up: one run per front, not reported.
for f in grpc http; do run_bench "$f" 0 "${CONCURRENCIES[0]}" warmup; done

# Alternating fronts within each repetition, with the same seed (the same
# prompts) for both, so that drifts of the machine hit both alike. The prefix
# cache is off, or the second front would find the first one's prompts cached.
for rep in $(seq "$REPS"); do
  for c in "${CONCURRENCIES[@]}"; do
    if [ $((rep % 2)) = 1 ]; then fronts=(grpc http); else fronts=(http grpc); fi
    for f in "${fronts[@]}"; do run_bench "$f" "$rep" "$c"; done
  done
done

/usr/bin/python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
failed = sum(r["failed"] for r in rows)
med = lambda f, c, k: statistics.median(r[k] for r in rows if r["front"] == f and r["concurrency"] == c)
print()
print(f"{'conc':>4} | {'gRPC tok/s':>10} {'HTTP tok/s':>10} {'HTTP/gRPC':>9} | {'gRPC TTFT':>9} {'HTTP TTFT':>9} {'diff':>9}"
      f" | {'front+client TTFT: gRPC':>23} {'HTTP':>6} {'diff':>7}")
for c in sorted({r["concurrency"] for r in rows}):
    g, h = med("grpc", c, "tok_s"), med("http", c, "tok_s")
    tg, th = med("grpc", c, "ttft_p50_ms"), med("http", c, "ttft_p50_ms")
    fg, fh = med("grpc", c, "front_ttft_ms"), med("http", c, "front_ttft_ms")
    print(f"{c:>4} | {g:10.1f} {h:10.1f} {h / g:9.3f} | {tg:7.1f}ms {th:7.1f}ms {th - tg:+7.1f}ms"
          f" | {fg:21.2f}ms {fh:4.2f}ms {fh - fg:+5.2f}ms")
reps = len([r for r in rows if r["front"] == "grpc" and r["concurrency"] == rows[0]["concurrency"]])
print(f"medians of {reps} runs per front; failed requests: {failed}")
PY
