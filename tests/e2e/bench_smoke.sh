#!/usr/bin/env bash
# End-to-end smoke test of tessera-bench against tessera-server on
# stories260K.gguf: a closed-loop and an open-loop run must complete every
# request and report sane JSON.
#
# usage: bench_smoke.sh TESSERA_SERVER TESSERA_CLI TESSERA_MAKE_MODEL
# env:   TESSERA_SOURCE_DIR (the repository root)
# tessera-bench is expected at $(dirname TESSERA_CLI)/bench/tessera-bench.
set -uo pipefail

SERVER_BIN=${1:?usage: bench_smoke.sh SERVER CLI MAKE_MODEL}
CLI=${2:?usage: bench_smoke.sh SERVER CLI MAKE_MODEL}
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must be set}
BENCH=$(dirname "$CLI")/bench/tessera-bench
PY=/usr/bin/python3
MODEL=$SRC/models/stories260K.gguf

WORK=$(mktemp -d)
LOG=$WORK/server.log
SERVER_PID=""

# shellcheck source=tests/e2e/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
trap e2e_cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- tessera-server log (last 40 lines) ---" >&2
  tail -n 40 "$LOG" >&2
  exit 1
}

[[ -x "$BENCH" ]] || { echo "FAIL: tessera-bench not found at $BENCH" >&2; exit 1; }
[[ -f "$MODEL" ]] || { echo "FAIL: model not found: $MODEL" >&2; exit 1; }

read -r PORT METRICS_PORT < <(e2e_free_ports)
ADDR=127.0.0.1:$PORT

# Nothing listens on PORT yet: the benchmark must say so with exit code 3.
"$BENCH" --server "$ADDR" --num-requests 1 >/dev/null 2>"$WORK/unreachable.err"
rc=$?
[[ $rc -eq 3 ]] || fail "unreachable server: exit code $rc (want 3): $(cat "$WORK/unreachable.err")"
echo "ok: unreachable server exits 3"

"$BENCH" --concurrency 0 >/dev/null 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "usage error: exit code $rc (want 2)"
echo "ok: usage error exits 2"

# A --save-requests path that cannot be written is refused before anything
# is sent (exit 2), not discovered after the run.
"$BENCH" --server "$ADDR" --num-requests 1 --save-requests "$WORK/no/such/dir/r.jsonl" \
  >/dev/null 2>"$WORK/save.err"
rc=$?
[[ $rc -eq 2 ]] || fail "unwritable --save-requests: exit code $rc (want 2)"
grep -q "save-requests: cannot write" "$WORK/save.err" ||
  fail "unwritable --save-requests: message: $(cat "$WORK/save.err")"
echo "ok: unwritable --save-requests exits 2 before the run"

"$SERVER_BIN" --model "$MODEL" --port "$PORT" --metrics-port "$METRICS_PORT" --http-port 0 --threads 2 \
  >"$LOG" 2>&1 &
SERVER_PID=$!
"$CLI" --server "$ADDR" info --wait 30 >/dev/null 2>"$WORK/info.err" ||
  fail "tessera-server at $ADDR did not report SERVING within 30 s: $(cat "$WORK/info.err")"

# check_json FILE WANT_COMPLETED: the report's shape and sanity.
check_json() {
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
report = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
problems = []
if report.get("completed") != want:
    problems.append(f"completed = {report.get('completed')}, want {want}")
if report.get("failed") != 0:
    problems.append(f"failed = {report.get('failed')}, errors = {report.get('errors')}")
if not report.get("output_tokens_per_second", 0) > 0:
    problems.append("output_tokens_per_second is not > 0")
for key in ("ttft_seconds", "tpot_seconds", "itl_seconds", "e2e_seconds"):
    stats = report.get(key)
    if not isinstance(stats, dict) or any(s not in stats for s in ("mean", "p50", "p90", "p99")):
        problems.append(f"{key} lacks mean/p50/p90/p99: {stats}")
    elif not stats["p50"] <= stats["p99"]:
        problems.append(f"{key}: p50 {stats['p50']} > p99 {stats['p99']}")
if report.get("errors") != {}:
    problems.append(f"errors = {report.get('errors')}")
for problem in problems:
    print("  " + problem, file=sys.stderr)
sys.exit(1 if problems else 0)
PYEOF
}

"$BENCH" --server "$ADDR" --concurrency 4 --num-requests 16 --max-tokens 32 --input-len 32 \
  --ignore-eos --json >"$WORK/closed.json" 2>"$WORK/closed.err" ||
  fail "closed-loop run exited $?: $(cat "$WORK/closed.err")"
check_json "$WORK/closed.json" 16 || fail "closed-loop report: $(cat "$WORK/closed.json")"
echo "ok: closed loop, concurrency 4, 16 requests"

"$BENCH" --server "$ADDR" --concurrency 2 --num-requests 4 --warmup 0 --max-tokens 8 \
  --input-len 16 --ignore-eos --save-requests "$WORK/requests.jsonl" >/dev/null \
  2>"$WORK/saved.err" || fail "--save-requests run exited $?: $(cat "$WORK/saved.err")"
"$PY" - "$WORK/requests.jsonl" <<'PYEOF' || fail "--save-requests file: $(cat "$WORK/requests.jsonl")"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 4, len(rows)
assert all(r["ok"] and r["output_tokens"] == 8 for r in rows), rows
PYEOF
echo "ok: --save-requests writes one line per request"

"$BENCH" --server "$ADDR" --request-rate 50 --num-requests 10 --max-tokens 16 --input-len 32 \
  --ignore-eos --json >"$WORK/open.json" 2>"$WORK/open.err" ||
  fail "open-loop run exited $?: $(cat "$WORK/open.err")"
check_json "$WORK/open.json" 10 || fail "open-loop report: $(cat "$WORK/open.json")"
echo "ok: open loop, 50 req/s, 10 requests"

# Conversations over a shared prefix: later turns find their history in the
# server's prefix cache, and the priority mix is reported per priority.
"$BENCH" --server "$ADDR" --concurrency 4 --num-requests 16 --warmup 0 --max-tokens 16 \
  --input-len 16 --shared-prefix-len 48 --multi-turn 4 --priority-mix 0.5 --ignore-eos --json \
  >"$WORK/turns.json" 2>"$WORK/turns.err" || fail "multi-turn run exited $?: $(cat "$WORK/turns.err")"
check_json "$WORK/turns.json" 16 || fail "multi-turn report: $(cat "$WORK/turns.json")"
"$PY" - "$WORK/turns.json" <<'PYEOF' || fail "multi-turn report: $(cat "$WORK/turns.json")"
import json, sys
r = json.load(open(sys.argv[1]))
# 16 requests: 4 conversations x 4 turns; turns 2-4 resend at least the
# prefix and the first question and answer (80 tokens: 5 full blocks).
assert r["cached_prompt_tokens"] >= 12 * 80, r["cached_prompt_tokens"]
assert r["prefill_tokens_computed"] == r["total_input_tokens"] - r["cached_prompt_tokens"]
assert set(r["by_priority"]) == {"-1", "0"}, r["by_priority"]
assert sum(c["completed"] for c in r["by_priority"].values()) == 16
PYEOF
echo "ok: 4-turn conversations over a shared prefix, priority mix"

echo "bench_smoke.sh: PASS"
