#!/usr/bin/env bash
# The CUDA backend module as the server sees it, on any machine:
#  - --device cuda without a usable GPU (or without the module) exits 1 at
#    once with a message naming the cause;
#  - --device auto falls back to the CPU (logging why), still reproduces the
#    reference greedy tokens (tests/e2e/golden.sh), and serves /metrics;
#  - bad --gpu-memory-utilization / --dtype values exit 2.
# On a machine where the module loads and a GPU is present, the refusal
# checks are skipped (they would succeed in loading).
#
# usage: cuda_module.sh TESSERA_SERVER TESSERA_CLI TESSERA_MAKE_MODEL
# env:   TESSERA_SOURCE_DIR (the repository root)
set -uo pipefail

SERVER_BIN=${1:?usage: cuda_module.sh SERVER CLI MAKE_MODEL}
CLI=${2:?usage: cuda_module.sh SERVER CLI MAKE_MODEL}
MAKE_MODEL=${3:?usage: cuda_module.sh SERVER CLI MAKE_MODEL}
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must be set}
PY=/usr/bin/python3
MODEL=$SRC/models/stories260K.gguf
MODULE=$(dirname "$SERVER_BIN")/libtessera_cuda.so
WORK=$(mktemp -d)
SERVER_PID=""

fail() {
  echo "cuda_module.sh: FAIL: $*" >&2
  for f in "$WORK"/*.log; do
    [[ -f "$f" ]] || continue
    echo "--- $f ---" >&2
    tail -n 20 "$f" >&2
  done
  exit 1
}

# shellcheck source=tests/e2e/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
trap e2e_cleanup EXIT


# Runs the server with --device cuda (plus $@), expecting exit 1 within 60 s
# and a log line matching the regular expression in $EXPECT.
expect_refusal() {
  local name=$1 expect=$2
  shift 2
  local status=0
  timeout 60 "$SERVER_BIN" --model "$MODEL" --port 0 --metrics-port 0 --http-port 0 --device cuda "$@" \
    >"$WORK/$name.log" 2>&1 || status=$?
  [[ $status -eq 1 ]] || fail "$name: exit status $status, want 1"
  grep -Eq -e "$expect" "$WORK/$name.log" || fail "$name: no message matching '$expect'"
  echo "cuda_module.sh: $name: refused: $(grep -E -e "$expect" "$WORK/$name.log" | head -n 1)"
}

[[ -f "$MODEL" ]] || fail "model not found: $MODEL"

# 1. Flags are validated before anything loads.
for bad in "--gpu-memory-utilization 0" "--gpu-memory-utilization 1.01" "--dtype f8"; do
  read -r -a args <<<"$bad"
  status=0
  "$SERVER_BIN" --model "$MODEL" "${args[@]}" >"$WORK/flags.log" 2>&1 || status=$?
  [[ $status -eq 2 ]] || fail "'$bad' exited $status, want 2"
  grep -q -- "${args[0]}" "$WORK/flags.log" || fail "'$bad': the message does not name the flag"
done
echo "cuda_module.sh: bad --gpu-memory-utilization / --dtype exit 2"

# 2. --device cuda refuses, naming the cause.
TESSERA_CUDA_MODULE=$WORK/missing/libtessera_cuda.so \
  expect_refusal missing_module "--device cuda: CUDA backend module not found"
echo "not a shared object" >"$WORK/fake.so"
TESSERA_CUDA_MODULE=$WORK/fake.so \
  expect_refusal bad_module "--device cuda: cannot load the CUDA backend module .*fake.so: "
GPU_PRESENT=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPU_PRESENT=1; fi
if [[ -f "$MODULE" && $GPU_PRESENT -eq 0 ]]; then
  expect_refusal no_gpu "--device cuda: CUDA backend \(.*\): (cudaGetDeviceCount failed: .+|no CUDA devices)"
elif [[ ! -f "$MODULE" ]]; then
  echo "cuda_module.sh: no module next to the server (CUDA not built): default lookup refuses"
  expect_refusal no_module "--device cuda: CUDA backend module not found"
fi

# 3. --device auto falls back to the CPU and serves metrics.
if [[ $GPU_PRESENT -eq 0 ]]; then
  read -r PORT METRICS_PORT < <(e2e_free_ports)
  "$SERVER_BIN" --model "$MODEL" --port "$PORT" --metrics-port "$METRICS_PORT" --http-port 0 --device auto \
    --threads 2 >"$WORK/auto.log" 2>&1 &
  SERVER_PID=$!
  "$CLI" --server "127.0.0.1:$PORT" info --wait 30 >"$WORK/info.txt" 2>&1 \
    || fail "--device auto: server not SERVING within 30 s"
  grep -q "device auto: .*; using the CPU" "$WORK/auto.log" || fail "--device auto: no fallback log line"
  grep -qi "device.*cpu" "$WORK/info.txt" || fail "--device auto: info does not report the CPU"
  "$CLI" --server "127.0.0.1:$PORT" generate "Once upon a time" --max-tokens 4 --temperature 0 \
    >"$WORK/gen.txt" 2>&1 || fail "--device auto: generate failed"
  curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics.txt" \
    || fail "--device auto: /metrics did not answer"
  grep -q "^tessera_generation_tokens_total" "$WORK/metrics.txt" \
    || fail "--device auto: /metrics lacks tessera_generation_tokens_total"
  echo "cuda_module.sh: --device auto fell back to the CPU: $(grep -o 'device auto: .*' "$WORK/auto.log" | head -n 1)"
  echo "cuda_module.sh: /metrics served ($(grep -c '^tessera_' "$WORK/metrics.txt") samples)"
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || fail "--device auto: server exited non-zero after SIGTERM"
  SERVER_PID=""
fi

# 4. The reference greedy tokens under --device auto.
TESSERA_GOLDEN_SERVER_ARGS="--device auto" bash "$SRC/tests/e2e/golden.sh" "$SERVER_BIN" "$CLI" \
  "$MAKE_MODEL" || fail "golden tokens under --device auto"
echo "cuda_module.sh: PASS"
