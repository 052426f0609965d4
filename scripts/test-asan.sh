#!/usr/bin/env bash
# The test suite under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: a Debug build at -O1 in ./build-asan (or
# $TESSERA_ASAN_BUILD_DIR) of every test and of the binaries the end-to-end
# tests drive, then CTest there. Any report fails the test that triggered it:
# ASan aborts, and UBSan is built with -fno-sanitize-recover.
# Extra CTest arguments are passed on, e.g. scripts/test-asan.sh -R Tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_ASAN_BUILD_DIR:-build-asan}
JOBS=${TESSERA_JOBS:-$(nproc)}

# Debian's gRPC, protobuf and abseil are not instrumented: ASan still sees
# every heap block (malloc is intercepted), but the few objects they keep
# until exit are reported as leaks. tests/lsan.supp names them, narrowly.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# -O1 keeps the suite some 3 times faster than -O0, and ASan's reports exact.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DTESSERA_SANITIZE=address,undefined -DTESSERA_CUDA=OFF > /dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"

# Left out of this pass (they all run in the Release pass of scripts/test.sh):
EXCLUDE=(
)
EXCLUDE_RE=$(IFS='|'; echo "${EXCLUDE[*]}")
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 1200 \
  ${EXCLUDE_RE:+-E "$EXCLUDE_RE"} "$@"
