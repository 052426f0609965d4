#!/usr/bin/env bash
# End-to-end checks of API keys on the tessera-server binary: a bad key file
# refuses to start; with a key file, gRPC (tessera-cli, tessera-bench and a
# Python client) and HTTP (curl) need a key, health stays open; SIGHUP after
# editing the file swaps the keys (the old one fails, the new one works), a
# bad file on SIGHUP keeps the keys in force; no key reaches the log.
#
# Usage: bash auth_keys.sh <tessera-server> <tessera-cli> <tessera-make-model>
# Needs TESSERA_SOURCE_DIR, /usr/bin/python3 with python3-grpcio, and curl.
# tessera-bench is expected at $(dirname tessera-cli)/bench/tessera-bench.
set -euo pipefail

SERVER=$(realpath "$1")
CLI=$(realpath "$2")
BENCH=$(dirname "$CLI")/bench/tessera-bench
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must point at the source tree}
MODEL="$SRC/models/stories260K.gguf"
PY=/usr/bin/python3
source "$SRC/tests/e2e/lib/common.sh"

WORK=$(mktemp -d)
SERVER_PID=""
trap e2e_cleanup EXIT

ALICE=alice-key-0123456789abcdef
BOB=bob-secret-key-0123456789
CAROL=carol-new-key-0123456789
KEYS="$WORK/keys.txt"

# --- A bad key file: exit 1, the message names file and line, not the key. ---
printf 'alice:%s\nbob:short-key\n' "$ALICE" >"$KEYS"
rc=0
timeout 30 "$SERVER" --model "$MODEL" --port 0 --metrics-port 0 --http-port 0 \
  --api-key-file "$KEYS" >"$WORK/bad.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || e2e_fail "a bad key file exited $rc, want 1"
grep -q "keys.txt:2: a key must have" "$WORK/bad.out" || e2e_fail "no file:line message: $(cat "$WORK/bad.out")"
grep -qF "$ALICE" "$WORK/bad.out" && e2e_fail "the start-up error printed a key"
rc=0
timeout 30 "$SERVER" --model "$MODEL" --port 0 --metrics-port 0 --http-port 0 \
  --api-key-file "$WORK/missing.txt" >"$WORK/missing.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || e2e_fail "a missing key file exited $rc, want 1"
echo "ok: bad and missing key files refuse to start"

# --- Start with alice's and bob's keys. ---
printf '# tenants\nalice:%s\n\n%s\n' "$ALICE" "$BOB" >"$KEYS"
read -r PORT HTTP_PORT < <(e2e_free_ports)
read -r METRICS_PORT _ < <(e2e_free_ports)
"$SERVER" --model "$MODEL" --host 127.0.0.1 --port "$PORT" --http-port "$HTTP_PORT" \
  --metrics-port "$METRICS_PORT" --device cpu --threads 1 --kv-cache-memory 32M \
  --api-key-file "$KEYS" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
ADDR="127.0.0.1:$PORT"
HTTP="http://127.0.0.1:$HTTP_PORT"
"$CLI" --server "$ADDR" --api-key "$ALICE" info --wait 30 >/dev/null 2>"$WORK/info.err" ||
  e2e_fail "the server did not become SERVING: $(cat "$WORK/info.err")"

# --- gRPC with tessera-cli: no key fails, --api-key and TESSERA_API_KEY work. ---
rc=0
"$CLI" --server "$ADDR" info >"$WORK/nokey.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || e2e_fail "tessera-cli info without a key succeeded"
grep -q UNAUTHENTICATED "$WORK/nokey.out" || e2e_fail "no UNAUTHENTICATED: $(cat "$WORK/nokey.out")"
text=$("$CLI" --server "$ADDR" --api-key "$ALICE" generate "Once upon a time" --max-tokens 8 --temperature 0) ||
  e2e_fail "generate with alice's key failed"
[[ -n "$text" ]] || e2e_fail "generate with alice's key printed nothing"
TESSERA_API_KEY=$BOB "$CLI" --server "$ADDR" tokenize "Once" >/dev/null ||
  e2e_fail "TESSERA_API_KEY did not reach the server"
echo "ok: tessera-cli needs a key and sends --api-key / TESSERA_API_KEY"

# --- gRPC with Python: health open, Generate and reflection keyed. ---
cat >"$WORK/client.py" <<'PYEOF'
import sys
import grpc

def code(channel, method, metadata, stream=False):
    try:
        if stream:
            call = channel.unary_stream(method)
            list(call(b"", metadata=metadata, timeout=10))
        else:
            channel.unary_unary(method)(b"", metadata=metadata, timeout=10)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name

