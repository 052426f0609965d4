"""The checks behind deploy/check_manifests.py, one module per kind of input:
schema (Kubernetes object schemas), overlays (a rendered overlay's wiring),
metrics (metric names, PromQL, the dashboard and the rules) and compose."""
