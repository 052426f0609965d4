#!/usr/bin/env bash
# Hostile-client probe of tessera-server: bad inputs over gRPC and HTTP,
# connection abuse, deadlines, API key bypass attempts, TLS misuse and a
# drain under load. Each case states what a correct server must answer, and
# after each one the probe checks that the server still says SERVING and
# still answers a small authenticated Generate. Not part of the test suite
# (not registered with CMake/ctest): run it by hand.
#
# Usage:
#   TESSERA_BUILD_DIR=build-dev scripts/hostile-probe.sh [-k SUBSTRING]... [-v]
#
#   TESSERA_BUILD_DIR  build folder holding server/tessera-server (default: build),
#                      relative to the repository root unless absolute
#   -k SUBSTRING       run only the cases whose name contains SUBSTRING (repeatable; the
#                      drain cases, which stop the drain server, run only when no -k is
#                      given or some -k contains "drain")
#   -v                 print each failing case's details
#   KEEP_WORK=1        keep the temporary folder (server logs, keys, certificates)
#   HOLD=1             start the servers, print the config path and wait (Ctrl-C ends):
#                      for running probe.py --config CONFIG by hand, or reproducing a case
#
# Starts three servers on free 127.0.0.1 ports in a temporary folder (the
# stories260K model, --device cpu --threads 1):
#   main   API keys, small queue limits, Qwen chat template, plain gRPC/HTTP/metrics
#   tls    mutual TLS on gRPC and HTTP, --metrics-tls, API keys, --auth-health
#   drain  long streams, then SIGTERM (exit code and drain behaviour checked)
# Needs /usr/bin/python3 with python3-grpcio and python3-protobuf, protoc and
# openssl. Prints one line per case and a summary; exits 1 if any case failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${TESSERA_BUILD_DIR:-build}
[[ $BUILD == /* ]] || BUILD="$ROOT/$BUILD"
SERVER_BIN="$BUILD/server/tessera-server"
MODEL="$ROOT/models/stories260K.gguf"
TEMPLATE="$ROOT/tests/data/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja"
PY=${PYTHON:-/usr/bin/python3}

[[ -x $SERVER_BIN ]] || { echo "hostile-probe: no server binary at $SERVER_BIN (set TESSERA_BUILD_DIR)" >&2; exit 2; }
command -v openssl >/dev/null || { echo "hostile-probe: openssl is needed" >&2; exit 2; }
command -v protoc >/dev/null || { echo "hostile-probe: protoc is needed" >&2; exit 2; }
"$PY" -c 'import grpc, google.protobuf' 2>/dev/null ||
  { echo "hostile-probe: $PY needs python3-grpcio and python3-protobuf" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-hostile.XXXXXX")
PIDS=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if [[ -n ${KEEP_WORK:-} ]]; then
    echo "hostile-probe: kept $WORK"
  else
    rm -rf "$WORK"
  fi
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Python modules of the API, generated from proto/.
mkdir -p "$WORK/pb"
protoc -I "$ROOT/proto" --python_out="$WORK/pb" "$ROOT"/proto/tessera/v1/*.proto

# --- API keys: name:key lines. Several tenants, for the per-key cap cases.
cat >"$WORK/keys.txt" <<'KEYS'
# hostile-probe keys
alice:sk-alice-7f3c9a1e5b2d4c6f8a0b
bob:sk-bob-2e4f6a8c0d1b3f5e7a9c
carol:sk-carol-9b8a7c6d5e4f3a2b1c0d
dave:sk-dave-1a2b3c4d5e6f7a8b9c0d
erin:sk-erin-0f1e2d3c4b5a69788796
KEYS

# --- Certificates: two CAs, a server certificate, good/foreign/expired clients.
# shellcheck source=SCRIPTDIR/../tests/e2e/lib/tls_certs.sh
source "$ROOT/tests/e2e/lib/tls_certs.sh"
C="$WORK/certs"
mkdir -p "$C"
tls_make_ca "$C" ca1
tls_make_ca "$C" ca2
tls_make_cert "$C" ca1 server server
tls_make_cert "$C" ca1 client client
tls_make_cert "$C" ca2 foreign client
tls_make_cert "$C" ca1 expired client 20200101000000Z 20200201000000Z
for f in ca1.crt ca2.crt server.crt client.crt foreign.crt expired.crt; do
  [[ -s $C/$f ]] || { echo "hostile-probe: openssl did not make $f" >&2; exit 2; }
done

# --- Free ports (all held while chosen, so that they differ).
read -r P_GRPC P_HTTP P_METRICS T_GRPC T_HTTP T_METRICS D_GRPC D_HTTP < <("$PY" -c '
import socket
socks = [socket.socket() for _ in range(8)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')

COMMON=(--model "$MODEL" --host 127.0.0.1 --device cpu --threads 1 --kv-cache-memory 32M
        --api-key-file "$WORK/keys.txt" --log-level info)

# main: a slow step (10 ms) makes streams long enough to overlap; two
# sequences run at once, 8 may wait, 4 per key.
TESSERA_TESTING_STEP_DELAY_MS=10 "$SERVER_BIN" "${COMMON[@]}" \
  --port "$P_GRPC" --http-port "$P_HTTP" --metrics-port "$P_METRICS" \
  --chat-template "$TEMPLATE" --max-num-seqs 2 --max-queued-requests 8 \
  --max-queued-requests-per-key 4 --max-concurrent-streams 8 --http-max-body 2M \
  --http-header-timeout 2 >"$WORK/main.log" 2>&1 &
PIDS+=($!)
MAIN_PID=$!

# tls: mutual TLS everywhere, health needs a key too.
"$SERVER_BIN" "${COMMON[@]}" --port "$T_GRPC" --http-port "$T_HTTP" --metrics-port "$T_METRICS" \
  --tls-cert "$C/server.crt" --tls-key "$C/server.key" --tls-client-ca "$C/ca1.crt" \
  --metrics-tls --auth-health --http-header-timeout 2 >"$WORK/tls.log" 2>&1 &
PIDS+=($!)
TLS_PID=$!

# drain: its exit status is written to drain.rc by the wrapper subshell.
(
  TESSERA_TESTING_STEP_DELAY_MS=10 "$SERVER_BIN" "${COMMON[@]}" --port "$D_GRPC" \
    --http-port "$D_HTTP" --metrics-port 0 --max-num-seqs 8 --drain-timeout 3 \
    >"$WORK/drain.log" 2>&1 &
  echo $! >"$WORK/drain.pid"
  rc=0
  wait $! || rc=$?
  echo "$rc" >"$WORK/drain.rc"
) &
for _ in $(seq 100); do [[ -s $WORK/drain.pid ]] && break; sleep 0.05; done
DRAIN_PID=$(cat "$WORK/drain.pid")
PIDS+=("$DRAIN_PID")

wait_ready() {
  local name=$1 pid=$2 log=$3
  for _ in $(seq 600); do
    grep -q "\] ready" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "hostile-probe: the $name server did not become ready:" >&2
  tail -n 20 "$log" >&2
  exit 2
}
wait_ready main "$MAIN_PID" "$WORK/main.log"
wait_ready tls "$TLS_PID" "$WORK/tls.log"
wait_ready drain "$DRAIN_PID" "$WORK/drain.log"

cat >"$WORK/config.json" <<JSON
{
  "work": "$WORK",
  "pb": "$WORK/pb",
  "server_bin": "$SERVER_BIN",
  "model": "$MODEL",
  "main": {"grpc": $P_GRPC, "http": $P_HTTP, "metrics": $P_METRICS, "pid": $MAIN_PID,
           "log": "$WORK/main.log", "max_queued": 8, "max_queued_per_key": 4,
           "max_num_seqs": 2, "max_concurrent_streams": 8, "http_max_body": 2097152,
           "http_header_timeout": 2, "step_delay_ms": 10},
  "tls": {"grpc": $T_GRPC, "http": $T_HTTP, "metrics": $T_METRICS, "pid": $TLS_PID,
          "log": "$WORK/tls.log", "http_header_timeout": 2},
  "drain": {"grpc": $D_GRPC, "http": $D_HTTP, "pid": $DRAIN_PID, "log": "$WORK/drain.log",
            "rc_file": "$WORK/drain.rc", "drain_timeout": 3, "step_delay_ms": 10},
  "keys_file": "$WORK/keys.txt",
  "certs": "$C"
}
JSON

if [[ -n ${HOLD:-} ]]; then
  echo "hostile-probe: servers up; run: $PY $ROOT/scripts/probe/probe.py --config $WORK/config.json"
  while kill -0 "$MAIN_PID" 2>/dev/null; do sleep 1; done
  exit 0
fi

rc=0
"$PY" "$ROOT/scripts/probe/probe.py" --config "$WORK/config.json" "$@" || rc=$?

for pair in "main:$MAIN_PID" "tls:$TLS_PID"; do
  if ! kill -0 "${pair#*:}" 2>/dev/null; then
    echo "hostile-probe: the ${pair%%:*} server is no longer running" >&2
    rc=1
  fi
done
if [[ $rc -ne 0 ]]; then
  for name in main tls drain; do
    echo "--- last lines of the $name server log ---" >&2
    tail -n 15 "$WORK/$name.log" >&2 || true
  done
fi
exit "$rc"
