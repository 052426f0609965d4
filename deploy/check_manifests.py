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
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRIC_NAMES_H = os.path.join(ROOT, "server/metric_names.h")
RULES = os.path.join(ROOT, "deploy/prometheus/tessera-rules.yml")
DASHBOARD = os.path.join(ROOT, "deploy/grafana/tessera-dashboard.json")
ADAPTER_VALUES = os.path.join(ROOT, "deploy/kubernetes/prometheus-adapter/values.yaml")
COMPOSE_DIR = os.path.join(ROOT, "deploy/compose")
COMPOSE = os.path.join(COMPOSE_DIR, "compose.yaml")

GRPC_PORT = 50051


class Errors:
    def __init__(self):
        self.items = []

    def add(self, where, message):
        self.items.append(f"{where}: {message}")


# ----------------------------------------------------------------- schema --
# A schema is one of:
#   a type tag ("str", "int", "bool", "quantity", "intorstr", "duration",
#   "any"), ("enum", [...]), ("list", schema), ("map", schema), or
#   {"fields": {name: (schema, required)}, "one_of": [names...]}.
# Objects are strict: a field not in the schema is an error, as with
# kubeconform -strict, so a misspelt field cannot slip through.

def obj(fields, one_of=None, open_=False):
    return {"fields": fields, "one_of": one_of, "open": open_}


