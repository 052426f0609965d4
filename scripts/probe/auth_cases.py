"""Hostile-client probe, section 5: auth bypass attempts (main server: --api-key-file,
health open)."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403
from grpc_cases import GARBAGE, MIB, chat_req
from http_cases import hs


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
