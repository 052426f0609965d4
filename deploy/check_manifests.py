#!/usr/bin/python3
"""Offline checks of Tessera's deployment files (run by deploy/check.sh).

  check_manifests.py --overlay NAME=RENDERED.yaml ... [--self-test]

- Kubernetes: every object rendered from an overlay is checked against a
  schema of the API fields these manifests use (types, required fields,
  enums, unknown fields; no cluster needed). Then the overlay must hold a
  Deployment with gRPC startup/readiness/liveness probes, a preStop hook and
  a grace period longer than preStop + drain, Services (one headless), a
  PodDisruptionBudget, an autoscaling/v2 HorizontalPodAutoscaler on a Pods
  metric that the prometheus-adapter rule serves, and a PodMonitor, all
  selecting the Deployment's pods. The gpu overlay must ask for nvidia.com/gpu
  and --device cuda.
- Metrics: every metric that the Grafana dashboard, the Prometheus rules and
  the adapter rule name exists in server/metric_names.h (histogram series
  with their _bucket/_sum/_count suffixes), every recording rule they use is
  defined, and the dashboard's PromQL parses (promtool).
- Compose: the services, their files and mounts, and the drain timing.

--self-test breaks copies of the inputs in known ways and fails unless each
break is reported, so a checker that accepts everything cannot pass.
"""

import argparse
import copy
import json
import os
import sys

import yaml

# The checks package sits next to this file; it is on sys.path when this runs
# as a script, but not when it is imported from elsewhere. Not writing
# bytecode keeps a check run from leaving __pycache__ folders in deploy/.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

from checks.compose import check_compose  # noqa: E402
from checks.metrics import (check_dashboard, check_expr, check_rules,  # noqa: E402
                            exported_metrics, grafana_exprs)
from checks.overlays import check_overlay  # noqa: E402
from checks.paths import ADAPTER_VALUES, COMPOSE, DASHBOARD, RULES  # noqa: E402
from checks.schema import PROMETHEUSRULE_SPEC, Errors, check_type, obj  # noqa: E402


def load_inputs(overlay_args):
    overlays = {}
    for arg in overlay_args:
        name, path = arg.split("=", 1)
        with open(path) as f:
            overlays[name] = [d for d in yaml.safe_load_all(f) if d is not None]
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    with open(ADAPTER_VALUES) as f:
        adapter = yaml.safe_load(f)
    with open(COMPOSE) as f:
        compose = yaml.safe_load(f)
    return {"overlays": overlays, "rules": rules, "dashboard": dashboard,
            "adapter": adapter, "compose": compose}


def run_checks(inputs, promtool=True):
    errors = Errors()
    metrics, label_names = exported_metrics()
    if not metrics:
        errors.add("server/metric_names.h", "no metric names found")
        return errors
    for name, docs in sorted(inputs["overlays"].items()):
        check_overlay(name, docs, inputs["adapter"], errors)
    groups = inputs["rules"]["groups"]
    check_type(inputs["rules"], obj({"groups": PROMETHEUSRULE_SPEC["fields"]["groups"]}), "rules", errors)
    recorded = check_rules(groups, metrics, label_names, errors)
    check_dashboard(inputs["dashboard"], metrics, label_names, recorded, errors, promtool)
    for rule in ((inputs["adapter"] or {}).get("rules") or {}).get("custom") or []:
        check_expr(rule.get("seriesQuery", ""), "prometheus-adapter seriesQuery", metrics,
                   label_names, recorded, errors)
    check_compose(inputs["compose"], errors)
    return errors


# The self-test's breaks reach into copies of the inputs through these.

def deployment(i, overlay="cpu"):
    return next(d for d in i["overlays"][overlay] if d["kind"] == "Deployment")


def container(i, overlay="cpu"):
    return deployment(i, overlay)["spec"]["template"]["spec"]["containers"][0]


def drop_kind(kind):
    def f(i):
        i["overlays"]["cpu"] = [d for d in i["overlays"]["cpu"] if d["kind"] != kind]
    return f


