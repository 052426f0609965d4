#!/usr/bin/env bash
# Parity check outside the test suite (issue #10): for each architecture
# (llama with Llama 3 vocab and llama3 rope scaling, qwen2, qwen3, phi3,
# phi3 with Phi-3.5's long-rope, gemma3, and a Mistral-style llama with a
# SentencePiece vocab) a small
# random-weight model the suite never saw, with a real vocabulary, as a GGUF
# file and as a Hugging Face folder. Tessera's prompt token ids and greedy
# tokens (32, EOS ignored) are compared with llama.cpp's (llama-server, f32 KV
# cache, flash attention off) on the GGUF file. Prints one line per
# architecture x format ("hf-padded": the folder with its tokenizer.json
# padded to config.json's vocab_size; see scripts/unseen/check.py).
#
# Usage: scripts/check-unseen-models.sh [LLAMA_CPP_DIR] [--cases a,b] [--keep]
#                                       [--json FILE]
#   LLAMA_CPP_DIR  llama.cpp with bin/llama-server (default: $LLAMA_CPP_DIR,
#                  else ../shared/tools/llama.cpp beside the repository)
#   --cases        only these cases (llama3 qwen2 qwen3 phi3 phi3.5 gemma3 mistral-spm)
#   --keep         keep the work folder (models, server logs) and print it
#   --json FILE    also write the results as JSON
# Environment: TESSERA_BUILD_DIR (default build-dev), VOCAB_DIR (default
# ../shared/models/vocab beside the repository; tests/data/vocab does too,
# its NAME.gguf.gz files unpacked into the work folder).
#
# Exit status: 0 all match, 1 a mismatch, 2 an error; 0 with a SKIP line
# when llama.cpp or the vocabularies are absent. Not part of ctest or CI:
# it takes a few minutes and needs llama.cpp.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LLAMA_DIR=${LLAMA_CPP_DIR:-$ROOT/../shared/tools/llama.cpp}
BUILD=${TESSERA_BUILD_DIR:-$ROOT/build-dev}
VOCAB=${VOCAB_DIR:-$ROOT/../shared/models/vocab}
KEEP=0
PY_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cases) PY_ARGS+=(--cases "$2"); shift 2 ;;
    --json) PY_ARGS+=(--json "$(realpath -m "$2")"); shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) LLAMA_DIR=$1; shift ;;
  esac
done

if [ ! -x "$LLAMA_DIR/bin/llama-server" ]; then
  echo "SKIP: no llama.cpp at $LLAMA_DIR (bin/llama-server); pass its folder or set LLAMA_CPP_DIR"
  exit 0
fi
if [ ! -d "$VOCAB" ]; then
  echo "SKIP: no vocabularies at $VOCAB; set VOCAB_DIR"
  exit 0
fi
for bin in tools/tessera-make-model server/tessera-server client/tessera-cli; do
  if [ ! -x "$BUILD/$bin" ]; then
    echo "error: $BUILD/$bin is missing; build first (ninja -C $BUILD) or set TESSERA_BUILD_DIR" >&2
    exit 2
  fi
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-unseen.XXXXXX")
PID_FILE=$WORK/server-pids
PY_PID=""
cleanup() {
  [ -n "$PY_PID" ] && kill "$PY_PID" 2>/dev/null && wait "$PY_PID" 2>/dev/null
  # Servers the driver started and did not stop (it stops them itself
  # unless it was killed).
  if [ -f "$PID_FILE" ]; then
    while read -r pid; do
      kill "$pid" 2>/dev/null
    done < "$PID_FILE"
  fi
  if [ "$KEEP" = 1 ]; then echo "work folder kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "llama.cpp: $LLAMA_DIR ($("$LLAMA_DIR/bin/llama-server" --version 2>&1 | grep -m1 -i version || echo '?'))"
echo "tessera:   $BUILD"
/usr/bin/python3 "$ROOT/scripts/unseen/check.py" --repo "$ROOT" --build "$BUILD" \
  --llama-dir "$LLAMA_DIR" --vocab-dir "$VOCAB" --work "$WORK" --pid-file "$PID_FILE" \
  "${PY_ARGS[@]}" &
PY_PID=$!
wait "$PY_PID"
RC=$?
PY_PID=""
exit $RC
