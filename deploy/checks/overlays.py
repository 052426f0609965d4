"""Checks of one rendered Kubernetes overlay: every object against the schema,
then the Deployment, its probes and shutdown timing, and the Services,
PodDisruptionBudget, HorizontalPodAutoscaler, PodMonitor and PrometheusRule
that go with it."""

import re

import yaml

from .paths import RULES
from .schema import check_object
from .tls import check_tls

GRPC_PORT = 50051
HTTP_PORT = 8000


def selects(selector, labels):
    match = (selector or {}).get("matchLabels") or {}
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def seconds_of(text, where, errors):
    try:
        return float(text)
    except (TypeError, ValueError):
        errors.add(where, f"expected seconds, got {text!r}")
        return 0.0


def flag_value(container, flag, env_name):
    """A tessera-server flag as the server would see it: arguments win over env."""
    args = container.get("args") or []
    for i, arg in enumerate(args):
        if arg == f"--{flag}" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(f"--{flag}="):
            return arg.split("=", 1)[1]
    for env in container.get("env") or []:
        if env.get("name") == env_name and "value" in env:
            return env["value"]
    return None


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def check_overlay(name, docs, adapter, errors):
    where = f"overlay {name}"
    before = len(errors.items)
    for i, doc in enumerate(docs):
        check_object(doc, f"{where} #{i}", errors)
    if len(errors.items) > before:
        return  # the semantic checks below assume well-typed objects
    dep, c = find_tessera_container(docs, where, errors)
    if c is None:
        return
    pod_labels = dep["spec"]["template"]["metadata"].get("labels") or {}
    pod = dep["spec"]["template"]["spec"]
    port_names = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
    if port_names.get("grpc") != GRPC_PORT or "metrics" not in port_names:
        errors.add(where, f"container ports must include grpc ({GRPC_PORT}) and metrics")
    if port_names.get("http") != HTTP_PORT:
        errors.add(where, f"container ports must include http ({HTTP_PORT}), the OpenAI API")
    cert_path = flag_value(c, "tls-cert", "TESSERA_TLS_CERT")
    if cert_path is None:
        check_probes(c, port_names, where, errors)
    else:
        check_tls(docs, pod, c, cert_path, port_names, where, errors)
    check_shutdown_timing(c, pod, where, errors)
    check_security(c, pod, where, errors)
    check_services(of_kind(docs, "Service"), pod_labels, port_names, where, errors)
    find_required(docs, "PodDisruptionBudget", where, errors, select_labels=pod_labels)
    hpas = find_required(docs, "HorizontalPodAutoscaler", where, errors)
    check_hpas(hpas, dep, adapter, where, errors)
    monitors = find_required(docs, "PodMonitor", where, errors, select_labels=pod_labels)
    check_pod_monitors(monitors, port_names, where, errors)
    with open(RULES) as f:
        groups = yaml.safe_load(f)["groups"]
    for rule in find_required(docs, "PrometheusRule", where, errors):
        if rule["spec"]["groups"] != groups:
            errors.add(where, "the PrometheusRule's groups differ from deploy/prometheus/tessera-rules.yml")
    check_device(name, c, where, errors)


def find_tessera_container(docs, where, errors):
    """The one Deployment and its tessera container, or (None, None) once the
    reason is reported."""
    deployments = of_kind(docs, "Deployment")
    if len(deployments) != 1:
        errors.add(where, f"expected one Deployment, found {len(deployments)}")
        return None, None
    dep = deployments[0]
    pod_labels = dep["spec"]["template"]["metadata"].get("labels") or {}
    if not selects(dep["spec"]["selector"], pod_labels):
        errors.add(where, "the Deployment's selector does not match its pod template labels")
    containers = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "tessera"]
    if not containers:
        errors.add(where, "the Deployment has no container named tessera")
        return None, None
    return dep, containers[0]


def check_probes(c, port_names, where, errors):
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if p is None:
            errors.add(where, f"the tessera container has no {probe}")
        elif "grpc" not in p:
            errors.add(where, f"{probe} is not a native gRPC (grpc.health.v1) probe")
        elif p["grpc"]["port"] != port_names.get("grpc"):
            errors.add(where, f"{probe} checks port {p['grpc']['port']}, not the grpc port")


def check_shutdown_timing(c, pod, where, errors):
    """The pod's grace period must cover the preStop hook and then the
    server's drain, or the kubelet kills requests that are still draining."""
    pre_stop = (c.get("lifecycle") or {}).get("preStop")
    if pre_stop is None:
        errors.add(where, "the tessera container has no preStop hook")
    pre_stop_seconds = 0.0
    if pre_stop and "sleep" in pre_stop:
        pre_stop_seconds = float(pre_stop["sleep"]["seconds"])
    elif pre_stop and "exec" in pre_stop:
        cmd = pre_stop["exec"]["command"]
        if len(cmd) == 2 and cmd[0] == "sleep":
            pre_stop_seconds = seconds_of(cmd[1], f"{where} preStop", errors)
    drain = flag_value(c, "drain-timeout", "TESSERA_DRAIN_TIMEOUT")
    drain_seconds = 30.0 if drain is None else seconds_of(drain, f"{where} drain timeout", errors)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace <= pre_stop_seconds + drain_seconds:
        errors.add(where, f"terminationGracePeriodSeconds {grace} must exceed the preStop hook "
                          f"({pre_stop_seconds:g} s) plus the server's drain timeout ({drain_seconds:g} s)")


