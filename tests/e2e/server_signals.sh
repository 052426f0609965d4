#!/usr/bin/env bash
# End-to-end checks of the tessera-server binary: flag errors, a missing
# model, health and /metrics of a running server, and a graceful drain on
# SIGTERM while a streaming generation is in flight.
#
# Usage: bash server_signals.sh <tessera-server> <tessera-cli> <tessera-make-model>
# Needs TESSERA_SOURCE_DIR, /usr/bin/python3 with python3-grpcio and
# python3-protobuf, protoc and curl; promtool is used when present.
set -euo pipefail

SERVER=$(realpath "$1")
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must point at the source tree}
MODEL="$SRC/models/stories260K.gguf"
PY=/usr/bin/python3
DRAIN_TIMEOUT=20  # seconds

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  if [[ -f "$WORK/server.log" ]]; then
    echo "--- server log ---" >&2
    tail -n 40 "$WORK/server.log" >&2
  fi
  exit 1
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- Invalid flags exit 2. ---
rc=0
"$SERVER" --model "$MODEL" --port -1 >"$WORK/flag.out" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "--port -1 exited $rc, want 2"
grep -q -- "--port" "$WORK/flag.out" || fail "--port -1 message does not name the flag"

# --- A missing model exits non-zero naming the file. ---
missing="$WORK/no-such-model.gguf"
rc=0
timeout 30 "$SERVER" --model "$missing" --port 0 --metrics-port 0 --http-port 0 >"$WORK/missing.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a missing model exited 0"
[[ $rc -ne 124 ]] || fail "a missing model did not exit"
grep -q "no-such-model.gguf" "$WORK/missing.out" || fail "the missing-model message does not name the file"

# --- Start the server. ---
PORT=$(free_port)
METRICS_PORT=$(free_port)
TESSERA_DRAIN_TIMEOUT=$DRAIN_TIMEOUT "$SERVER" --model "$MODEL" --host 127.0.0.1 \
  --port "$PORT" --metrics-port "$METRICS_PORT" --http-port 0 --device cpu --threads 1 \
  --kv-cache-memory 32M >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

# Python client: health probe (raw bytes; Debian ships no grpc_health
# module) and the generated tessera.v1 messages.
protoc --proto_path="$SRC/proto" --python_out="$WORK" "$SRC/proto/tessera/v1/inference.proto" \
  || fail "protoc could not generate the Python messages"
cat >"$WORK/client.py" <<'PYEOF'
import os, signal, sys, time
import grpc
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tessera.v1 import inference_pb2 as pb

def health(target, service=b""):
    """HealthCheckResponse.status (1 SERVING, 2 NOT_SERVING), or None."""
    request = (b"\x0a" + bytes([len(service)]) + service) if service else b""
    with grpc.insecure_channel(target) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            reply = check(request, timeout=1)
        except grpc.RpcError:
            return None
    return reply[1] if len(reply) >= 2 and reply[0] == 0x08 else 0

def wait_serving(target, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if health(target) == 1 and health(target, b"tessera.v1.Inference") == 1:
            return 0
        time.sleep(0.05)
    print("server did not become SERVING", file=sys.stderr)
    return 1

def reflection(target):
    """Server reflection lists the Inference service (list_services = field 7)."""
    with grpc.insecure_channel(target) as channel:
        info = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        replies = list(info(iter([b"\x3a\x00"]), timeout=5))
    if not replies or b"tessera.v1.Inference" not in replies[0]:
        print("reflection does not list tessera.v1.Inference", file=sys.stderr)
        return 1
    return 0

def drain(target, pid, max_tokens):
    """Streams a long generation, sends SIGTERM after the first message and
    checks that the stream still completes and new requests are refused."""
    channel = grpc.insecure_channel(target)
    generate = channel.unary_stream("/tessera.v1.Inference/Generate",
                                    request_serializer=pb.GenerateRequest.SerializeToString,
                                    response_deserializer=pb.GenerateResponse.FromString)
    complete = channel.unary_unary("/tessera.v1.Inference/Complete",
                                   request_serializer=pb.GenerateRequest.SerializeToString,
                                   response_deserializer=pb.CompleteResponse.FromString)
    request = pb.GenerateRequest(text="Once upon a time",
                                 sampling=pb.SamplingParams(temperature=0.0),
                                 stopping=pb.StoppingCriteria(max_tokens=max_tokens, ignore_eos=True))
    tokens, last, signalled = 0, None, False
    for message in generate(request, timeout=60):
        tokens += len(message.token_ids)
        last = message
        if not signalled:
            os.kill(pid, signal.SIGTERM)
            signalled = True
            time.sleep(0.05)
            try:
                complete(pb.GenerateRequest(text="Hi"), timeout=5)
                print("a request during the drain was accepted", file=sys.stderr)
                return 1
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    print("a request during the drain got", e.code(), file=sys.stderr)
                    return 1
    if not signalled or tokens != max_tokens or last.finish_reason != pb.FINISH_REASON_LENGTH:
        print("stream ended early: %d tokens, finish_reason %s" %
              (tokens, last.finish_reason if last else None), file=sys.stderr)
        return 1
    channel.close()
    return 0

if __name__ == "__main__":
    command, target = sys.argv[1], sys.argv[2]
    if command == "wait_serving":
        sys.exit(wait_serving(target, float(sys.argv[3])))
    if command == "reflection":
        sys.exit(reflection(target))
    if command == "drain":
        sys.exit(drain(target, int(sys.argv[3]), int(sys.argv[4])))
    sys.exit(2)
PYEOF

"$PY" "$WORK/client.py" wait_serving "127.0.0.1:$PORT" 60 || fail "health never became SERVING"
"$PY" "$WORK/client.py" reflection "127.0.0.1:$PORT" || fail "server reflection check failed"

# --- /metrics is served and valid. ---
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics.txt" || fail "GET /metrics failed"
grep -q "^# TYPE tessera_request_success_total counter" "$WORK/metrics.txt" \
  || fail "/metrics lacks tessera_request_success_total"
if command -v promtool >/dev/null 2>&1; then
  promtool check metrics <"$WORK/metrics.txt" || fail "promtool rejected /metrics"
else
  echo "promtool not found; skipping the /metrics format check"
fi

# --- SIGTERM during a streaming generation drains gracefully. ---
"$PY" "$WORK/client.py" drain "127.0.0.1:$PORT" "$SERVER_PID" 2000 || fail "drain check failed"
rc=0
timeout $((DRAIN_TIMEOUT + 10)) tail --pid="$SERVER_PID" -f /dev/null || fail "the server did not exit after draining"
wait "$SERVER_PID" || rc=$?
SERVER_PID=""
[[ $rc -eq 0 ]] || fail "the server exited $rc after SIGTERM, want 0"
grep -q "signal 15" "$WORK/server.log" || fail "the server log does not show the signal"

echo "PASS: server_signals"
