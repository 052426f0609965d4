"""Hostile-client probe, section 6: TLS misuse (tls server: mutual TLS, --metrics-tls,
keys, --auth-health)."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403


# ==========================================================================
# 6. TLS misuse (tls server: mutual TLS, --metrics-tls, keys, --auth-health)
# ==========================================================================


def tls_call(creds, metadata=None, port=None):
    ch = channel(port or TLS["grpc"], creds) if creds is not None else channel(port or TLS["grpc"])
    try:
        return call(ch, "Tokenize", pb.TokenizeRequest(text="hi"), metadata or md(), timeout=10)[0]
    finally:
        ch.close()


def T(name, expect, fn):
    add("tls." + name, expect, fn, target="tls")


T("grpc.good-client(valid)", "OK", lambda: tls_call(grpc_tls_creds()))
T("grpc.good-client-no-key", "UNAUTHENTICATED", lambda: tls_call(grpc_tls_creds(), metadata=[("x", "y")]))
T("grpc.health-no-key(--auth-health)", "UNAUTHENTICATED", lambda: health(tls_channel()))
T("grpc.health-with-key", "SERVING", lambda: health(tls_channel(), md()))
T("grpc.plaintext-to-tls-port", "UNAVAILABLE", lambda: tls_call(None))
T("grpc.wrong-ca-trusted", "UNAVAILABLE", lambda: tls_call(grpc_tls_creds(ca="ca2")))
T("grpc.no-client-cert", "UNAVAILABLE", lambda: tls_call(grpc_tls_creds(client=None)))
T("grpc.client-cert-other-ca", "UNAVAILABLE", lambda: tls_call(grpc_tls_creds(client="foreign")))
T("grpc.client-cert-expired", "UNAVAILABLE", lambda: tls_call(grpc_tls_creds(client="expired")))
# A certificate without the clientAuth purpose (the server's own, EKU
# serverAuth) is not a client certificate.
T("grpc.server-cert-as-client-cert", "UNAVAILABLE", lambda: tls_call(grpc_tls_creds(client="server")))
T("https.good-client(valid)", "200", lambda: https_get("/v1/models"))
T("https.good-client-no-key", "401", lambda: https_get("/v1/models", key=None))
T("https.health-no-key(--auth-health)", "401", lambda: https_get("/health", key=None))
T("metrics-https.good-client(valid)", "200", lambda: https_get("/metrics", port=TLS["metrics"], key=None))


def old_tls_refused(port, version, alpn=None):
    try:
        ctx = ssl_ctx(version=version, alpn=alpn)
    except (ValueError, ssl.SSLError) as e:
        raise Skip("Python's ssl cannot force %s: %s" % (version.name, e))
    hello = client_hello_of(ctx)
    # Byte 9-10 of the record: the ClientHello's client_version (0x0301 = TLS 1.0).
    want = {ssl.TLSVersion.TLSv1: b"\x03\x01", ssl.TLSVersion.TLSv1_1: b"\x03\x02"}[version]
    if hello is None or hello[9:11] != want:
        raise Skip("Python's ssl will not offer %s only" % version.name)
    return handshake_fails(port, ctx)


def handshake_fails(port, ctx, path="/v1/models"):
    """What a TLS client gets: the handshake (or, in TLS 1.3, the first read)
    must fail for a refused client."""
    r = https_get(path, ctx=ctx, port=port)
    if r.startswith("tls error") or r.startswith("closed") or r in ("reset", "closed"):
        return "refused"
    return r


for _port_name in ("http", "metrics"):
    T("%s.wrong-ca-trusted" % _port_name, "refused",
      lambda p=_port_name: handshake_fails(TLS[p], ssl_ctx(ca="ca2")))
    T("%s.no-client-cert" % _port_name, "refused",
      lambda p=_port_name: handshake_fails(TLS[p], ssl_ctx(client=None)))
    T("%s.client-cert-other-ca" % _port_name, "refused",
      lambda p=_port_name: handshake_fails(TLS[p], ssl_ctx(client="foreign")))
    T("%s.client-cert-expired" % _port_name, "refused",
      lambda p=_port_name: handshake_fails(TLS[p], ssl_ctx(client="expired")))
    T("%s.server-cert-as-client-cert" % _port_name, "refused",
      lambda p=_port_name: handshake_fails(TLS[p], ssl_ctx(client="server")))
    for _v in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
        T("%s.%s-only-client" % (_port_name, _v.name), "refused",
          lambda p=_port_name, v=_v: old_tls_refused(TLS[p], v))
for _v in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
    T("grpc.%s-only-client" % _v.name, "refused",
      lambda v=_v: old_tls_refused(TLS["grpc"], v, alpn=["h2"]))


def plaintext_http(port):
    c = HttpConn(port)
    try:
        c.send(http_req("GET", "/health", key=None))
        r = c.response(5)
        if isinstance(r, tuple):
            return "HTTP %d answered in plaintext" % r[0]
        return "no HTTP response"
    except ValueError:
        return "no HTTP response"
    finally:
        c.close()


T("http.plaintext-to-tls-port", "no HTTP response", lambda: plaintext_http(TLS["http"]))
T("metrics.plaintext-to-tls-port", "no HTTP response", lambda: plaintext_http(TLS["metrics"]))
T("grpc.http1-over-tls-alpn", "refused",
  lambda: handshake_fails(TLS["grpc"], ssl_ctx(alpn=["http/1.1"])))


def half_handshake(port_name):
    """Half a ClientHello, left idle: a good client is served meanwhile; the
    HTTP ports drop the stalled connection after --http-header-timeout."""
    hello = client_hello()
    s = socket.create_connection((HOST, TLS[port_name]), timeout=10)
    try:
        s.sendall(hello[:len(hello) // 2])
        start = time.monotonic()
        t = time.monotonic()
        if port_name == "grpc":
            code, _, _ = stream(tls_channel(), "Generate", gen(), md(), timeout=10)
            good = code == "OK"
        else:
            good = https_get("/v1/models" if port_name == "http" else "/metrics",
                             port=TLS[port_name]) == "200"
        took = time.monotonic() - t
        if not good or took > 1.5:
            return "good client: %s after %.2f s" % (good, took)
        if port_name == "grpc":
            return "good client served"
        s.settimeout(TLS["http_header_timeout"] + 3)
        try:
            data = s.recv(100)
        except socket.timeout:
            return "stalled handshake still open after %d s" % (TLS["http_header_timeout"] + 3)
        except OSError:
            data = b""
        waited = time.monotonic() - start
        return "good client served, stalled one dropped" if not data or waited >= 1 else \
            "answered %r" % data[:20]
    finally:
        s.close()


T("grpc.half-handshake-idle", "good client served", lambda: half_handshake("grpc"))
T("http.half-handshake-idle", "good client served, stalled one dropped", lambda: half_handshake("http"))
T("metrics.half-handshake-idle", "good client served, stalled one dropped",
  lambda: half_handshake("metrics"))


def hello_then_garbage(port_name):
    s = socket.create_connection((HOST, TLS[port_name]), timeout=5)
    try:
        s.sendall(client_hello() + os.urandom(8192))
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                if not s.recv(65536):
                    return "closed"
            except socket.timeout:
                return "still open"
            except OSError:
                return "closed"
        return "still open"
    finally:
        s.close()


for _p in ("grpc", "http", "metrics"):
    T("%s.client-hello-then-random-bytes" % _p, "closed", lambda p=_p: hello_then_garbage(p))


def tls_idle_connections():
    socks = []
    try:
        for port in (TLS["grpc"], TLS["http"], TLS["metrics"]):
            for _ in range(100):
                socks.append(socket.create_connection((HOST, port), timeout=5))
        t = time.monotonic()
        code, _, _ = stream(tls_channel(), "Generate", gen(), md(), timeout=10)
        a = time.monotonic() - t
        t = time.monotonic()
        m = https_get("/metrics", port=TLS["metrics"], key=None)
        b = time.monotonic() - t
        return "answered within 1.5 s" if code == "OK" and m == "200" and max(a, b) <= 1.5 else \
            "Generate %s %.2fs, metrics %s %.2fs" % (code, a, m, b)
    finally:
        for s in socks:
            s.close()


T("conn.300-idle-tcp-to-tls-ports", "answered within 1.5 s", tls_idle_connections)