def check_security(c, pod, where, errors):
    security = c.get("securityContext") or {}
    if security.get("allowPrivilegeEscalation") is not False:
        errors.add(where, "the tessera container must set allowPrivilegeEscalation: false")
    if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
        errors.add(where, "the pod must set runAsNonRoot")


def check_services(services, pod_labels, port_names, where, errors):
    if not services:
        errors.add(where, "no Service")
    for svc in services:
        sel = svc["spec"].get("selector") or {}
        if not sel or any(pod_labels.get(k) != v for k, v in sel.items()):
            errors.add(where, f"Service {svc['metadata']['name']} does not select the Deployment's pods")
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if isinstance(target, str) and target not in port_names:
                errors.add(where, f"Service {svc['metadata']['name']} targets unknown port {target!r}")
            if isinstance(target, int) and target not in port_names.values():
                errors.add(where, f"Service {svc['metadata']['name']} targets unknown port {target}")
    if not any(s["spec"].get("clusterIP") == "None" for s in services):
        errors.add(where, "no headless Service (clusterIP: None) for client-side gRPC balancing")
    if not any(any(p.get("targetPort") == "grpc" for p in s["spec"]["ports"])
               and s["spec"].get("clusterIP") != "None" for s in services):
        errors.add(where, "no ClusterIP Service for the grpc port")
    if not any(any(p.get("targetPort") == "http" for p in s["spec"]["ports"]) for s in services):
        errors.add(where, "no Service for the http port")


def find_required(docs, kind, where, errors, select_labels=None):
    """The objects of a kind the overlay must hold; with select_labels, each
    must also select the pods that carry those labels."""
    found = of_kind(docs, kind)
    if not found:
        errors.add(where, f"no {kind}")
    for o in found if select_labels is not None else []:
        if not selects(o["spec"]["selector"], select_labels):
            errors.add(where, f"the {kind} does not select the Deployment's pods")
    return found


def check_hpas(hpas, dep, adapter, where, errors):
    dep_name = dep["metadata"]["name"]
    served = adapter_metric_names(adapter)
    for hpa in hpas:
        spec = hpa["spec"]
        ref = spec["scaleTargetRef"]
        if ref["kind"] != "Deployment" or ref["name"] != dep_name:
            errors.add(where, f"the HorizontalPodAutoscaler scales {ref['kind']}/{ref['name']}, "
                              f"not Deployment/{dep_name}")
        if spec.get("minReplicas", 1) > spec["maxReplicas"]:
            errors.add(where, "HorizontalPodAutoscaler minReplicas exceeds maxReplicas")
        pods_metrics = [m["pods"]["metric"]["name"] for m in spec.get("metrics") or [] if m["type"] == "Pods"]
        if not pods_metrics:
            errors.add(where, "the HorizontalPodAutoscaler has no Pods (custom) metric")
        for metric in pods_metrics:
            if metric not in served:
                errors.add(where, f"HPA metric {metric!r} is not served by the prometheus-adapter "
                                  f"rules ({sorted(served)})")
        if "replicas" in dep["spec"]:
            errors.add(where, "the Deployment sets replicas, which every apply would reset under the HPA")


def check_pod_monitors(monitors, port_names, where, errors):
    for mon in monitors:
        for ep in mon["spec"]["podMetricsEndpoints"]:
            if ep.get("port") not in port_names:
                errors.add(where, f"the PodMonitor scrapes unknown port {ep.get('port')!r}")


def check_device(name, c, where, errors):
    """Only the gpu overlay may, and must, ask for a GPU and run on CUDA."""
    limits = (c.get("resources") or {}).get("limits") or {}
    device = flag_value(c, "device", "TESSERA_DEVICE")
    if name == "gpu":
        if str(limits.get("nvidia.com/gpu", "0")) in ("0", ""):
            errors.add(where, "the gpu overlay does not ask for nvidia.com/gpu")
        if device != "cuda":
            errors.add(where, f"the gpu overlay runs --device {device}, not cuda")
    else:
        if "nvidia.com/gpu" in limits:
            errors.add(where, "a non-gpu overlay asks for nvidia.com/gpu")
        if device == "cuda":
            errors.add(where, "a non-gpu overlay runs --device cuda")


def adapter_metric_names(adapter):
    names = set()
    for rule in ((adapter or {}).get("rules") or {}).get("custom") or []:
        alias = (rule.get("name") or {}).get("as")
        if alias:
            names.add(alias)
        else:
            series = re.match(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", rule.get("seriesQuery", ""))
            if series:
                names.add(series.group(1))
    return names
