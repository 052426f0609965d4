#!/usr/bin/env bash
# Packs the C++ build dependencies for a GPU machine that has CUDA, CMake and
# ninja but cannot reach a package registry. Run on Debian 12 with apt access;
# it downloads the Debian packages of the libraries Tessera builds against
# (gRPC, protobuf, Abseil, prometheus-cpp, spdlog, fmt, GoogleTest, Google
# Benchmark, nlohmann-json) with their library dependencies into .gpu-deps/
# (ignored by git, ~27 MB). tests/gpu/run.sh unpacks them into a prefix of
# its own (dpkg -x, nothing installed system-wide) when the machine lacks them.
#   tests/gpu/pack-deps.sh [DIR]     (default: .gpu-deps)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-.gpu-deps}
DEV=(libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
     libabsl-dev prometheus-cpp-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
     libbenchmark-dev nlohmann-json3-dev)
# What any glibc-based image with a C++ toolchain has already: the C and C++
# runtimes, the compiler itself, and the base system.
BASE='^(libc6|libc6-dev|libgcc-s1|libstdc\+\+6|gcc-12-base|libc-dev-bin|linux-libc-dev|libcrypt.*|debconf|perl.*|dpkg|tar|coreutils|libselinux1|libpcre.*|zlib1g|libzstd1|liblzma5|libbz2-1.0|libacl1|libattr1|libaudit.*|libcap.*|libgmp10|libmd0|libsystemd0|libudev1|libdb5.3|base-files|bash|debianutils|sensible-utils|mawk|install-info|libtinfo6|libncurses.*|gcc.*|g\+\+.*|cpp.*|binutils.*|libstdc\+\+-12-dev|libgcc-12-dev|libasan8|libtsan2|liblsan0|libubsan1|libitm1|libquadmath0|libatomic1|libgomp1|libcc1-0|libisl23|libmpc3|libmpfr6|libctf.*|libbinutils|libgprofng0|libjansson4|libsframe.*|libhwasan0)$'
mapfile -t packages < <(apt-cache depends --recurse --no-recommends --no-suggests \
  --no-conflicts --no-breaks --no-replaces --no-enhances "${DEV[@]}" |
  grep -E '^[a-z0-9]' | sort -u | grep -v -E "$BASE")
mkdir -p "$OUT"
(cd "$OUT" && apt-get download "${packages[@]}")
echo "pack-deps: ${#packages[@]} packages, $(du -sh "$OUT" | cut -f1) in $OUT"