def self_test_breaks():
    """(title, mutate) for each known break of the inputs."""
    return [
        ("readiness probe removed", lambda i: container(i).pop("readinessProbe")),
        ("liveness probe on HTTP instead of gRPC",
         lambda i: container(i).update(livenessProbe={"httpGet": {"path": "/", "port": 9090}})),
        ("TLS overlay probing with kubelet's plain gRPC probe",
         lambda i: container(i, "cpu-tls").update(readinessProbe={"grpc": {"port": 50051}})),
        ("TLS overlay without the Certificate", lambda i: i["overlays"].update(
            {"cpu-tls": [d for d in i["overlays"]["cpu-tls"] if d["kind"] != "Certificate"]})),
        ("TLS overlay without a writable /tmp", lambda i: container(i, "cpu-tls").update(
            volumeMounts=[m for m in container(i, "cpu-tls")["volumeMounts"]
                          if m["mountPath"] != "/tmp"])),
        ("misspelt field", lambda i: container(i).update(readinessprobe=container(i)["readinessProbe"])),
        ("env value not a string", lambda i: container(i)["env"][1].update(value=30)),
        ("memory not a quantity", lambda i: container(i)["resources"]["limits"].update(memory="4 gigs")),
        ("grace period shorter than drain",
         lambda i: deployment(i)["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=20)),
        ("Service selects other pods",
         lambda i: next(d for d in i["overlays"]["cpu"] if d["kind"] == "Service")["spec"].update(
             selector={"app": "other"})),
        ("no PodDisruptionBudget", drop_kind("PodDisruptionBudget")),
        ("no HorizontalPodAutoscaler", drop_kind("HorizontalPodAutoscaler")),
        ("HPA on autoscaling/v1", lambda i: next(d for d in i["overlays"]["cpu"]
                                                 if d["kind"] == "HorizontalPodAutoscaler").update(
            apiVersion="autoscaling/v1")),
        ("HPA metric the adapter does not serve",
         lambda i: next(d for d in i["overlays"]["cpu"] if d["kind"] == "HorizontalPodAutoscaler")
         ["spec"]["metrics"][0]["pods"]["metric"].update(name="tessera_queue_depth")),
        ("gpu overlay without a GPU",
         lambda i: container(i, "gpu")["resources"]["limits"].pop("nvidia.com/gpu")),
        ("PrometheusRule out of step with the rules file",
         lambda i: next(d for d in i["overlays"]["cpu"] if d["kind"] == "PrometheusRule")
         ["spec"]["groups"][1]["rules"].pop()),
        ("dashboard metric that does not exist",
         lambda i: i["dashboard"]["panels"][1]["targets"][0].update(
             expr='histogram_quantile(0.5, sum by (le) (rate(tessera_ttft_seconds_bucket[5m])))')),
        ("dashboard PromQL that does not parse",
         lambda i: i["dashboard"]["panels"][1]["targets"][0].update(
             expr='histogram_quantile(0.5, sum by (le) (rate(tessera_time_to_first_token_seconds_bucket[5m]))')),
        ("dashboard without the preemptions panel",
         lambda i: i["dashboard"].update(panels=[p for p in i["dashboard"]["panels"]
                                                 if "preemptions" not in json.dumps(p)])),
        ("rule on an unknown metric",
         lambda i: i["rules"]["groups"][0]["rules"][0].update(
             expr="histogram_quantile(0.95, sum by (job, le) (rate(tessera_ttft_bucket[5m])))")),
        ("rule on an unknown label",
         lambda i: i["rules"]["groups"][0]["rules"][0].update(
             expr="histogram_quantile(0.95, sum by (jb, le) "
                  "(rate(tessera_time_to_first_token_seconds_bucket[5m])))")),
        ("alert on an undefined recording rule",
         lambda i: i["rules"]["groups"][1]["rules"][1].update(expr="job:tessera_queue:p95 > 5")),
        ("compose grace period shorter than drain",
         lambda i: i["compose"]["services"]["tessera"].update(stop_grace_period="20s")),
        ("compose mounts a missing file",
         lambda i: i["compose"]["services"]["prometheus"]["volumes"].__setitem__(
             0, "./missing.yml:/etc/prometheus/prometheus.yml:ro")),
    ]


def self_test(inputs):
    """Each break must be reported; returns the number that were not."""
    breaks = self_test_breaks()
    missed = 0
    for title, mutate in breaks:
        broken = copy.deepcopy(inputs)
        mutate(broken)
        errors = run_checks(broken, promtool="parse" in title)
        if errors.items:
            print(f"  caught: {title}: {errors.items[0]}")
        else:
            print(f"  MISSED: {title}")
            missed += 1
    return missed, len(breaks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlay", action="append", default=[], metavar="NAME=RENDERED.yaml")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    inputs = load_inputs(args.overlay)
    errors = run_checks(inputs)
    for item in errors.items:
        print(f"  error: {item}")
    if errors.items:
        print(f"check_manifests: {len(errors.items)} error(s)")
        return 1
    for name, docs in sorted(inputs["overlays"].items()):
        kinds = sorted({d["kind"] for d in docs})
        print(f"  overlay {name}: {len(docs)} objects valid ({', '.join(kinds)})")
    exprs = len(grafana_exprs(inputs["dashboard"]))
    rules = sum(len(g["rules"]) for g in inputs["rules"]["groups"])
    print(f"  dashboard: {exprs} queries, rules: {rules}; every metric is in server/metric_names.h")
    print("  compose: services, mounts and drain timing consistent")
    if args.self_test:
        if not inputs["overlays"].get("cpu") or not inputs["overlays"].get("gpu"):
            print("check_manifests: --self-test needs the cpu and gpu overlays")
            return 1
        print("self-test: broken copies must be rejected")
        missed, total = self_test(inputs)
        if missed:
            print(f"check_manifests: self-test missed {missed} of {total} breaks")
            return 1
        print(f"  all {total} breaks caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
