#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan into
# ./build-fuzz (or $TESSERA_FUZZ_BUILD_DIR), then:
#   scripts/fuzz.sh                 replays every committed corpus, then fuzzes
#                                   each harness for $TESSERA_FUZZ_SECONDS (30)
#   scripts/fuzz.sh --replay        replays the corpora only
#   scripts/fuzz.sh HARNESS [SECS]  fuzzes one harness (gguf, tokenizer,
#                                   request, format, template, openai)
# Fuzzing runs one process at a time. New inputs go to
# build-fuzz/work/HARNESS (the committed corpus is only read); a crash is
# written to build-fuzz/artifacts/ and fails the script.
# Extra libFuzzer flags: $TESSERA_FUZZ_FLAGS (e.g. "-max_len=8192").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${TESSERA_JOBS:-$(nproc)}
SECONDS_EACH=${TESSERA_FUZZ_SECONDS:-30}
HARNESSES=(gguf tokenizer request format template openai)
CORPUS=tests/fuzz/corpus

dict_for() {
  case "$1" in
    template) echo "-dict=tests/fuzz/dict/template.dict" ;;
    openai|format) echo "-dict=tests/fuzz/dict/json.dict" ;;
  esac
}

build() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTESSERA_FUZZ=ON \
      -DTESSERA_BUILD_TESTS=OFF -DTESSERA_CUDA=OFF > /dev/null
  fi
  cmake --build "$BUILD_DIR" -j "$JOBS" --target tessera_fuzzers
}

replay() {
  mkdir -p "$BUILD_DIR/artifacts"
  for h in "${HARNESSES[@]}"; do
    echo "== replay $h: $(ls "$CORPUS/$h" | wc -l) inputs"
    "$BUILD_DIR/tests/fuzz/${h}_fuzz" -runs=0 -artifact_prefix="$BUILD_DIR/artifacts/$h-" \
      "$CORPUS/$h" 2>&1 | tail -n 2
  done
}

fuzz() {
  local h=$1 secs=$2
  mkdir -p "$BUILD_DIR/work/$h" "$BUILD_DIR/artifacts"
  echo "== fuzz $h for ${secs}s"
  set +e
  # shellcheck disable=SC2046,SC2086
  "$BUILD_DIR/tests/fuzz/${h}_fuzz" -max_total_time="$secs" -timeout=25 -rss_limit_mb=4096 -max_len=32768 \
    -print_final_stats=1 -artifact_prefix="$BUILD_DIR/artifacts/$h-" $(dict_for "$h") \
    ${TESSERA_FUZZ_FLAGS:-} "$BUILD_DIR/work/$h" "$CORPUS/$h" > "$BUILD_DIR/work/$h.log" 2>&1
  local rc=$?
  set -e
  grep -E "^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss|SUMMARY|Test unit written|fuzz invariant)" \
    "$BUILD_DIR/work/$h.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "FAILED: $h (exit $rc); log: $BUILD_DIR/work/$h.log"
    tail -n 60 "$BUILD_DIR/work/$h.log"
    return 1
  fi
}

build
case "${1:-}" in
  "")
    replay
    failed=0
    for h in "${HARNESSES[@]}"; do fuzz "$h" "$SECONDS_EACH" || failed=1; done
    exit "$failed" ;;
  --replay) replay ;;
  *) fuzz "$1" "${2:-$SECONDS_EACH}" ;;
esac
