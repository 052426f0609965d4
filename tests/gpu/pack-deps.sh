#!/usr/bin/env bash
# Packs the C++ build dependencies for a GPU machine that has CUDA, CMake and
# ninja but cannot reach a package registry. Run on Debian 12 with apt access
# and a C++ compiler: it downloads the Debian packages of the libraries
# Tessera builds against (gRPC, protobuf, Abseil, prometheus-cpp, spdlog, fmt,
# GoogleTest, Google Benchmark, nlohmann-json, Boost, PCRE2, ICU, OpenSSL,
# zlib, pkg-config) with their library dependencies, unpacks them, drops what
# the build never reads (documentation, static libraries that have a shared
# twin, the Boost libraries that no source reaches) and packs the rest as one
# package, .gpu-deps/tessera-gpu-deps.deb (ignored by git, ~23 MiB; its
# packages are listed in .gpu-deps/packages.txt). The lent machines take at
# most 64 MiB of working tree, .gpu-deps included: tests/gpu/tree-size.sh says
# whether it fits. tests/gpu/run.sh unpacks it into a prefix of its own
# (dpkg -x, nothing installed system-wide) when the machine lacks them.
#   tests/gpu/pack-deps.sh [DIR]     (default: .gpu-deps)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-.gpu-deps}
# Every find_package and pkg_check_modules of the CMakeLists.txt files.
DEV=(libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
     libabsl-dev prometheus-cpp-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
     libbenchmark-dev nlohmann-json3-dev libboost-dev libpcre2-dev libicu-dev libssl-dev
     zlib1g-dev pkgconf)
# What any glibc-based image with a C++ toolchain has already: the C and C++
# runtimes, the compiler itself, and the base system. (Not zlib1g or
# libpcre2-8-0: the libz.so and libpcre2-8.so links of the -dev packages
# point at their exact versions.) And what the build never runs: catch2
# (spdlog's tests) and the ICU tools.
BASE=(libc6 libc6-dev libgcc-s1 'libstdc\+\+6' gcc-12-base libc-dev-bin linux-libc-dev 'libcrypt.*'
      debconf 'perl.*' dpkg tar coreutils libselinux1 libzstd1 liblzma5 libbz2-1.0 libacl1 libattr1
      'libaudit.*' 'libcap.*' libgmp10 libmd0 libsystemd0 libudev1 libdb5.3 base-files bash
      debianutils sensible-utils mawk install-info libtinfo6 'libncurses.*' 'gcc.*' 'g\+\+.*'
      'cpp.*' 'binutils.*' 'libstdc\+\+-12-dev' libgcc-12-dev libasan8 libtsan2 liblsan0 libubsan1
      libitm1 libquadmath0 libatomic1 libgomp1 libcc1-0 libisl23 libmpc3 libmpfr6 'libctf.*'
      libbinutils libgprofng0 libjansson4 'libsframe.*' libhwasan0 catch2 icu-devtools)
