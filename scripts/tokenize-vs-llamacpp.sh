#!/usr/bin/env bash
# How llama.cpp tokenizes a committed tokenizer.json once it is a GGUF file.
# For each NAME under tests/data/tokenizers (default: every one with a
# tokenizer.json.gz and a reference.jsonl.gz), writes a one-layer random model folder with that
# tokenizer (tessera-make-model --format hf), converts it to GGUF with
# tessera-quantize (which writes the tokenizer.ggml.* keys that reproduce the
# tokenizer.json, or fails), serves it with llama.cpp's llama-server and
# compares its /tokenize ids on the 2,400-string corpus with the reference
# ids of Hugging Face's tokenizers (reference.jsonl.gz), which
# tokenizer_hf_test holds Tessera to. Prints one line per NAME. A GGUF file
# has no key for a normalizer, so a tokenizer.json with one (Qwen's NFC)
# differs as a GGUF file on the strings that it changes, in llama.cpp as in
# Tessera (GgufExportTest counts them: 654 for qwen3, with the strings that
# hold vocabulary entries read as control tokens, such as "</s>").
#
# Usage: scripts/tokenize-vs-llamacpp.sh [NAME ...]
# Environment: TESSERA_BUILD_DIR (default build-dev), LLAMA_CPP_DIR (default
# ../shared/tools/llama.cpp beside the repository). Not part of ctest or CI:
# it needs llama.cpp. Exit status: 0 when it ran (differences are reported,
# not failed), 2 on an error.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${TESSERA_BUILD_DIR:-$ROOT/build-dev}
LLAMA_DIR=${LLAMA_CPP_DIR:-$ROOT/../shared/tools/llama.cpp}
DATA=$ROOT/tests/data/tokenizers
[ -x "$LLAMA_DIR/bin/llama-server" ] || { echo "no llama-server in $LLAMA_DIR" >&2; exit 2; }
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
LLAMA=$("$ROOT/scripts/lib/llama-view.sh" "$LLAMA_DIR" "$WORK/llama")
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for d in "$DATA"/*/; do
    n=$(basename "$d")
    [ -f "$d/tokenizer.json.gz" ] && [ -f "$d/reference.jsonl.gz" ] \
      && [ ! -f "$d/corpus.jsonl.gz" ] && names+=("$n")
  done
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for name in "${names[@]}"; do
  src=$DATA/$name
  zcat "$src/tokenizer.json.gz" > "$WORK/$name.json"
  # A large tokenizer_config.json is stored gzipped.
  config=$src/tokenizer_config.json
  if [ ! -f "$config" ]; then
    zcat "$config.gz" > "$WORK/$name-config.json"
    config=$WORK/$name-config.json
  fi
  vocab=$(python3 - "$WORK/$name.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
ids = list(j["model"]["vocab"].values()) + [t["id"] for t in j.get("added_tokens", [])]
print(max(ids) + 1)
EOF
)
  "$BUILD/tools/tessera-make-model" --format hf --dim 64 --layers 1 --heads 2 --ffn 128 \
    --vocab-size "$vocab" --tokenizer-json "$WORK/$name.json" \
    --tokenizer-config "$config" --out "$WORK/$name-hf" > /dev/null
  if ! "$BUILD/tools/tessera-quantize" "$WORK/$name-hf" "$WORK/$name.gguf" Q8_0 \
      > "$WORK/$name.quantize.log" 2>&1; then
    echo "$name: no GGUF keys: $(tail -n 1 "$WORK/$name.quantize.log")"
    continue
  fi
  LD_LIBRARY_PATH=$LLAMA/lib "$LLAMA/bin/llama-server" -m "$WORK/$name.gguf" --port "$port" \
    -t 1 > "$WORK/$name.server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 120); do
    curl -sf "127.0.0.1:$port/health" > /dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 5 "$WORK/$name.server.log" >&2; exit 2; }
    sleep 0.5
  done
  python3 - "$port" "$name" "$DATA" <<'EOF'
import gzip, json, sys, urllib.request
port, name, data = sys.argv[1], sys.argv[2], sys.argv[3]
corpus = [json.loads(line) for line in gzip.open(f"{data}/corpus.jsonl.gz", "rt", encoding="utf-8")]
ref = [json.loads(line) for line in gzip.open(f"{data}/{name}/reference.jsonl.gz", "rt",
                                              encoding="utf-8")]
differ = []
for text, want in zip(corpus, ref):
    body = json.dumps({"content": text, "add_special": False, "parse_special": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/tokenize", data=body,
                                 headers={"Content-Type": "application/json"})
    if json.load(urllib.request.urlopen(req))["tokens"] != want["ids"]:
        differ.append(text)
shown = ", ".join(json.dumps(t, ensure_ascii=False) for t in differ[:3])
print(f"{name}: llama.cpp's ids differ from tokenizer.json's on {len(differ)} of "
      f"{len(corpus)} strings" + (f", e.g. {shown}" if differ else ""))
EOF
  kill "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
done
