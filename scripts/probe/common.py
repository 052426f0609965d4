"""Hostile-client probe: configuration (from --config), the gRPC, protobuf-encoding,
HTTP and TLS helpers every case module uses. Imported first by probe.py."""
import argparse
import json
import os
import re
import resource
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import warnings

sys.dont_write_bytecode = True  # no __pycache__ next to h2raw.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
# grpcio's own error log (failed handshakes, refused metadata) is expected noise here.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

ap = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--config", required=True)
ap.add_argument("-k", action="append", default=[], help="run only cases whose name contains this")
ap.add_argument("-v", action="store_true", help="print details of failures")
ARGS = ap.parse_args()
CFG = json.load(open(ARGS.config))
sys.path.insert(0, CFG["pb"])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
from tessera.v1 import inference_pb2 as pb  # noqa: E402

import h2raw  # noqa: E402

HOST = "127.0.0.1"
MAIN = CFG["main"]
TLS = CFG["tls"]
DRAIN = CFG["drain"]
CERTS = CFG["certs"]
KEYS = {}
for line in open(CFG["keys_file"]):
    line = line.strip()
    if line and not line.startswith("#"):
        name, key = line.split(":", 1)
        KEYS[name] = key
ALICE, BOB, CAROL, DAVE, ERIN = (KEYS[n] for n in ("alice", "bob", "carol", "dave", "erin"))

VOCAB = 512        # stories260K
CONTEXT = 2048
SVC = "/tessera.v1.Inference/"
METHODS = ["Generate", "Complete", "Tokenize", "Detokenize", "GetModelInfo", "Chat",
           "ChatComplete", "RenderChat"]
STREAMING = {"Generate", "Chat"}
HEALTH = "/grpc.health.v1.Health/Check"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
BIG = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]

# Many sockets at once (idle-connection cases).
try:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
except (ValueError, OSError):
    pass


def md(key=ALICE, extra=()):
    return [("authorization", "Bearer " + key)] + list(extra)


# --------------------------------------------------------------------------
# gRPC helpers


def channel(port=None, creds=None, options=()):
    """A channel with its own connection (grpcio otherwise shares one TCP
    connection between channels of the same target and arguments)."""
    target = "%s:%d" % (HOST, port or MAIN["grpc"])
    opts = list(BIG) + [("grpc.use_local_subchannel_pool", 1)] + list(options)
    if creds is not None:
        return grpc.secure_channel(target, creds, options=opts +
                                   [("grpc.ssl_target_name_override", "localhost")])
    return grpc.insecure_channel(target, options=opts)


def ser(msg):
    return msg if isinstance(msg, bytes) else msg.SerializeToString()


def unary(ch, method, body, metadata=None, timeout=15):
    """(code name, details, response bytes or None)."""
    path = method if method.startswith("/") else SVC + method
    try:
        resp = ch.unary_unary(path)(ser(body), metadata=metadata, timeout=timeout)
        return "OK", "", resp
    except grpc.RpcError as e:
        return e.code().name, e.details() or "", None


def stream(ch, method, body, metadata=None, timeout=15):
    """(code name, details, [response bytes])."""
    path = method if method.startswith("/") else SVC + method
    msgs = []
    try:
        for m in ch.unary_stream(path)(ser(body), metadata=metadata, timeout=timeout):
            msgs.append(m)
        return "OK", "", msgs
    except grpc.RpcError as e:
        return e.code().name, e.details() or "", msgs


def call(ch, method, body, metadata=None, timeout=15):
    name = method.rsplit("/", 1)[-1]
    if name in STREAMING:
        code, details, _ = stream(ch, method, body, metadata, timeout)
    else:
        code, details, _ = unary(ch, method, body, metadata, timeout)
    return code, details


class BgStream:
    """A streaming call consumed on a thread."""

    def __init__(self, ch, body, key=ALICE, method="Generate", timeout=60, extra_md=()):
        path = method if method.startswith("/") else SVC + method
        self.call = ch.unary_stream(path)(ser(body), metadata=md(key, extra_md), timeout=timeout)
        self.msgs = []
        self.code = None
        self.details = ""
        self.first = threading.Event()
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            for m in self.call:
                self.msgs.append(pb.GenerateResponse.FromString(m))
                self.first.set()
            self.code = "OK"
        except grpc.RpcError as e:
            self.code = e.code().name
            self.details = e.details() or ""
        except Exception as e:  # noqa: BLE001
            self.code = "client error: %r" % e
        finally:
            self.first.set()
            self.done.set()

    def cancel(self):
        self.call.cancel()

    def wait(self, timeout):
        return self.done.wait(timeout)

    def last(self):
        return self.msgs[-1] if self.msgs else None


