#!/usr/bin/env bash
# One command for a new user: installs what is missing, builds, and starts
# tessera-server on the bundled model (stories260K.gguf).
#   scripts/serve.sh [extra tessera-server flags...]
# Environment: TESSERA_PORT (50051), TESSERA_METRICS_PORT (9090).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
PORT=${TESSERA_PORT:-50051}
METRICS_PORT=${TESSERA_METRICS_PORT:-9090}
cat <<MSG

Starting tessera-server on port $PORT (metrics on $METRICS_PORT). In another terminal, try:
  $BUILD_DIR/client/tessera-cli --server localhost:$PORT info
  $BUILD_DIR/client/tessera-cli --server localhost:$PORT generate "Once upon a time" --max-tokens 64
Stop it with Ctrl-C.

MSG
exec "$BUILD_DIR/server/tessera-server" --model models/stories260K.gguf \
  --port "$PORT" --metrics-port "$METRICS_PORT" "$@"
