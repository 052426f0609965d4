#!/usr/bin/env bash
# Prints, one a line, the Debian/Ubuntu packages that own the shared libraries
# the given executables load. The runtime stage installs exactly these, so the
# image carries no compiler or -dev package, and the list stays right on both
# bases (Debian 12 and Ubuntu 24.04 name some library packages differently,
# e.g. the t64 suffixes).
#   runtime-packages.sh EXECUTABLE...
set -euo pipefail

owner() {
  local lib=$1 hit
  # dpkg records either the /lib or the /usr/lib spelling of merged-/usr paths.
  local real
  real=$(readlink -f "$lib")
  for candidate in "$lib" "$real" "${real#/usr}"; do
    if hit=$(dpkg -S "$candidate" 2>/dev/null); then
      # "libfoo1:amd64: /usr/lib/..." -> libfoo1
      echo "${hit%%: *}" | head -n 1 | cut -d: -f1
      return 0
    fi
  done
  return 1
}

status=0
packages=()
for exe in "$@"; do
  ldd_out=$(ldd "$exe") || { echo "runtime-packages: ldd failed on $exe" >&2; exit 1; }
  while read -r name arrow path _; do
    if [ "$arrow" != "=>" ]; then continue; fi
    if [ "$path" = "not" ]; then
      case "$name" in
        # The NVIDIA container runtime mounts the driver's libraries at run time.
        libcuda.so.*|libnvidia-*) continue ;;
      esac
      echo "runtime-packages: $exe needs $name, which is not installed" >&2
      status=1
    elif pkg=$(owner "$path"); then
      packages+=("$pkg")
    else
      echo "runtime-packages: no package owns $path (needed by $exe)" >&2
      status=1
    fi
  done <<< "$ldd_out"
done
[ "$status" -eq 0 ] || exit "$status"
printf '%s\n' "${packages[@]}" | sort -u