def gen(text="Once upon a time", max_tokens=2, **kw):
    stopping = kw.pop("stopping", None) or pb.StoppingCriteria(max_tokens=max_tokens)
    return pb.GenerateRequest(text=text, stopping=stopping, **kw)


def long_gen(tokens=400):
    return pb.GenerateRequest(text="Once upon a time",
                              stopping=pb.StoppingCriteria(max_tokens=tokens, ignore_eos=True))


# Shared channels to the main server: one for the after-case check, one for cases.
CHECK_CH = channel()
WORK_CH = channel()


def model_load(ch=None):
    code, _, resp = unary(ch or CHECK_CH, "GetModelInfo", b"", md(), timeout=5)
    if code != "OK":
        return None
    info = pb.GetModelInfoResponse.FromString(resp)
    return info.requests_running, info.requests_waiting


def wait_idle(timeout=15.0, ch=None):
    """Waits until the engine runs and queues nothing; True when it does."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        load = model_load(ch)
        if load == (0, 0):
            return True
        time.sleep(0.05)
    return False


def wait_running(n, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        load = model_load()
        if load is not None and load[0] >= n:
            return True
        time.sleep(0.02)
    return False


def occupy(n=2, key=BOB, tokens=400):
    """Fills the engine's running slots with n long streams of `key`."""
    ch = channel()
    streams = [BgStream(ch, long_gen(tokens), key=key) for _ in range(n)]
    wait_running(n)
    return ch, streams


def release(ch, streams):
    for s in streams:
        s.cancel()
    for s in streams:
        s.wait(10)
    ch.close()
    wait_idle()


def health(ch, metadata=None, timeout=5):
    code, details, resp = unary(ch, HEALTH, b"", metadata, timeout)
    if code != "OK":
        return code
    return {b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}.get(resp, "status %r" % resp)


# --------------------------------------------------------------------------
# Raw protobuf encoding (for invalid UTF-8, unknown fields, nesting).


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(num, data):
    return varint((num << 3) | 2) + varint(len(data)) + data


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def with_text(text_bytes, rest=b""):
    """GenerateRequest with raw bytes in `text` (field 1)."""
    return field_bytes(1, text_bytes) + rest


STOP_2 = field_bytes(4, field_varint(1, 2))  # stopping { max_tokens: 2 }


# --------------------------------------------------------------------------
# HTTP helpers (raw sockets).


