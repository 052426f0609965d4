#!/usr/bin/env bash
# deploy/test-image.sh takes its Debian mirrors from this machine's apt
# configuration: with a fake apt-get that reports a corporate mirror, the
# function it uses picks that mirror, and falls back when apt knows none.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source <(sed -n '/^apt_mirror()/,/^}/p' "$SRC/deploy/test-image.sh")
declare -F apt_mirror >/dev/null || { echo "FAIL: deploy/test-image.sh has no apt_mirror()"; exit 1; }

mkdir "$WORK/bin"
cat >"$WORK/bin/apt-get" <<'FAKE'
#!/bin/sh
echo "http://mirror.corp.example/debian/ bookworm contrib"
echo "http://mirror.corp.example/debian/ bookworm main"
echo "http://mirror.corp.example/debian/ bookworm-updates main"
echo "http://mirror.corp.example/security/ bookworm-security main"
FAKE
chmod +x "$WORK/bin/apt-get"

check() {
  local got=$1 want=$2
  [[ "$got" == "$want" ]] || { echo "FAIL: got '$got', want '$want'"; exit 1; }
}
check "$(PATH="$WORK/bin:$PATH" apt_mirror bookworm FALLBACK)" "http://mirror.corp.example/debian"
check "$(PATH="$WORK/bin:$PATH" apt_mirror bookworm-security FALLBACK)" \
  "http://mirror.corp.example/security"
check "$(PATH="$WORK/bin:$PATH" apt_mirror trixie http://deb.debian.org/debian)" \
  "http://deb.debian.org/debian"
printf '#!/bin/sh\nexit 100\n' >"$WORK/bin/apt-get"
check "$(PATH="$WORK/bin:$PATH" apt_mirror bookworm http://deb.debian.org/debian)" \
  "http://deb.debian.org/debian"
echo "PASS: apt_mirror"
