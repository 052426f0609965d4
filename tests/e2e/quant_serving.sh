#!/usr/bin/env bash
# Quantized GGUF files (written by llama.cpp's llama-quantize, committed in
# tests/data/quant_parity) served end to end: tessera-server loads the
# Q4_K_M and Q8_0 files, reports their types, and its greedy completion over
# the OpenAI HTTP front equals llama.cpp's (detokenized by the server), for
# 4 concurrent requests at once (the same text for each: batch invariance).
#
# usage: quant_serving.sh TESSERA_SERVER TESSERA_CLI TESSERA_MAKE_MODEL
set -uo pipefail
SERVER_BIN=${1:?usage: quant_serving.sh SERVER CLI MAKE_MODEL}
CLI=${2:?usage: quant_serving.sh SERVER CLI MAKE_MODEL}
SRC=${TESSERA_SOURCE_DIR:?TESSERA_SOURCE_DIR must be set}
PY=/usr/bin/python3
WORK=$(mktemp -d)
SERVER_PID=""
# shellcheck source=tests/e2e/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
trap e2e_cleanup EXIT

check_type() {  # case expected_dtype
  local ref=$SRC/tests/data/quant_parity/$1.json
  local model
  model=$SRC/tests/data/quant_parity/$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["model_file"])' "$ref")
  read -r PORT HTTP_PORT < <(e2e_free_ports)
  "$SERVER_BIN" --model "$model" --port "$PORT" --http-port "$HTTP_PORT" --metrics-port 0 \
    --threads 2 >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  "$CLI" --server "127.0.0.1:$PORT" info --wait 30 >"$WORK/info.txt" || e2e_fail "$1: not SERVING"
  grep -q "weight_dtype: *$2\$" "$WORK/info.txt" || e2e_fail "$1: info says $(grep weight_dtype "$WORK/info.txt")"
  # llama.cpp's greedy ids as text, by the server's own detokenizer.
  mapfile -t IDS < <("$PY" -c 'import json,sys; print("\n".join(map(str, json.load(open(sys.argv[1]))["generated_ids"])))' "$ref")
  "$CLI" --server "127.0.0.1:$PORT" detokenize "${IDS[@]}" --json >"$WORK/want.json" || e2e_fail "$1: detokenize"
  for i in 1 2 3 4; do
    curl -sS "http://127.0.0.1:$HTTP_PORT/v1/completions" -H 'Content-Type: application/json' \
      -d "$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"model": "tessera-random-llama", "prompt": r["prompt_ids"], "max_tokens": len(r["generated_ids"]), "temperature": 0, "ignore_eos": True}))' "$ref")" \
      >"$WORK/got$i.json" &
  done
  wait %2 %3 %4 %5 2>/dev/null
  for i in 1 2 3 4; do
    "$PY" - "$WORK/got$i.json" "$WORK/want.json" "$1" <<'PYEOF' || e2e_fail "$1: request $i differs"
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
text = got["choices"][0]["text"]
# Detokenizing from the first token drops its leading space.
if text.lstrip(" ") != want["text"].lstrip(" "):
    print(f"{sys.argv[3]}: got {text!r}\n want {want['text']!r}", file=sys.stderr)
    sys.exit(1)
PYEOF
  done
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; SERVER_PID=""
  echo "quant_serving.sh: $1 ($2) matches llama.cpp"
}

check_type q4_k_m "q4_K+q6_K"
check_type q8_0 "q8_0"
echo "quant_serving.sh: PASS"
