#!/usr/bin/env bash
# TLS on the gRPC port (tessera-cli) and the HTTP front (curl), with test
# certificates made here by openssl: the right CA connects, a wrong CA, an
# expired certificate and plain text do not; mutual TLS refuses clients
# without a certificate of the client CA; replaced files are served to new
# connections within the refresh interval, and a broken replacement keeps
# the previous certificates. Bad TLS flags or files stop the server at
# startup with a clear message.
#
# Usage: bash tls.sh <tessera-server> <tessera-cli> <tessera-make-model>
set -euo pipefail

SERVER_BIN=$(realpath "$1")
CLI=$(realpath "$2")
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must point at the source tree}
MODEL="$SRC/models/stories260K.gguf"
PY=/usr/bin/python3
source "$SRC/tests/e2e/lib/common.sh"
source "$SRC/tests/e2e/lib/tls_certs.sh"
command -v openssl >/dev/null || { echo "SKIP: openssl is not installed"; exit 0; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 0; }

WORK=$(mktemp -d)
SERVER_PID=""
trap e2e_cleanup EXIT
fail() { e2e_fail "$@"; }
C="$WORK/certs"
mkdir -p "$C"

tls_make_ca "$C" ca1
tls_make_ca "$C" ca2
tls_make_cert "$C" ca1 server server
tls_make_cert "$C" ca2 server2 server
tls_make_cert "$C" ca1 expired server 20200101000000Z 20200201000000Z
tls_make_cert "$C" ca1 client client
tls_make_cert "$C" ca2 client2 client

COMMON=(--model "$MODEL" --host 127.0.0.1 --metrics-port 0 --device cpu --threads 1
        --kv-cache-memory 32M)

# --- startup checks: each must exit non-zero at once, naming the problem.
expect_refusal() {
  local want=$1
  shift
  local rc=0
  timeout 20 "$SERVER_BIN" "${COMMON[@]}" --port 0 --http-port 0 "$@" >"$WORK/refused.log" 2>&1 \
    || rc=$?
  [[ $rc -ne 0 && $rc -ne 124 ]] || fail "the server started (rc $rc) with $*"
  grep -q -- "$want" "$WORK/refused.log" || { cat "$WORK/refused.log" >&2; fail "no '$want' for $*"; }
}
expect_refusal "cannot read the TLS certificate" --tls-cert "$C/missing.crt" --tls-key "$C/server.key"
expect_refusal "cannot read the TLS key" --tls-cert "$C/server.crt" --tls-key "$C/missing.key"
expect_refusal "does not match the certificate" --tls-cert "$C/server.crt" --tls-key "$C/client.key"
expect_refusal "holds no valid PEM certificate" --tls-cert "$C/server.key" --tls-key "$C/server.key"
expect_refusal "holds no valid PEM private key" --tls-cert "$C/server.crt" --tls-key "$C/server.crt"
expect_refusal "--tls-client-ca needs --tls-cert" --tls-client-ca "$C/ca1.crt"
expect_refusal "--tls-cert needs --tls-key" --tls-cert "$C/server.crt"
expect_refusal "holds no valid PEM certificate" --tls-cert "$C/server.crt" \
  --tls-key "$C/server.key" --tls-client-ca "$C/server.key"
echo "startup checks: ok"

# Starts a server on fresh ports with the given TLS flags; sets GRPC and HTTP.
start_server() {
  stop_server
  read -r GRPC HTTP < <(e2e_free_ports)
  "$SERVER_BIN" "${COMMON[@]}" --port "$GRPC" --http-port "$HTTP" --tls-refresh-interval 1 "$@" \
    >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
}
# Waits for the server's "ready" line.
wait_ready() {
  for _ in $(seq 600); do
    grep -q "\] ready" "$WORK/server.log" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  fail "the server never became ready"
}
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
# grpc_ok|grpc_fails CLI-FLAGS...: one Generate over a new connection.
grpc_call() { "$CLI" --server "127.0.0.1:$GRPC" --timeout 10 "$@" generate --max-tokens 2 Once \
  >"$WORK/cli.out" 2>&1; }
grpc_ok() { grpc_call "$@" || { cat "$WORK/cli.out" >&2; fail "gRPC call failed with $*"; }; }
grpc_fails() { if grpc_call "$@"; then fail "gRPC call succeeded with $*"; fi; }
# http_ok|http_fails CURL-FLAGS...: GET /v1/models over a new connection.
http_call() { curl -sS --max-time 10 "$@" "https://localhost:$HTTP/v1/models" >"$WORK/curl.out" 2>&1; }
http_ok() { http_call "$@" || { cat "$WORK/curl.out" >&2; fail "HTTPS call failed with $*"; }
  grep -q '"object":"list"' "$WORK/curl.out" || fail "HTTPS answer without the model list"; }
