#!/usr/bin/env bash
# A stuck engine step: the step watchdog reports it (log, counter, health
# NOT_SERVING until it ends), and SIGTERM still ends the process when the
# step never finishes.
#
# Usage: bash stuck_engine.sh <tessera-server> <tessera-cli> <tessera-make-model>
# The first engine step is made to sleep with TESSERA_TESTING_STALL_FIRST_STEP_MS.
set -euo pipefail

SERVER_BIN=$(realpath "$1")
CLI=$(realpath "$2")
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must point at the source tree}
MODEL="$SRC/models/stories260K.gguf"
PY=/usr/bin/python3
source "$SRC/tests/e2e/lib/common.sh"

WORK=$(mktemp -d)
SERVER_PID=""
trap e2e_cleanup EXIT

fail() { e2e_fail "$@"; }

# start_server STALL_MS: a server whose first step sleeps STALL_MS.
start_server() {
  read -r PORT METRICS_PORT < <(e2e_free_ports)
  TESSERA_TESTING_STALL_FIRST_STEP_MS=$1 "$SERVER_BIN" --model "$MODEL" --host 127.0.0.1 \
    --port "$PORT" --metrics-port "$METRICS_PORT" --device cpu --threads 1 \
    --kv-cache-memory 32M --http-port 0 --step-watchdog 1 --drain-timeout 1 >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  "$CLI" --server "127.0.0.1:$PORT" info --wait 60 >/dev/null || fail "the server never became SERVING"
}

stalled_count() {
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk '$1 == "tessera_engine_stalled_steps_total" { print $2 }'
}

# --- A step stalled for 5 s, watchdog at 1 s. ---
start_server 5000
"$CLI" --server "127.0.0.1:$PORT" generate "Once upon a time" --max-tokens 4 --temperature 0 \
  >"$WORK/gen.out" 2>&1 &
GEN_PID=$!
sleep 2.5
[[ "$(stalled_count)" == "1" ]] || fail "tessera_engine_stalled_steps_total is '$(stalled_count)' during a stall, want 1"
grep -q "past the step watchdog" "$WORK/server.log" || fail "the stall was not logged"
if "$CLI" --server "127.0.0.1:$PORT" info >/dev/null 2>&1; then
  fail "health stayed SERVING during a stalled step"
fi
wait "$GEN_PID" || fail "the generation failed after the stall: $(cat "$WORK/gen.out")"
"$CLI" --server "127.0.0.1:$PORT" info --wait 5 >/dev/null || fail "health did not come back after the stall"
[[ "$(stalled_count)" == "1" ]] || fail "one stall counted $(stalled_count) times"
kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
SERVER_PID=""
[[ $rc -eq 0 ]] || fail "a server whose stall ended exited $rc on SIGTERM, want 0"

# --- A step that never ends: SIGTERM still ends the process (exit 3). ---
start_server 600000
"$CLI" --server "127.0.0.1:$PORT" --timeout 60 generate "Once upon a time" --max-tokens 4 \
  >/dev/null 2>&1 &
sleep 2
grep -q "past the step watchdog" "$WORK/server.log" || fail "the stuck step was not reported"
start=$(date +%s)
kill -TERM "$SERVER_PID"
rc=0
timeout 40 tail --pid="$SERVER_PID" -f /dev/null || fail "the server with a stuck step did not exit on SIGTERM"
wait "$SERVER_PID" || rc=$?
SERVER_PID=""
took=$(( $(date +%s) - start ))
[[ $rc -eq 3 ]] || fail "the server with a stuck step exited $rc, want 3"
grep -q "exiting now" "$WORK/server.log" || fail "the forced exit was not logged"
echo "PASS: stuck_engine (forced exit after ${took} s)"
