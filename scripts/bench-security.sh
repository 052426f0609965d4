#!/usr/bin/env bash
# What TLS and API keys cost: the 110M llama model of bench-serving.sh served
# four ways (plain; --api-key-file; --tls-cert/--tls-key; both), one server at
# a time, and the same tessera-bench gRPC streaming load against each, the
# four configurations alternating REPS times so that drift in the machine
# falls on all of them. Prints one line per run and the medians of output
# tokens/s and TTFT p50, with each one's ratio to plain.
#   scripts/bench-security.sh [concurrency ...]              (default: 16)
# Environment: REPS (3), TESSERA_BENCH_REQUESTS_PER_STREAM (2), INPUT_LEN
# (128), MAX_TOKENS (128), TESSERA_THREADS (all cores), TESSERA_BUILD_DIR
# (build), TESSERA_BENCH_MODEL_FLAGS (tessera-make-model shape flags).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
REPS=${REPS:-3}
PER_STREAM=${TESSERA_BENCH_REQUESTS_PER_STREAM:-2}
INPUT_LEN=${INPUT_LEN:-128}
MAX_TOKENS=${MAX_TOKENS:-128}
CONCURRENCIES=("$@")
[ ${#CONCURRENCIES[@]} -gt 0 ] || CONCURRENCIES=(16)
read -r -a SHAPE <<< "${TESSERA_BENCH_MODEL_FLAGS:---dim 768 --layers 12 --heads 12 --ffn 2048}"
for bin in tools/tessera-make-model server/tessera-server client/tessera-cli client/bench/tessera-bench; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "bench-security: build $BUILD_DIR/$bin first (scripts/build.sh)" >&2; exit 1; }
done
command -v openssl > /dev/null || { echo "bench-security: needs openssl" >&2; exit 1; }

# shellcheck source=lib/bench_common.sh
source scripts/lib/bench_common.sh
# shellcheck source=../tests/e2e/lib/tls_certs.sh
source tests/e2e/lib/tls_certs.sh

"$BUILD_DIR/tools/tessera-make-model" --arch llama "${SHAPE[@]}" \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --dtype f16 --tied \
  --out "$WORK/model.gguf" > /dev/null
tls_make_ca "$WORK" ca
tls_make_cert "$WORK" ca server server
KEY="bench-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
printf 'bench:%s\n' "$KEY" > "$WORK/keys"

# Server and client flags of each configuration.
server_flags() {
  case $1 in
    plain) ;;
    auth) echo "--api-key-file $WORK/keys" ;;
    tls) echo "--tls-cert $WORK/server.crt --tls-key $WORK/server.key" ;;
    tls+auth) echo "--tls-cert $WORK/server.crt --tls-key $WORK/server.key --api-key-file $WORK/keys" ;;
  esac
}
client_flags() {
  case $1 in
    plain) ;;
    auth) echo "--api-key $KEY" ;;
    tls) echo "--tls-ca $WORK/ca.crt" ;;
    tls+auth) echo "--tls-ca $WORK/ca.crt --api-key $KEY" ;;
  esac
}

run_config() {  # config rep
  local port cflags
  port=$(free_port)
  # shellcheck disable=SC2046
  "$BUILD_DIR/server/tessera-server" --model "$WORK/model.gguf" --port "$port" --http-port 0 \
    --metrics-port 0 --no-prefix-caching --threads "${TESSERA_THREADS:-0}" $(server_flags "$1") \
    > "$WORK/server.log" 2>&1 &
  PID=$!
  read -r -a cflags <<< "$(client_flags "$1")"
  "$BUILD_DIR/client/tessera-cli" --server "localhost:$port" "${cflags[@]}" info --wait 120 > /dev/null
  for c in "${CONCURRENCIES[@]}"; do
    "$BUILD_DIR/client/bench/tessera-bench" --server "localhost:$port" "${cflags[@]}" \
      --concurrency "$c" --num-requests $((c * PER_STREAM)) --input-len "$INPUT_LEN" \
      --max-tokens "$MAX_TOKENS" --ignore-eos --warmup 2 --seed "$2" --json |
      /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"config": sys.argv[1], "rep": int(sys.argv[2]), "concurrency": int(sys.argv[3]),
                  "tok_s": d["output_tokens_per_second"],
                  "ttft_p50_ms": 1000 * d["ttft_seconds"]["p50"], "failed": d["failed"]}))
' "$1" "$2" "$c" | tee -a "$WORK/results.jsonl"
  done
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
}

for rep in $(seq "$REPS"); do
  for config in plain auth tls tls+auth; do run_config "$config" "$rep"; done
done

/usr/bin/python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if any(r["failed"] for r in rows):
    sys.exit("bench-security: some requests failed")
med = lambda cfg, c, f: statistics.median(r[f] for r in rows if r["config"] == cfg and r["concurrency"] == c)
print()
print(f"{'config':9} {'conc':>4} | {'tok/s':>7} {'vs plain':>8} | {'TTFT p50':>9} {'vs plain':>8}")
for c in sorted({r["concurrency"] for r in rows}):
    base_t, base_f = med("plain", c, "tok_s"), med("plain", c, "ttft_p50_ms")
    for cfg in ("plain", "auth", "tls", "tls+auth"):
        t, f = med(cfg, c, "tok_s"), med(cfg, c, "ttft_p50_ms")
        print(f"{cfg:9} {c:>4} | {t:7.1f} {t / base_t:8.3f} | {f:7.0f}ms {f / base_f:8.3f}")
PY
