#!/usr/bin/env bash
# Serves one model with the same tessera-server under two environments,
# alternately ROUNDS times (A, B, A, B, ...), so that both see the same
# spells of a noisy host, and runs bench-quant.sh's load against each
# (streamed /v1/completions, 128-token prompts as ids, 128 output tokens,
# two requests per stream). Prints each run, then the median output
# tokens/s and TTFT p50 of each side and B's ratio to A. For choices that
# an environment variable makes, e.g. the kernels of earlier defaults:
#   scripts/bench-serve-env-ab.sh MODEL.gguf 1 4 \
#     'TESSERA_CPU_GFNI=1 TESSERA_CPU_QUANT_PREFETCH=1' ''
#   scripts/bench-serve-env-ab.sh MODEL CONCURRENCY ROUNDS 'ENV_A' 'ENV_B'
# Words of a side that are not NAME=value assignments are passed to the
# server as flags, e.g. '--kv-cache-dtype f16' '--kv-cache-dtype int8'.
# Environment: TESSERA_BUILD_DIR (build).
set -euo pipefail
[ $# -eq 5 ] || { sed -n 2,14p "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
MODEL=$1 CONC=$2 ROUNDS=$3
ENVS=("$4" "$5")
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
# shellcheck source=lib/bench_common.sh
source scripts/lib/bench_common.sh

for round in $(seq "$ROUNDS"); do
  for side in 0 1; do
    port=$(free_port)
    assignments=() flags=()
    read -ra words <<< "${ENVS[$side]}"
    for word in ${words[@]+"${words[@]}"}; do
      if [[ $word =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then assignments+=("$word"); else flags+=("$word"); fi
    done
    env ${assignments[@]+"${assignments[@]}"} "$BUILD_DIR/server/tessera-server" \
      --model "$MODEL" --port "$(free_port)" --http-port "$port" --metrics-port 0 --threads 2 \
      ${flags[@]+"${flags[@]}"} \
      > "$WORK/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 600); do
      curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
      sleep 0.2
    done
    "$BUILD_DIR/client/bench/tessera-bench" --backend openai-completions \
      --base-url "http://127.0.0.1:$port" --concurrency "$CONC" \
      --num-requests $((CONC * 2)) --input-len 128 --max-tokens 128 --ignore-eos \
      --warmup 2 --json --seed $((round * 1000 + CONC)) |
      /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"side": "AB"[int(sys.argv[1])], "round": int(sys.argv[2]),
                  "tok_s": d["output_tokens_per_second"],
                  "ttft_p50_ms": 1000 * d["ttft_seconds"]["p50"], "failed": d["failed"]}))
' "$side" "$round" | tee -a "$WORK/runs.jsonl"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
  done
done

/usr/bin/python3 - "$WORK/runs.jsonl" "${ENVS[0]:-(none)}" "${ENVS[1]:-(none)}" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
med = {s: {k: statistics.median(r[k] for r in runs if r["side"] == s)
           for k in ("tok_s", "ttft_p50_ms")} for s in "AB"}
for side, env in (("A", sys.argv[2]), ("B", sys.argv[3])):
    m = med[side]
    print(f"{side} ({env}): {m['tok_s']:.1f} tok/s, TTFT p50 {m['ttft_p50_ms']:.0f} ms")
print(f"B/A tokens/s {med['B']['tok_s'] / med['A']['tok_s']:.2f}")
PY
