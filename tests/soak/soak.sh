#!/usr/bin/env bash
# Soak test: tessera-server with API keys under a mixed load from the
# project's own clients for TESSERA_SOAK_SECONDS (default 60): 48 streaming
# clients (tessera-bench over gRPC Generate and over the HTTP chat front),
# tessera-cli calls cancelled with SIGINT, killed with SIGKILL, run with short
# deadlines, sent with invalid fields and sent without a valid key. soak.py
# drives the load, counts every request it started and checks the server
# afterwards (gauges, counters, RSS, greedy output, health).
#
# Usage: bash soak.sh <tessera-server> <tessera-cli> <tessera-make-model>
# Needs TESSERA_SOURCE_DIR and /usr/bin/python3 with python3-grpcio.
# tessera-bench is expected at $(dirname tessera-cli)/bench/tessera-bench.
# env: TESSERA_SOAK_SECONDS  length of the measured phase (default 60)
#      TESSERA_SOAK_WARMUP   streams of the warm-up phase's gRPC bench (default 128;
#                            the HTTP chat bench makes half as many)
#      TESSERA_SOAK_ARTIFACTS a folder to copy the server log into at the end
set -euo pipefail

SERVER=$(realpath "$1")
CLI=$(realpath "$2")
MAKE_MODEL=$(realpath "$3")
BENCH=$(dirname "$CLI")/bench/tessera-bench
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must point at the source tree}
PY=/usr/bin/python3
source "$SRC/tests/e2e/lib/common.sh"

WORK=$(mktemp -d)
SERVER_PID=""
soak_cleanup() {
  if [[ -n "${TESSERA_SOAK_ARTIFACTS:-}" && -f "$WORK/server.log" ]]; then
    mkdir -p "$TESSERA_SOAK_ARTIFACTS" && cp "$WORK/server.log" "$TESSERA_SOAK_ARTIFACTS/"
  fi
  e2e_cleanup
}
trap soak_cleanup EXIT

[[ -x "$BENCH" ]] || e2e_fail "no tessera-bench at $BENCH"
"$PY" -c 'import grpc' 2>/dev/null || e2e_fail "/usr/bin/python3 lacks grpc (python3-grpcio)"

# The dims of the other e2e models, with a real (llama SPM) vocabulary, so
# that generated ids print as text, and a context long enough for the long
# streams that get cancelled or run out of time.
"$MAKE_MODEL" --dim 64 --layers 2 --heads 4 --ffn 128 --dtype f16 --output-std 0.3 --seed 7 \
  --context 4096 --vocab-from "$SRC/tests/data/vocab/ggml-vocab-llama-spm.gguf" \
  --out "$WORK/model.gguf" >/dev/null || e2e_fail "tessera-make-model failed"

KEY=soak-tenant-key-0123456789abcdef
printf '# soak tenant\nsoak:%s\n' "$KEY" >"$WORK/keys.txt"

# One compute thread: its spinning workers would otherwise starve gRPC's own
# threads and the clients on a small, loaded machine.
read -r PORT HTTP_PORT < <(e2e_free_ports)
read -r METRICS_PORT _ < <(e2e_free_ports)
"$SERVER" --model "$WORK/model.gguf" --host 127.0.0.1 --port "$PORT" --http-port "$HTTP_PORT" \
  --metrics-port "$METRICS_PORT" --device cpu --threads 1 --kv-cache-memory 4M \
  --chat-template "$SRC/tests/data/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
  --api-key-file "$WORK/keys.txt" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
"$CLI" --server "127.0.0.1:$PORT" --api-key "$KEY" info --wait 60 >/dev/null 2>"$WORK/info.err" ||
  e2e_fail "the server did not become SERVING: $(cat "$WORK/info.err")"

"$PY" "$SRC/tests/soak/soak.py" --cli "$CLI" --bench "$BENCH" --server-pid "$SERVER_PID" \
  --grpc "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP_PORT" --metrics "127.0.0.1:$METRICS_PORT" \
  --key "$KEY" --seconds "${TESSERA_SOAK_SECONDS:-60}" --warmup-requests "${TESSERA_SOAK_WARMUP:-128}" ||
  e2e_fail "the soak checks failed (see above)"

kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || e2e_fail "the server exited non-zero after SIGTERM"
SERVER_PID=""
echo "PASS"
