#!/usr/bin/env bash
# The test suite under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: a Debug build at -O1 in ./build-asan (or
# $TESSERA_ASAN_BUILD_DIR) of every test and of the binaries the end-to-end
# tests drive, then CTest there. Any report fails the test that triggered it:
# ASan aborts, and UBSan is built with -fno-sanitize-recover.
# Extra CTest arguments are passed on, e.g. scripts/test-asan.sh -R Tokenizer.
# --unit-and-server (first argument): only the unit, engine, server and
# client suites (CTest labels engine, server, client), not the end-to-end
# scripts, and only the test executables are built; scripts/test.sh runs
# this in CI.
set -euo pipefail
UNIT_ONLY=0
if [ "${1:-}" = "--unit-and-server" ]; then
  UNIT_ONLY=1
  shift
fi
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_ASAN_BUILD_DIR:-build-asan}
JOBS=${TESSERA_JOBS:-$(nproc)}

# Debian's gRPC, protobuf and abseil are not instrumented: ASan still sees
# every heap block (malloc is intercepted), but the few objects they keep
# until exit are reported as leaks. tests/lsan.supp names them, narrowly.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# -O1 keeps the suite fast and the reports exact; -g1 (line tables only)
# is enough for symbolized stacks and compiles a quarter faster than -g.
# The server, the client and the tests themselves build at -O0, which
# compiles in about half the time; the tests spend their time in the engine.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DTESSERA_NON_ENGINE_FLAGS=-O0 \
  -DTESSERA_SANITIZE=address,undefined -DTESSERA_CUDA=OFF > /dev/null
# Every test executable, and the binaries the end-to-end tests drive; not the
# benchmarks (tessera-microbench, tessera-engine-bench, tessera-load-bench),
# which no test runs.
TESTS=$(ninja -C "$BUILD_DIR" -t targets all | sed -n 's/^\([A-Za-z0-9_]*_test\): phony$/\1/p' |
  grep -v '^cmake_object_order')
if [ "$UNIT_ONLY" = 1 ]; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target $TESTS
  set -- -L '^(engine|server|client)$' "$@"
else
  cmake --build "$BUILD_DIR" -j "$JOBS" --target $TESTS tessera-server tessera-cli \
    tessera-make-model tessera-http-test-server tessera-bench tessera-quantize tessera-eval
fi

# Left out of this pass (they all run in the Release pass of scripts/test.sh):
EXCLUDE=(
  # Shell checks that run no binary of ours (a fake apt-get; ldd of the
  # binaries): nothing for the sanitizers to watch.
  apt_mirror_test cuda_link_check
)
EXCLUDE_RE="^($(IFS='|'; echo "${EXCLUDE[*]}"))\$"
# ASan and LSan reports go to files, one per process: the end-to-end scripts
# stop their servers without looking at how they exited, so a report there (a
# leak found at exit) would otherwise pass unseen. Any report fails this
# script. (GCC's UBSan ignores log_path beside ASan: its reports go to the
# process's stderr, and the process exits 1 at the first one.)
REPORTS=$PWD/$BUILD_DIR/sanitizer-reports
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export ASAN_OPTIONS=$ASAN_OPTIONS:log_path=$REPORTS/asan
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 1200 \
  ${EXCLUDE_RE:+-E "$EXCLUDE_RE"} "$@" || status=$?
if [ -n "$(ls -A "$REPORTS")" ]; then
  for f in "$REPORTS"/*; do echo "== $f"; cat "$f"; done
  echo "FAIL: sanitizer reports above ($REPORTS)" >&2
  exit 1
fi
exit $status
