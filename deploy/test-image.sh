#!/usr/bin/env bash
# Proves that the container image builds and serves, with no registry: makes a
# Debian 12 base with debootstrap, imports it into podman, builds the CPU
# variant of ./Dockerfile on it (by default with BINARIES=context: this
# host's Release build of tessera-server and tessera-cli, also Debian 12,
# goes into the image; the image build installs the build dependencies and
# runs CMake's configure step but does not compile), runs the container,
# waits for its gRPC
# HEALTHCHECK to pass, generates through it from the host with tessera-cli,
# scrapes its metrics, stops it with SIGTERM (a clean drain exits 0) and
# removes what it made. Prints the image size and the build time.
#
# Environment:
#   TESSERA_DEBIAN_MIRROR           Debian mirror (default: the one this machine's
#                                   apt uses for bookworm, else deb.debian.org)
#   TESSERA_DEBIAN_SECURITY_MIRROR  (default: this machine's for bookworm-security)
#   TESSERA_TEST_IMAGE_FRESH_BASE=1 remake the debootstrap base even if cached
#   TESSERA_TEST_IMAGE_KEEP=1       keep the built image (localhost/tessera:cpu)
#   TESSERA_TEST_IMAGE_FROM_SOURCE=1  compile in the image build (BINARIES=source,
#                                   what `docker build` does by default; about
#                                   10 more minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
# The repository this machine's apt fetches SUITE's main component from (a
# corporate mirror or proxy works as it does for apt itself), or FALLBACK.
apt_mirror() {
  local suite=$1 fallback=$2 uri
  uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 2>/dev/null |
        awk -v s="$suite" '$2 == s && $3 == "main" { print $1; exit }')
  echo "${uri:-$fallback}" | sed 's:/*$::'
}
MIRROR=${TESSERA_DEBIAN_MIRROR:-$(apt_mirror bookworm http://deb.debian.org/debian)}
SECURITY_MIRROR=${TESSERA_DEBIAN_SECURITY_MIRROR:-$(apt_mirror bookworm-security http://deb.debian.org/debian-security)}
BASE_IMAGE=localhost/tessera-debian12-base:latest
IMAGE=localhost/tessera:cpu
NAME=tessera-test-image-$$
START=$(date +%s)

log() { echo "== test-image: $*"; }

# --- tools --------------------------------------------------------------
need=()
for p in podman debootstrap runc curl; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    need+=("$p")
  fi
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  log "installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# debootstrap, chroot and rootful podman need root.
if [ "$(id -u)" -ne 0 ]; then
  echo "test-image: run as root (debootstrap and rootful podman)" >&2
  exit 1
fi

# The host-side client that talks to the container, and the binaries the
# image gets unless it compiles them.
scripts/install-deps.sh
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
CLI=$ROOT/$BUILD_DIR/client/tessera-cli
if [ "${TESSERA_TEST_IMAGE_FROM_SOURCE:-0}" = "1" ]; then
  BINARIES=source
  cmake --build "$BUILD_DIR" --target tessera-cli > /dev/null
else
  BINARIES=context
  cmake --build "$BUILD_DIR" --target tessera-cli tessera-server > /dev/null
  grep -q "CMAKE_BUILD_TYPE:STRING=Release" "$BUILD_DIR/CMakeCache.txt" || {
    echo "test-image: $BUILD_DIR is not a Release build" \
      "(TESSERA_TEST_IMAGE_FROM_SOURCE=1 compiles in the image)" >&2
    exit 1
  }
fi
STAGED=$ROOT/.image-binaries

# --- podman settings ------------------------------------------------------
WORK=$(mktemp -d /var/tmp/tessera-test-image.XXXXXX)
cleanup() {
  local rc=$?
  if podman container exists "$NAME" 2>/dev/null; then
    if [ "$rc" -ne 0 ]; then
      echo "--- container log (last 40 lines)"
      podman logs --tail 40 "$NAME" 2>&1 || true
    fi
    podman rm -f -t 0 "$NAME" > /dev/null 2>&1 || true
  fi
  if [ "${TESSERA_TEST_IMAGE_KEEP:-0}" != "1" ]; then
    podman rmi -f "$IMAGE" > /dev/null 2>&1 || true
  fi
  rm -rf "$WORK" "$STAGED"
  exit "$rc"
}
trap cleanup EXIT

# Debian 12's podman asks the OCI runtime for the host's hard ulimits, which
# runc may not set inside this sandbox ("error setting rlimit type 7:
# operation not permitted"); containers get these instead. runc, because
# Debian 12's crun refuses a hybrid cgroup layout. CONTAINERS_CONF makes
# podman read this file instead of the system's, so nothing on the host
# changes.
cat > "$WORK/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF=$WORK/containers.conf

# --- the Debian 12 base -------------------------------------------------
BASE_SECONDS=0
if [ "${TESSERA_TEST_IMAGE_FRESH_BASE:-0}" = "1" ] || ! podman image exists "$BASE_IMAGE"; then
  log "making a Debian 12 base with debootstrap from $MIRROR"
  t0=$(date +%s)
  ROOTFS=$WORK/rootfs
  debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 || {
    tail -n 20 "$WORK/debootstrap.log"
    exit 1
  }
  cat > "$ROOTFS/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
SOURCES
  # The same trimming as Debian's -slim images: no manuals, docs or locales,
  # now or in later installs, and no apt caches.
  cat > "$ROOTFS/etc/dpkg/dpkg.cfg.d/tessera-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
SLIM
  chroot "$ROOTFS" apt-get clean
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
  find "$ROOTFS/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  tar -C "$ROOTFS" --numeric-owner -cf "$WORK/base.tar" .
  old_base=$(podman image inspect --format '{{.Id}}' "$BASE_IMAGE" 2> /dev/null || true)
  podman import --change 'CMD ["/bin/bash"]' "$WORK/base.tar" "$BASE_IMAGE" > /dev/null 2>&1
  # The base it replaces would be left untagged.
  if [ -n "$old_base" ]; then podman rmi "$old_base" > /dev/null 2>&1 || true; fi
  rm -rf "$ROOTFS" "$WORK/base.tar"
  BASE_SECONDS=$(($(date +%s) - t0))
  log "base made in ${BASE_SECONDS}s"
else
  log "reusing $BASE_IMAGE (TESSERA_TEST_IMAGE_FRESH_BASE=1 remakes it)"
fi

# --- build ----------------------------------------------------------------
rm -rf "$STAGED"
if [ "$BINARIES" = context ]; then
  install -D -s -m 0755 "$BUILD_DIR/server/tessera-server" "$STAGED/bin/tessera-server"
  install -D -s -m 0755 "$CLI" "$STAGED/bin/tessera-cli"
  mkdir -p "$STAGED/lib/tessera"
fi
log "building $IMAGE (VARIANT=cpu, BINARIES=$BINARIES) on $BASE_IMAGE"
t0=$(date +%s)
# --format docker keeps the HEALTHCHECK (the OCI image format has none);
# --layers=false leaves no intermediate images behind, so every build is a
# cold one; the build steps reach the apt mirror over the host's network.
podman build --pull=never --layers=false --format docker --network host \
  --build-arg VARIANT=cpu --build-arg CPU_IMAGE="$BASE_IMAGE" --build-arg BINARIES="$BINARIES" \
  -t "$IMAGE" -f Dockerfile . > "$WORK/build.log" 2>&1 || {
  tail -n 40 "$WORK/build.log"
  exit 1
}
BUILD_SECONDS=$(($(date +%s) - t0))
SIZE_BYTES=$(podman image inspect --format '{{.Size}}' "$IMAGE")
BASE_BYTES=$(podman image inspect --format '{{.Size}}' "$BASE_IMAGE")
log "built in ${BUILD_SECONDS}s"

# --- run ------------------------------------------------------------------
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
GRPC_PORT=$(free_port)
METRICS_PORT=$(free_port)
HTTP_PORT=$(free_port)
log "starting the container: gRPC on 127.0.0.1:$GRPC_PORT, HTTP on 127.0.0.1:$HTTP_PORT, metrics on 127.0.0.1:$METRICS_PORT"
# Flags come both from the environment and from arguments; the root file
# system is read-only and no capability is kept, as in the Kubernetes manifests.
# Podman drives periodic health checks with systemd timers and complains on
# stderr where there is no systemd; the loop below runs the image's
# HEALTHCHECK itself, so that noise goes to a file, shown only on failure.
podman run -d --name "$NAME" \
  -p "127.0.0.1:$GRPC_PORT:50051" -p "127.0.0.1:$HTTP_PORT:8000" -p "127.0.0.1:$METRICS_PORT:9090" \
  --read-only --cap-drop ALL --security-opt no-new-privileges \
  -e TESSERA_MAX_NUM_SEQS=16 -e TESSERA_DRAIN_TIMEOUT=10 \
  "$IMAGE" --threads 2 > /dev/null 2> "$WORK/podman-run.err" || {
  cat "$WORK/podman-run.err" >&2
  exit 1
}

log "waiting for the image's HEALTHCHECK (grpc.health.v1) to pass"
healthy=0
for _ in $(seq 1 120); do
  if [ "$(podman inspect --format '{{.State.Running}}' "$NAME")" != "true" ]; then
    echo "test-image: the container exited" >&2
    exit 1
  fi
  # Runs the HEALTHCHECK command of the image inside the container.
  if podman healthcheck run "$NAME" > /dev/null 2>&1; then
    healthy=1
    break
  fi
  sleep 1
done
if [ "$healthy" != 1 ]; then
  echo "test-image: not healthy after 120 s" >&2
  exit 1
fi
log "health: $(podman inspect --format '{{.State.Health.Status}}' "$NAME")"

user=$(podman exec "$NAME" id -u)
[ "$user" = "10001" ] || { echo "test-image: server runs as uid $user, not 10001" >&2; exit 1; }

log "tessera-cli info / generate from the host"
"$CLI" --server "127.0.0.1:$GRPC_PORT" --timeout 10 info
"$CLI" --server "127.0.0.1:$GRPC_PORT" --timeout 30 generate "Once upon a time" \
  --max-tokens 48 --temperature 0 --json > "$WORK/generate.json"
/usr/bin/python3 - "$WORK/generate.json" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
assert out["token_ids"], "no tokens generated"
assert out["text"].strip(), "empty text"
print("generated %d tokens, finish_reason %s: %r" %
      (len(out["token_ids"]), out["finish_reason"], out["text"]))
PY
# A refused request, so that the failure counter has a series (by code).
set +e
"$CLI" --server "127.0.0.1:$GRPC_PORT" --timeout 10 generate "Once" --max-tokens 0 2> "$WORK/refused.txt"
refused=$?
set -e
[ "$refused" = 4 ] || { echo "test-image: invalid request exited $refused, not 4" >&2; exit 1; }
sed 's/^/    /' "$WORK/refused.txt"

log "the OpenAI-compatible HTTP API from the host (the image's port 8000)"
/usr/bin/python3 - "$HTTP_PORT" <<'PY'
import json, sys, urllib.request
base = "http://127.0.0.1:%s/v1" % sys.argv[1]
models = json.load(urllib.request.urlopen(base + "/models", timeout=30))
assert models["object"] == "list" and models["data"], models
model = models["data"][0]["id"]
body = {"model": model, "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}
req = urllib.request.Request(base + "/completions", data=json.dumps(body).encode(),
                             headers={"content-type": "application/json"})
out = json.load(urllib.request.urlopen(req, timeout=30))
choice = out["choices"][0]
assert out["usage"]["completion_tokens"] > 0, out
print("HTTP: model %s, %d tokens, finish_reason %s: %r" % (
    model, out["usage"]["completion_tokens"], choice["finish_reason"], choice["text"]))
PY

log "metrics from the host"
curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" > "$WORK/metrics.txt"
missing=0
checked=0
while read -r name; do
  checked=$((checked + 1))
  if ! grep -q "^$name" "$WORK/metrics.txt"; then
    echo "test-image: metric $name is not exported" >&2
    missing=1
  fi
done < <(sed -n 's/^inline constexpr char k[A-Za-z0-9]*\[\] = "\(tessera_[a-z0-9_]*\)";/\1/p' server/metric_names.h)
if [ "$missing" != 0 ] || [ "$checked" = 0 ]; then
  echo "test-image: metrics missing (checked $checked names)" >&2
  exit 1
fi
echo "all $checked metrics of server/metric_names.h are exported"
grep -E '^tessera_(generation_tokens|request_failure)_total' "$WORK/metrics.txt"
awk '/^tessera_generation_tokens_total/ { exit !($2 > 0) }' "$WORK/metrics.txt"

log "SIGTERM: the server drains and exits 0"
podman stop -t 30 "$NAME" > /dev/null 2> "$WORK/podman-stop.err" || {
  cat "$WORK/podman-stop.err" >&2
  exit 1
}
code=$(podman inspect --format '{{.State.ExitCode}}' "$NAME")
[ "$code" = "0" ] || { echo "test-image: exit code $code after SIGTERM" >&2; exit 1; }
podman logs --tail 3 "$NAME" 2>&1 | sed 's/^/    /'

TOTAL=$(($(date +%s) - START))
echo
echo "image:        $IMAGE (CPU variant, Debian 12 base)"
echo "image size:   $((SIZE_BYTES / 1000000)) MB (${SIZE_BYTES} bytes; the debootstrap base alone: $((BASE_BYTES / 1000000)) MB)"
echo "build time:   ${BUILD_SECONDS} s (podman build, no cache, BINARIES=$BINARIES)"
if [ "$BASE_SECONDS" -gt 0 ]; then
  echo "base time:    ${BASE_SECONDS} s (debootstrap + import)"
else
  echo "base time:    cached"
fi
echo "total time:   ${TOTAL} s"
echo "test-image: PASS"