R, O = True, False  # required, optional
STR_MAP = ("map", "str")
LABEL_SELECTOR = obj({
    "matchLabels": (STR_MAP, O),
    "matchExpressions": (("list", obj({
        "key": ("str", R),
        "operator": (("enum", ["In", "NotIn", "Exists", "DoesNotExist"]), R),
        "values": (("list", "str"), O),
    })), O),
})
META = obj({
    "name": ("str", R),
    "namespace": ("str", O),
    "labels": (STR_MAP, O),
    "annotations": (STR_MAP, O),
})
TEMPLATE_META = obj({"labels": (STR_MAP, O), "annotations": (STR_MAP, O)})
EXEC = obj({"command": (("list", "str"), R)})
HTTP_GET = obj({
    "path": ("str", O), "port": ("intorstr", R), "host": ("str", O),
    "scheme": (("enum", ["HTTP", "HTTPS"]), O),
    "httpHeaders": (("list", obj({"name": ("str", R), "value": ("str", R)})), O),
})
TCP_SOCKET = obj({"port": ("intorstr", R), "host": ("str", O)})
GRPC_ACTION = obj({"port": ("int", R), "service": ("str", O)})
PROBE = obj({
    "exec": (EXEC, O), "httpGet": (HTTP_GET, O), "tcpSocket": (TCP_SOCKET, O),
    "grpc": (GRPC_ACTION, O),
    "initialDelaySeconds": ("int", O), "periodSeconds": ("int", O),
    "timeoutSeconds": ("int", O), "successThreshold": ("int", O),
    "failureThreshold": ("int", O), "terminationGracePeriodSeconds": ("int", O),
}, one_of=["exec", "httpGet", "tcpSocket", "grpc"])
HANDLER = obj({
    "exec": (EXEC, O), "httpGet": (HTTP_GET, O), "tcpSocket": (TCP_SOCKET, O),
    "sleep": (obj({"seconds": ("int", R)}), O),
}, one_of=["exec", "httpGet", "tcpSocket", "sleep"])
KEY_REF = obj({"name": ("str", O), "key": ("str", R), "optional": ("bool", O)})
ENV_VAR = obj({
    "name": ("str", R),
    "value": ("str", O),
    "valueFrom": (obj({
        "fieldRef": (obj({"fieldPath": ("str", R), "apiVersion": ("str", O)}), O),
        "resourceFieldRef": (obj({
            "resource": ("str", R), "containerName": ("str", O), "divisor": ("quantity", O),
        }), O),
        "configMapKeyRef": (KEY_REF, O),
        "secretKeyRef": (KEY_REF, O),
    }, one_of=["fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"]), O),
})
SECCOMP = obj({
    "type": (("enum", ["RuntimeDefault", "Localhost", "Unconfined"]), R),
    "localhostProfile": ("str", O),
})
CONTAINER_SECURITY = obj({
    "allowPrivilegeEscalation": ("bool", O), "readOnlyRootFilesystem": ("bool", O),
    "runAsNonRoot": ("bool", O), "runAsUser": ("int", O), "runAsGroup": ("int", O),
    "privileged": ("bool", O),
    "capabilities": (obj({"add": (("list", "str"), O), "drop": (("list", "str"), O)}), O),
    "seccompProfile": (SECCOMP, O),
})
POD_SECURITY = obj({
    "runAsNonRoot": ("bool", O), "runAsUser": ("int", O), "runAsGroup": ("int", O),
    "fsGroup": ("int", O), "supplementalGroups": (("list", "int"), O),
    "fsGroupChangePolicy": (("enum", ["OnRootMismatch", "Always"]), O),
    "seccompProfile": (SECCOMP, O),
})
CONTAINER = obj({
    "name": ("str", R),
    "image": ("str", R),
    "imagePullPolicy": (("enum", ["Always", "IfNotPresent", "Never"]), O),
    "command": (("list", "str"), O),
    "args": (("list", "str"), O),
    "workingDir": ("str", O),
    "env": (("list", ENV_VAR), O),
    "envFrom": (("list", "any"), O),
    "ports": (("list", obj({
        "name": ("str", O), "containerPort": ("int", R), "hostPort": ("int", O),
        "protocol": (("enum", ["TCP", "UDP", "SCTP"]), O),
    })), O),
    "resources": (obj({
        "requests": (("map", "quantity"), O),
        "limits": (("map", "quantity"), O),
    }), O),
    "startupProbe": (PROBE, O),
    "readinessProbe": (PROBE, O),
    "livenessProbe": (PROBE, O),
    "lifecycle": (obj({"preStop": (HANDLER, O), "postStart": (HANDLER, O)}), O),
    "securityContext": (CONTAINER_SECURITY, O),
    "volumeMounts": (("list", obj({
        "name": ("str", R), "mountPath": ("str", R), "readOnly": ("bool", O),
        "subPath": ("str", O),
    })), O),
    "terminationMessagePolicy": (("enum", ["File", "FallbackToLogsOnError"]), O),
})
VOLUME = obj({
    "name": ("str", R),
    "persistentVolumeClaim": (obj({"claimName": ("str", R), "readOnly": ("bool", O)}), O),
    "emptyDir": (obj({"medium": ("str", O), "sizeLimit": ("quantity", O)}), O),
    "configMap": (obj({"name": ("str", R), "items": (("list", "any"), O),
                       "defaultMode": ("int", O), "optional": ("bool", O)}), O),
    "secret": (obj({"secretName": ("str", R), "items": (("list", "any"), O),
                    "defaultMode": ("int", O), "optional": ("bool", O)}), O),
    "hostPath": (obj({"path": ("str", R), "type": ("str", O)}), O),
}, one_of=["persistentVolumeClaim", "emptyDir", "configMap", "secret", "hostPath"])
POD_SPEC = obj({
    "containers": (("list", CONTAINER), R),
    "initContainers": (("list", CONTAINER), O),
    "terminationGracePeriodSeconds": ("int", O),
    "securityContext": (POD_SECURITY, O),
    "serviceAccountName": ("str", O),
    "automountServiceAccountToken": ("bool", O),
    "runtimeClassName": ("str", O),
    "priorityClassName": ("str", O),
    "nodeSelector": (STR_MAP, O),
    "affinity": ("any", O),
    "topologySpreadConstraints": (("list", "any"), O),
    "tolerations": (("list", obj({
        "key": ("str", O),
        "operator": (("enum", ["Exists", "Equal"]), O),
        "value": ("str", O),
        "effect": (("enum", ["NoSchedule", "PreferNoSchedule", "NoExecute"]), O),
        "tolerationSeconds": ("int", O),
    })), O),
    "volumes": (("list", VOLUME), O),
    "imagePullSecrets": (("list", obj({"name": ("str", R)})), O),
})
DEPLOYMENT_SPEC = obj({
    "replicas": ("int", O),
    "revisionHistoryLimit": ("int", O),
    "minReadySeconds": ("int", O),
    "progressDeadlineSeconds": ("int", O),
    "selector": (LABEL_SELECTOR, R),
    "strategy": (obj({
        "type": (("enum", ["RollingUpdate", "Recreate"]), O),
        "rollingUpdate": (obj({"maxSurge": ("intorstr", O), "maxUnavailable": ("intorstr", O)}), O),
    }), O),
    "template": (obj({"metadata": (TEMPLATE_META, R), "spec": (POD_SPEC, R)}), R),
})
SERVICE_SPEC = obj({
    "type": (("enum", ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]), O),
    "clusterIP": ("str", O),
    "selector": (STR_MAP, O),
    "publishNotReadyAddresses": ("bool", O),
    "sessionAffinity": (("enum", ["None", "ClientIP"]), O),
    "internalTrafficPolicy": (("enum", ["Cluster", "Local"]), O),
    "ports": (("list", obj({
        "name": ("str", O), "port": ("int", R), "targetPort": ("intorstr", O),
        "protocol": (("enum", ["TCP", "UDP", "SCTP"]), O), "appProtocol": ("str", O),
        "nodePort": ("int", O),
    })), R),
})
PDB_SPEC = obj({
    "minAvailable": ("intorstr", O),
    "maxUnavailable": ("intorstr", O),
    "selector": (LABEL_SELECTOR, R),
    "unhealthyPodEvictionPolicy": (("enum", ["IfHealthyBudget", "AlwaysAllow"]), O),
}, one_of=["minAvailable", "maxUnavailable"])
METRIC_TARGET = obj({
    "type": (("enum", ["Value", "AverageValue", "Utilization"]), R),
    "value": ("quantity", O), "averageValue": ("quantity", O),
    "averageUtilization": ("int", O),
}, one_of=["value", "averageValue", "averageUtilization"])
METRIC_ID = obj({"name": ("str", R), "selector": (LABEL_SELECTOR, O)})
SCALING_RULES = obj({
    "stabilizationWindowSeconds": ("int", O),
    "selectPolicy": (("enum", ["Max", "Min", "Disabled"]), O),
    "policies": (("list", obj({
        "type": (("enum", ["Pods", "Percent"]), R), "value": ("int", R),
        "periodSeconds": ("int", R),
    })), O),
})
HPA_SPEC = obj({
    "scaleTargetRef": (obj({"apiVersion": ("str", O), "kind": ("str", R), "name": ("str", R)}), R),
    "minReplicas": ("int", O),
    "maxReplicas": ("int", R),
    "metrics": (("list", obj({
        "type": (("enum", ["Pods", "Resource", "Object", "External", "ContainerResource"]), R),
        "pods": (obj({"metric": (METRIC_ID, R), "target": (METRIC_TARGET, R)}), O),
        "resource": (obj({"name": ("str", R), "target": (METRIC_TARGET, R)}), O),
        "object": ("any", O), "external": ("any", O), "containerResource": ("any", O),
    }, one_of=["pods", "resource", "object", "external", "containerResource"])), O),
    "behavior": (obj({"scaleUp": (SCALING_RULES, O), "scaleDown": (SCALING_RULES, O)}), O),
})
PODMONITOR_SPEC = obj({
    "selector": (LABEL_SELECTOR, R),
    "namespaceSelector": (obj({"any": ("bool", O), "matchNames": (("list", "str"), O)}), O),
    "jobLabel": ("str", O),
    "podMetricsEndpoints": (("list", obj({
        "port": ("str", O), "path": ("str", O), "interval": ("duration", O),
        "scrapeTimeout": ("duration", O), "scheme": (("enum", ["http", "https"]), O),
        "honorLabels": ("bool", O), "relabelings": (("list", "any"), O),
        "metricRelabelings": (("list", "any"), O),
    })), R),
})
RULE = obj({
    "record": ("str", O), "alert": ("str", O), "expr": ("str", R), "for": ("duration", O),
    "keep_firing_for": ("duration", O), "labels": (STR_MAP, O), "annotations": (STR_MAP, O),
}, one_of=["record", "alert"])
PROMETHEUSRULE_SPEC = obj({
    "groups": (("list", obj({
        "name": ("str", R), "interval": ("duration", O), "limit": ("int", O),
        "rules": (("list", RULE), R),
    })), R),
})

