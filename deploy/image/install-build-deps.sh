#!/usr/bin/env bash
# Installs what the container's builder stage needs to compile tessera-server
# and tessera-cli (no tests), on either base the Dockerfile supports: Debian 12
# (the CPU variant) or Ubuntu 24.04 (the CUDA images). The two name these
# packages alike today; the per-distro lists are where they would diverge.
set -euo pipefail

# shellcheck disable=SC1091
. /etc/os-release
COMMON=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev prometheus-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  # Tokenizers (PCRE2 regexes, ICU NFC), the HTTP front (Boost.Beast).
  libpcre2-dev libicu-dev libboost-dev zlib1g-dev
  # TLS: OpenSSL (the runtime stage gets libssl3 from the binaries' libraries).
  libssl-dev
  # bench/ is configured even when only the server is built.
  libbenchmark-dev
)
case "${ID}:${VERSION_ID}" in
  debian:12) EXTRA=() ;;
  ubuntu:24.04) EXTRA=() ;;
  *)
    echo "install-build-deps: unsupported base ${PRETTY_NAME:-$ID}; expected Debian 12 or Ubuntu 24.04" >&2
    exit 1
    ;;
esac

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${COMMON[@]}" "${EXTRA[@]}"
rm -rf /var/lib/apt/lists/*