http_fails() { if http_call "$@"; then fail "HTTPS call succeeded with $*"; fi; }

# --- TLS: the right CA, a wrong CA, plain text.
start_server --tls-cert "$C/server.crt" --tls-key "$C/server.key"
# Started at once: the first attempts are refused until the server listens.
"$CLI" --server "127.0.0.1:$GRPC" --tls-ca "$C/ca1.crt" info --wait 60 >/dev/null \
  || fail "info --wait over TLS never saw the server SERVING"
grpc_ok --tls-ca "$C/ca1.crt"
grpc_fails --tls-ca "$C/ca2.crt"
grpc_fails
http_ok --cacert "$C/ca1.crt"
http_fails --cacert "$C/ca2.crt"
# A streamed completion over TLS reaches its last event.
curl -sS -N --max-time 20 --cacert "$C/ca1.crt" "https://localhost:$HTTP/v1/completions" \
  -H 'content-type: application/json' \
  -d '{"model": "llama", "prompt": "Once", "max_tokens": 4, "stream": true}' >"$WORK/sse.out" \
  || fail "streamed completion over TLS failed"
grep -q '^data: \[DONE\]' "$WORK/sse.out" || fail "streamed completion over TLS did not end"
# Two completions on one kept-alive TLS connection (curl reuses it).
body='{"model": "llama", "prompt": "Once", "max_tokens": 3}'
curl -sS --max-time 20 --cacert "$C/ca1.crt" -H 'content-type: application/json' \
  "https://localhost:$HTTP/v1/completions" -d "$body" --next --cacert "$C/ca1.crt" \
  -H 'content-type: application/json' "https://localhost:$HTTP/v1/completions" -d "$body" \
  -w '\n%{num_connects}\n' >"$WORK/two.out" 2>&1 || fail "two completions over one TLS connection"
[[ $(grep -o '"finish_reason":"length"' "$WORK/two.out" | wc -l) -eq 2 ]] \
  || { cat "$WORK/two.out" >&2; fail "two completions over TLS did not both finish"; }
[[ $(tail -n 1 "$WORK/two.out") == 0 ]] || fail "the second completion opened a new connection"
if curl -sS --max-time 5 "http://127.0.0.1:$HTTP/v1/models" >/dev/null 2>&1; then
  fail "plain HTTP was answered on the TLS port"
fi
echo "TLS, right and wrong CA: ok"

# --- API keys over TLS: the key check runs on TLS connections too.
printf 'ci:tls-test-key-0123456789\n' >"$WORK/keys.txt"
start_server --tls-cert "$C/server.crt" --tls-key "$C/server.key" --api-key-file "$WORK/keys.txt"
"$CLI" --server "127.0.0.1:$GRPC" --tls-ca "$C/ca1.crt" --api-key tls-test-key-0123456789 \
  info --wait 60 >/dev/null || fail "info --wait over TLS with keys never saw the server SERVING"
grpc_ok --tls-ca "$C/ca1.crt" --api-key tls-test-key-0123456789
grpc_fails --tls-ca "$C/ca1.crt"
grpc_fails --tls-ca "$C/ca1.crt" --api-key wrong-key-0123456789abc
grep -q "UNAUTHENTICATED\|nauthenticated" "$WORK/cli.out" || { cat "$WORK/cli.out" >&2; fail "no UNAUTHENTICATED over TLS"; }
http_ok --cacert "$C/ca1.crt" -H "Authorization: Bearer tls-test-key-0123456789"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$C/ca1.crt" "https://localhost:$HTTP/v1/models")
[[ $code == 401 ]] || fail "HTTPS without a key got $code, not 401"
echo "API keys over TLS: ok"

