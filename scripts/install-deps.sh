#!/usr/bin/env bash
# Installs the build and test dependencies of Tessera from Debian 12's apt.
# Safe to run repeatedly: it installs only what is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev prometheus-cpp-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  # The HTTP front: Boost.Beast on Boost.Asio (header-only in Boost 1.74).
  libboost-dev
  # Tokenizers: PCRE2 (pre-tokenizer regexes), ICU (NFC normalization).
  libpcre2-dev libicu-dev
  # TLS: OpenSSL checks the certificate files; openssl makes the test certificates.
  libssl-dev openssl
  python3 python3-grpcio python3-protobuf prometheus curl
  # tests/template-reference/render_reference.py (reference chat template renderer).
  python3-jinja2
  # deploy/check.sh (the manifest checker) and deploy/test-image.sh (podman
  # on a debootstrap base; runc, as Debian 12's crun refuses a hybrid cgroup
  # layout such as this machine's).
  python3-yaml podman debootstrap runc
  # scripts/fuzz.sh: libFuzzer harnesses (clang with its sanitizer runtimes).
  clang libclang-rt-14-dev zlib1g-dev
)
# `kubectl kustomize` renders the Kubernetes overlays. Debian 12 ships kubectl
# in kubernetes-client; a kubectl from elsewhere (a newer one, say) will do
# and must not be replaced, since both packages own /usr/bin/kubectl.
if ! command -v kubectl > /dev/null; then
  PACKAGES+=(kubernetes-client)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
