"""Schema checks of rendered Kubernetes objects, and the error list that every
check reports into."""

import re


class Errors:
    def __init__(self):
        self.items = []

    def add(self, where, message):
        self.items.append(f"{where}: {message}")


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
# cert-manager's Certificate (the TLS overlay).
CERTIFICATE_SPEC = obj({
    "secretName": ("str", R),
    "commonName": ("str", O),
    "duration": ("duration", O),
    "renewBefore": ("duration", O),
    "dnsNames": (("list", "str"), O),
    "ipAddresses": (("list", "str"), O),
    "usages": (("list", ("enum", [
        "digital signature", "key encipherment", "server auth", "client auth",
        "signing", "content commitment", "key agreement"])), O),
    "privateKey": (obj({
        "algorithm": (("enum", ["RSA", "ECDSA", "Ed25519"]), O),
        "size": ("int", O),
        "encoding": (("enum", ["PKCS1", "PKCS8"]), O),
        "rotationPolicy": (("enum", ["Never", "Always"]), O),
    }), O),
    "issuerRef": (obj({"name": ("str", R), "kind": ("str", O), "group": ("str", O)}), R),
    "secretTemplate": ("any", O),
})

KINDS = {
    ("v1", "Namespace"): None,
    ("v1", "Service"): SERVICE_SPEC,
    ("apps/v1", "Deployment"): DEPLOYMENT_SPEC,
    ("policy/v1", "PodDisruptionBudget"): PDB_SPEC,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): HPA_SPEC,
    ("monitoring.coreos.com/v1", "PodMonitor"): PODMONITOR_SPEC,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUSRULE_SPEC,
    ("cert-manager.io/v1", "Certificate"): CERTIFICATE_SPEC,
}

QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SCALARS = ("str", "int", "bool", "quantity", "intorstr", "duration")



def check_type(value, schema, where, errors):
    if schema == "any":
        return
    if schema in SCALARS:
        check_scalar(value, schema, where, errors)
    elif isinstance(schema, tuple) and schema[0] == "enum":
        if value not in schema[1]:
            errors.add(where, f"expected one of {schema[1]}, got {value!r}")
    elif isinstance(schema, tuple) and schema[0] == "list":
        check_list(value, schema[1], where, errors)
    elif isinstance(schema, tuple) and schema[0] == "map":
        check_map(value, schema[1], where, errors)
    elif isinstance(schema, dict):
        check_fields(value, schema, where, errors)
    else:
        raise ValueError(f"bad schema {schema!r}")


def check_scalar(value, schema, where, errors):
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


def check_list(value, item_schema, where, errors):
    if not isinstance(value, list):
        errors.add(where, f"expected a list, got {type(value).__name__}")
        return
    for i, item in enumerate(value):
        check_type(item, item_schema, f"{where}[{i}]", errors)


def check_map(value, value_schema, where, errors):
    if not isinstance(value, dict):
        errors.add(where, f"expected a map, got {type(value).__name__}")
        return
    for k, v in value.items():
        if not isinstance(k, str):
            errors.add(where, f"map key {k!r} is not a string")
        check_type(v, value_schema, f"{where}.{k}", errors)


def check_fields(value, schema, where, errors):
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
