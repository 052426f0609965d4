#!/usr/bin/env bash
# Writes ppl_reference.json: llama.cpp's llama-perplexity over lighthouse.txt
# for the models that tessera-make-model writes with each case's flags.
# Usage: tests/data/eval/generate.sh build/tools/tessera-make-model [LLAMA_CPP_DIR]
set -euo pipefail
make_model=$(realpath "$1")
llama=${2:-/work/shared/tools/llama.cpp}
here=$(cd "$(dirname "$0")" && pwd)
vocab="$here/../vocab/ggml-vocab-llama-spm.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$llama/lib:$llama/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ctx=128
chunks=4
cases=(
  "llama_f32|--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --dtype f32 --seed 7 --output-std 0.2"
  "llama_f16|--dim 64 --layers 2 --heads 4 --ffn 192 --dtype f16 --seed 8 --output-std 0.2 --tied"
)
{
  echo "{"
  echo "  \"text\": \"lighthouse.txt\", \"ctx\": $ctx, \"chunks\": $chunks,"
  echo "  \"vocab\": \"ggml-vocab-llama-spm.gguf\","
  echo "  \"cases\": ["
  sep=""
  for c in "${cases[@]}"; do
    name=${c%%|*}
    flags=${c#*|}
    # shellcheck disable=SC2086
    "$make_model" $flags --vocab-from "$vocab" --out "$tmp/$name.gguf" > /dev/null
    # llama.cpp's asynchronous log sometimes loses its last lines at exit: retry.
    ppl=""
    for _ in 1 2 3 4 5; do
      ppl=$("$llama/bin/llama-perplexity" -m "$tmp/$name.gguf" -f "$here/lighthouse.txt" \
              -c $ctx --chunks $chunks -t 2 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
      [ -n "$ppl" ] && break
    done
    [ -n "$ppl" ] || { echo "llama-perplexity gave no estimate for $name" >&2; exit 1; }
    printf '%s    {"name": "%s", "make_model_args": "%s", "llama_cpp_ppl": %s}' "$sep" "$name" "$flags" "$ppl"
    sep=$',\n'
  done
  echo
  echo "  ]"
  echo "}"
} > "$here/ppl_reference.json"
cat "$here/ppl_reference.json"
