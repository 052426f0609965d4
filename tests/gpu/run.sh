#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (written for one H200, to
# finish in under 8 minutes). In order, it:
#   1. builds, with the CUDA backend for sm_90 (build-gpu/), what it runs:
#      the CUDA module, tessera-server, tessera-cli, tessera-bench,
#      tessera-make-model, tessera-gpu-bandwidth and the GPU tests;
#   2. runs every GPU-labelled test: kernel, GEMM, attention and sampling
#      parity with the CPU twins, and whole-model parity on stories260K.gguf
#      (greedy tokens identical to the CPU's, logits within 1e-3); a skipped
#      GPU test counts as a failure here;
#   3. measures the device's copy bandwidth (tessera-gpu-bandwidth);
#   4. makes a random llama model shaped like TinyLlama-1.1B (bf16, dim 2048,
#      22 layers, 32 heads, 4 KV heads, ffn 5632, vocab 32000), serves it
#      with --device cuda, and runs tessera-bench at concurrency 1, 16, 64;
#   5. prints a table of output tokens/s, TTFT and ITL p50/p99, and batch-1
#      effective bandwidth (weight bytes read per token × tokens/s) as a
#      fraction of the copy bandwidth, with the issue's goals (≥ 85% at
#      batch 1; ≥ 20× batch-1 throughput at concurrency 64).
# Exit status: non-zero when the build or a GPU test fails, or the benchmark
# cannot run; the goals are reported, not enforced.
#
# Dependencies: on a machine without the Debian -dev packages and without a
# registry (the lent GPU machines), first run tests/gpu/pack-deps.sh on a
# Debian 12 machine and bring .gpu-deps/ along; this script unpacks it.
# Without either it stops at once. The lent machines take at most 64 MiB of
# working tree (tracked files, untracked ones git does not ignore, and the
# carried .gpu-deps/): tests/gpu/tree-size.sh says whether it fits.
#
# Environment: TESSERA_GPU_BUILD_DIR (build-gpu), TESSERA_GPU_ARCH (90),
# TESSERA_JOBS (all cores), TESSERA_BENCH_INPUT_LEN (128),
# TESSERA_BENCH_MAX_TOKENS (128).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
SECONDS=0
BUILD=${TESSERA_GPU_BUILD_DIR:-build-gpu}
ARCH=${TESSERA_GPU_ARCH:-90}
JOBS=${TESSERA_JOBS:-$(nproc)}
INPUT_LEN=${TESSERA_BENCH_INPUT_LEN:-128}
MAX_TOKENS=${TESSERA_BENCH_MAX_TOKENS:-128}
PY=$(command -v python3 || echo /usr/bin/python3)
WORK=$(mktemp -d)
SERVER_PID=""
STATUS=0

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { echo; echo "== [${SECONDS}s] $*"; }
die() { echo "run.sh: FAIL: $*" >&2; exit 1; }

step "GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  || die "nvidia-smi found no GPU"

