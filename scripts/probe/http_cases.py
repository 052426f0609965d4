"""Hostile-client probe, section 2: bad inputs over HTTP (valid key, main server)."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403
from grpc_cases import MIB


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
