#!/usr/bin/env bash
# Builds Tessera (scripts/build.sh) and runs the microbenchmarks five times,
# printing the median of each. Extra arguments go to tessera-microbench, e.g.
#   scripts/microbench.sh --benchmark_filter=Linear --threads=1
# (--threads=N or TESSERA_BENCH_THREADS sets the CPU backend's threads.)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
scripts/build.sh
# Console rows are named BM_..._mean/_median/_stddev/_cv; keep the medians
# and everything that is not a result row (context, headers, JSON).
"$BUILD_DIR/bench/tessera-microbench" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true "$@" |
  awk '!/^BM_/ || $1 ~ /_median$/'
