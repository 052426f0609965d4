"""The files that the checks read, from the repository root."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METRIC_NAMES_H = os.path.join(ROOT, "server/metric_names.h")
RULES = os.path.join(ROOT, "deploy/prometheus/tessera-rules.yml")
DASHBOARD = os.path.join(ROOT, "deploy/grafana/tessera-dashboard.json")
ADAPTER_VALUES = os.path.join(ROOT, "deploy/kubernetes/prometheus-adapter/values.yaml")
COMPOSE_DIR = os.path.join(ROOT, "deploy/compose")
COMPOSE = os.path.join(COMPOSE_DIR, "compose.yaml")
