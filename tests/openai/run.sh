#!/usr/bin/env bash
# Runs openai.test.mjs (node:test with the official openai SDK, pinned in
# package-lock.json) against a tessera-http-test-server on the bundled
# stories260K model.
#
# Usage: bash run.sh <tessera-http-test-server>
# Needs TESSERA_SOURCE_DIR, node >= 18 and npm (the packages come from the
# npm registry through `npm ci`); skips (exit 77) without node.
set -euo pipefail

SERVER=$(realpath "$1")
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must point at the source tree}
PY=/usr/bin/python3
HERE="$SRC/tests/openai"
source "$SRC/tests/e2e/lib/common.sh"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed"; exit 77
fi
WORK=$(mktemp -d)
SERVER_PID=""
trap 'e2e_cleanup || true' EXIT

# The packages go to a copy of the folder, so the source tree stays clean.
cp "$HERE/package.json" "$HERE/package-lock.json" "$HERE/openai.test.mjs" "$WORK/"
(cd "$WORK" && npm ci --no-audit --no-fund --loglevel=error) || { echo "FAIL: npm ci"; exit 1; }

# The server needs an API key, which the SDK sends as a bearer token.
export TESSERA_API_KEY=sdk-test-key-0123456789abcdef
printf 'sdk:%s\n' "$TESSERA_API_KEY" >"$WORK/keys.txt"
read -r PORT HTTP_PORT < <(e2e_free_ports)
"$SERVER" --api-key-file "$WORK/keys.txt" --model "$SRC/models/stories260K.gguf" --host 127.0.0.1 --port "$PORT" \
  --metrics-port 0 --http-port "$HTTP_PORT" --device cpu --threads 1 --kv-cache-memory 32M \
  --max-num-seqs 1 --max-queued-requests 2 --log-level warn >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$HTTP_PORT/health" >/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log"; echo "FAIL: the server exited"; exit 1; }
  sleep 0.1
done

rc=0
(cd "$WORK" && TESSERA_HTTP_URL="http://127.0.0.1:$HTTP_PORT" node --test openai.test.mjs) || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "--- server log ---"; tail -n 40 "$WORK/server.log"
  exit $rc
fi
kill -0 "$SERVER_PID" 2>/dev/null || { echo "FAIL: the server died"; exit 1; }
echo "PASS"
