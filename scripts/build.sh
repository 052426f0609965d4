#!/usr/bin/env bash
# Configures and builds Tessera (Release) into ./build, or $TESSERA_BUILD_DIR.
# Extra arguments go to CMake's configure step, e.g. -DTESSERA_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
JOBS=${TESSERA_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
