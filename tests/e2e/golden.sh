#!/usr/bin/env bash
# End-to-end golden test: tessera-server on stories260K.gguf must reproduce,
# token for token, the greedy completion of an independent implementation
# (tests/data/reference/), and must exit 0 on SIGTERM.
#
# usage: golden.sh TESSERA_SERVER TESSERA_CLI TESSERA_MAKE_MODEL
# env:   TESSERA_SOURCE_DIR (the repository root)
#        TESSERA_GOLDEN_SERVER_ARGS (optional extra server flags, e.g. "--device auto")
set -uo pipefail

SERVER_BIN=${1:?usage: golden.sh SERVER CLI MAKE_MODEL}
CLI=${2:?usage: golden.sh SERVER CLI MAKE_MODEL}
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must be set}
PY=/usr/bin/python3
MODEL=$SRC/models/stories260K.gguf
REF=$SRC/tests/data/reference/stories260K-once-upon-a-time.json

WORK=$(mktemp -d)
LOG=$WORK/server.log
SERVER_PID=""

log_tail() {
  echo "--- tessera-server log (last 40 lines) ---" >&2
  tail -n 40 "$LOG" >&2 2>/dev/null || true
  echo "--- end of log ---" >&2
}

fail() {
  echo "golden.sh: FAIL: $*" >&2
  log_tail
  exit 1
}

# shellcheck source=tests/e2e/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
trap e2e_cleanup EXIT

read -r PORT METRICS_PORT < <(e2e_free_ports)
ADDR=127.0.0.1:$PORT

[[ -f "$MODEL" ]] || fail "model not found: $MODEL"
[[ -f "$REF" ]] || fail "reference not found: $REF"

read -r -a EXTRA_ARGS <<<"${TESSERA_GOLDEN_SERVER_ARGS:-}"
"$SERVER_BIN" --model "$MODEL" --port "$PORT" --metrics-port "$METRICS_PORT" --http-port 0 --threads 2 \
  "${EXTRA_ARGS[@]}" >"$LOG" 2>&1 &
SERVER_PID=$!

if ! "$CLI" --server "$ADDR" info --wait 30 >"$WORK/info.txt" 2>"$WORK/info.err"; then
  cat "$WORK/info.err" >&2
  kill -0 "$SERVER_PID" 2>/dev/null || fail "tessera-server exited during start-up"
  fail "tessera-server at $ADDR did not report SERVING within 30 s"
fi
echo "golden.sh: server ready at $ADDR"

# Tokenizer: BOS + "Once upon a time".
"$CLI" --server "$ADDR" tokenize "Once upon a time" --json >"$WORK/tokenize.json" \
  2>"$WORK/tokenize.err" || { cat "$WORK/tokenize.err" >&2; fail "tokenize failed"; }
"$PY" - "$WORK/tokenize.json" <<'PYEOF' || fail "tokenize gave the wrong ids"
import json, sys
got = json.load(open(sys.argv[1]))
want = [1, 403, 407, 261, 378]
if got.get("token_ids") != want:
    print(f"tokenize: got {got.get('token_ids')}, want {want}", file=sys.stderr)
    sys.exit(1)
if len(got.get("pieces", [])) != len(want):
    print(f"tokenize: {len(got.get('pieces', []))} pieces for {len(want)} ids", file=sys.stderr)
    sys.exit(1)
PYEOF

# Greedy generation against the reference.
"$CLI" --server "$ADDR" --timeout 120 generate "Once upon a time" --max-tokens 64 \
  --temperature 0 --json >"$WORK/generate.json" 2>"$WORK/generate.err" \
  || { cat "$WORK/generate.err" >&2; fail "generate failed"; }
"$PY" - "$WORK/generate.json" "$REF" <<'PYEOF' || fail "generation differs from the reference"
import json, sys
got = json.load(open(sys.argv[1]))
ref = json.load(open(sys.argv[2]))
errors = []
if got.get("prompt_token_ids") != ref["prompt_ids"]:
    errors.append(f"prompt ids: got {got.get('prompt_token_ids')}, want {ref['prompt_ids']}")
ids, want_ids = got.get("token_ids", []), ref["generated_ids"]
if ids != want_ids:
    first = next((i for i, (a, b) in enumerate(zip(ids, want_ids)) if a != b),
                 min(len(ids), len(want_ids)))
    errors.append(f"token ids differ first at position {first} "
                  f"(got {len(ids)} ids: {ids[first:first + 8]}..., "
                  f"want {len(want_ids)}: {want_ids[first:first + 8]}...)")
if got.get("text") != ref["generated_text"]:
    errors.append(f"text: got {got.get('text')!r}\n      want {ref['generated_text']!r}")
if got.get("finish_reason") != "length":
    errors.append(f"finish_reason: got {got.get('finish_reason')!r}, want 'length'")
usage = got.get("usage", {})
if usage.get("completion_tokens") != len(want_ids) or usage.get("prompt_tokens") != len(ref["prompt_ids"]):
    errors.append(f"usage: got {usage}")
for e in errors:
    print("generate: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PYEOF
echo "golden.sh: greedy output matches the reference"

# Graceful shutdown: SIGTERM must end the server with status 0.
kill -TERM "$SERVER_PID"
for _ in $(seq 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SERVER_PID" 2>/dev/null && fail "tessera-server still running 30 s after SIGTERM"
wait "$SERVER_PID"
STATUS=$?
SERVER_PID=""
[[ $STATUS -eq 0 ]] || fail "tessera-server exited with status $STATUS after SIGTERM"
echo "golden.sh: PASS"
