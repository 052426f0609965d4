#!/usr/bin/env bash
# One command for the whole test suite: installs what is missing, builds, and
# runs every test with CTest. Then it rebuilds the unit, engine, server and
# client tests under AddressSanitizer and UndefinedBehaviorSanitizer and runs
# them (scripts/test-asan.sh --unit-and-server), and the engine's tests under
# ThreadSanitizer (the
# engine does not touch gRPC, whose Debian build gives false TSan reports).
# Set TESSERA_SKIP_SANITIZERS=1 to skip the sanitizer passes.
# It also checks the deployment files offline (deploy/check.sh) and builds and
# runs the CPU container image with podman (deploy/test-image.sh, 2.5 to 4
# minutes; TESSERA_SKIP_IMAGE_TEST=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says how long the suite has run, to see where time goes.
START=$(date +%s)
step() { echo "== $* (at $(( ($(date +%s) - START) / 60 )) min)"; }
scripts/install-deps.sh
step "Release build"
scripts/build.sh
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
JOBS=${TESSERA_JOBS:-$(nproc)}

if [ "${TESSERA_SKIP_SANITIZERS:-0}" != "1" ]; then
  # The unit, engine, server and client suites under both; the end-to-end
  # scripts run in the Release pass below (scripts/test-asan.sh without
  # arguments runs them under the sanitizers too).
  step "AddressSanitizer + UndefinedBehaviorSanitizer: the unit, engine, server and client suites"
  TESSERA_ASAN_BUILD_DIR=build-asan scripts/test-asan.sh --unit-and-server

  step "ThreadSanitizer: thread pool stress, engine batching, cancellation and deadlines"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=thread \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DTESSERA_CUDA=OFF > /dev/null
  cmake --build build-tsan -j "$JOBS" --target engine_batching_test thread_pool_test
  # tests/tsan.supp: false reports from Debian's uninstrumented abseil.
  tsan_options="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
  TSAN_OPTIONS="$tsan_options" TESSERA_STRESS_SECONDS=${TESSERA_TSAN_STRESS_SECONDS:-10} \
    build-tsan/tests/thread_pool_test --gtest_brief=1
  TSAN_OPTIONS="$tsan_options" build-tsan/tests/engine_batching_test --gtest_brief=1
fi

step "Deployment files: kustomize overlays, manifests, dashboard, Prometheus rules"
deploy/check.sh

if [ "${TESSERA_SKIP_IMAGE_TEST:-0}" != "1" ]; then
  step "Container image: CPU variant built with podman, served, generated through"
  if [ "$(id -u)" -eq 0 ]; then
    deploy/test-image.sh
  else
    echo "skipped: debootstrap and rootful podman need root (run deploy/test-image.sh as root)"
  fi
fi

# The full suite runs last, so its summary closes the log.
step "CTest: the whole suite (Release)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