class HttpConn:
    def __init__(self, port, tls_ctx=None, timeout=10):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        if tls_ctx is not None:
            self.sock = tls_ctx.wrap_socket(self.sock, server_hostname="localhost")
        self.buf = b""
        self.closed = False

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout()
        self.sock.settimeout(remaining)
        chunk = self.sock.recv(65536)
        if not chunk:
            self.closed = True
            raise ConnectionError("closed")
        self.buf += chunk

    def _until(self, marker, deadline):
        while marker not in self.buf:
            self._fill(deadline)
        i = self.buf.index(marker)
        out, self.buf = self.buf[:i], self.buf[i + len(marker):]
        return out

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self, timeout=10, head_only=False):
        """(status, headers, body), or a string: 'closed' / 'timeout' / 'reset'."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                head = self._until(b"\r\n\r\n", deadline)
                lines = head.decode("latin-1").split("\r\n")
                status = int(lines[0].split()[1])
                headers = {}
                for line in lines[1:]:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
                if status != 100:
                    break
            if head_only:
                return status, headers, b""
            if headers.get("transfer-encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int(self._until(b"\r\n", deadline).split(b";")[0], 16)
                    if size == 0:
                        self._until(b"\r\n", deadline)
                        break
                    body += self._take(size, deadline)
                    self._take(2, deadline)
            else:
                body = self._take(int(headers.get("content-length", "0")), deadline)
            return status, headers, body
        except socket.timeout:
            return "timeout"
        except ssl.SSLError as e:
            return "tls error (%s)" % (e.reason or e)
        except (ConnectionResetError, BrokenPipeError):
            return "reset"
        except (ConnectionError, OSError):
            return "closed"

    def wait_closed(self, timeout):
        """Seconds until the peer closes, or None if it does not within timeout."""
        start = time.monotonic()
        end = start + timeout
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except (ssl.SSLError, OSError):
                return time.monotonic() - start
            if not chunk:
                return time.monotonic() - start
        return None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def http_req(method, path, body=None, key=ALICE, content_type="application/json", headers=(),
             version="HTTP/1.1"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    h = "%s %s %s\r\nHost: localhost\r\n" % (method, path, version)
    if key is not None:
        h += "Authorization: Bearer %s\r\n" % key
    if body is not None:
        if content_type is not None:
            h += "Content-Type: %s\r\n" % content_type
        h += "Content-Length: %d\r\n" % len(body)
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    return h.encode("latin-1") + b"\r\n" + (body or b"")


def http(raw, port=None, timeout=10, tls_ctx=None):
    c = HttpConn(port or MAIN["http"], tls_ctx)
    try:
        c.send(raw)
        return c.response(timeout)
    finally:
        c.close()


def status_of(r):
    return str(r[0]) if isinstance(r, tuple) else r


def completion(**fields):
    body = {"model": "llama", "prompt": "Once upon a time", "max_tokens": 2}
    body.update(fields)
    return http_req("POST", "/v1/completions", body)


def chat_body(**fields):
    body = {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    body.update(fields)
    return http_req("POST", "/v1/chat/completions", body)


def scrape(port=None, tls_ctx=None):
    """{(name, labels-string): value} of a /metrics scrape."""
    r = http(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", port or MAIN["metrics"], tls_ctx=tls_ctx)
    if not isinstance(r, tuple) or r[0] != 200:
        return None
    out = {}
    for line in r[2].decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)", line)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def metric(scraped, name, labels=""):
    if scraped is None:
        return None
    if labels:
        for (n, l), v in scraped.items():
            if n == name and all(part in l for part in labels.split(",")):
                return v
        return 0.0
    return scraped.get((name, ""))


def gauges_zero(timeout=6.0):
    """Waits until tessera_requests_running and _waiting are 0 on /metrics in
    two scrapes 0.35 s apart (the gauges are refreshed every 250 ms, so one
    scrape right after a burst may still show the state before it)."""
    end = time.monotonic() + timeout
    last = None
    zeros = 0
    time.sleep(0.3)
    while time.monotonic() < end:
        s = scrape()
        last = (metric(s, "tessera_requests_running"), metric(s, "tessera_requests_waiting"))
        zeros = zeros + 1 if last == (0.0, 0.0) else 0
        if zeros >= 2:
            return True, last
        time.sleep(0.35)
    return False, last


# --------------------------------------------------------------------------
# TLS helpers


def cert(name):
    return os.path.join(CERTS, name)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def grpc_tls_creds(ca="ca1", client="client"):
    if client:
        return grpc.ssl_channel_credentials(read(cert(ca + ".crt")), read(cert(client + ".key")),
                                            read(cert(client + ".crt")))
    return grpc.ssl_channel_credentials(read(cert(ca + ".crt")))


def ssl_ctx(ca="ca1", client="client", version=None, alpn=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cert(ca + ".crt"))
    if client:
        ctx.load_cert_chain(cert(client + ".crt"), cert(client + ".key"))
    if version is not None:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.minimum_version = version
        ctx.maximum_version = version
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


TLS_CH = None


def tls_channel():
    global TLS_CH
    if TLS_CH is None:
        TLS_CH = channel(TLS["grpc"], grpc_tls_creds())
    return TLS_CH


def https_get(path, ctx=None, port=None, key=ALICE, timeout=10):
    """Status of a GET over TLS, or what went wrong."""
    try:
        c = HttpConn(port or TLS["http"], ctx or ssl_ctx(), timeout=timeout)
    except ssl.SSLError as e:
        return "tls error (%s)" % (e.reason or e)
    except OSError as e:
        return "closed (%s)" % e.__class__.__name__
    try:
        c.send(http_req("GET", path, key=key))
        return status_of(c.response(timeout))
    finally:
        c.close()


def client_hello_of(ctx):
    """The ClientHello `ctx` would send, or None when it cannot make one
    (e.g. an OpenSSL that refuses to offer TLS 1.0 at all)."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    except ssl.SSLError:
        return None
    return out.read() or None


def client_hello():
    """The bytes of a real TLS ClientHello (from Python's ssl, not sent anywhere)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return client_hello_of(ctx)