KINDS = {
    ("v1", "Namespace"): None,
    ("v1", "Service"): SERVICE_SPEC,
    ("apps/v1", "Deployment"): DEPLOYMENT_SPEC,
    ("policy/v1", "PodDisruptionBudget"): PDB_SPEC,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): HPA_SPEC,
    ("monitoring.coreos.com/v1", "PodMonitor"): PODMONITOR_SPEC,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUSRULE_SPEC,
}

QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_type(value, schema, where, errors):
    if schema == "any":
        return
    if schema == "str":
        if not isinstance(value, str):
            errors.add(where, f"expected a string, got {type(value).__name__} {value!r}")
    elif schema == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.add(where, f"expected an integer, got {type(value).__name__} {value!r}")
    elif schema == "bool":
        if not isinstance(value, bool):
            errors.add(where, f"expected a boolean, got {type(value).__name__} {value!r}")
    elif schema == "quantity":
        if isinstance(value, bool) or not (
                isinstance(value, (int, float)) or (isinstance(value, str) and QUANTITY.match(value))):
            errors.add(where, f"expected a quantity such as 4, 500m or 2Gi, got {value!r}")
    elif schema == "intorstr":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.add(where, f"expected an integer or a string, got {value!r}")
    elif schema == "duration":
        if not isinstance(value, str) or not DURATION.match(value):
            errors.add(where, f"expected a duration such as 30s or 5m, got {value!r}")
    elif isinstance(schema, tuple) and schema[0] == "enum":
        if value not in schema[1]:
            errors.add(where, f"expected one of {schema[1]}, got {value!r}")
    elif isinstance(schema, tuple) and schema[0] == "list":
        if not isinstance(value, list):
            errors.add(where, f"expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check_type(item, schema[1], f"{where}[{i}]", errors)
    elif isinstance(schema, tuple) and schema[0] == "map":
        if not isinstance(value, dict):
            errors.add(where, f"expected a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                errors.add(where, f"map key {k!r} is not a string")
            check_type(v, schema[1], f"{where}.{k}", errors)
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            errors.add(where, f"expected an object, got {type(value).__name__} {value!r}")
            return
        fields = schema["fields"]
        for name, (sub, required) in fields.items():
            if name in value:
                if value[name] is None:
                    errors.add(f"{where}.{name}", "is null")
                else:
                    check_type(value[name], sub, f"{where}.{name}", errors)
            elif required:
                errors.add(where, f"required field '{name}' is missing")
        if not schema.get("open"):
            for name in value:
                if name not in fields:
                    errors.add(where, f"unknown field '{name}'")
        if schema.get("one_of"):
            present = [n for n in schema["one_of"] if n in value]
            if len(present) != 1:
                errors.add(where, f"needs exactly one of {schema['one_of']}, has {present}")
    else:
        raise ValueError(f"bad schema {schema!r}")


def check_object(doc, where, errors):
    if not isinstance(doc, dict):
        errors.add(where, "not a mapping")
        return
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        errors.add(where, "apiVersion and kind must be strings")
        return
    where = f"{where} {kind}/{(doc.get('metadata') or {}).get('name', '?')}"
    if (api, kind) not in KINDS:
        errors.add(where, f"unexpected {api} {kind} (not in the checker's schemas)")
        return
    spec_schema = KINDS[(api, kind)]
    top = {"apiVersion": ("str", R), "kind": ("str", R), "metadata": (META, R)}
    if spec_schema is not None:
        top["spec"] = (spec_schema, R)
    check_type(doc, obj(top), where, errors)
    name = (doc.get("metadata") or {}).get("name")
    if isinstance(name, str) and not DNS1123.match(name):
        errors.add(where, f"metadata.name {name!r} is not a DNS-1123 label")


# -------------------------------------------------------------- overlays --

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


def check_overlay(name, docs, adapter, errors):
    where = f"overlay {name}"
    before = len(errors.items)
    for i, doc in enumerate(docs):
        check_object(doc, f"{where} #{i}", errors)
    if len(errors.items) > before:
        return  # the semantic checks below assume well-typed objects

    def of_kind(kind):
        return [d for d in docs if d["kind"] == kind]

    deployments = of_kind("Deployment")
    if len(deployments) != 1:
        errors.add(where, f"expected one Deployment, found {len(deployments)}")
        return
    dep = deployments[0]
    dep_name = dep["metadata"]["name"]
    pod_labels = dep["spec"]["template"]["metadata"].get("labels") or {}
    pod = dep["spec"]["template"]["spec"]
    if not selects(dep["spec"]["selector"], pod_labels):
        errors.add(where, "the Deployment's selector does not match its pod template labels")
    containers = [c for c in pod["containers"] if c["name"] == "tessera"]
    if not containers:
        errors.add(where, "the Deployment has no container named tessera")
        return
    c = containers[0]
    port_names = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
    if port_names.get("grpc") != GRPC_PORT or "metrics" not in port_names:
        errors.add(where, f"container ports must include grpc ({GRPC_PORT}) and metrics")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if p is None:
            errors.add(where, f"the tessera container has no {probe}")
        elif "grpc" not in p:
            errors.add(where, f"{probe} is not a native gRPC (grpc.health.v1) probe")
        elif p["grpc"]["port"] != port_names.get("grpc"):
            errors.add(where, f"{probe} checks port {p['grpc']['port']}, not the grpc port")
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
    security = c.get("securityContext") or {}
    if security.get("allowPrivilegeEscalation") is not False:
        errors.add(where, "the tessera container must set allowPrivilegeEscalation: false")
    if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
        errors.add(where, "the pod must set runAsNonRoot")

    services = of_kind("Service")
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

    def required(kind, selecting_pods):
        found = of_kind(kind)
        if not found:
            errors.add(where, f"no {kind}")
        for o in found if selecting_pods else []:
            if not selects(o["spec"]["selector"], pod_labels):
                errors.add(where, f"the {kind} does not select the Deployment's pods")
        return found

    required("PodDisruptionBudget", selecting_pods=True)
    hpas = required("HorizontalPodAutoscaler", selecting_pods=False)
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

    for mon in required("PodMonitor", selecting_pods=True):
        for ep in mon["spec"]["podMetricsEndpoints"]:
            if ep.get("port") not in port_names:
                errors.add(where, f"the PodMonitor scrapes unknown port {ep.get('port')!r}")

    with open(RULES) as f:
        groups = yaml.safe_load(f)["groups"]
    for rule in required("PrometheusRule", selecting_pods=False):
        if rule["spec"]["groups"] != groups:
            errors.add(where, "the PrometheusRule's groups differ from deploy/prometheus/tessera-rules.yml")

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


# --------------------------------------------------------------- metrics --

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
    # preemptions, errors by code.
    required = {
        "tessera_time_to_first_token_seconds_bucket", "tessera_inter_token_latency_seconds_bucket",
        "tessera_generation_tokens_total", "tessera_requests_running", "tessera_requests_waiting",
        "tessera_kv_cache_usage_ratio", "tessera_batch_size_bucket", "tessera_batch_padding_ratio_sum",
        "tessera_preemptions_total", "tessera_request_failure_total",
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


# --------------------------------------------------------------- compose --

def check_compose(compose, errors):
    where = "compose"
    services = compose.get("services") or {}
    missing = [n for n in ("tessera", "prometheus", "grafana") if n not in services]
    for name in missing:
        errors.add(where, f"no {name} service")
    if missing:
        return
    tessera = services["tessera"]
    build = tessera.get("build") or {}
    context = os.path.normpath(os.path.join(COMPOSE_DIR, build.get("context", ".")))
    if not os.path.isfile(os.path.join(context, build.get("dockerfile", "Dockerfile"))):
        errors.add(where, "the tessera build context has no Dockerfile")
    drain = float((tessera.get("environment") or {}).get("TESSERA_DRAIN_TIMEOUT", 30))
    grace = tessera.get("stop_grace_period", "10s")
    m = re.fullmatch(r"(\d+)s", str(grace))
    if not m or int(m.group(1)) <= drain:
        errors.add(where, f"tessera stop_grace_period {grace} must exceed TESSERA_DRAIN_TIMEOUT {drain:g} s")
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
    prom_config = mounts.get(("prometheus", "/etc/prometheus/prometheus.yml"))
    if not prom_config:
        errors.add(where, "prometheus does not mount a config at /etc/prometheus/prometheus.yml")
    else:
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


# ----------------------------------------------------------------- main ---

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


def self_test(inputs):
    """Each break must be reported; returns the number that were not."""

    def deployment(i, overlay="cpu"):
        return next(d for d in i["overlays"][overlay] if d["kind"] == "Deployment")

    def container(i, overlay="cpu"):
        return deployment(i, overlay)["spec"]["template"]["spec"]["containers"][0]

    def drop_kind(kind):
        def f(i):
            i["overlays"]["cpu"] = [d for d in i["overlays"]["cpu"] if d["kind"] != kind]
        return f

    breaks = [
        ("readiness probe removed", lambda i: container(i).pop("readinessProbe")),
        ("liveness probe on HTTP instead of gRPC",
         lambda i: container(i).update(livenessProbe={"httpGet": {"path": "/", "port": 9090}})),
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
