"""Checks that every metric and label that the Grafana dashboard, the
Prometheus rules and the prometheus-adapter name exists in
server/metric_names.h, that every recording rule they use is defined, and
that the dashboard's PromQL parses."""

import os
import re
import subprocess
import tempfile

import yaml

from .paths import METRIC_NAMES_H


def exported_metrics():
    """{name: kind} from server/metric_names.h, kind from its section comment."""
    kinds, kind = {}, None
    labels = set()
    with open(METRIC_NAMES_H) as f:
        for line in f:
            section = re.match(r"\s*//\s*(Counters|Histograms|Gauges|Label names)\.", line)
            if section:
                kind = section.group(1)
            m = re.search(r'constexpr char k\w+\[\] = "([a-z0-9_]+)";', line)
            if m:
                if kind == "Label names":
                    labels.add(m.group(1))
                elif kind:
                    kinds[m.group(1)] = kind
    return kinds, labels


PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan", "atan2",
}
# Labels that the scrape adds (job, instance; namespace, pod, container from a
# PodMonitor), histogram buckets, and the metrics' own labels.
SCRAPE_LABELS = {"job", "instance", "namespace", "pod", "container", "le", "__name__"}
OTHER_METRICS = {"up"}  # Prometheus' own per-target series


def promql_names(expr):
    """(metric names, label names) that a PromQL expression refers to."""
    labels = set()
    text = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', expr)  # string literals
    for block in re.findall(r"\{([^}]*)\}", text):
        labels.update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", block))
    text = re.sub(r"\{[^}]*\}", " ", text)
    for clause in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", text):
        labels.update(x.strip() for x in clause.split(",") if x.strip())
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        token = m.group(0)
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or token.lower() in PROMQL_KEYWORDS:
            continue  # a function or an operator
        if re.fullmatch(r"[eE]\d*", token) or text[m.start() - 1:m.start()].isdigit():
            continue  # the exponent of a number, or a duration's unit
        names.add(token)
    return names, labels


def check_expr(expr, where, metrics, label_names, recorded, errors):
    names, labels = promql_names(expr)
    for name in sorted(names):
        if ":" in name:
            if name not in recorded:
                errors.add(where, f"recording rule {name!r} is not defined in tessera-rules.yml")
            continue
        if name in OTHER_METRICS:
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in metrics and metrics[name] != "Histograms":
            continue
        if base != name and metrics.get(base) == "Histograms":
            continue
        if name in metrics:
            errors.add(where, f"histogram {name!r} has no series of its own; use _bucket, _sum or _count")
        else:
            errors.add(where, f"metric {name!r} is not in server/metric_names.h")
    for label in sorted(labels - SCRAPE_LABELS - label_names):
        errors.add(where, f"label {label!r} is neither a scrape label nor in server/metric_names.h")
    return names


def grafana_exprs(dashboard):
    """(where, PromQL) for every panel target and query variable."""
    out = []

    def walk_panels(panels):
        for p in panels:
            for t in p.get("targets") or []:
                if "expr" in t:
                    out.append((f"dashboard panel {p.get('title')!r} {t.get('refId')}", t["expr"]))
            walk_panels(p.get("panels") or [])

    walk_panels(dashboard.get("panels") or [])
    for var in (dashboard.get("templating") or {}).get("list") or []:
        if var.get("type") == "query":
            q = var.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.match(r"^\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*$", q or "")
            out.append((f"dashboard variable {var.get('name')!r}", m.group(1) if m else q))
    return out


def substitute_grafana_variables(expr):
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)
    return re.sub(r"\$\{?\w+\}?", ".+", expr)


def check_dashboard(dashboard, metrics, label_names, recorded, errors, promtool=True):
    exprs = grafana_exprs(dashboard)
    used = set()
    for where, expr in exprs:
        used |= check_expr(substitute_grafana_variables(expr), where, metrics, label_names, recorded, errors)
    ids = [p.get("id") for p in dashboard.get("panels") or []]
    if len(ids) != len(set(ids)):
        errors.add("dashboard", "panel ids are not unique")
    # What the dashboard must show (issue #5): TTFT and ITL percentiles, output
    # tokens/s, running and waiting, KV usage, batch size and padding ratio,
    # preemptions, errors by code; the prefix cache's hit ratio (issue #14);
    # the engine's step time by kind.
    required = {
        "tessera_time_to_first_token_seconds_bucket", "tessera_inter_token_latency_seconds_bucket",
        "tessera_generation_tokens_total", "tessera_requests_running", "tessera_requests_waiting",
        "tessera_kv_cache_usage_ratio", "tessera_batch_size_bucket", "tessera_batch_padding_ratio_sum",
        "tessera_preemptions_total", "tessera_request_failure_total",
        "tessera_prefix_cache_hits_total", "tessera_prefix_cache_queries_total",
        "tessera_engine_step_duration_seconds_bucket",
    }
    for name in sorted(required - used):
        errors.add("dashboard", f"no panel shows {name}")
    if not any("histogram_quantile" in e for _, e in exprs):
        errors.add("dashboard", "no percentile (histogram_quantile) panel")
    if not any(re.search(r"by \(code\)", e) for _, e in exprs):
        errors.add("dashboard", "errors are not broken down by code")
    if promtool and exprs:
        check_promql_syntax([(w, substitute_grafana_variables(e)) for w, e in exprs], errors)


def check_promql_syntax(exprs, errors):
    """Runs each expression through promtool's parser, as a recording rule."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": e} for i, (_, e) in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump(rules, f)
        path = f.name
    try:
        result = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if result.returncode != 0:
        detail = (result.stdout + result.stderr).strip().splitlines()
        errors.add("dashboard PromQL", "promtool rejects it: " + " | ".join(detail[-4:]))


def recorded_names(groups):
    return {r["record"] for g in groups for r in g["rules"] if "record" in r}


def check_rules(groups, metrics, label_names, errors):
    recorded = recorded_names(groups)
    alerts = set()
    for g in groups:
        for r in g["rules"]:
            where = f"rule {r.get('record') or r.get('alert')}"
            check_expr(r["expr"], where, metrics, label_names, recorded, errors)
            if "alert" in r:
                alerts.add(r["alert"])
    # Issue #5: high queue time, KV cache near full, error ratio, server down.
    for needed, pattern in (("high queue time", "tessera_request_queue_time_seconds"),
                            ("KV cache near full", "tessera_kv_cache_usage_ratio"),
                            ("error ratio", "tessera_request_errors:ratio"),
                            ("server down", "up{")):
        if not any(pattern in r["expr"] for g in groups for r in g["rules"] if "alert" in r):
            errors.add("rules", f"no alert on {needed}")
    return recorded
