#!/usr/bin/env bash
# Writes tests/data/quant/tiny-q4_k_m.gguf and tiny-q8_0.gguf: llama.cpp's
# llama-quantize applied to a 2-layer f16 model from tessera-make-model
# (ffn 96, so the ffn_down rows are not whole K blocks and fall back).
#   tools/quant-vectors/gen-models.sh MAKE_MODEL [LLAMA_CPP_DIR]
set -euo pipefail
MAKE_MODEL=$1
LLAMA=${2:-/work/shared/tools/llama.cpp}
OUT=$(cd "$(dirname "$0")/../../tests/data/quant" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$MAKE_MODEL" --dim 256 --layers 2 --heads 2 --kv-heads 1 --ffn 96 --vocab-size 260 \
  --dtype f16 --seed 7 --out "$TMP/tiny-f16.gguf" > /dev/null
export LD_LIBRARY_PATH=$LLAMA/lib
"$LLAMA/bin/llama-quantize" "$TMP/tiny-f16.gguf" "$OUT/tiny-q4_k_m.gguf" Q4_K_M 2 > /dev/null 2>&1
"$LLAMA/bin/llama-quantize" "$TMP/tiny-f16.gguf" "$OUT/tiny-q8_0.gguf" Q8_0 2 > /dev/null 2>&1