target, key = sys.argv[1], sys.argv[2]
with grpc.insecure_channel(target) as channel:
    bearer = [("authorization", "Bearer " + key)]
    checks = [
        (code(channel, "/grpc.health.v1.Health/Check", None), "OK"),
        (code(channel, "/tessera.v1.Inference/Generate", None, True), "UNAUTHENTICATED"),
        (code(channel, "/tessera.v1.Inference/Generate", [("x-api-key", key + "x")], True),
         "UNAUTHENTICATED"),
        (code(channel, "/tessera.v1.Inference/GetModelInfo", [("x-api-key", key)]), "OK"),
        (code(channel, "/tessera.v1.Inference/GetModelInfo", bearer), "OK"),
        (code(channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", None, True),
         "UNAUTHENTICATED"),
    ]
bad = [(i, got, want) for i, (got, want) in enumerate(checks) if got != want]
for i, got, want in bad:
    print("check %d: got %s, want %s" % (i, got, want), file=sys.stderr)
sys.exit(1 if bad else 0)
PYEOF
"$PY" "$WORK/client.py" "$ADDR" "$ALICE" || e2e_fail "Python gRPC checks failed"
echo "ok: Python gRPC: health open, Generate and reflection need a key"

# --- HTTP with curl. ---
status() { curl -s -o "$WORK/body" -D "$WORK/head" -w '%{http_code}' "$@"; }
[[ $(status "$HTTP/v1/models") == 401 ]] || e2e_fail "GET /v1/models without a key: not 401"
grep -qi '^WWW-Authenticate: Bearer' "$WORK/head" || e2e_fail "no WWW-Authenticate: Bearer"
grep -q '"code":"invalid_api_key"' "$WORK/body" || e2e_fail "401 body: $(cat "$WORK/body")"
[[ $(status -H "Authorization: Bearer $ALICE" "$HTTP/v1/models") == 200 ]] ||
  e2e_fail "GET /v1/models with alice's key: not 200"
[[ $(status -H "Authorization: Bearer $BOB" -H 'Content-Type: application/json' \
  -d '{"model":"llama","prompt":"Once","max_tokens":4}' "$HTTP/v1/completions") == 200 ]] ||
  e2e_fail "POST /v1/completions with bob's key: $(cat "$WORK/body")"
[[ $(status "$HTTP/health") == 200 ]] || e2e_fail "GET /health without a key: not 200"
echo "ok: HTTP 401 without a key, 200 with one, /health open"

# --- tessera-bench against the keyed server, both backends. ---
if [[ -x "$BENCH" ]]; then
  "$BENCH" --server "$ADDR" --api-key "$ALICE" --num-requests 2 --concurrency 1 --max-tokens 4 \
    --input-len 8 --warmup 0 >/dev/null 2>"$WORK/bench.err" || e2e_fail "bench (grpc): $(cat "$WORK/bench.err")"
  TESSERA_API_KEY=$ALICE "$BENCH" --backend openai-completions --base-url "$HTTP" --num-requests 2 \
    --concurrency 1 --max-tokens 4 --input-len 8 --warmup 0 >/dev/null 2>"$WORK/bench.err" ||
    e2e_fail "bench (openai): $(cat "$WORK/bench.err")"
  echo "ok: tessera-bench sends the key on both backends"
fi

# --- SIGHUP after editing the file: carol in, alice out. ---
printf 'carol:%s\n%s\n' "$CAROL" "$BOB" >"$KEYS.new" && mv "$KEYS.new" "$KEYS"
kill -HUP "$SERVER_PID"
for _ in $(seq 50); do
  grep -q "SIGHUP: reloaded 2 API key" "$WORK/server.log" && break
  sleep 0.1
done
grep -q "SIGHUP: reloaded 2 API key" "$WORK/server.log" || e2e_fail "no reload logged"
"$CLI" --server "$ADDR" --api-key "$CAROL" info >/dev/null 2>&1 || e2e_fail "carol's new key fails over gRPC"
"$CLI" --server "$ADDR" --api-key "$ALICE" info >/dev/null 2>&1 && e2e_fail "alice's old key still works over gRPC"
[[ $(status -H "Authorization: Bearer $CAROL" "$HTTP/v1/models") == 200 ]] || e2e_fail "carol's key: HTTP not 200"
[[ $(status -H "Authorization: Bearer $ALICE" "$HTTP/v1/models") == 401 ]] || e2e_fail "alice's key: HTTP not 401"
echo "ok: SIGHUP swapped the keys on both fronts"

# --- SIGHUP with a bad file: the server stays up with carol's key. ---
printf 'carol:%s\nbroken key line\n' "$CAROL" >"$KEYS"
kill -HUP "$SERVER_PID"
for _ in $(seq 50); do
  grep -q "SIGHUP: keeping the 2 API key" "$WORK/server.log" && break
  sleep 0.1
done
grep -q "SIGHUP: keeping the 2 API key" "$WORK/server.log" || e2e_fail "no reload error logged"
kill -0 "$SERVER_PID" || e2e_fail "the server exited on a bad reload"
"$CLI" --server "$ADDR" --api-key "$BOB" info >/dev/null 2>&1 || e2e_fail "bob's key stopped working"
echo "ok: a bad file on SIGHUP keeps the keys in force"

# --- Refusals are counted on /metrics; no key reaches the log. ---
curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics"
grep -q '^tessera_auth_failures_total{front="grpc",reason="missing_key"} [1-9]' "$WORK/metrics" ||
  e2e_fail "no gRPC missing_key count: $(grep auth_failures "$WORK/metrics")"
grep -q '^tessera_auth_failures_total{front="http",reason="invalid_key"} [1-9]' "$WORK/metrics" ||
  e2e_fail "no HTTP invalid_key count: $(grep auth_failures "$WORK/metrics")"
for key in "$ALICE" "$BOB" "$CAROL"; do
  grep -qF "$key" "$WORK/server.log" && e2e_fail "a key reached the server log"
done
grep -q "refused (invalid_key, fingerprint [0-9a-f]\{8\})" "$WORK/server.log" ||
  e2e_fail "refusals are not logged with a fingerprint"
echo "ok: refusals counted and logged without keys"

kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || e2e_fail "the server exited non-zero after SIGTERM"
SERVER_PID=""
echo "PASS"
