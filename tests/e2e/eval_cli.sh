#!/usr/bin/env bash
# End-to-end test of tessera-eval (built beside tessera-make-model):
#   kld of a model against itself: 0, same top token 100 %
#   kld of two random models (different seeds): > 0
#   the same for Hugging Face folders
#   a Q8_0 GGUF that tessera-quantize made from a folder against the folder
#   models with different vocabularies: refused (exit 1)
#   ppl --json agrees with kld's PPL of the model
#   usage errors: exit 2; a missing text file: exit 1
#
# usage: eval_cli.sh TESSERA_SERVER TESSERA_CLI TESSERA_MAKE_MODEL
# env:   TESSERA_SOURCE_DIR (the repository root)
set -uo pipefail

MAKE_MODEL=${3:?usage: eval_cli.sh SERVER CLI MAKE_MODEL}
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must be set}
EVAL=$(dirname "$MAKE_MODEL")/tessera-eval
PY=/usr/bin/python3
TEXT=$SRC/tests/data/eval/lighthouse.txt
VOCAB=$SRC/tests/data/vocab/ggml-vocab-llama-spm.gguf

WORK=$(mktemp -d)
# shellcheck source=tests/e2e/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
trap e2e_cleanup EXIT

[[ -x "$EVAL" ]] || e2e_fail "no tessera-eval at $EVAL"
make_model() {  # OUT SEED [FLAGS...]
  local out=$1 seed=$2
  shift 2
  "$MAKE_MODEL" --dim 64 --layers 2 --heads 4 --ffn 128 --dtype f16 --output-std 0.3 \
    --seed "$seed" --out "$WORK/$out" "$@" > /dev/null || e2e_fail "tessera-make-model $out"
}
make_model a.gguf 1 --vocab-from "$VOCAB"
make_model b.gguf 2 --vocab-from "$VOCAB"
make_model synth.gguf 1 --vocab-size 300

