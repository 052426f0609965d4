#!/usr/bin/env bash
# End-to-end test of tessera-cli's failure modes and exit codes:
#   2  usage errors (no server needed)
#   3  server unreachable, with "cannot reach server at HOST:PORT"
#   4  request refused by a running tessera-server, naming the gRPC code
#
# usage: cli_errors.sh TESSERA_SERVER TESSERA_CLI TESSERA_MAKE_MODEL
# env:   TESSERA_SOURCE_DIR (the repository root)
set -uo pipefail

SERVER_BIN=${1:?usage: cli_errors.sh SERVER CLI MAKE_MODEL}
CLI=${2:?usage: cli_errors.sh SERVER CLI MAKE_MODEL}
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must be set}
PY=/usr/bin/python3
MODEL=$SRC/models/stories260K.gguf

WORK=$(mktemp -d)
LOG=$WORK/server.log
SERVER_PID=""
FAILURES=0

# shellcheck source=tests/e2e/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
trap e2e_cleanup EXIT

# check_cli DESCRIPTION WANT_RC STDERR_SUBSTRING -- CLI_ARGS...
# Runs tessera-cli and checks its exit code and that stderr contains the
# substring (empty: no check).
check_cli() {
  local what=$1 want_rc=$2 want_err=$3
  shift 4
  "$CLI" "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [[ $rc -ne $want_rc ]] || [[ -n "$want_err" && "$(cat "$WORK/err")" != *"$want_err"* ]]; then
    echo "FAIL: $what: tessera-cli $*" >&2
    echo "  exit code $rc (want $want_rc); want stderr to contain: '$want_err'" >&2
    sed 's/^/  stderr: /' "$WORK/err" >&2
    FAILURES=$((FAILURES + 1))
  else
    echo "ok: $what (exit $rc)"
  fi
}


# Usage errors.
check_cli "no command" 2 "no command" --
check_cli "unknown command" 2 "unknown command" -- frobnicate
check_cli "generate without a prompt" 2 "PROMPT" -- generate
check_cli "unknown option" 2 "unknown option --bogus" -- generate hi --bogus
check_cli "non-numeric --max-tokens" 2 "--max-tokens" -- generate hi --max-tokens many
check_cli "missing option value" 2 "needs a value" -- generate hi --seed
check_cli "option of another command" 2 "does not apply" -- tokenize hi --max-tokens 3
check_cli "detokenize with a non-integer id" 2 "" -- detokenize 1 x
check_cli "--help" 0 "" -- --help

# Nothing listens on UNUSED_PORT (the probe socket is closed again).
read -r UNUSED_PORT _ < <(e2e_free_ports)
check_cli "unreachable generate" 3 "cannot reach server at 127.0.0.1:$UNUSED_PORT" -- \
  --server "127.0.0.1:$UNUSED_PORT" generate hi
check_cli "unreachable info" 3 "cannot reach server at 127.0.0.1:$UNUSED_PORT" -- \
  --server "127.0.0.1:$UNUSED_PORT" info
TESSERA_SERVER=127.0.0.1:$UNUSED_PORT check_cli "unreachable via TESSERA_SERVER" 3 \
  "cannot reach server at 127.0.0.1:$UNUSED_PORT" -- tokenize hi

# Requests a running server must refuse.
[[ -f "$MODEL" ]] || { echo "FAIL: model not found: $MODEL" >&2; exit 1; }
read -r PORT METRICS_PORT < <(e2e_free_ports)
ADDR=127.0.0.1:$PORT
"$SERVER_BIN" --model "$MODEL" --port "$PORT" --metrics-port "$METRICS_PORT" --http-port 0 --threads 2 \
  >"$LOG" 2>&1 &
SERVER_PID=$!
if ! "$CLI" --server "$ADDR" info --wait 30 >/dev/null 2>"$WORK/info.err"; then
  echo "FAIL: tessera-server at $ADDR did not report SERVING within 30 s" >&2
  cat "$WORK/info.err" >&2
  tail -n 40 "$LOG" >&2
  exit 1
fi
check_cli "NaN temperature" 4 "request failed: INVALID_ARGUMENT" -- \
  --server "$ADDR" generate hi --temperature nan
check_cli "max_tokens beyond the context" 4 "request failed: INVALID_ARGUMENT" -- \
  --server "$ADDR" generate hi --max-tokens 100000
check_cli "top_p of 0" 4 "request failed: INVALID_ARGUMENT" -- \
  --server "$ADDR" generate hi --top-p 0
check_cli "token id out of vocabulary" 4 "request failed: INVALID_ARGUMENT" -- \
  --server "$ADDR" detokenize 1000000
check_cli "a valid request still works" 0 "" -- \
  --server "$ADDR" generate hi --max-tokens 4 --temperature 0

if [[ $FAILURES -ne 0 ]]; then
  echo "--- tessera-server log (last 40 lines) ---" >&2
  tail -n 40 "$LOG" >&2
  echo "cli_errors.sh: $FAILURES check(s) failed" >&2
  exit 1
fi
echo "cli_errors.sh: PASS"
