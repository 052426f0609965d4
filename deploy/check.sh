#!/usr/bin/env bash
# Offline checks of the deployment files, no cluster or container engine
# needed (scripts/test.sh runs this):
#  - kubectl kustomize renders deploy/kubernetes/overlays/{cpu,gpu};
#  - deploy/check_manifests.py checks the rendered objects' schema and
#    wiring, that every metric the dashboard and rules use exists in
#    server/metric_names.h, and the compose stack; then breaks copies of
#    them to show that it rejects what it should (--self-test);
#  - promtool checks the rules, their unit tests, and the compose stack's
#    Prometheus config laid out as the container sees it.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in kubectl promtool /usr/bin/python3; do
  command -v "$tool" > /dev/null || { echo "check: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "== kubectl kustomize (kubectl $(kubectl version --client 2>/dev/null | grep -o "v[0-9][0-9.]*" | head -n 1))"
for overlay in cpu gpu cpu-tls; do
  # Newer kustomize warns that 'bases' and 'patchesStrategicMerge' are
  # deprecated; they are kept for the kustomize v2 in Debian 12's kubectl.
  if ! kubectl kustomize "deploy/kubernetes/overlays/$overlay" > "$TMP/$overlay.yaml" 2> "$TMP/$overlay.err"; then
    cat "$TMP/$overlay.err" >&2
    echo "check: overlay $overlay does not render" >&2
    exit 1
  fi
  grep -v "is deprecated. Please use" "$TMP/$overlay.err" >&2 || true
  echo "  overlay $overlay: $(grep -c '^kind:' "$TMP/$overlay.yaml") objects"
done

echo "== check_manifests.py"
/usr/bin/python3 deploy/check_manifests.py --overlay "cpu=$TMP/cpu.yaml" --overlay "gpu=$TMP/gpu.yaml" \
  --overlay "cpu-tls=$TMP/cpu-tls.yaml" --self-test

echo "== promtool"
promtool check rules deploy/prometheus/tessera-rules.yml
(cd deploy/prometheus && promtool test rules tessera-rules.test.yml)
# The compose stack mounts its config and the rules into /etc/prometheus.
mkdir -p "$TMP/etc-prometheus/rules"
cp deploy/compose/prometheus.yml "$TMP/etc-prometheus/prometheus.yml"
cp deploy/prometheus/tessera-rules.yml "$TMP/etc-prometheus/rules/"
promtool check config "$TMP/etc-prometheus/prometheus.yml"
echo "deploy check: PASS"