# --- Rotation: a broken certificate file keeps the old pair; a new CA's pair
# is served to new connections within the refresh interval.
cp "$C/server.crt" "$WORK/live.crt"
cp "$C/server.key" "$WORK/live.key"
start_server --tls-cert "$WORK/live.crt" --tls-key "$WORK/live.key"
wait_ready
echo "not a certificate" >"$WORK/live.crt"
for _ in $(seq 50); do grep -q "TLS files not reloaded" "$WORK/server.log" && break; sleep 0.1; done
grep -q "TLS files not reloaded" "$WORK/server.log" || fail "a broken certificate was not reported"
sleep 1.5  # past gRPC's own re-read of the staged files
grpc_ok --tls-ca "$C/ca1.crt"
http_ok --cacert "$C/ca1.crt"
cp "$C/server2.key" "$WORK/live.key"
cp "$C/server2.crt" "$WORK/live.crt"
start=$(date +%s.%N)
rotated=""
for _ in $(seq 100); do
  if grpc_call --tls-ca "$C/ca2.crt" && http_call --cacert "$C/ca2.crt"; then rotated=1; break; fi
  sleep 0.1
done
[[ -n "$rotated" ]] || fail "the new certificate was not served within 10 s"
took=$("$PY" -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
  "$start" "$(date +%s.%N)")
echo "rotation: new certificate served after ${took} s (refresh interval 1 s)"
"$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 4 else 1)" "$took" \
  || fail "rotation took ${took} s, more than the refresh interval plus 3 s"
grpc_fails --tls-ca "$C/ca1.crt"
http_fails --cacert "$C/ca1.crt"
echo "rotation: ok"

# --- An expired server certificate is refused by both clients.
start_server --tls-cert "$C/expired.crt" --tls-key "$C/expired.key"
wait_ready
grpc_fails --tls-ca "$C/ca1.crt"
# gRPC's message only says "certificate verify failed": openssl names the
# reason for the certificate served on the gRPC port.
echo | openssl s_client -connect "127.0.0.1:$GRPC" -alpn h2 -CAfile "$C/ca1.crt" \
  -verify_return_error >"$WORK/s_client.out" 2>&1 || true
grep -q "certificate has expired" "$WORK/s_client.out" \
  || { cat "$WORK/s_client.out" >&2; fail "the gRPC port's certificate is not reported expired"; }
http_fails --cacert "$C/ca1.crt"
grep -qi "expired" "$WORK/curl.out" || { cat "$WORK/curl.out" >&2; fail "no 'expired' in curl's error"; }
echo "expired certificate: ok"

# --- Mutual TLS: a client certificate of the client CA is required.
start_server --tls-cert "$C/server.crt" --tls-key "$C/server.key" --tls-client-ca "$C/ca1.crt"
GOOD=(--tls-ca "$C/ca1.crt" --tls-cert "$C/client.crt" --tls-key "$C/client.key")
wait_ready
grpc_ok "${GOOD[@]}"
grpc_fails --tls-ca "$C/ca1.crt"
grpc_fails --tls-ca "$C/ca1.crt" --tls-cert "$C/client2.crt" --tls-key "$C/client2.key"
http_ok --cacert "$C/ca1.crt" --cert "$C/client.crt" --key "$C/client.key"
http_fails --cacert "$C/ca1.crt"
http_fails --cacert "$C/ca1.crt" --cert "$C/client2.crt" --key "$C/client2.key"
grep -q "(mutual TLS)" "$WORK/server.log" || fail "the log does not say mutual TLS"
echo "mutual TLS: ok"

# --- --metrics-tls: the metrics port serves HTTPS with the same certificates
# and client check; without --tls-cert the flag is refused.
expect_refusal "--metrics-tls needs --tls-cert" --metrics-tls
read -r METRICS _ < <(e2e_free_ports)
start_server --tls-cert "$C/server.crt" --tls-key "$C/server.key" --tls-client-ca "$C/ca1.crt" \
  --metrics-tls --metrics-port "$METRICS"
wait_ready
metrics_call() { curl -sS --max-time 10 "$@" "https://localhost:$METRICS/metrics" >"$WORK/curl.out" 2>&1; }
metrics_call --cacert "$C/ca1.crt" --cert "$C/client.crt" --key "$C/client.key" \
  || { cat "$WORK/curl.out" >&2; fail "HTTPS scrape with a client certificate failed"; }
grep -q '^tessera_request_success_total' "$WORK/curl.out" || fail "the HTTPS scrape has no metrics"
if metrics_call --cacert "$C/ca1.crt"; then fail "HTTPS scrape without a client certificate"; fi
if curl -sS --max-time 5 "http://127.0.0.1:$METRICS/metrics" >/dev/null 2>&1; then
  fail "plain HTTP was answered on the HTTPS metrics port"
fi
grep -q "serving metrics on .*(HTTPS, mutual TLS)" "$WORK/server.log" \
  || fail "the log does not say the metrics port is HTTPS"
echo "metrics over TLS: ok"
stop_server
echo "tls: all checks passed"
