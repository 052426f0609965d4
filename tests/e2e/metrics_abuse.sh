#!/usr/bin/env bash
# The metrics port under idle, slow and abusive connections: a scrape still
# answers within a second or two (also beside 300 idle connections), the port
# answers GET /metrics alone, and it binds where --host (or --metrics-host)
# says, not on every address.
#
# Usage: bash metrics_abuse.sh <tessera-server> <tessera-cli> <tessera-make-model>
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

read -r PORT METRICS_PORT < <(e2e_free_ports)
"$SERVER_BIN" --model "$MODEL" --host 127.0.0.1 --port "$PORT" --metrics-port "$METRICS_PORT" \
  --device cpu --threads 1 --kv-cache-memory 32M --http-port 0 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
"$CLI" --server "127.0.0.1:$PORT" info --wait 60 >/dev/null || fail "the server never became SERVING"

grep -q "serving metrics on 127.0.0.1:$METRICS_PORT" "$WORK/server.log" \
  || fail "/metrics does not follow --host 127.0.0.1"

"$PY" - "$METRICS_PORT" <<'PYEOF' || fail "a scrape was held back by other connections"
import socket, sys, threading, time
port = int(sys.argv[1])

def request(raw, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(raw)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data

def scrape():
    start = time.time()
    data = request(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n", timeout=30)
    if b"tessera_request_success_total" not in data:
        print("scrape returned no metrics", file=sys.stderr)
        sys.exit(1)
    return time.time() - start

# Only GET /metrics is served, and a metrics connection is not an API one.
for raw, want in ((b"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n", b" 405 "),
                  (b"GET /v1/models HTTP/1.0\r\n\r\n", b" 404 "),
                  (b"GET /metrics HTTP/1.0\r\n\r\n", b" 200 ")):
    head = request(raw).split(b"\r\n", 1)[0]
    if want not in head:
        print("%r answered %r, want %r" % (raw, head, want), file=sys.stderr)
        sys.exit(1)
body = request(b"GET /metrics HTTP/1.0\r\n\r\n").decode()
if "\ntessera_http_connections 0" not in body:
    print("metrics connections counted as HTTP API connections", file=sys.stderr)
    sys.exit(1)

held = []
# Idle connections that never send a byte: more than any thread pool.
for _ in range(300):
    held.append(socket.create_connection(("127.0.0.1", port)))
# A slow client: half a request line, then nothing.
slow = socket.create_connection(("127.0.0.1", port))
slow.sendall(b"GET /metr")
held.append(slow)
# A half-closed one.
half = socket.create_connection(("127.0.0.1", port))
half.shutdown(socket.SHUT_WR)
held.append(half)
took = scrape()
print("scrape with %d idle, slow and half-closed connections: %.2f s" % (len(held), took))
if took > 1.5:
    sys.exit(1)
# Garbage and an over-long header must not take the port down.
for junk in (b"\x00\xff" * 512 + b"\r\n\r\n", b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n"):
    j = socket.create_connection(("127.0.0.1", port))
    try:
        j.sendall(junk)
        j.settimeout(5)
        j.recv(1024)
    except OSError:
        pass
    j.close()
took = scrape()
print("scrape after garbage requests: %.2f s" % took)
sys.exit(0 if took <= 1.5 else 1)
PYEOF
kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
SERVER_PID=""
[[ $rc -eq 0 ]] || fail "the server exited $rc on SIGTERM"
echo "PASS: metrics_abuse"
