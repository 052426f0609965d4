#!/usr/bin/env bash
# One command for the whole test suite: installs what is missing, builds, and
# runs every test with CTest. Then it rebuilds the file format, quantization,
# tokenizer, template and sampler tests under AddressSanitizer and
# UndefinedBehaviorSanitizer (scripts/test-asan.sh does the whole suite), and
# the engine's tests under ThreadSanitizer (the
# engine does not touch gRPC, whose Debian build gives false TSan reports).
# Set TESSERA_SKIP_SANITIZERS=1 to skip the sanitizer passes.
# It also checks the deployment files offline (deploy/check.sh) and builds and
# runs the CPU container image with podman (deploy/test-image.sh, 2.5 to 4
# minutes; TESSERA_SKIP_IMAGE_TEST=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
JOBS=${TESSERA_JOBS:-$(nproc)}

if [ "${TESSERA_SKIP_SANITIZERS:-0}" != "1" ]; then
  # The whole suite under both (scripts/test-asan.sh) is not part of this
  # command yet: run it on its own. Here: the readers of untrusted bytes.
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer: file formats, quantization, tokenizers, templates, sampler"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DTESSERA_SANITIZE=address,undefined -DTESSERA_CUDA=OFF > /dev/null
  ASAN_TESTS=(gguf_test gguf_corrupt_test format_safetensors_test format_hf_config_test
    format_hf_folder_test format_hf_arch_test quant_test quant_plan_test tokenizer_test
    tokenizer_hf_test template_engine_test template_conformance_test sampler_test)
  cmake --build build-asan -j "$JOBS" --target "${ASAN_TESTS[@]}"
  for t in "${ASAN_TESTS[@]}"; do
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      build-asan/tests/$t --gtest_brief=1
  done

  echo "== ThreadSanitizer: thread pool stress, engine batching, cancellation and deadlines"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=thread \
    -DTESSERA_CUDA=OFF > /dev/null
  cmake --build build-tsan -j "$JOBS" --target engine_batching_test thread_pool_test
  TSAN_OPTIONS="halt_on_error=1" TESSERA_STRESS_SECONDS=${TESSERA_TSAN_STRESS_SECONDS:-10} \
    build-tsan/tests/thread_pool_test --gtest_brief=1
  TSAN_OPTIONS="halt_on_error=1" build-tsan/tests/engine_batching_test --gtest_brief=1
fi

echo "== Deployment files: kustomize overlays, manifests, dashboard, Prometheus rules"
deploy/check.sh

if [ "${TESSERA_SKIP_IMAGE_TEST:-0}" != "1" ]; then
  echo "== Container image: CPU variant built with podman, served, generated through"
  if [ "$(id -u)" -eq 0 ]; then
    deploy/test-image.sh
  else
    echo "skipped: debootstrap and rootful podman need root (run deploy/test-image.sh as root)"
  fi
fi

# The full suite runs last, so its summary closes the log.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
