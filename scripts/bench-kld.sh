#!/usr/bin/env bash
# KL divergence of quantized models, Tessera against llama.cpp, on the same
# files and text. An f16 random-weight llama model (tessera-make-model, all
# dims multiples of 256) is quantized by llama.cpp's llama-quantize to each
# type; then, per type,
#   llama.cpp: llama-perplexity -m f16.gguf --kl-divergence-base base.kld -f TEXT -c CTX
#              llama-perplexity -m q.gguf --kl-divergence-base base.kld --kl-divergence
#   Tessera:   tessera-eval kld --base f16.gguf --model q.gguf --text TEXT --ctx CTX
# and prints mean KLD, same-top-p and PPL(Q) of both with the ratio of the
# KLDs (goal: Tessera's at most 1.1x llama.cpp's). Exit 1 when a ratio is
# above TESSERA_KLD_MAX_RATIO (default 1.1).
# Environment: TESSERA_BUILD_DIR (build),
# LLAMA_CPP_DIR (/work/shared/tools/llama.cpp),
# TESSERA_KLD_TEXT (tests/data/eval/lighthouse.txt), TESSERA_KLD_CTX (128),
# TESSERA_KLD_TYPES ("Q8_0 Q4_K_M"), TESSERA_THREADS (2),
# TESSERA_KLD_MODEL_FLAGS (tessera-make-model's shape flags, default
# "--dim 256 --layers 4 --heads 4 --ffn 768 --output-std 0.2 --seed 1").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
LLAMA=${LLAMA_CPP_DIR:-/work/shared/tools/llama.cpp}
TEXT=$(realpath "${TESSERA_KLD_TEXT:-tests/data/eval/lighthouse.txt}")
CTX=${TESSERA_KLD_CTX:-128}
TYPES=${TESSERA_KLD_TYPES:-"Q8_0 Q4_K_M"}
THREADS=${TESSERA_THREADS:-2}
MAX_RATIO=${TESSERA_KLD_MAX_RATIO:-1.1}
FLAGS=${TESSERA_KLD_MODEL_FLAGS:-"--dim 256 --layers 4 --heads 4 --ffn 768 --output-std 0.2 --seed 1"}
for bin in tools/tessera-make-model tools/tessera-eval; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "bench-kld: build $BUILD_DIR/$bin first" >&2; exit 1; }
done
for bin in llama-quantize llama-perplexity; do
  [ -x "$LLAMA/bin/$bin" ] || { echo "bench-kld: no $LLAMA/bin/$bin" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LLAMA=$(scripts/lib/llama-view.sh "$LLAMA" "$WORK/llama")  # AMX CPUs: see there
export LD_LIBRARY_PATH="$LLAMA/lib:$LLAMA/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# shellcheck disable=SC2086
"$BUILD_DIR/tools/tessera-make-model" $FLAGS --dtype f16 \
  --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --out "$WORK/f16.gguf"
"$LLAMA/bin/llama-perplexity" -m "$WORK/f16.gguf" --kl-divergence-base "$WORK/base.kld" \
  -f "$TEXT" -c "$CTX" -t "$THREADS" > "$WORK/base.log" 2>&1 \
  || { tail -20 "$WORK/base.log" >&2; exit 1; }

# llama_value LOG LABEL: the first number after "LABEL:" in llama-perplexity's summary.
llama_value() { sed -n "s/^.*$2 *: *\([-0-9.]*\).*/\1/p" "$1" | head -1; }
json_value() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

status=0
printf '%-8s %-9s %12s %12s %14s\n' type engine "mean KLD" "same top p" "PPL(Q)"
for type in $TYPES; do
  q="$WORK/$type.gguf"
  "$LLAMA/bin/llama-quantize" "$WORK/f16.gguf" "$q" "$type" > "$WORK/quantize-$type.log" 2>&1 \
    || { tail -20 "$WORK/quantize-$type.log" >&2; exit 1; }
  log="$WORK/llama-$type.log"
  # llama.cpp's asynchronous log sometimes loses its last lines at exit: retry.
  l_kld=""
  for _ in 1 2 3 4 5; do
    "$LLAMA/bin/llama-perplexity" -m "$q" --kl-divergence-base "$WORK/base.kld" --kl-divergence \
      -c "$CTX" -t "$THREADS" > "$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
    l_kld=$(llama_value "$log" "Mean    KLD")
    [ -n "$l_kld" ] && break
  done
  [ -n "$l_kld" ] || { echo "bench-kld: no KLD summary from llama-perplexity" >&2; exit 1; }
  l_top=$(llama_value "$log" "Same top p")
  l_ppl=$(llama_value "$log" "Mean PPL(Q)")
  out="$WORK/tessera-$type.json"
  "$BUILD_DIR/tools/tessera-eval" kld --base "$WORK/f16.gguf" --model "$q" --text "$TEXT" \
    --ctx "$CTX" --threads "$THREADS" --json > "$out" 2> "$WORK/tessera-$type.err" \
    || { cat "$WORK/tessera-$type.err" >&2; exit 1; }
  t_kld=$(json_value "$out" "['kld']['value']")
  t_top=$(json_value "$out" "['same_top_p']['value'] * 100")
  t_ppl=$(json_value "$out" "['ppl_model']['value']")
  printf '%-8s %-9s %12.6f %11.3f%% %14.4f\n' "$type" llama.cpp "$l_kld" "$l_top" "$l_ppl"
  printf '%-8s %-9s %12.6f %11.3f%% %14.4f\n' "$type" tessera "$t_kld" "$t_top" "$t_ppl"
  ratio=$(/usr/bin/python3 -c "print(f'{$t_kld / $l_kld:.3f}')")
  echo "$type: Tessera KLD / llama.cpp KLD = $ratio (goal <= $MAX_RATIO)"
  /usr/bin/python3 -c "import sys; sys.exit(0 if $ratio <= $MAX_RATIO else 1)" || status=1
done
exit $status
