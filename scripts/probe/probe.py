#!/usr/bin/env python3
"""Hostile-client probe of tessera-server (the cases). Started by
scripts/hostile-probe.sh, which starts the servers and writes the config;
by hand: HOLD=1 scripts/hostile-probe.sh, then
    /usr/bin/python3 scripts/probe/probe.py --config CONFIG [-k SUBSTRING]... [-v]

Every case states what a correct server must answer (a gRPC status code, an
HTTP status, or an outcome such as "closed"), runs, and is followed by a
check that the server it targeted still says SERVING (grpc.health.v1) and
still answers a small authenticated Generate. One line per case:
    PASS|FAIL|SKIP  <name>  expected: <...>  got: <...>  (<seconds>)
then a summary; the exit status is 1 when any case failed.

The expectations follow the server's documented contract: the comments of
proto/tessera/v1/inference.proto, server/validation.{h,cc} (limits),
server/auth/ (API keys), server/http/ (the OpenAI front), the flags' help
text, and the RFCs where the server defers to them. Where that contract is
unclear the case says so in its comment (look for "CONTRACT UNCLEAR").
"""
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

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def client_hello():
    """The bytes of a real TLS ClientHello (from Python's ssl, not sent anywhere)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


# --------------------------------------------------------------------------
# The after-case checks.


def check_main():
    h = health(CHECK_CH)
    if h != "SERVING":
        return "main health %s" % h
    code, details, _ = stream(CHECK_CH, "Generate", gen(max_tokens=2), md(), timeout=20)
    if code != "OK":
        return "main Generate %s %s" % (code, details[:80])
    return None


def check_tls():
    ch = tls_channel()
    h = health(ch, md())
    if h != "SERVING":
        return "tls health %s" % h
    code, details, _ = stream(ch, "Generate", gen(max_tokens=2), md(), timeout=20)
    if code != "OK":
        return "tls Generate %s %s" % (code, details[:80])
    return None


CHECKS = {"main": check_main, "tls": check_tls, "drain": check_main}


# --------------------------------------------------------------------------
# Case registry and runner.


class Case:
    def __init__(self, name, expect, target, fn):
        self.name, self.expect, self.target, self.fn = name, expect, target, fn


CASES = []


def case(name, expect, target="main"):
    """Registers fn() -> got (str) or (got, ok). A str result passes when it
    equals `expect` or one of its '|'-separated alternatives."""
    def deco(fn):
        CASES.append(Case(name, expect, target, fn))
        return fn
    return deco


def add(name, expect, fn, target="main"):
    CASES.append(Case(name, expect, target, fn))


class Skip(Exception):
    pass


# ==========================================================================
# 1. Bad inputs over gRPC (valid key, main server)
# ==========================================================================

GARBAGE = b"\xff" * 12 + b"garbage\x00\x01"  # a varint longer than 10 bytes: never valid

# Every method: garbage bytes are INVALID_ARGUMENT (convert.cc ParseMessage).
for _m in METHODS:
    add("grpc.garbage.%s" % _m, "INVALID_ARGUMENT",
        lambda m=_m: call(WORK_CH, m, GARBAGE, md())[0])

# A length-delimited field claiming more bytes than the message has.
add("grpc.truncated.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", b"\x0a\x40Once", md())[0])
add("grpc.truncated.Tokenize", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", b"\x0a\x40Once", md())[0])
# Field number 0 is invalid protobuf.
add("grpc.field-number-0.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", b"\x02\x01a" + with_text(b"hi", STOP_2), md())[0])
# An empty message: no prompt (the prompt is "Required").
add("grpc.empty-message.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", b"", md())[0])
add("grpc.empty-message.Complete", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", b"", md())[0])
add("grpc.empty-message.GetModelInfo(valid)", "OK",
    lambda: call(WORK_CH, "GetModelInfo", b"", md())[0])
add("grpc.empty-message.Tokenize(valid)", "OK",
    lambda: call(WORK_CH, "Tokenize", b"", md())[0])

# Invalid UTF-8 in string fields (proto3 strings must be UTF-8; the proto
# says "valid UTF-8" for text, stop strings and request_id).
BAD_UTF8 = b"caf\xc3(\xff\xfe"
add("grpc.utf8.Generate.text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(BAD_UTF8, STOP_2), md())[0])
add("grpc.utf8.Complete.text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", with_text(BAD_UTF8, STOP_2), md())[0])
add("grpc.utf8.Tokenize.text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", field_bytes(1, BAD_UTF8), md())[0])
add("grpc.utf8.Generate.stop", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", field_bytes(
        4, field_varint(1, 2) + field_bytes(2, BAD_UTF8))), md())[0])
add("grpc.utf8.Generate.request_id", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2 + field_bytes(7, BAD_UTF8)),
                 md())[0])
add("grpc.utf8.Generate.overlong-nul", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"a\xc0\x80b", STOP_2), md())[0])
add("grpc.utf8.Generate.surrogate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"a\xed\xa0\x80b", STOP_2), md())[0])


def chat_raw(messages_raw, extra=b""):
    """ChatRequest bytes: chat { messages... } + extra."""
    return field_bytes(1, messages_raw) + extra


def msg_raw(role, content):
    return field_bytes(1, field_bytes(1, role) + field_bytes(2, content))


add("grpc.utf8.Chat.content", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_raw(msg_raw(b"user", BAD_UTF8)), md())[0])
add("grpc.utf8.ChatComplete.role", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_raw(msg_raw(BAD_UTF8, b"hi")), md())[0])
add("grpc.utf8.RenderChat.content", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", msg_raw(b"user", BAD_UTF8), md())[0])
add("grpc.utf8.RenderChat.tools_json", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", msg_raw(b"user", b"hi") + field_bytes(2, b"[\xff]"),
                 md())[0])

# Empty prompts.
add("grpc.prompt.empty-text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", pb.GenerateRequest(
        text="", stopping=pb.StoppingCriteria(max_tokens=2)), md())[0])


def _empty_ids():
    r = pb.GenerateRequest(stopping=pb.StoppingCriteria(max_tokens=2))
    r.token_ids.SetInParent()
    return r


add("grpc.prompt.empty-token_ids", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", _empty_ids(), md())[0])
# Text at most 1 MiB.
MIB = 1 << 20
add("grpc.prompt.text-1MiB+1", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="a" * (MIB + 1)), md())[0])
add("grpc.prompt.text-1MiB+1.Complete", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", gen(text="a" * (MIB + 1)), md())[0])
add("grpc.Tokenize.text-1MiB+1", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text="a" * (MIB + 1)), md())[0])
# Exactly 1 MiB is allowed: Tokenize answers (within 30 s).
add("grpc.Tokenize.text-1MiB(valid)", "OK",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text=("Once upon a time. " * 60000)[:MIB]),
                 md(), timeout=30)[0])
# A text prompt of 1 MiB is past the context once tokenized.
add("grpc.prompt.text-1MiB-past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="a" * MIB), md(), timeout=30)[0])
# A message past gRPC's default 4 MiB receive limit: gRPC's own RESOURCE_EXHAUSTED.
add("grpc.message-5MiB", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "Tokenize", field_bytes(9, b"x" * (5 * MIB)), md(), timeout=30)[0])


def ids_req(ids, max_tokens=1):
    return pb.GenerateRequest(token_ids=pb.TokenIds(ids=ids),
                              stopping=pb.StoppingCriteria(max_tokens=max_tokens))


for _name, _ids in [("negative", [1, -1]), ("vocab", [1, VOCAB]), ("int32-max", [1, 2**31 - 1]),
                    ("int32-min", [1, -2**31])]:
    add("grpc.token_ids.%s" % _name, "INVALID_ARGUMENT",
        lambda ids=_ids: call(WORK_CH, "Generate", ids_req(ids), md())[0])
    add("grpc.Detokenize.%s" % _name, "INVALID_ARGUMENT",
        lambda ids=_ids: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=ids), md())[0])
add("grpc.token_ids.vocab-1(valid)", "OK",
    lambda: call(WORK_CH, "Generate", ids_req([1, VOCAB - 1]), md())[0])
# "at most the context length" ids.
add("grpc.Detokenize.context+1-ids", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5] * (CONTEXT + 1)), md())[0])
add("grpc.Detokenize.context-ids(valid)", "OK",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5] * CONTEXT), md())[0])
# prompt + max_tokens must fit the context.
add("grpc.token_ids.context-1+1(valid)", "OK",
    lambda: call(WORK_CH, "Complete", ids_req([5] * (CONTEXT - 1), 1), md(), timeout=30)[0])
add("grpc.token_ids.context+1", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", ids_req([5] * CONTEXT, 1), md())[0])
add("grpc.token_ids.past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", ids_req([5] * (CONTEXT + 1), 1), md())[0])
add("grpc.max_tokens.past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="Once", max_tokens=CONTEXT), md())[0])
add("grpc.max_tokens.int32-max", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(max_tokens=2**31 - 1), md())[0])
add("grpc.max_tokens.0", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(max_tokens=0), md())[0])
add("grpc.max_tokens.negative", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(max_tokens=-5), md())[0])
add("grpc.text.past-context-after-tokenizing", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="Once upon a time " * 700), md())[0])

NAN, INF = float("nan"), float("inf")
SAMPLING_BAD = [
    ("temperature", NAN), ("temperature", INF), ("temperature", -INF), ("temperature", -0.5),
    ("temperature", 100.5),
    ("top_p", 0.0), ("top_p", -0.1), ("top_p", 1.01), ("top_p", NAN),
    ("min_p", -0.01), ("min_p", 1.01), ("min_p", NAN), ("min_p", INF),
    ("repetition_penalty", 0.0), ("repetition_penalty", -1.0), ("repetition_penalty", 10.5),
    ("repetition_penalty", NAN),
    ("presence_penalty", 2.5), ("presence_penalty", -2.5), ("presence_penalty", NAN),
    ("frequency_penalty", 2.5), ("frequency_penalty", -INF),
    ("top_k", -1), ("top_k", VOCAB + 1), ("top_k", -2**31),
]
SAMPLING_GOOD = [("temperature", 100.0), ("temperature", 0.0), ("top_p", 1.0), ("min_p", 1.0),
                 ("repetition_penalty", 10.0), ("presence_penalty", -2.0),
                 ("frequency_penalty", 2.0), ("top_k", VOCAB), ("seed", 2**64 - 1)]
for _f, _v in SAMPLING_BAD:
    add("grpc.sampling.%s=%s" % (_f, _v), "INVALID_ARGUMENT",
        lambda f=_f, v=_v: call(WORK_CH, "Generate", gen(sampling=pb.SamplingParams(**{f: v})),
                                md())[0])
for _f, _v in SAMPLING_GOOD:
    add("grpc.sampling.%s=%s(valid)" % (_f, _v), "OK",
        lambda f=_f, v=_v: call(WORK_CH, "Generate", gen(sampling=pb.SamplingParams(**{f: v})),
                                md())[0])


def stop_req(stop=(), ids=()):
    return pb.GenerateRequest(text="Once upon a time", stopping=pb.StoppingCriteria(
        max_tokens=2, stop=list(stop), stop_token_ids=list(ids)))


for _name, _stop, _ids, _want in [
        ("stop.9-strings", ["s%d" % i for i in range(9)], [], "INVALID_ARGUMENT"),
        ("stop.8-strings(valid)", ["s%d" % i for i in range(8)], [], "OK"),
        ("stop.257-bytes", ["x" * 257], [], "INVALID_ARGUMENT"),
        ("stop.256-bytes(valid)", ["x" * 256], [], "OK"),
        ("stop.257-bytes-multibyte", ["\u00e9" * 128 + "x"], [], "INVALID_ARGUMENT"),
        ("stop.empty-string", [""], [], "INVALID_ARGUMENT"),
        ("stop_token_ids.33", [], list(range(33)), "INVALID_ARGUMENT"),
        ("stop_token_ids.32(valid)", [], list(range(32)), "OK"),
        ("stop_token_ids.negative", [], [-1], "INVALID_ARGUMENT"),
        ("stop_token_ids.vocab", [], [VOCAB], "INVALID_ARGUMENT")]:
    add("grpc.%s" % _name, _want,
        lambda s=_stop, i=_ids: call(WORK_CH, "Generate", stop_req(s, i), md())[0])

for _name, _kw, _want in [
        ("top_logprobs=-1", {"top_logprobs": -1}, "INVALID_ARGUMENT"),
        ("top_logprobs=21", {"top_logprobs": 21}, "INVALID_ARGUMENT"),
        ("top_logprobs=20(valid)", {"top_logprobs": 20}, "OK"),
        ("request_id=129-bytes", {"request_id": "r" * 129}, "INVALID_ARGUMENT"),
        ("request_id=128-bytes(valid)", {"request_id": "r" * 128}, "OK"),
        ("priority=1000001", {"priority": 1000001}, "INVALID_ARGUMENT"),
        ("priority=-1000001", {"priority": -1000001}, "INVALID_ARGUMENT"),
        ("priority=int32-min", {"priority": -2**31}, "INVALID_ARGUMENT"),
        ("priority=1000000(valid)", {"priority": 1000000}, "OK"),
        ("priority=-1000000(valid)", {"priority": -1000000}, "OK")]:
    add("grpc.%s" % _name, _want, lambda kw=_kw: call(WORK_CH, "Generate", gen(**kw), md())[0])
# The same bounds through Complete and Chat.
add("grpc.Complete.top_logprobs=21", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", gen(top_logprobs=21), md())[0])


def chat_req(messages=(("user", "hi"),), max_tokens=2, tools_json="", **kw):
    return pb.ChatRequest(
        chat=pb.RenderChatRequest(messages=[pb.ChatMessage(role=r, content=c) for r, c in messages],
                                  tools_json=tools_json),
        stopping=pb.StoppingCriteria(max_tokens=max_tokens), **kw)


add("grpc.Chat(valid)", "OK", lambda: call(WORK_CH, "Chat", chat_req(), md())[0])
add("grpc.Chat.no-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(messages=()), md())[0])
add("grpc.Chat.no-chat-field", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", pb.ChatRequest(), md())[0])
add("grpc.ChatComplete.no-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=()), md())[0])
add("grpc.RenderChat.no-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", pb.RenderChatRequest(), md())[0])
add("grpc.Chat.empty-role", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(messages=(("", "hi"),)), md())[0])
add("grpc.RenderChat.empty-role", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", chat_req(messages=(("", "hi"),)).chat, md())[0])
# CONTRACT UNCLEAR: the proto lists roles as "system, user, assistant,
# tool..." (open-ended) and the server only requires a non-empty role; what
# an unknown role does is up to the chat template (Qwen2.5 skips it). Taken
# as accepted.
add("grpc.Chat.unknown-role(accepted)", "OK",
    lambda: call(WORK_CH, "Chat", chat_req(messages=(("user", "hi"), ("hacker", "x"))), md())[0])
add("grpc.Chat.content-over-1MiB", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=(("user", "a" * MIB), ("user", "b"))),
                 md())[0])
# Content of at most 1 MiB is accepted by RenderChatPrompt, but the Qwen
# template then writes more than its 1 MiB output limit. chat_renderer.h:
# "Errors are INVALID_ARGUMENT with a message for the client"; the request
# can never succeed, so INVALID_ARGUMENT, not RESOURCE_EXHAUSTED (a
# retryable "some resource has been exhausted").
add("grpc.ChatComplete.content-1MiB-renders-over-limit", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=(("user", "a" * MIB),)), md())[0])
add("grpc.RenderChat.content-1MiB-renders-over-limit", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", chat_req(messages=(("user", "a" * MIB),)).chat, md())[0])
add("grpc.Chat.tools_json-malformed", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(tools_json="[{"), md())[0])
add("grpc.Chat.tools_json-object", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(tools_json='{"a": 1}'), md())[0])
add("grpc.Chat.tools_json-nested-100k", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(tools_json="[" * 100000 + "]" * 100000), md())[0])
add("grpc.Chat.temperature-nan", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(sampling=pb.SamplingParams(temperature=NAN)), md())[0])
add("grpc.Chat.max_tokens-past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(max_tokens=CONTEXT), md())[0])
add("grpc.Chat.request_id-129", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(request_id="r" * 129), md())[0])
add("grpc.ChatComplete.stop_token_ids-vocab", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", pb.ChatRequest(
        chat=chat_req().chat, stopping=pb.StoppingCriteria(max_tokens=2, stop_token_ids=[VOCAB])),
        md())[0])

# Deeply nested unknown groups (wire types 3/4): protobuf's recursion limit
# (100) makes 100,000 levels a parse error; 50 levels are unknown fields,
# which proto3 keeps and the server ignores.
GROUP_START, GROUP_END = varint((100 << 3) | 3), varint((100 << 3) | 4)


def nested_groups(depth):
    return GROUP_START * depth + GROUP_END * depth


add("grpc.nested-groups-100k.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) + nested_groups(100000), md())[0])
add("grpc.nested-groups-100k.Tokenize", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", nested_groups(100000), md())[0])
add("grpc.nested-groups-100k.Chat", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", ser(chat_req()) + nested_groups(100000), md())[0])
add("grpc.nested-groups-50(unknown,accepted)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) + nested_groups(50), md())[0])
# Nested length-delimited submessages inside an unknown field: opaque bytes.
add("grpc.nested-unknown-bytes(accepted)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) +
                 field_bytes(200, b"\x0a\x02\x0a\x00" * 1000), md())[0])

# Huge repeated fields.
add("grpc.huge.token_ids-1M", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", ids_req([5] * 1000000), md(), timeout=30)[0])
add("grpc.huge.Detokenize-1M-ids", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5] * 1000000), md(),
                 timeout=30)[0])
add("grpc.huge.stop-100k-strings", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", stop_req(["s"] * 100000), md(), timeout=30)[0])
add("grpc.huge.stop_token_ids-500k", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", stop_req((), [5] * 500000), md(), timeout=30)[0])
# 100,000 short messages: content is small, the rendered prompt is far past
# the context (and past the template's output limit): INVALID_ARGUMENT, as
# for content-1MiB-renders-over-limit.
add("grpc.huge.chat-100k-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=[("user", "hi")] * 100000), md(),
                 timeout=60)[0])
add("grpc.huge.chat-20k-messages-past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=[("user", "hi")] * 20000), md(),
                 timeout=60)[0])
add("grpc.huge.unknown-repeated-1M(accepted)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) +
                 field_bytes(300, varint(1) * 1000000), md(), timeout=30)[0])

# Unknown fields are accepted (proto3 forward compatibility).
# NUL and other control characters are valid UTF-8: a valid prompt.
add("grpc.text-with-NUL-and-controls(valid)", "OK",
    lambda: call(WORK_CH, "Generate", gen(text="a\x00b\x01\x1b[2J\x7f\u2028\ufeffc"), md())[0])
add("grpc.Tokenize.NUL-only(valid)", "OK",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text="\x00" * 1000), md())[0])
add("grpc.unknown-field.Generate", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) + field_varint(99, 7), md())[0])
add("grpc.unknown-field.SamplingParams", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2 + field_bytes(
        3, field_varint(77, 1) + field_bytes(78, b"zz"))), md())[0])
add("grpc.unknown-field.Tokenize", "OK",
    lambda: call(WORK_CH, "Tokenize", field_bytes(1, b"hi") + field_varint(50, 1), md())[0])
add("grpc.unknown-field.GetModelInfo", "OK",
    lambda: call(WORK_CH, "GetModelInfo", field_bytes(5, b"x"), md())[0])
add("grpc.unknown-field.ChatComplete", "OK",
    lambda: call(WORK_CH, "ChatComplete", ser(chat_req()) + field_varint(40, 3), md())[0])
# Both oneof members on the wire: the last one wins (protobuf), a valid request.
add("grpc.oneof-both-members(valid)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) +
                 field_bytes(2, ser(pb.TokenIds(ids=[1, 5]))), md())[0])


# ==========================================================================
# 2. Bad inputs over HTTP (valid key, main server)
# ==========================================================================

C_PATH = "/v1/completions"


def hs(raw, **kw):
    return status_of(http(raw, **kw))


add("http.completion(valid)", "200", lambda: hs(completion()))
add("http.chat(valid)", "200", lambda: hs(chat_body()))
add("http.malformed-json", "400", lambda: hs(http_req("POST", C_PATH, '{"model": ')))
add("http.json-nested-100k", "400", lambda: hs(http_req("POST", C_PATH, "[" * 100000)))
add("http.json-nested-100k-in-field", "400",
    lambda: hs(http_req("POST", C_PATH, '{"model": "llama", "prompt": "a", "x": ' +
                        "[" * 100000 + "]" * 100000 + "}")))
add("http.non-utf8-body", "400",
    lambda: hs(http_req("POST", C_PATH, b'{"model": "llama", "prompt": "\xff\xfe", "max_tokens": 1}')))
add("http.content-type-text/plain", "415",
    lambda: hs(http_req("POST", C_PATH, json.dumps({"model": "llama", "prompt": "a"}),
                        content_type="text/plain")))
add("http.content-type-form", "415",
    lambda: hs(http_req("POST", "/v1/chat/completions", "a=b",
                        content_type="application/x-www-form-urlencoded")))
add("http.content-type-apply-template", "415",
    lambda: hs(http_req("POST", "/apply-template", "{}", content_type="text/html")))
# Bodies over --http-max-body (2 MiB): 413.
MAX_BODY = MAIN["http_max_body"]
add("http.body-over-max.declared", "413",
    lambda: hs(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ALICE.encode() +
               b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)))
add("http.body-over-max.sent", "413",
    lambda: hs(http_req("POST", C_PATH, '{"model": "llama", "prompt": "' + "a" * MAX_BODY + '"}')))


def chunked_over_max():
    c = HttpConn(MAIN["http"])
    try:
        c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ALICE.encode() +
               b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"a" * 65536
        for _ in range(MAX_BODY // len(chunk) + 2):
            if not c.send(b"%x\r\n" % len(chunk) + chunk + b"\r\n"):
                break
        return status_of(c.response())
    finally:
        c.close()


add("http.body-over-max.chunked", "413", chunked_over_max)
add("http.body-over-max.expect-100-continue", "413",
    lambda: hs(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ALICE.encode() +
               b"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
               b"Content-Length: %d\r\n\r\n" % (MAX_BODY * 4)))
add("http.header-20KiB", "431",
    lambda: hs(http_req("GET", "/v1/models", headers=[("X-Pad", "p" * 20000)])))
add("http.header-many-small", "431",
    lambda: hs(http_req("GET", "/v1/models", headers=[("X-P%d" % i, "v") for i in range(3000)])))
add("http.url-20KiB", "431", lambda: hs(http_req("GET", "/v1/models?" + "q" * 20000)))
add("http.wrong-method.GET-completions", "405", lambda: hs(http_req("GET", C_PATH)))
add("http.wrong-method.DELETE-models", "405", lambda: hs(http_req("DELETE", "/v1/models")))
add("http.wrong-method.POST-health", "405", lambda: hs(http_req("POST", "/health", "{}")))


def head_pipelined():
    # HEAD is not GET here (405); a response to HEAD must carry no body
    # (RFC 9110 9.3.2), or the next response on the connection is corrupt.
    c = HttpConn(MAIN["http"])
    try:
        c.send(http_req("HEAD", "/health") + http_req("GET", "/health"))
        first = c.response(head_only=True)
        if not isinstance(first, tuple):
            return first
        if c.buf and not c.buf.startswith(b"HTTP/1.1 "):
            return "%d with content %r (forbidden for HEAD)" % (first[0], c.buf[:30])
        try:
            second = c.response()
        except ValueError:
            return "%d, then an unparsable response" % first[0]
        return "%s then %s" % (status_of(first), status_of(second))
    finally:
        c.close()


add("http.HEAD-then-GET-pipelined", "405 then 200", head_pipelined)
add("http.unknown-route", "404", lambda: hs(http_req("GET", "/v1/nothing")))
add("http.unknown-route.absolute-form", "404",
    lambda: hs(http_req("GET", "http://localhost/v1/../etc/passwd")))
add("http.unknown-method", "405", lambda: hs(http_req("FROB", "/v1/models")))

HTTP_400 = [
    ("temperature=101", {"temperature": 101}), ("temperature=-1", {"temperature": -1}),
    ("temperature=string", {"temperature": "hot"}), ("top_p=0", {"top_p": 0}),
    ("top_p=1.5", {"top_p": 1.5}), ("min_p=2", {"min_p": 2}), ("top_k=-2", {"top_k": -2}),
    ("top_k=513", {"top_k": 513}), ("top_k=1e12", {"top_k": 10**12}),
    ("presence_penalty=2.5", {"presence_penalty": 2.5}),
    ("frequency_penalty=-3", {"frequency_penalty": -3}),
    ("repetition_penalty=0", {"repetition_penalty": 0}),
    ("max_tokens=0", {"max_tokens": 0}), ("max_tokens=-1", {"max_tokens": -1}),
    ("max_tokens=past-context", {"max_tokens": CONTEXT}),
    ("max_tokens=1e20", {"max_tokens": 10**20}), ("max_tokens=float", {"max_tokens": 2.5}),
    ("logprobs=21", {"logprobs": 21}), ("stop=9-strings", {"stop": ["s%d" % i for i in range(9)]}),
    ("stop=257-bytes", {"stop": "x" * 257}), ("stop=number", {"stop": 5}),
    ("seed=string", {"seed": "x"}), ("user=129-bytes", {"user": "u" * 129}),
    ("prompt=empty", {"prompt": ""}), ("prompt=ids-vocab", {"prompt": [1, VOCAB]}),
    ("prompt=ids-negative", {"prompt": [1, -1]}), ("prompt=ids-2**40", {"prompt": [1, 2**40]}),
    ("prompt=two-prompts", {"prompt": ["a", "b"]}), ("prompt=object", {"prompt": {"a": 1}}),
    ("prompt=1MiB+1", {"prompt": "a" * (MIB + 1)}), ("prompt=missing", {"prompt": None}),
    ("model=number", {"model": 5}), ("echo=true", {"echo": True}),
    ("n=0", {"n": 0}), ("n=17", {"n": 17}), ("n=-1", {"n": -1}), ("n=1e12", {"n": 10**12}),
    ("n=2.0", {"n": 2.0}), ("n=string", {"n": "2"}),
    ("stream=string", {"stream": "yes"}), ("stream=1", {"stream": 1}), ("stream=[]", {"stream": []}),
    ("stream=object", {"stream": {}}), ("stream_options=string", {"stream_options": "x"}),
    ("include_usage=string", {"stream": True, "stream_options": {"include_usage": "yes"}}),
    ("ignore_eos=string", {"ignore_eos": "no"}),
    ("prompt=500k-ids", {"prompt": [5] * 500000}), ("stop=100k-strings", {"stop": ["s"] * 100000}),
    ("stop=empty-string", {"stop": [""]}),
]
for _name, _fields in HTTP_400:
    add("http.completion.%s" % _name, "400", lambda f=_fields: hs(completion(**f)))
add("http.completion.model-unknown", "404", lambda: hs(completion(model="gpt-4")))
add("http.completion.n=2(valid)", "200", lambda: hs(completion(n=2)))
add("http.completion.stream=null(valid)", "200", lambda: hs(completion(stream=None)))
# CONTRACT UNCLEAR: each of the n choices counts as one waiting request
# against --max-queued-requests (8 here) and --max-queued-requests-per-key
# (4), so n=16 (within the documented n <= 16) is refused even on an idle
# server, with 429 "retry later", although it can never fit.
def n16():
    r = hs(completion(n=16))
    time.sleep(0.3)  # see http.n=5-refused-then-retry: the refused choices free their slots late
    return r


add("http.completion.n=16-over-queue-limits", "429", n16)


def refused_then_retry():
    """A request refused with 429 must not keep holding its key's per-key
    slots: n=5 (> the cap of 4) is refused, and the same key's next request,
    sent right after the 429, must be accepted. The engine is kept busy (a
    long stream of bob's), as it is on any loaded server."""
    ch, hold = occupy(1, key=BOB, tokens=2000)
    try:
        refused = 0
        for _ in range(10):
            first = hs(completion(n=5))
            if first != "429":
                return "n=5 answered %s" % first
            code, _, _ = unary(ch, "Complete", gen(max_tokens=1), md(), timeout=10)
            if code != "OK":
                refused += 1
            time.sleep(0.1)
        return "retry accepted" if refused == 0 else "retry refused in %d of 10 tries" % refused
    finally:
        release(ch, hold)
        time.sleep(0.3)


add("http.n=5-refused-then-immediate-retry", "retry accepted", refused_then_retry)


def http_stream_ok():
    r = http(completion(stream=True, max_tokens=3))
    if not isinstance(r, tuple):
        return r
    ok = r[0] == 200 and r[1].get("content-type", "").startswith("text/event-stream") and \
        r[2].rstrip().endswith(b"data: [DONE]")
    return "200 event-stream ending [DONE]" if ok else "%s %r" % (r[0], r[2][-80:])


add("http.completion.stream(valid)", "200 event-stream ending [DONE]", http_stream_ok)
add("http.completion.prompt-with-NUL(valid)", "200", lambda: hs(completion(prompt="a\u0000b\u001b")))


def many_keys():
    body = {"k%d" % i: i for i in range(90000)}
    body.update(model="llama", prompt="Once", max_tokens=1)
    t = time.monotonic()
    r = hs(http_req("POST", C_PATH, body))
    took = time.monotonic() - t
    return r if took < 5 else "%s after %.1f s" % (r, took)


# 90,000 unknown keys (1.6 MB, under --http-max-body): ignored, answered promptly.
add("http.json-90k-unknown-keys(valid)", "200", many_keys)

CHAT_400 = [
    ("messages=empty", {"messages": []}), ("messages=missing", {"messages": None}),
    ("messages=string", {"messages": "hi"}), ("messages=role-missing", {"messages": [{"content": "x"}]}),
    ("messages=role-number", {"messages": [{"role": 1, "content": "x"}]}),
    ("messages=content-number", {"messages": [{"role": "user", "content": 5}]}),
    ("messages=not-objects", {"messages": ["hi"]}), ("tools=object", {"tools": {"a": 1}}),
    ("top_logprobs-without-logprobs", {"top_logprobs": 2}),
    ("top_logprobs=21", {"logprobs": True, "top_logprobs": 21}),
    ("max_completion_tokens=0", {"max_completion_tokens": 0}),
    ("messages=content-over-1MiB", {"messages": [{"role": "user", "content": "a" * (MIB + 10)}]}),
    # The template's 1 MiB output limit (see the gRPC case of the same
    # name): a request that can never succeed must be 400, not 429
    # rate_limit_exceeded (which OpenAI clients retry).
    ("messages=content-1MiB-renders-over-limit",
     {"messages": [{"role": "user", "content": "a" * (MIB - 64)}]}),
]
for _name, _fields in CHAT_400:
    add("http.chat.%s" % _name, "400", lambda f=_fields: hs(chat_body(**f)))
add("http.apply-template.malformed", "400",
    lambda: hs(http_req("POST", "/apply-template", '{"messages": [')))
add("http.apply-template.no-messages", "400",
    lambda: hs(http_req("POST", "/apply-template", '{"messages": []}')))
add("http.apply-template(valid)", "200",
    lambda: hs(http_req("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi"}]})))

