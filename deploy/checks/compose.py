"""Checks of the compose stack: its services, the files they mount, the
Prometheus scrape and rules, Grafana's provisioning, and the drain timing."""

import os
import re

import yaml

from .paths import COMPOSE_DIR, DASHBOARD, RULES


def check_compose(compose, errors):
    where = "compose"
    services = compose.get("services") or {}
    missing = [n for n in ("tessera", "prometheus", "grafana") if n not in services]
    for name in missing:
        errors.add(where, f"no {name} service")
    if missing:
        return
    check_tessera_service(services["tessera"], where, errors)
    mounts = host_mounts(services, where, errors)
    check_prometheus_mounts(mounts, where, errors)
    check_grafana_mounts(mounts, where, errors)


def check_tessera_service(tessera, where, errors):
    build = tessera.get("build") or {}
    context = os.path.normpath(os.path.join(COMPOSE_DIR, build.get("context", ".")))
    if not os.path.isfile(os.path.join(context, build.get("dockerfile", "Dockerfile"))):
        errors.add(where, "the tessera build context has no Dockerfile")
    drain = float((tessera.get("environment") or {}).get("TESSERA_DRAIN_TIMEOUT", 30))
    grace = tessera.get("stop_grace_period", "10s")
    m = re.fullmatch(r"(\d+)s", str(grace))
    if not m or int(m.group(1)) <= drain:
        errors.add(where, f"tessera stop_grace_period {grace} must exceed TESSERA_DRAIN_TIMEOUT {drain:g} s")


def host_mounts(services, where, errors):
    """{(service, target): host path} for every bind mount of a host file that
    exists; a missing one is reported."""
    mounts = {}
    for name, svc in services.items():
        for volume in svc.get("volumes") or []:
            parts = volume.split(":")
            source, target = parts[0], parts[1]
            if source.startswith(".") or source.startswith("/"):
                path = os.path.normpath(os.path.join(COMPOSE_DIR, source))
                if os.path.exists(path):
                    mounts[(name, target)] = path
                else:
                    errors.add(where, f"{name} mounts {source}, which does not exist")
    return mounts


def check_prometheus_mounts(mounts, where, errors):
    prom_config = mounts.get(("prometheus", "/etc/prometheus/prometheus.yml"))
    if not prom_config:
        errors.add(where, "prometheus does not mount a config at /etc/prometheus/prometheus.yml")
        return
    with open(prom_config) as f:
        config = yaml.safe_load(f)
    targets = [t for sc in config.get("scrape_configs") or []
               for s in sc.get("static_configs") or [] for t in s.get("targets") or []]
    if "tessera:9090" not in targets:
        errors.add(where, "prometheus does not scrape tessera:9090")
    rule_mounts = [p for (svc, t), p in mounts.items()
                   if svc == "prometheus" and os.path.realpath(p) == os.path.realpath(RULES)]
    if not rule_mounts:
        errors.add(where, "prometheus does not mount deploy/prometheus/tessera-rules.yml")


def check_grafana_mounts(mounts, where, errors):
    """Grafana must load the dashboard through its provisioning, and query
    the compose stack's Prometheus."""
    dash_mount = [t for (svc, t), p in mounts.items()
                  if svc == "grafana" and os.path.realpath(p) == os.path.realpath(DASHBOARD)]
    provisioning = mounts.get(("grafana", "/etc/grafana/provisioning"))
    if not dash_mount or not provisioning:
        errors.add(where, "grafana must mount the provisioning folder and the dashboard")
        return
    dash_dirs = []
    for fname in sorted(os.listdir(os.path.join(provisioning, "dashboards"))):
        with open(os.path.join(provisioning, "dashboards", fname)) as f:
            for p in yaml.safe_load(f).get("providers") or []:
                dash_dirs.append(p["options"]["path"])
    if os.path.dirname(dash_mount[0]) not in dash_dirs:
        errors.add(where, f"the dashboard is mounted at {dash_mount[0]}, outside the provisioned "
                          f"dashboard folders {dash_dirs}")
    sources = []
    for fname in sorted(os.listdir(os.path.join(provisioning, "datasources"))):
        with open(os.path.join(provisioning, "datasources", fname)) as f:
            sources += yaml.safe_load(f).get("datasources") or []
    if not any(s.get("type") == "prometheus" and s.get("url") == "http://prometheus:9090" for s in sources):
        errors.add(where, "grafana has no provisioned Prometheus data source at http://prometheus:9090")
