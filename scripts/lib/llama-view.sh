#!/usr/bin/env bash
# Prints the llama.cpp folder to run: LLAMA_DIR itself, or, on CPUs with
# AMX, a view of it in OUT_DIR without ggml's "sapphirerapids" CPU variant
# (or the variants LLAMA_SKIP_VARIANTS names). That variant of the shared
# build stops with SIGILL on quantized models: its AMX path runs a tile
# instruction before any tile configuration. ggml loads the best CPU
# variant found next to the executable, so the view holds copies of the
# executables (small; the code is in lib/) and links to the other variants.
#   scripts/lib/llama-view.sh LLAMA_DIR OUT_DIR
set -euo pipefail
llama=$(cd "$1" && pwd)
out=$2
skip=${LLAMA_SKIP_VARIANTS-$(grep -q amx_tile /proc/cpuinfo && echo sapphirerapids || true)}
if [ -z "$skip" ]; then echo "$llama"; exit 0; fi
mkdir -p "$out/bin"
[ -e "$out/lib" ] || ln -s "$llama/lib" "$out/lib"
for f in "$llama"/bin/*; do
  name=$(basename "$f")
  case $name in
    libggml-cpu-*.so)
      keep=1
      for v in $skip; do [ "$name" = "libggml-cpu-$v.so" ] && keep=0; done
      [ $keep = 1 ] && ln -sf "$f" "$out/bin/$name"
      ;;
    *.so) ln -sf "$f" "$out/bin/$name" ;;
    *) cp -f "$f" "$out/bin/$name" ;;
  esac
done
echo "llama.cpp without the CPU variants: $skip" >&2
echo "$out"