# The C++ libraries come from the system when it has them (scripts/
# install-deps.sh on Debian 12), else from the packages tests/gpu/pack-deps.sh
# put in .gpu-deps/: unpacked into a prefix of their own, nothing installed.
use_packed_deps() {
  local prefix=/tmp/tessera-gpu-deps
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in .gpu-deps/*.deb; do dpkg -x "$deb" "$prefix" || return 1; done
  export PATH="$prefix/usr/bin:$PATH"
  local lib="$prefix/usr/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # gRPC's CMake package names re2 as a bare -lre2, and some headers are
  # found by path: the compiler and linker search the prefix too.
  export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  # OpenSSL's opensslconf.h and configuration.h are under the multiarch folder.
  export CPATH="$prefix/usr/include:$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
  # pkg-config (PCRE2) reads the prefix's .pc files.
  local pc="$lib/pkgconfig:$prefix/usr/share/pkgconfig"
  export PKG_CONFIG_PATH="$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  CMAKE_DEPS=(-DCMAKE_PREFIX_PATH="$prefix/usr")
  echo "run.sh: using .gpu-deps ($(wc -l 2>/dev/null < .gpu-deps/packages.txt || echo '?') packages," \
    "$(du -sh .gpu-deps | cut -f1)) in $prefix"
}

step "build for sm_${ARCH} in $BUILD"
CMAKE_DEPS=()
if command -v grpc_cpp_plugin > /dev/null; then
  echo "run.sh: the system has the C++ dependencies"
elif compgen -G ".gpu-deps/*.deb" > /dev/null; then
  use_packed_deps || die "cannot unpack .gpu-deps"
else
  # scripts/install-deps.sh needs a package registry, which the lent machines cannot reach.
  die "no C++ dependencies: no system gRPC (grpc_cpp_plugin) and no .gpu-deps/*.deb;" \
    "run tests/gpu/pack-deps.sh on a Debian 12 machine with apt and bring .gpu-deps along," \
    "or run scripts/install-deps.sh first where a package registry is reachable"
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "${CMAKE_DEPS[@]}" >"$WORK/configure.log" 2>&1 \
  || { cat "$WORK/configure.log"; die "configure"; }
# Only what this script runs, not the CPU tests and benchmarks: ctest -L gpu
# needs only the GPU tests (one executable gpu_NAME per tests/gpu/NAME.cc).
TARGETS=(tessera_cuda tessera-server tessera-cli tessera-bench tessera-make-model
         tessera-gpu-bandwidth)
for src in tests/gpu/*_test.cc; do TARGETS+=("gpu_$(basename "$src" .cc)"); done
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" >"$WORK/build.log" 2>&1 \
  || { tail -n 60 "$WORK/build.log"; die "build"; }

step "GPU tests (ctest -L gpu)"
ctest --test-dir "$BUILD" -L gpu --output-on-failure -j 4 2>&1 | tee "$WORK/ctest.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || { STATUS=1; echo "run.sh: GPU tests FAILED" >&2; }
if grep -q "Not Run\|Skipped" "$WORK/ctest.log"; then
  STATUS=1
  echo "run.sh: some GPU tests were skipped or not run on a GPU machine" >&2
fi
grep -q "tests passed\|tests failed" "$WORK/ctest.log" || { STATUS=1; echo "run.sh: ctest ran nothing" >&2; }

step "copy bandwidth"
"$BUILD/tests/gpu/tessera-gpu-bandwidth" | tee "$WORK/bandwidth.txt" || die "bandwidth"
BANDWIDTH=$(awk '/^copy_bandwidth_bytes_per_second/ {print $2}' "$WORK/bandwidth.txt")
[[ -n "$BANDWIDTH" ]] || die "no bandwidth figure"

# TinyLlama-1.1B's shape. Bytes a decode step reads: every matrix (bf16),
# the untied output head, and the f32 norms; the embedding table is only
# looked up, one row per token.
DIM=2048 LAYERS=22 HEADS=32 KV_HEADS=4 FFN=5632 VOCAB=32000
HEAD_DIM=$((DIM / HEADS))
KV_DIM=$((HEAD_DIM * KV_HEADS))
LAYER_BYTES=$(((2 * DIM * DIM + 2 * DIM * KV_DIM + 3 * DIM * FFN) * 2 + 2 * DIM * 4))
WEIGHT_BYTES=$((LAYERS * LAYER_BYTES + VOCAB * DIM * 2 + DIM * 4))
MODEL=$WORK/tinyllama-shaped-bf16.gguf
step "model: llama bf16 dim $DIM, $LAYERS layers, $HEADS/$KV_HEADS heads, ffn $FFN, vocab $VOCAB"
"$BUILD/tools/tessera-make-model" --arch llama --dim "$DIM" --layers "$LAYERS" --heads "$HEADS" \
  --kv-heads "$KV_HEADS" --ffn "$FFN" --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf \
  --dtype bf16 --out "$MODEL" || die "tessera-make-model"

step "tessera-server --device cuda"
read -r PORT METRICS_PORT < <("$PY" -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
"$BUILD/server/tessera-server" --model "$MODEL" --device cuda --dtype bf16 --port "$PORT" \
  --metrics-port "$METRICS_PORT" --http-port 0 --max-num-seqs 64 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
if ! "$BUILD/client/tessera-cli" --server "127.0.0.1:$PORT" info --wait 180 >"$WORK/info.txt" 2>&1; then
  tail -n 30 "$WORK/server.log"
  die "server did not become ready"
fi
grep -E "device|weight|KV cache" "$WORK/server.log" | tail -n 5

for c in 1 16 64; do
  step "tessera-bench --concurrency $c"
  requests=$((c < 8 ? 8 : 2 * c))
  "$BUILD/client/bench/tessera-bench" --server "127.0.0.1:$PORT" --concurrency "$c" \
    --num-requests "$requests" --input-len "$INPUT_LEN" --max-tokens "$MAX_TOKENS" \
    --ignore-eos --warmup 2 --json >"$WORK/bench-$c.json" || die "tessera-bench at concurrency $c"
done

step "results"
if ! "$PY" - "$WORK" "$WEIGHT_BYTES" "$BANDWIDTH" <<'PYEOF'
import json, sys
work, weight_bytes, bandwidth = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rows = {c: json.load(open(f"{work}/bench-{c}.json")) for c in (1, 16, 64)}
ms = lambda s: f"{1000 * s:8.1f}"
print("| concurrency | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | failed |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for c, r in rows.items():
    print(f"| {c} | {r['output_tokens_per_second']:.1f} | {ms(r['ttft_seconds']['p50'])} | "
          f"{ms(r['ttft_seconds']['p99'])} | {ms(r['itl_seconds']['p50'])} | "
          f"{ms(r['itl_seconds']['p99'])} | {r['failed']} |")
tps1 = rows[1]["output_tokens_per_second"]
effective = weight_bytes * tps1
ratio64 = rows[64]["output_tokens_per_second"] / tps1 if tps1 > 0 else 0.0
print()
print(f"weight bytes read per token: {weight_bytes / 1e9:.3f} GB")
print(f"copy bandwidth (read + write): {bandwidth / 1e12:.3f} TB/s")
print(f"batch-1 effective bandwidth: {effective / 1e12:.3f} TB/s = "
      f"{100 * effective / bandwidth:.1f}% of copy bandwidth (goal >= 85%: "
      f"{'met' if effective >= 0.85 * bandwidth else 'NOT met'})")
print(f"concurrency 64 / batch 1 output tok/s: {ratio64:.1f}x (goal >= 20x: "
      f"{'met' if ratio64 >= 20 else 'NOT met'})")
if any(r["failed"] for r in rows.values()):
    sys.exit(1)
PYEOF
then
  STATUS=1
  echo "run.sh: benchmark requests failed" >&2
fi
step "done in ${SECONDS}s"
exit "$STATUS"