def pipelined_many(n=500):
    c = HttpConn(MAIN["http"])
    try:
        c.send(http_req("GET", "/v1/models") * n)
        codes = {}
        for _ in range(n):
            st = status_of(c.response())
            codes[st] = codes.get(st, 0) + 1
            if st not in ("200",):
                break
        return ", ".join("%d x %s" % (v, k) for k, v in sorted(codes.items()))
    finally:
        c.close()


add("http.pipelined-500-GETs", "500 x 200", pipelined_many)

# Framing abuse.
RAW_400 = [
    ("garbage-request-line", b"\x16\x03\x01\x02\x00garbage\r\n\r\n"),
    ("header-without-colon", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n"),
    ("nul-in-header", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
    ("negative-content-length",
     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
    ("two-different-content-lengths",
     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello"),
    ("bad-chunk-size",
     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
    ("http-version-garbage", b"GET /v1/models HTTP/9.Z\r\nHost: x\r\n\r\n"),
]
for _name, _raw in RAW_400:
    add("http.framing.%s" % _name, "400", lambda raw=_raw: hs(raw))


def cl_and_te():
    # Content-Length with Transfer-Encoding (RFC 9112 6.1): the server may
    # reject (400) or use the chunked framing and must then close the
    # connection after the response. Either way the bytes after the chunked
    # body must never be answered as a second (smuggled) request.
    body = json.dumps({"model": "llama", "prompt": "a", "max_tokens": 1}).encode()
    smuggled = http_req("GET", "/v1/nothing-smuggled")
    raw = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ALICE.encode() +
           b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n" % (len(body) + 5) +
           b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n" + smuggled)
    c = HttpConn(MAIN["http"])
    try:
        c.send(raw)
        first = c.response()
        second = c.response(timeout=3)
        if isinstance(second, tuple) and second[0] == 404:
            return "%s, then the smuggled request was answered (404)" % status_of(first)
        return "%s, no second response" % status_of(first) if status_of(first) in ("400", "200") \
            else status_of(first)
    finally:
        c.close()


add("http.framing.content-length-and-chunked", "400, no second response|200, no second response",
    cl_and_te)


def pipelined():
    c = HttpConn(MAIN["http"])
    try:
        c.send(completion(max_tokens=3) + http_req("GET", "/v1/models") + completion(max_tokens=1))
        got = []
        for _ in range(3):
            r = c.response()
            got.append(status_of(r))
            if isinstance(r, tuple) and got[-1] == "200":
                obj = json.loads(r[2])
                got[-1] += "/" + obj.get("object", "?")
        return " ".join(got)
    finally:
        c.close()


add("http.pipelined-3-requests", "200/text_completion 200/list 200/text_completion", pipelined)


def http10():
    c = HttpConn(MAIN["http"])
    try:
        c.send(b"GET /v1/models HTTP/1.0\r\nAuthorization: Bearer " + ALICE.encode() + b"\r\n\r\n")
        r = c.response()
        closed = c.wait_closed(3)
        return "%s, %s" % (status_of(r), "closed" if closed is not None else "kept open")
    finally:
        c.close()


add("http.HTTP/1.0", "200, closed", http10)


def keepalive_after_400():
    c = HttpConn(MAIN["http"])
    try:
        c.send(http_req("POST", C_PATH, '{"model": '))
        a = status_of(c.response())
        c.send(completion(max_tokens=1))
        return "%s then %s" % (a, status_of(c.response()))
    finally:
        c.close()


add("http.keep-alive-after-400", "400 then 200", keepalive_after_400)

HDR_TIMEOUT = MAIN["http_header_timeout"]


def slow_client(partial, trickle=None):
    """A client that starts a request and never finishes it: dropped after
    --http-header-timeout (the whole request, not per byte), while another
    client is served at once."""
    slow = HttpConn(MAIN["http"])
    try:
        slow.send(partial)
        start = time.monotonic()
        t = time.monotonic()
        r = http(http_req("GET", "/v1/models"), timeout=5)
        served = time.monotonic() - t
        if status_of(r) != "200" or served > 1.5:
            return "other client: %s after %.2f s" % (status_of(r), served)
        if trickle:
            closed_at = None
            while time.monotonic() - start < HDR_TIMEOUT + 3:
                if not slow.send(trickle):
                    closed_at = time.monotonic() - start
                    break
                if select.select([slow.sock], [], [], 0.3)[0]:
                    try:
                        if not slow.sock.recv(4096):
                            closed_at = time.monotonic() - start
                            break
                    except OSError:
                        closed_at = time.monotonic() - start
                        break
            waited = closed_at
        else:
            w = slow.wait_closed(HDR_TIMEOUT + 3)
            waited = None if w is None else time.monotonic() - start
        if waited is None:
            return "still open after %d s" % (HDR_TIMEOUT + 3)
        if waited < HDR_TIMEOUT - 0.5:
            return "closed too early (%.1f s)" % waited
        return "dropped after ~%d s, others served" % HDR_TIMEOUT
    finally:
        slow.close()


DROPPED = "dropped after ~%d s, others served" % HDR_TIMEOUT
add("http.slow-client.headers-never-finish", DROPPED,
    lambda: slow_client(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"))
add("http.slow-client.slowloris-trickle", DROPPED,
    lambda: slow_client(b"GET /v1/models HTTP/1.1\r\n", trickle=b"X"))
add("http.slow-client.body-never-finishes", DROPPED,
    lambda: slow_client(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Authorization: Bearer " + ALICE.encode() + b"\r\nContent-Length: 100\r\n\r\n{"))


# ==========================================================================
# 3. Connection abuse
# ==========================================================================


def metrics_slow_client():
    """The metrics port gives a request 2 s (server.cc kMetricsHeaderTimeout)."""
    c = HttpConn(MAIN["metrics"])
    try:
        c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        w = c.wait_closed(6)
        if w is None:
            return "still open after 6 s"
        return "dropped after ~2 s" if 1.5 <= w <= 5 else "closed after %.1f s" % w
    finally:
        c.close()


add("metrics.slow-client.headers-never-finish", "dropped after ~2 s", metrics_slow_client)


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


def bytes_during_generation(stream_mode):
    """A client starts a long completion on a connection, then keeps sending
    bytes on it (pipelined data) while the completion runs. The server may
    read ahead only a bounded amount: a request it has not parsed yet is
    bounded by the 16 KiB header limit and --http-max-body (2 MiB here). It
    must stop reading (TCP backpressure) or close the connection, not
    buffer everything: 96 MiB sent may grow its RSS by at most 32 MiB."""
    pid = MAIN["pid"]
    c = HttpConn(MAIN["http"])
    try:
        c.send(completion(max_tokens=1500, ignore_eos=True, stream=stream_mode))
        time.sleep(0.4)
        before = rss_mib(pid)
        chunk = b"G" * (1 << 20)
        sent = 0
        c.sock.settimeout(3)
        try:
            for _ in range(96):
                c.sock.sendall(chunk)
                sent += 1
        except (socket.timeout, OSError):
            pass
        grown = rss_mib(pid) - before
        got = "sent %d MiB, server RSS +%.0f MiB" % (sent, grown)
        return got, grown <= 32
    finally:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        wait_idle()


add("http.bytes-sent-during-generation-are-bounded",
    "stops reading or closes (RSS +<= 32 MiB for 96 MiB sent)", lambda: bytes_during_generation(False))
add("http.bytes-sent-during-stream-are-bounded",
    "stops reading or closes (RSS +<= 32 MiB for 96 MiB sent)", lambda: bytes_during_generation(True))


def cancel_frees_engine(kind):
    """A client gone mid-generation stops it: the engine is idle within 2 s,
    not after the 1500 tokens (15 s)."""
    if kind == "grpc":
        ch = channel()
        bg = BgStream(ch, long_gen(1500))
        bg.first.wait(10)
        bg.cancel()
        bg.wait(5)
        ch.close()
    else:
        c = HttpConn(MAIN["http"])
        c.send(completion(max_tokens=1500, ignore_eos=True, stream=kind == "http-stream"))
        if kind == "http-stream":
            c.response(timeout=10, head_only=True)
        else:
            time.sleep(0.5)
        c.close()
    t = time.monotonic()
    idle = wait_idle(10)
    took = time.monotonic() - t
    return "engine idle within 2 s" if idle and took <= 2 else "engine idle after %.1f s" % took


for _k in ("grpc", "http", "http-stream"):
    add("conn.client-gone-mid-generation.%s" % _k, "engine idle within 2 s",
        lambda k=_k: cancel_frees_engine(k))


def slow_reader_grpc():
    """A raw HTTP/2 client with a stream window of 0 starts a long Generate
    and never reads: the engine must not wait on it (others are served at
    normal speed, and its generation finishes in the engine)."""
    c = h2raw.Conn(HOST, MAIN["grpc"], settings=struct.pack(">HI", 4, 0))
    try:
        c.request(SVC + "Generate", ser(long_gen(150)), md())
        time.sleep(0.3)
        t = time.monotonic()
        code, _, _ = stream(WORK_CH, "Generate", gen(max_tokens=5), md(BOB), timeout=10)
        took = time.monotonic() - t
        if code != "OK" or took > 1.5:
            return "other client: %s after %.2f s" % (code, took)
        idle = wait_idle(10)
        return "others served, engine not blocked" if idle else "engine still busy after 10 s"
    finally:
        c.close()
        wait_idle()


add("conn.slow-reader-zero-window.grpc", "others served, engine not blocked", slow_reader_grpc)


def slow_reader_http():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((HOST, MAIN["http"]))
    try:
        s.sendall(completion(max_tokens=150, ignore_eos=True, stream=True))
        time.sleep(0.3)
        t = time.monotonic()
        r = hs(completion(max_tokens=5))
        took = time.monotonic() - t
        if r != "200" or took > 1.5:
            return "other client: %s after %.2f s" % (r, took)
        idle = wait_idle(10)
        return "others served, engine not blocked" if idle else "engine still busy after 10 s"
    finally:
        s.close()
        wait_idle()


add("conn.slow-reader.http-stream", "others served, engine not blocked", slow_reader_http)


def idle_connections():
    socks = []
    try:
        for port in (MAIN["grpc"], MAIN["http"], MAIN["metrics"]):
            for _ in range(300):
                socks.append(socket.create_connection((HOST, port), timeout=5))
        time.sleep(0.3)
        ch = channel()
        t = time.monotonic()
        code, _, _ = stream(ch, "Generate", gen(max_tokens=2), md(), timeout=10)
        t_grpc = time.monotonic() - t
        ch.close()
        t = time.monotonic()
        s = scrape()
        t_scrape = time.monotonic() - t
        t = time.monotonic()
        r = hs(http_req("GET", "/v1/models"))
        t_http = time.monotonic() - t
        ok = code == "OK" and s is not None and r == "200" and max(t_grpc, t_scrape, t_http) <= 1.5
        return ("answered within 1.5 s" if ok else
                "Generate %s %.2fs, scrape %s %.2fs, HTTP %s %.2fs" % (
                    code, t_grpc, s is not None, t_scrape, r, t_http))
    finally:
        for s in socks:
            s.close()


add("conn.900-idle-tcp-connections", "answered within 1.5 s", idle_connections)


def idle_h2_connections():
    conns = []
    try:
        for _ in range(200):
            conns.append(h2raw.Conn(HOST, MAIN["grpc"], timeout=5))
        t = time.monotonic()
        code, _, _ = stream(WORK_CH, "Generate", gen(max_tokens=2), md(), timeout=10)
        took = time.monotonic() - t
        return "answered within 1.5 s" if code == "OK" and took <= 1.5 else "%s %.2fs" % (code, took)
    finally:
        for c in conns:
            c.close()


add("conn.200-idle-h2-connections", "answered within 1.5 s", idle_h2_connections)


def reset_connections():
    for port in (MAIN["grpc"], MAIN["http"], MAIN["metrics"]):
        for _ in range(100):
            s = socket.create_connection((HOST, port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
    return "server fine"


add("conn.300-connect-then-RST", "server fine", reset_connections)


def send_to_grpc(data):
    s = socket.create_connection((HOST, MAIN["grpc"]), timeout=5)
    try:
        s.sendall(data)
        out = b""
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                return "still open"
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if out.startswith(b"HTTP/1."):
            return "HTTP/1 answer: %r" % out[:40]
        return "closed"
    finally:
        s.close()


add("conn.grpc-port.garbage-bytes", "closed", lambda: send_to_grpc(os.urandom(4096)))
add("conn.grpc-port.http1-request", "closed",
    lambda: send_to_grpc(http_req("POST", "/tessera.v1.Inference/Tokenize", "x")))
add("conn.grpc-port.preface-then-garbage", "closed",
    lambda: send_to_grpc(h2raw.PREFACE + os.urandom(2048)))


def big_metadata(size, want_code):
    """A call with `size` bytes of metadata while a stream on the SAME channel
    keeps running: the big call gets want_code, the stream still ends OK."""
    ch = channel()
    try:
        bg = BgStream(ch, long_gen(60), key=ALICE)
        if not bg.first.wait(10):
            return "background stream never started"
        code, details, _ = stream(ch, "Generate", gen(max_tokens=2),
                                  md(extra=[("x-pad", "p" * size)]), timeout=15)
        bg.wait(30)
        if bg.code != "OK":
            return "%s; the other stream ended %s (%s)" % (code, bg.code, bg.details[:60])
        return code
    finally:
        ch.close()


# convert.h: kMaxRequestMetadataBytes = 64 KiB per call (RESOURCE_EXHAUSTED
# for that call alone); 20 KiB is below it.
add("conn.metadata-20KiB-same-channel", "OK", lambda: big_metadata(20 << 10, "OK"))
add("conn.metadata-1MiB-same-channel", "RESOURCE_EXHAUSTED", lambda: big_metadata(MIB, "RESOURCE_EXHAUSTED"))
add("conn.metadata-1MiB.Tokenize", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text="hi"), md(extra=[("x-pad", "p" * MIB)]))[0])
add("conn.metadata-1MiB.ChatComplete", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "ChatComplete", chat_req(), md(extra=[("x-pad", "p" * MIB)]))[0])
add("conn.metadata-1MiB.RenderChat", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "RenderChat", chat_req().chat, md(extra=[("x-pad", "p" * MIB)]))[0])
add("conn.metadata-1MiB.GetModelInfo", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "GetModelInfo", b"", md(extra=[("x-pad", "p" * MIB)]))[0])
add("conn.metadata-1MiB.Detokenize", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5]),
                 md(extra=[("x-pad", "p" * MIB)]))[0])
add("conn.metadata-64KiB-in-many-headers", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "Generate", gen(), md(extra=[("x-p%d" % i, "v" * 200) for i in range(400)]))[0])


def many_streams_one_channel():
    """12 streams on one channel, --max-concurrent-streams 8: the client
    queues the rest (HTTP/2 SETTINGS), all end OK, and the server never
    holds more than 8 of them (running + waiting)."""
    ch = channel()
    try:
        streams = [BgStream(ch, long_gen(30), key=[ALICE, BOB, CAROL][i % 3]) for i in range(12)]
        peak = 0
        end = time.monotonic() + 60
        while time.monotonic() < end and not all(s.done.is_set() for s in streams):
            load = model_load()
            if load:
                peak = max(peak, load[0] + load[1])
            time.sleep(0.03)
        codes = sorted(set(s.code or "unfinished" for s in streams))
        if codes != ["OK"]:
            return "codes %s" % codes
        return "all OK, peak %s" % ("<= 8" if peak <= 8 else peak)
    finally:
        ch.close()


add("conn.12-streams-one-channel-limit-8", "all OK, peak <= 8", many_streams_one_channel)


def raw_over_stream_limit():
    """A raw client ignoring SETTINGS_MAX_CONCURRENT_STREAMS (8) opens 9
    streams at once. RFC 9113 5.1.2: the excess stream is refused
    (REFUSED_STREAM or PROTOCOL_ERROR); the server must never serve more than
    8 at once. (gRPC 1.51's core ends the whole connection instead: the
    offender only hurts itself.) Other clients are unaffected (after-check)."""
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        c.pump(lambda c: 3 in c.peer_settings, 3)
        out, sids = b"", []
        for _ in range(9):
            sid, d = c.request_frames(SVC + "Tokenize", ser(pb.TokenizeRequest(text="hi")),
                                      md())
            sids.append(sid)
            out += d
        c.send(out)
        c.pump(lambda c: all(c.streams[s]["ended"] for s in sids) or c.goaway, 10)
        results = [c.result(s) for s in sids]
        served = results.count("grpc-status 0")
        summary = ", ".join("%d x %s" % (results.count(r), r) for r in sorted(set(results)))
        return "%d of 9 served (%s)" % (served, summary), served <= 8
    finally:
        c.close()


add("conn.raw-h2-9-streams-over-limit", "at most 8 of 9 served", raw_over_stream_limit)


def rapid_reset_grpcio():
    ch = channel()
    try:
        for i in range(1000):
            c = ch.unary_stream(SVC + "Generate")(ser(long_gen(200)), metadata=md([ALICE, BOB][i % 2]),
                                                  timeout=30)
            c.cancel()
        # Answered on the same connection after the burst: the server has read it all.
        sentinel = call(ch, "Tokenize", pb.TokenizeRequest(text="hi"), md(CAROL))[0]
        ok, last = gauges_zero(8)
        if sentinel != "OK":
            return "a call after the burst got %s" % sentinel
        if not ok:
            return "gauges running/waiting %s after 8 s" % (last,)
        return "serving, gauges 0"
    finally:
        ch.close()


add("conn.rapid-reset-1000-grpcio", "serving, gauges 0", rapid_reset_grpcio)


def rapid_reset_raw():
    """CVE-2023-44487 style: 1000 x (HEADERS + DATA + RST_STREAM) in one burst."""
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        c.pump(lambda c: 3 in c.peer_settings, 3)
        out = bytearray()
        for _ in range(1000):
            sid, d = c.request_frames(SVC + "Generate", ser(long_gen(200)), md())
            out += d + c.rst(sid)
        c.send(bytes(out))
        # Answered on the same connection after the burst: the server has read it all.
        sid = c.request(SVC + "Tokenize", ser(pb.TokenizeRequest(text="hi")), md(CAROL))
        sentinel = c.wait_stream(sid, 15)
    finally:
        c.close()
    if sentinel != "grpc-status 0":
        return "a call after the burst got %s" % sentinel
    ok, last = gauges_zero(8)
    return "serving, gauges 0" if ok else "gauges running/waiting %s after 8 s" % (last,)


add("conn.rapid-reset-1000-raw-h2", "serving, gauges 0", rapid_reset_raw)


def per_key_slots_free(key=ALICE):
    """Ticket accounting: with the running slots held by bob, `key` can queue
    exactly --max-queued-requests-per-key (4) requests, and the 5th gets
    RESOURCE_EXHAUSTED. A leaked ticket (from a cancelled, expired or
    refused request) would refuse one of the first 4."""
    ch, hold = occupy(2, key=BOB if key != BOB else CAROL)
    mine = []
    try:
        for _ in range(4):
            mine.append(BgStream(ch, long_gen(50), key=key))
            time.sleep(0.05)
        time.sleep(0.3)
        early = [s.code for s in mine if s.done.is_set()]
        code, details, _ = stream(ch, "Generate", gen(max_tokens=2), md(key), timeout=10)
        if early:
            return "of 4 queued, %d refused: %s" % (len(early), early)
        return "4 queued, 5th %s" % code
    finally:
        for s in mine:
            s.cancel()
        release(ch, hold)


FREE = "4 queued, 5th RESOURCE_EXHAUSTED"
add("conn.per-key-slots-free-after-rapid-reset", FREE, per_key_slots_free)


def ping_flood():
    """--keepalive-min-client-interval: 'clients pinging more often than this
    ... get GOAWAY too_many_pings after 2 such pings'."""
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        c.pump(lambda c: 3 in c.peer_settings, 3)
        c.send(b"".join(h2raw.frame(h2raw.PING, 0, 0, struct.pack(">Q", i)) for i in range(2000)))
        c.pump(lambda c: c.goaway is not None, 5)
        return "GOAWAY %s" % c.goaway[1] if c.goaway else ("closed" if c.closed else "no GOAWAY")
    finally:
        c.close()


add("conn.raw-h2-ping-flood", "GOAWAY ENHANCE_YOUR_CALM", ping_flood)


def settings_flood():
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        c.send(b"".join(h2raw.frame(h2raw.SETTINGS, 0, 0, struct.pack(">HI", 4, 65535 + i))
                        for i in range(5000)))
        c.pump(lambda c: False, 2)
        return "server fine"
    finally:
        c.close()


add("conn.raw-h2-settings-flood", "server fine", settings_flood)


def uppercase_header():
    # RFC 9113 8.2.1: uppercase field names make the request malformed.
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        sid = c.request(SVC + "Tokenize", ser(pb.TokenizeRequest(text="hi")),
                        [("Authorization", "Bearer " + ALICE)])
        r = c.wait_stream(sid)
        return ("refused (%s)" % r, True) if r != "grpc-status 0" else ("served", False)
    finally:
        c.close()


add("conn.raw-h2-uppercase-header-name", "refused", uppercase_header)


def queue_fill():
    """--max-queued-requests 8, --max-num-seqs 2: of 14 long streams (spread
    over 5 keys, under the per-key cap), at most 2 run + 8 wait; the rest get
    RESOURCE_EXHAUSTED at once, and the waiting count never exceeds 8."""
    # One channel per stream: one channel would hold all but 8 in the client
    # (--max-concurrent-streams 8).
    chans = [channel() for _ in range(14)]
    streams = []
    peak = [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            load = model_load()
            if load:
                peak[0] = max(peak[0], load[1])
            time.sleep(0.02)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    try:
        keys = [ALICE, BOB, CAROL, DAVE, ERIN]
        for i in range(14):
            streams.append(BgStream(chans[i], long_gen(300), key=keys[i % 5]))
            time.sleep(0.02)
        time.sleep(1.0)
        refused = [s for s in streams if s.done.is_set()]
        codes = sorted(set(s.code for s in refused))
        s = scrape()
        waiting_metric = metric(s, "tessera_requests_waiting")
        stop.set()
        w.join()
        n = len(refused)
        got = "%d of 14 refused %s, waiting peaked at %d (metric %s)" % (
            n, "/".join(codes) or "-", peak[0], waiting_metric)
        ok = codes == ["RESOURCE_EXHAUSTED"] and 4 <= n <= 6 and peak[0] <= 8 and \
            (waiting_metric or 0) <= 8
        return got, ok
    finally:
        stop.set()
        for s in streams:
            s.cancel()
        for s in streams:
            s.wait(10)
        for ch in chans:
            ch.close()
        wait_idle()


add("conn.queue-fill-max-queued-8", "4..6 of 14 RESOURCE_EXHAUSTED, waiting <= 8", queue_fill)
add("conn.per-key-slots-free-after-queue-fill", FREE, per_key_slots_free)


def per_key_cap():
    """One key (alice) fills its per-key cap (4) while bob holds the running
    slots: alice's 5th and 6th get RESOURCE_EXHAUSTED (HTTP: 429), carol is
    still accepted and served."""
    ch, hold = occupy(2, key=BOB, tokens=120)
    mine = []
    try:
        for _ in range(4):
            mine.append(BgStream(ch, long_gen(50), key=ALICE))
            time.sleep(0.05)
        time.sleep(0.2)
        c5, d5, _ = stream(ch, "Generate", gen(), md(ALICE), timeout=10)
        c6, d6, _ = unary(ch, "Complete", gen(), md(ALICE), timeout=10)
        h = hs(completion())
        for s in mine:
            s.cancel()
        cc, dc, _ = unary(ch, "Complete", gen(), md(CAROL), timeout=30)
        got = "alice 5th %s, 6th %s, HTTP %s; carol %s" % (c5, c6, h, cc)
        return got
    finally:
        for s in mine:
            s.cancel()
        release(ch, hold)


add("conn.per-key-cap-other-key-served",
    "alice 5th RESOURCE_EXHAUSTED, 6th RESOURCE_EXHAUSTED, HTTP 429; carol OK", per_key_cap)


def http_disconnect_while_queued():
    """An HTTP client that disconnects while its request waits must give its
    per-key slot back."""
    ch, hold = occupy(2, key=BOB)
    conns = []
    try:
        for _ in range(4):
            c = HttpConn(MAIN["http"])
            c.send(completion(max_tokens=20))
            conns.append(c)
        time.sleep(0.5)
        for c in conns:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
        time.sleep(0.5)
    finally:
        release(ch, hold)
    return per_key_slots_free()


add("conn.per-key-slots-free-after-http-disconnects", FREE, http_disconnect_while_queued)


def http_n_refused_then_free():
    hs(completion(n=16))
    return per_key_slots_free()


add("conn.per-key-slots-free-after-refused-n=16", FREE, http_n_refused_then_free)


# ==========================================================================
# 4. Deadlines
# ==========================================================================

DEADLINE_BEFORE = {}


@case("deadline.snapshot-metrics", "scraped")
def deadline_snapshot():
    s = scrape()
    DEADLINE_BEFORE["v"] = metric(s, "tessera_request_failure_total", 'code="DEADLINE_EXCEEDED"')
    return "scraped" if s is not None else "no scrape"


add("deadline.1ms.Generate", "DEADLINE_EXCEEDED",
    lambda: call(WORK_CH, "Generate", long_gen(100), md(), timeout=0.001)[0])
add("deadline.1ms.Complete", "DEADLINE_EXCEEDED",
    lambda: call(WORK_CH, "Complete", long_gen(100), md(), timeout=0.001)[0])


def expired_raw(timeout_value):
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        sid = c.request(SVC + "Generate", ser(long_gen(100)), md(extra=[("grpc-timeout", timeout_value)]))
        r = c.wait_stream(sid, 10)
        return {"grpc-status 4": "DEADLINE_EXCEEDED", "grpc-status 0": "OK"}.get(r, r)
    finally:
        c.close()


# Already expired on arrival (grpc-timeout of 1 ns, which grpcio will not send).
add("deadline.already-expired-1n", "DEADLINE_EXCEEDED", lambda: expired_raw("1n"))
add("deadline.already-expired-0n", "DEADLINE_EXCEEDED", lambda: expired_raw("0n"))


def deadline_in_queue(method):
    """The running slots are held by bob: the call waits in the queue until
    its 0.5 s deadline passes."""
    ch, hold = occupy(2, key=BOB)
    try:
        t = time.monotonic()
        body = chat_req(max_tokens=5) if method == "Chat" else gen(max_tokens=5)
        code, _ = call(ch, method, body, md(), timeout=0.5)
        took = time.monotonic() - t
        if code == "DEADLINE_EXCEEDED" and took > 2.0:
            return "DEADLINE_EXCEEDED only after %.1f s" % took
        return code
    finally:
        release(ch, hold)


add("deadline.while-queued.Generate", "DEADLINE_EXCEEDED", lambda: deadline_in_queue("Generate"))
add("deadline.while-queued.Complete", "DEADLINE_EXCEEDED", lambda: deadline_in_queue("Complete"))
add("deadline.while-queued.Chat", "DEADLINE_EXCEEDED", lambda: deadline_in_queue("Chat"))


def deadline_streaming():
    ch = channel()
    try:
        bg = BgStream(ch, long_gen(1000), key=ALICE, timeout=0.8)
        bg.wait(10)
        if bg.code == "DEADLINE_EXCEEDED" and bg.msgs:
            return "DEADLINE_EXCEEDED after some messages"
        return "%s after %d messages" % (bg.code, len(bg.msgs))
    finally:
        ch.close()


add("deadline.while-streaming", "DEADLINE_EXCEEDED after some messages", deadline_streaming)


def deadline_metrics():
    # The server saw at least the 3 queued and the streaming deadline calls
    # (the 1 ms and already-expired ones may end before a handler runs).
    wait_idle()
    time.sleep(0.4)
    after = metric(scrape(), "tessera_request_failure_total", 'code="DEADLINE_EXCEEDED"')
    before = DEADLINE_BEFORE.get("v")
    if before is None or after is None:
        return "no metric"
    delta = after - before
    return "+%d DEADLINE_EXCEEDED" % delta, delta >= 4


add("deadline.counted-in-metrics", "+>=4 DEADLINE_EXCEEDED (3 queued, 1 streaming, maybe the rest)",
    deadline_metrics)
add("deadline.gauges-back-to-0", "True", lambda: str(gauges_zero(6)[0]))
add("deadline.per-key-slots-free-after-deadlines", FREE, per_key_slots_free)


# ==========================================================================
# 5. Auth bypass attempts (main server: --api-key-file, health open)
# ==========================================================================

VALID_BODIES = {
    "Generate": gen(), "Complete": gen(), "Tokenize": pb.TokenizeRequest(text="hi"),
    "Detokenize": pb.DetokenizeRequest(token_ids=[5]), "GetModelInfo": b"",
    "Chat": chat_req(), "ChatComplete": chat_req(), "RenderChat": chat_req().chat,
}
for _m in METHODS:
    add("auth.grpc.no-key.%s" % _m, "UNAUTHENTICATED",
        lambda m=_m: call(WORK_CH, m, VALID_BODIES[m], None)[0])
    add("auth.grpc.wrong-key.%s" % _m, "UNAUTHENTICATED",
        lambda m=_m: call(WORK_CH, m, VALID_BODIES[m], md("sk-wrong-000000000000"))[0])
# Garbage body and no key: the key is checked first.
add("auth.grpc.no-key-garbage-body", "UNAUTHENTICATED",
    lambda: call(WORK_CH, "Generate", GARBAGE, None)[0])


def reflection(metadata):
    try:
        it = WORK_CH.stream_stream(REFLECTION)(iter([field_bytes(7, b"")]), metadata=metadata, timeout=10)
        got = b"".join(it)
        return "OK" + (" (lists tessera.v1.Inference)" if b"tessera.v1.Inference" in got else "")
    except grpc.RpcError as e:
        return e.code().name


add("auth.grpc.reflection-no-key", "UNAUTHENTICATED", lambda: reflection(None))
add("auth.grpc.reflection-wrong-key", "UNAUTHENTICATED", lambda: reflection(md("sk-wrong-00000000")))
add("auth.grpc.reflection-with-key(valid)", "OK (lists tessera.v1.Inference)", lambda: reflection(md()))
add("auth.grpc.health-no-key(open)", "SERVING", lambda: health(WORK_CH))
add("auth.grpc.unknown-method-no-key", "UNAUTHENTICATED",
    lambda: call(WORK_CH, "/tessera.v1.Inference/Nope", b"", None)[0])
add("auth.grpc.unknown-method-with-key", "UNIMPLEMENTED",
    lambda: call(WORK_CH, "/tessera.v1.Inference/Nope", b"", md())[0])
# The open health prefix must not open other methods: gRPC does not
# normalise paths, so these name no method (UNIMPLEMENTED), never run one.
add("auth.grpc.health-prefix-path-traversal", "UNIMPLEMENTED",
    lambda: call(WORK_CH, "/grpc.health.v1.Health/../tessera.v1.Inference/Tokenize",
                 pb.TokenizeRequest(text="hi"), None)[0])
add("auth.grpc.health-prefix-unknown-method", "UNIMPLEMENTED",
    lambda: call(WORK_CH, "/grpc.health.v1.Health/Generate", gen(), None)[0])
add("auth.grpc.uppercase-path-no-key", "UNAUTHENTICATED",
    lambda: call(WORK_CH, "/TESSERA.V1.INFERENCE/Tokenize", pb.TokenizeRequest(text="hi"), None)[0])


def auth_call(metadata):
    return call(WORK_CH, "Tokenize", pb.TokenizeRequest(text="hi"), metadata)[0]


AUTH_CASES = [
    ("empty-bearer", [("authorization", "Bearer ")], "UNAUTHENTICATED"),
    ("bearer-no-key", [("authorization", "Bearer")], "UNAUTHENTICATED"),
    ("key-without-scheme", [("authorization", ALICE)], "UNAUTHENTICATED"),
    ("basic-scheme", [("authorization", "Basic " + ALICE)], "UNAUTHENTICATED"),
    # RFC 7235: the scheme is case-insensitive (authenticator.cc says so).
    ("lowercase-bearer(valid)", [("authorization", "bearer " + ALICE)], "OK"),
    ("uppercase-BEARER(valid)", [("authorization", "BEARER " + ALICE)], "OK"),
    # Surrounding whitespace is not part of a header value (RFC 9110 5.5) and
    # keys may hold no whitespace: stripped, the key is the real one.
    ("key-trailing-space(valid)", [("authorization", "Bearer " + ALICE + " ")], "OK"),
    ("two-spaces-after-bearer(valid)", [("authorization", "Bearer  " + ALICE)], "OK"),
    ("key-wrong-case", [("authorization", "Bearer " + ALICE.upper())], "UNAUTHENTICATED"),
    ("key-prefix", [("authorization", "Bearer " + ALICE[:-1])], "UNAUTHENTICATED"),
    ("key-suffix", [("authorization", "Bearer " + ALICE[1:])], "UNAUTHENTICATED"),
    ("key-plus-char", [("authorization", "Bearer " + ALICE + "x")], "UNAUTHENTICATED"),
    ("two-keys-in-one-header", [("authorization", "Bearer " + ALICE + " " + BOB)], "UNAUTHENTICATED"),
    ("key-1MiB", [("authorization", "Bearer " + "k" * MIB)], "UNAUTHENTICATED"),
    ("key-real-then-1MiB", [("authorization", "Bearer " + ALICE + "k" * MIB)], "UNAUTHENTICATED"),
    ("authorization-bin", [("authorization-bin", ("Bearer " + ALICE).encode())], "UNAUTHENTICATED"),
    ("x-api-key(valid)", [("x-api-key", ALICE)], "OK"),
    ("x-api-key-wrong", [("x-api-key", "sk-wrong-0000000000")], "UNAUTHENTICATED"),
    ("x-api-key-empty", [("x-api-key", "")], "UNAUTHENTICATED"),
    # authorization wins over x-api-key (authenticator.cc PresentedKey).
    ("wrong-bearer-plus-good-x-api-key", [("authorization", "Bearer sk-wrong-000000"),
                                          ("x-api-key", ALICE)], "UNAUTHENTICATED"),
    ("basic-plus-good-x-api-key", [("authorization", "Basic abc"), ("x-api-key", ALICE)],
     "UNAUTHENTICATED"),
]
for _name, _md, _want in AUTH_CASES:
    add("auth.grpc.%s" % _name, _want, lambda m=_md: auth_call(m))


def raw_auth(values, header="authorization"):
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        sid = c.request(SVC + "Tokenize", ser(pb.TokenizeRequest(text="hi")),
                        [(header, v) for v in values])
        r = c.wait_stream(sid)
        return {"grpc-status 16": "UNAUTHENTICATED", "grpc-status 0": "OK"}.get(r, r)
    finally:
        c.close()


# Two authorization headers (raw HTTP/2; grpcio would merge nothing either).
# The first decides (processor and key naming both use it): a wrong first
# value is refused even with a good second one.
add("auth.grpc.two-authorization-wrong-then-good", "UNAUTHENTICATED",
    lambda: raw_auth(["Bearer sk-wrong-00000000", "Bearer " + ALICE]))
# CONTRACT UNCLEAR: a good first value with a wrong second one. authorization
# is a singleton field; refusing would be stricter, accepting is what the
# first-value rule gives. Either is accepted here (no bypass: the client holds
# a valid key).
add("auth.grpc.two-authorization-good-then-wrong", "OK|UNAUTHENTICATED",
    lambda: raw_auth(["Bearer " + ALICE, "Bearer sk-wrong-00000000"]))
# CONTRACT UNCLEAR: a newline or NUL inside a header value makes the
# request malformed (RFC 9113 8.2.1), which gRPC 1.51's core does not check;
# the server then strips surrounding whitespace (so "KEY\n" is KEY). Not a
# bypass (the client holds the key); any outcome but a crash is accepted for
# the newline; a NUL is not whitespace and must not match.
add("auth.grpc.key-trailing-newline(raw)", "OK|UNAUTHENTICATED|RST_STREAM PROTOCOL_ERROR",
    lambda: raw_auth(["Bearer " + ALICE + "\n"]))
add("auth.grpc.key-trailing-tab(raw,valid)", "OK", lambda: raw_auth(["Bearer " + ALICE + "\t"]))
add("auth.grpc.key-trailing-nul(raw)", "UNAUTHENTICATED|RST_STREAM PROTOCOL_ERROR",
    lambda: raw_auth(["Bearer " + ALICE + "\x00"]))
add("auth.grpc.key-with-crlf-injection(raw)", "UNAUTHENTICATED|RST_STREAM PROTOCOL_ERROR",
    lambda: raw_auth(["Bearer sk-wrong\r\nauthorization: Bearer " + ALICE]))

# HTTP.
HTTP_AUTH_PATHS = [("GET", "/v1/models", None), ("POST", "/v1/completions",
                   {"model": "llama", "prompt": "a", "max_tokens": 1}),
                   ("POST", "/v1/chat/completions",
                    {"model": "llama", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}),
                   ("POST", "/apply-template", {"messages": [{"role": "user", "content": "x"}]}),
                   ("GET", "/metrics", None)]


def http_401(raw):
    r = http(raw)
    if not isinstance(r, tuple):
        return r
    if r[0] == 401 and r[1].get("www-authenticate", "").lower() != "bearer":
        return "401 without WWW-Authenticate: Bearer"
    return str(r[0])


for _meth, _path, _body in HTTP_AUTH_PATHS:
    add("auth.http.no-key.%s" % _path, "401",
        lambda m=_meth, p=_path, b=_body: http_401(http_req(m, p, b, key=None)))
    add("auth.http.wrong-key.%s" % _path, "401",
        lambda m=_meth, p=_path, b=_body: http_401(http_req(m, p, b, key="sk-wrong-0000000000")))
add("auth.http.unknown-route-no-key", "401", lambda: http_401(http_req("GET", "/v1/secret", key=None)))
add("auth.http.health-no-key(open)", "200", lambda: hs(http_req("GET", "/health", key=None)))
add("auth.http.health-query-no-key(open)", "200", lambda: hs(http_req("GET", "/health?x=1", key=None)))
add("auth.http.health-dotdot-models-no-key", "401",
    lambda: http_401(http_req("GET", "/health/../v1/models", key=None)))
add("auth.http.health-encoded-no-key", "401",
    lambda: http_401(http_req("GET", "/%68ealth/../v1/models", key=None)))
add("auth.http.key-in-query-string", "401",
    lambda: http_401(http_req("GET", "/v1/models?api_key=" + ALICE, key=None)))
add("auth.http.key-in-query-string-key", "401",
    lambda: http_401(http_req("GET", "/v1/models?key=" + ALICE, key=None)))
add("auth.http.key-in-body", "401",
    lambda: http_401(http_req("POST", "/v1/completions", {"model": "llama", "prompt": "a",
                                                           "api_key": ALICE}, key=None)))
add("auth.http.empty-bearer", "401",
    lambda: http_401(http_req("GET", "/v1/models", key=None, headers=[("Authorization", "Bearer ")])))
add("auth.http.lowercase-bearer(valid)", "200",
    lambda: hs(http_req("GET", "/v1/models", key=None, headers=[("Authorization", "bearer " + ALICE)])))
add("auth.http.key-trailing-space(valid)", "200",
    lambda: hs(http_req("GET", "/v1/models", key=None, headers=[("Authorization", "Bearer " + ALICE + "  ")])))
add("auth.http.key-wrong-case", "401",
    lambda: http_401(http_req("GET", "/v1/models", key=ALICE.upper())))
add("auth.http.key-prefix", "401", lambda: http_401(http_req("GET", "/v1/models", key=ALICE[:-1])))
add("auth.http.key-suffix", "401", lambda: http_401(http_req("GET", "/v1/models", key=ALICE + "0")))
add("auth.http.key-1MiB", "431", lambda: hs(http_req("GET", "/v1/models", key="k" * MIB)))
add("auth.http.x-api-key(valid)", "200",
    lambda: hs(http_req("GET", "/v1/models", key=None, headers=[("X-Api-Key", ALICE)])))
add("auth.http.x-api-key-wrong", "401",
    lambda: http_401(http_req("GET", "/v1/models", key=None, headers=[("X-Api-Key", "sk-wrong-0000")])))
add("auth.http.wrong-bearer-plus-good-x-api-key", "401",
    lambda: http_401(http_req("GET", "/v1/models", key="sk-wrong-0000", headers=[("X-Api-Key", ALICE)])))
add("auth.http.two-authorization-wrong-then-good", "401",
    lambda: http_401(http_req("GET", "/v1/models", key="sk-wrong-0000",
                              headers=[("Authorization", "Bearer " + ALICE)])))
# RFC 9112 5.2: an obs-fold is either refused (400) or replaced by spaces
# (then the key is the real one, 200).
add("auth.http.obs-fold-key", "400|200",
    lambda: hs(http_req("GET", "/v1/models", key=None,
                        headers=[("Authorization", "Bearer\r\n " + ALICE)])))
add("auth.metrics-port.no-key(open by design)", "200",
    lambda: hs(http_req("GET", "/metrics", key=None), port=MAIN["metrics"]))
add("auth.metrics-port.other-path", "404",
    lambda: hs(http_req("GET", "/v1/models"), port=MAIN["metrics"]))
add("auth.metrics-port.POST", "405",
    lambda: hs(http_req("POST", "/metrics", "", key=None), port=MAIN["metrics"]))
add("auth.metrics-port.body-refused", "413",
    lambda: hs(http_req("GET", "/metrics", "x" * 100, key=None), port=MAIN["metrics"]))


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


# ==========================================================================
# 7. Drain (drain server; SIGTERM with long streams running)
# ==========================================================================

DRAIN_STATE = {}


def drain_run():
    """Starts 3 long streams and 1 short one, sends SIGTERM, and records what
    each got, what new calls got, and how the process ended."""
    if DRAIN_STATE:
        return DRAIN_STATE
    ch = channel(DRAIN["grpc"])
    longs = [BgStream(ch, long_gen(1500), key=[ALICE, BOB, CAROL][i]) for i in range(3)]
    short = BgStream(ch, long_gen(80), key=DAVE)
    for s in longs + [short]:
        s.first.wait(15)
    started = [bool(s.msgs) for s in longs + [short]]
    t0 = time.monotonic()
    os.kill(DRAIN["pid"], signal.SIGTERM)
    time.sleep(0.2)
    ch2 = channel(DRAIN["grpc"])
    new_grpc = call(ch2, "Generate", gen(), md(), timeout=5)[0]
    new_health = health(ch2, timeout=3)
    ch2.close()
    new_http = status_of(http(completion(), port=DRAIN["http"], timeout=5))
    for s in longs + [short]:
        s.wait(DRAIN["drain_timeout"] + 15)
    rc = None
    end = t0 + DRAIN["drain_timeout"] + 15
    while time.monotonic() < end:
        if os.path.exists(DRAIN["rc_file"]):
            with open(DRAIN["rc_file"]) as f:
                text = f.read().strip()
            if text:
                rc = int(text)
                break
        time.sleep(0.1)
    exit_after = time.monotonic() - t0
    ch.close()
    DRAIN_STATE.update(started=started, longs=longs, short=short, new_grpc=new_grpc,
                       new_health=new_health, new_http=new_http, rc=rc, exit_after=exit_after)
    return DRAIN_STATE


def describe_end(s):
    last = s.last()
    reason = pb.FinishReason.Name(last.finish_reason) if last else "no message"
    return "%s/%s" % (s.code, reason)


def drain_case(fn):
    def run():
        st = drain_run()
        if not all(st["started"]):
            return "streams did not start: %s" % st["started"]
        return fn(st)
    return run


def drain_longs(st):
    ends = [describe_end(s) for s in st["longs"]]
    # Cut at the drain timeout: a last message with FINISH_REASON_CANCELLED
    # and OK (convert.cc FinishStatus, server.cc Drain), or their normal end.
    ok = all(e in ("OK/FINISH_REASON_CANCELLED", "OK/FINISH_REASON_LENGTH") for e in ends)
    return ", ".join(ends), ok


add("drain.long-streams-end-with-final-message-OK", "each OK/FINISH_REASON_CANCELLED (or LENGTH)", drain_case(drain_longs),
    target="drain")
add("drain.short-stream-finishes-normally", "OK/FINISH_REASON_LENGTH",
    drain_case(lambda st: describe_end(st["short"])), target="drain")
add("drain.new-grpc-call", "UNAVAILABLE", drain_case(lambda st: st["new_grpc"]), target="drain")
add("drain.new-http-call", "503", drain_case(lambda st: st["new_http"]), target="drain")
add("drain.health-not-serving", "NOT_SERVING|UNAVAILABLE", drain_case(lambda st: st["new_health"]),
    target="drain")
add("drain.exit-code-0-within-timeout+5s", "exit 0 within %d s" % (DRAIN["drain_timeout"] + 5),
    drain_case(lambda st: ("exit %s after %.1f s" % (st["rc"], st["exit_after"]),
                           st["rc"] == 0 and st["exit_after"] <= DRAIN["drain_timeout"] + 5)),
    target="drain")

# ==========================================================================
# Compressed messages (grpc-encoding: gzip). Last but for the final checks:
# the server may keep the memory these make it allocate.
# ==========================================================================

_BOMBS = {}


def gzip_bomb(inflated, tail=b""):
    """A gzip-compressed message that inflates to `inflated` bytes (an
    unknown field of zeros, then `tail`): about 1/1000 of its inflated size."""
    key = (inflated, tail)
    if key not in _BOMBS:
        import zlib
        co = zlib.compressobj(9, zlib.DEFLATED, 31)
        out = [co.compress(varint((9 << 3) | 2) + varint(inflated))]
        zeros = b"\0" * (1 << 20)
        for _ in range(inflated >> 20):
            out.append(co.compress(zeros))
        out.append(co.compress(tail))
        out.append(co.flush())
        _BOMBS[key] = b"".join(out)
    return _BOMBS[key]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compressed_call(path, message, metadata, timeout=60):
    """(result, peak RSS growth of the main server in MiB, its CPU seconds)
    of one call whose message is sent gzip-compressed over raw HTTP/2. (RSS
    alone can miss an allocation that reuses memory the server kept from an
    earlier one; CPU time cannot.)"""
    pid = MAIN["pid"]
    cpu0 = cpu_seconds(pid)
    base = rss_mib(pid)
    peak = [base]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mib(pid) or 0)
            time.sleep(0.005)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    c = h2raw.Conn(HOST, MAIN["grpc"])
    try:
        c.pump(lambda c: 3 in c.peer_settings, 3)
        sid, headers = c.request_frames(path, None, list(metadata) + [("grpc-encoding", "gzip")])
        c.send(headers)
        c.send_message(sid, message, compressed=True)
        r = c.wait_stream(sid, timeout)
    finally:
        c.close()
        stop.set()
        w.join()
    names = {"grpc-status 0": "OK", "grpc-status 8": "RESOURCE_EXHAUSTED",
             "grpc-status 12": "UNIMPLEMENTED", "grpc-status 16": "UNAUTHENTICATED",
             "grpc-status 3": "INVALID_ARGUMENT"}
    return names.get(r, r), peak[0] - base, cpu_seconds(pid) - cpu0


def small_compressed_ok():
    import zlib
    co = zlib.compressobj(6, zlib.DEFLATED, 31)
    msg = co.compress(ser(pb.TokenizeRequest(text="hello world"))) + co.flush()
    return compressed_call(SVC + "Tokenize", msg, md())[0]


# gRPC allows compressed messages: a small one is served (or refused with
# UNIMPLEMENTED if the server turned compression off).
add("grpc.gzip.small-message", "OK|UNIMPLEMENTED", small_compressed_ok)


def bomb(path, metadata, tail=b""):
    """256 MiB of zeros in ~260 KB of gzip: past the 4 MiB receive limit, so
    the call must be refused (RESOURCE_EXHAUSTED, or UNIMPLEMENTED without
    compression) without inflating it all: server RSS +<= 64 MiB and at most
    0.3 s of server CPU (inflating 256 MiB takes about a second)."""
    code, grown, cpu = compressed_call(path, gzip_bomb(256 << 20, tail), metadata)
    return "%s, server RSS +%.0f MiB, CPU %.2f s" % (code, grown, cpu), code in (
        "RESOURCE_EXHAUSTED", "UNIMPLEMENTED") and grown <= 64 and cpu <= 0.3


BOMB_EXPECT = "RESOURCE_EXHAUSTED|UNIMPLEMENTED without inflating (RSS +<= 64 MiB, CPU <= 0.3 s)"
# Health is open without a key (no --auth-health): anyone can send this.
add("grpc.gzip-bomb-256MiB.health-no-key", BOMB_EXPECT, lambda: bomb(HEALTH, []))
add("grpc.gzip-bomb-256MiB.Tokenize-with-key", BOMB_EXPECT,
    lambda: bomb(SVC + "Tokenize", md(), ser(pb.TokenizeRequest(text="hi"))))
add("grpc.gzip-bomb-256MiB.Tokenize-no-key", "UNAUTHENTICATED",
    lambda: compressed_call(SVC + "Tokenize", gzip_bomb(256 << 20), [])[0])
# The same check on a call refused for its key: nothing is inflated.
add("grpc.gzip-bomb-256MiB.Tokenize-no-key.cpu", "cheap refusal",
    lambda: (lambda r: ("cheap refusal" if r[2] <= 0.3 else "CPU %.2f s" % r[2]))(
        compressed_call(SVC + "Tokenize", gzip_bomb(256 << 20), [])))

# Last: nothing leaked over the whole run.
add("final.per-key-slots-free(alice)", FREE, per_key_slots_free)
add("final.per-key-slots-free(carol)", FREE, lambda: per_key_slots_free(CAROL))
add("final.gauges-back-to-0", "True", lambda: str(gauges_zero(6)[0]))


# --------------------------------------------------------------------------


def matches(got, expect):
    return got == expect or got in expect.split("|")


def main():
    names = [c.name for c in CASES]
    dups = sorted(set(n for n in names if names.count(n) > 1))
    if dups:
        sys.exit("probe.py: duplicate case names: %s" % dups)
    selected = [c for c in CASES if not ARGS.k or any(k in c.name for k in ARGS.k)]
    if ARGS.k and not any("drain" in k for k in ARGS.k):
        selected = [c for c in selected if c.target != "drain"]
    print("hostile probe: %d cases (main gRPC %d HTTP %d metrics %d; tls gRPC %d HTTP %d metrics %d;"
          " drain gRPC %d)" % (len(selected), MAIN["grpc"], MAIN["http"], MAIN["metrics"],
                               TLS["grpc"], TLS["http"], TLS["metrics"], DRAIN["grpc"]), flush=True)
    start = time.monotonic()
    passed = failed = skipped = 0
    failures = []
    for c in selected:
        t = time.monotonic()
        try:
            got = c.fn()
            if isinstance(got, tuple):
                got, ok = got
            else:
                ok = matches(got, c.expect)
        except Skip as e:
            print("SKIP  %s  (%s)" % (c.name, e), flush=True)
            skipped += 1
            continue
        except Exception as e:  # noqa: BLE001
            got, ok = "probe error: %r" % e, False
        after = CHECKS[c.target]()
        if after:
            got = "%s [after: %s]" % (got, after)
            ok = False
        took = time.monotonic() - t
        got_s = str(got)
        if len(got_s) > 160:
            got_s = got_s[:157] + "..."
        print("%s  %s  expected: %s  got: %s  (%.2fs)" % ("PASS" if ok else "FAIL", c.name, c.expect,
                                                           got_s, took), flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
            failures.append((c.name, c.expect, got))
    wall = time.monotonic() - start
    print("\nsummary: %d cases, %d passed, %d failed, %d skipped, %.1f s" % (
        len(selected), passed, failed, skipped, wall))
    for name, expect, got in failures:
        print("  FAILED %s: expected %s, got %s" % (name, expect, got if ARGS.v else str(got)[:200]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