# field JSON_FILE PYTHON_EXPRESSION_OF_j
field() { "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
run_eval() {  # OUT_JSON ARGS...
  local out=$1
  shift
  "$EVAL" "$@" --text "$TEXT" --ctx 64 --chunks 3 --threads 2 --json > "$WORK/$out" \
    2> "$WORK/err.txt" || e2e_fail "tessera-eval $*: $(cat "$WORK/err.txt")"
}

run_eval self.json kld --base "$WORK/a.gguf" --model "$WORK/a.gguf"
self_ok="j['kld']['value'] == 0 and j['same_top_p']['value'] == 1"
[[ $(field "$WORK/self.json" "$self_ok") == True ]] || e2e_fail "self kld: $(cat "$WORK/self.json")"
[[ $(field "$WORK/self.json" "j['scored_tokens']") == 93 ]] \
  || e2e_fail "3 chunks of 64 score 93 tokens"

run_eval ab.json kld --base "$WORK/a.gguf" --model "$WORK/b.gguf"
ab_ok="j['kld']['value'] > 0.01 and j['same_top_p']['value'] < 1"
[[ $(field "$WORK/ab.json" "$ab_ok") == True ]] \
  || e2e_fail "different models: $(cat "$WORK/ab.json")"

run_eval ppl.json ppl --model "$WORK/b.gguf"
kld_ppl=$(field "$WORK/ab.json" "j['ppl_model']['value']")
[[ $(field "$WORK/ppl.json" "abs(j['ppl']['value'] / $kld_ppl - 1) < 1e-9") == True ]] \
  || e2e_fail "ppl and kld's PPL(Q) differ"

# Hugging Face folders load as tessera-server loads them: the same folder
# against itself gives 0, two seeds differ.
gunzip -c "$SRC/tests/data/tokenizers/tiny-spm/tokenizer.json.gz" > "$WORK/tokenizer.json"
for seed in 1 2; do
  make_model "hf$seed" "$seed" --format hf --vocab-size 332 \
    --tokenizer-json "$WORK/tokenizer.json" \
    --tokenizer-config "$SRC/tests/data/tokenizers/tiny-spm/tokenizer_config.json"
done
run_eval hf_self.json kld --base "$WORK/hf1" --model "$WORK/hf1"
[[ $(field "$WORK/hf_self.json" "$self_ok") == True ]] \
  || e2e_fail "Hugging Face folder against itself: $(cat "$WORK/hf_self.json")"
run_eval hf_ab.json kld --base "$WORK/hf1" --model "$WORK/hf2"
[[ $(field "$WORK/hf_ab.json" "$ab_ok") == True ]] \
  || e2e_fail "two Hugging Face folders: $(cat "$WORK/hf_ab.json")"

# tessera-quantize writes a byte-level tokenizer.json (Llama 3's) into the
# GGUF file it makes from a folder: the quantized file then evaluates
# against the folder it came from, token for token.
QUANTIZE=$(dirname "$MAKE_MODEL")/tessera-quantize
gunzip -c "$SRC/tests/data/tokenizers/llama3/tokenizer.json.gz" > "$WORK/llama3.json"
make_model hf-llama3 1 --format hf --vocab-size 128256 --tokenizer-json "$WORK/llama3.json" \
  --tokenizer-config "$SRC/tests/data/tokenizers/llama3/tokenizer_config.json"
"$QUANTIZE" "$WORK/hf-llama3" "$WORK/llama3-q8.gguf" Q8_0 > /dev/null 2> "$WORK/quantize.err" \
  || e2e_fail "tessera-quantize of a folder: $(cat "$WORK/quantize.err")"
run_eval q8.json kld --base "$WORK/hf-llama3" --model "$WORK/llama3-q8.gguf"
q8_ok="j['kld']['value'] < 0.01 and j['same_top_p']['value'] > 0.9"
[[ $(field "$WORK/q8.json" "$q8_ok") == True ]] \
  || e2e_fail "Q8_0 GGUF of a folder against the folder: $(cat "$WORK/q8.json")"
# tiny-spm's tokenizer.json has no GGUF form (added tokens that strip the
# spaces around them): a warning.
"$QUANTIZE" "$WORK/hf1" "$WORK/spm-q8.gguf" Q8_0 > /dev/null 2> "$WORK/quantize.err" \
  || e2e_fail "tessera-quantize of a folder: $(cat "$WORK/quantize.err")"
grep -q "the output has no tokenizer: the SentencePiece GGUF keys do not" "$WORK/quantize.err" \
  || e2e_fail "no warning for an unconverted tokenizer: $(cat "$WORK/quantize.err")"

"$EVAL" kld --base "$WORK/a.gguf" --model "$WORK/synth.gguf" --text "$TEXT" --ctx 64 \
  > /dev/null 2> "$WORK/err.txt"
rc=$?
[[ $rc == 1 ]] && grep -q "vocabularies differ" "$WORK/err.txt" \
  || e2e_fail "different vocabularies: rc $rc, $(cat "$WORK/err.txt")"

"$EVAL" kld --model "$WORK/a.gguf" --text "$TEXT" > /dev/null 2>&1
[[ $? == 2 ]] || e2e_fail "kld without --base must exit 2"
"$EVAL" ppl --model "$WORK/a.gguf" --text "$TEXT" --ctx zero > /dev/null 2>&1
[[ $? == 2 ]] || e2e_fail "a bad --ctx must exit 2"
"$EVAL" ppl --model "$WORK/a.gguf" --text "$WORK/missing.txt" > /dev/null 2>&1
[[ $? == 1 ]] || e2e_fail "a missing text must exit 1"
"$EVAL" ppl --model "$WORK/a.gguf" --text "$TEXT" --ctx 4096 > /dev/null 2> "$WORK/err.txt"
rc=$?
[[ $rc == 1 ]] && grep -q "needs at least 8192" "$WORK/err.txt" \
  || e2e_fail "too short a text must exit 1 (rc $rc)"
echo "PASS"
