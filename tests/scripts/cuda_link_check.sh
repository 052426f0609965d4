#!/usr/bin/env bash
# Checks who links CUDA:
#  - no executable of the build outside tests/gpu/ (tessera-server first of
#    all) may depend on libcudart or libcublas, directly (readelf -d) or
#    through another library (ldd): cuBLAS's thread-local storage would
#    break the metrics exposer's threads, and the binaries must run on
#    machines without CUDA;
#  - the CUDA backend module, when built, must need libcublas and carry the
#    CUDA runtime (linked statically: its cudaGetDeviceCount is defined in it).
#
# usage: cuda_link_check.sh BUILD_DIR [MODULE]
set -uo pipefail

BUILD=${1:?usage: cuda_link_check.sh BUILD_DIR [MODULE]}
MODULE=${2:-}
failures=0
checked=0

while IFS= read -r -d '' exe; do
  case "$exe" in */tests/gpu/*|*/CMakeFiles/*) continue ;; esac
  head -c 4 "$exe" | grep -q "ELF" || continue
  checked=$((checked + 1))
  needed=$(readelf -d "$exe" 2>/dev/null)
  loaded=$(ldd "$exe" 2>/dev/null)
  if grep -Eq "NEEDED.*lib(cudart|cublas)" <<<"$needed"; then
    echo "cuda_link_check: FAIL: $exe links CUDA directly:" >&2
    grep -E "lib(cudart|cublas)" <<<"$needed" >&2
    failures=$((failures + 1))
  elif grep -Eq "lib(cudart|cublas)" <<<"$loaded"; then
    echo "cuda_link_check: FAIL: $exe loads CUDA through a dependency:" >&2
    grep -E "lib(cudart|cublas)" <<<"$loaded" >&2
    failures=$((failures + 1))
  fi
done < <(find "$BUILD" -type f -perm -u+x ! -name '*.so' ! -name '*.sh' -print0)

[[ -x "$BUILD/server/tessera-server" ]] || { echo "cuda_link_check: FAIL: no tessera-server in $BUILD" >&2; exit 1; }
echo "cuda_link_check: $checked executables, none linking libcudart or libcublas"

if [[ -n "$MODULE" ]]; then
  # Whole outputs first: grep -q closing a pipe early would fail it under pipefail.
  dynamic=$(readelf -d "$MODULE")
  symbols=$(readelf -sW "$MODULE")
  grep -Eq "NEEDED.*libcublas\.so" <<<"$dynamic" \
    || { echo "cuda_link_check: FAIL: $MODULE does not link libcublas" >&2; failures=$((failures + 1)); }
  grep -Eq " cudaGetDeviceCount$" <<<"$symbols" \
    || { echo "cuda_link_check: FAIL: $MODULE does not contain the CUDA runtime" >&2; failures=$((failures + 1)); }
  exported=$(nm -D --defined-only "$MODULE" | awk '{print $3}' | grep -v '^_' | sort | tr '\n' ' ')
  [[ "$exported" == "tessera_cuda_create_backend tessera_cuda_module_abi " ]] \
    || { echo "cuda_link_check: FAIL: $MODULE exports: $exported" >&2; failures=$((failures + 1)); }
  echo "cuda_link_check: $MODULE links cuBLAS and the static CUDA runtime, exports the two entry points"

fi
[[ $failures -eq 0 ]] || exit 1
echo "cuda_link_check: PASS"