BASE_RE="^($(IFS="|"; echo "${BASE[*]}"))$"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Downloads the packages into $WORK/debs and lists them in $WORK/packages.txt.
download() {
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${DEV[@]}" |
    grep -E '^[a-z0-9]' | sort -u | grep -v -E "$BASE_RE" > "$WORK/packages.txt"
  mkdir -p "$WORK/debs"
  (cd "$WORK/debs" && xargs -a "$WORK/packages.txt" apt-get download -q > /dev/null)
  local deb
  for deb in "$WORK"/debs/*.deb; do
    dpkg-deb --show --showformat="\${Package} \${Version}\n" "$deb"
  done > "$WORK/packages.txt"
}

# A static library goes where a shared one of the same name is there and no
# CMake package file names it (CMake checks that the files it imports exist).
prune_static() {
  local root=$1 a
  local -a cmake_files
  mapfile -t cmake_files < <(find "$root" -name '*.cmake')
  while IFS= read -r a; do
    [[ -e ${a%.a}.so ]] || continue
    grep -qF "$(basename "$a")" /dev/null "${cmake_files[@]}" && continue
    rm "$a"
  done < <(find "$root" -name '*.a')
}

# The Boost headers to keep, one line each: the folder (or top-level header)
# of every Boost library that the compiler reaches from the Boost headers the
# sources include, whole, so that another compiler's configuration branches
# find theirs (boost/numeric holds several libraries: its subfolders count).
boost_units() {
  local include=$1/usr/include
  grep -rhoE --include='*.cc' --include='*.h' --include='*.cu' '#include <boost/[^>]+>' \
    server client engine tools bench tests | sort -u > "$WORK/boost.cc"
  c++ -std=c++20 -M -I "$include" -I "$include/x86_64-linux-gnu" -x c++ "$WORK/boost.cc" |
    tr -s ' \134' '\n' | sed -n "s|^$include/||p" | grep '^boost/' |
    awk -F/ '$2 == "numeric" && NF > 3 {print $1 "/" $2 "/" $3; next}
             NF > 2 {print $1 "/" $2; next} {print}' | sort -u
}

# Keeps the Boost libraries that boost_units names (all of Boost when the
# compiler cannot say).
prune_boost() {
  local include=$1/usr/include units unit
  if ! units=$(boost_units "$1") || [[ -z $units ]]; then
    echo "pack-deps: no Boost header list from c++; Boost kept whole" >&2
    return
  fi
  mkdir "$WORK/boost-kept"
  while IFS= read -r unit; do
    mkdir -p "$WORK/boost-kept/$(dirname "$unit")"
    mv "$include/$unit" "$WORK/boost-kept/$unit"
  done <<< "$units"
  rm -rf "$include/boost"
  mv "$WORK/boost-kept/boost" "$include/boost"
}

# Some packages install into /lib, which Debian 12 systems link to /usr/lib,
# and some -dev links are absolute (libz.so -> /lib/x86_64-linux-gnu/...):
# the same merge here, and such links made relative, so that every library is
# under the prefix's usr/lib (run.sh's library paths) and no link leaves it.
merge_usr() {
  local root=$1 link target
  if [[ -d $root/lib ]]; then
    cp -a "$root/lib/." "$root/usr/lib/"
    rm -rf "${root:?}/lib"
  fi
  while IFS= read -r link; do
    target=$(readlink "$link")
    [[ $target == /usr/* ]] || target=/usr$target
    [[ -e $root$target ]] || continue
    ln -sfn "$(realpath -s --relative-to="$(dirname "$link")" "$root$target")" "$link"
  done < <(find "$root" -type l -lname '/*')
}

# Unpacks the packages into $WORK/root, less what the build does not read.
unpack() {
  local root=$WORK/root deb
  for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$root"; done
  merge_usr "$root"
  rm -rf "$root"/usr/share/{doc,doc-base,man,info,lintian,locale,bug} "$root/usr/src"
  prune_static "$root"
  prune_boost "$root"
  if find "$root" -type l -lname '/*' | grep .; then
    echo "pack-deps: these links point out of the prefix" >&2
  fi
}

# One package of the unpacked tree, xz-compressed (dpkg -x reads it).
pack() {
  local root=$WORK/root
  mkdir -p "$root/DEBIAN"
  cat > "$root/DEBIAN/control" <<EOF
Package: tessera-gpu-deps
Version: 1
Architecture: $(dpkg --print-architecture)
Maintainer: Tessera <tessera@localhost>
Description: C++ build dependencies of Tessera for tests/gpu/run.sh
 Debian 12 packages, unpacked and pruned by tests/gpu/pack-deps.sh.
EOF
  mkdir -p "$OUT"
  rm -f "$OUT"/*.deb
  dpkg-deb --root-owner-group -Zxz -z9 -b "$root" "$OUT/tessera-gpu-deps.deb" > /dev/null
  cp "$WORK/packages.txt" "$OUT/packages.txt"
}

download
unpack
pack
echo "pack-deps: $(wc -l < "$OUT/packages.txt") packages, $(du -sh "$OUT" | cut -f1) in $OUT"
