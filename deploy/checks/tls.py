"""Checks of an overlay that serves TLS (TESSERA_TLS_CERT or --tls-cert): its
probes speak TLS, the files come from a mounted secret that a cert-manager
Certificate writes, and that certificate names the address the probes call."""

import posixpath


PROBE_HOST = "127.0.0.1"


def is_tls_probe(probe, grpc_port, tls_dir):
    """An exec probe that runs `tessera-cli ... info` over TLS against the
    pod's own gRPC port, trusting a CA file from the mounted secret."""
    cmd = (probe.get("exec") or {}).get("command") or []
    if not cmd or cmd[0] != "tessera-cli" or cmd[-1] != "info":
        return False
    def value(flag):
        return cmd[cmd.index(flag) + 1] if flag in cmd[:-1] else None
    ca = value("--tls-ca")
    return (value("--server") == f"{PROBE_HOST}:{grpc_port}" and ca is not None
            and posixpath.dirname(ca) == tls_dir)


def flag_env(c, name):
    return next((e.get("value") for e in c.get("env") or [] if e.get("name") == name), None)


def check_tls(docs, pod, c, cert_path, port_names, where, errors):
    tls_dir = posixpath.dirname(cert_path)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe) or {}
        if not is_tls_probe(p, port_names.get("grpc"), tls_dir):
            errors.add(where, f"{probe} must run `tessera-cli --server {PROBE_HOST}:<grpc port> "
                              f"--tls-ca {tls_dir}/... info` (kubelet gRPC probes cannot "
                              "speak TLS)")
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    if (c.get("securityContext") or {}).get("readOnlyRootFilesystem"):
        tmp = flag_env(c, "TMPDIR") or "/tmp"
        if not any(m.get("mountPath") == tmp and "emptyDir" in volumes.get(m["name"], {})
                   for m in c.get("volumeMounts") or []):
            errors.add(where, f"the root filesystem is read-only: TLS needs an emptyDir at {tmp} "
                              "(the server stages its checked certificates there)")
    mounts = [m for m in c.get("volumeMounts") or [] if m.get("mountPath") == tls_dir]
    secrets = [volumes[m["name"]]["secret"]["secretName"] for m in mounts
               if "secret" in volumes.get(m["name"], {})]
    if not secrets:
        errors.add(where, f"no secret volume is mounted at {tls_dir}, where the TLS files are")
        return
    certs = [d for d in docs if d["kind"] == "Certificate"
             and d["spec"]["secretName"] == secrets[0]]
    if not certs:
        errors.add(where, f"no cert-manager Certificate writes the secret {secrets[0]}")
        return
    if PROBE_HOST not in (certs[0]["spec"].get("ipAddresses") or []):
        errors.add(where, f"the Certificate must name {PROBE_HOST}, which the probes call")
