#!/usr/bin/env python3
"""The HTTP front against bad clients, many connections and the gRPC front.

Starts a tessera-http-test-server on the bundled stories260K model, then:
  * sends 50+ malformed or invalid HTTP requests over raw sockets, each with
    the status and OpenAI error body it must get, checking /health after
    each one (the server must stay healthy);
  * holds 2,000 concurrent keep-alive connections and answers a request on
    every one of them;
  * checks that a greedy completion over HTTP equals Generate over gRPC,
    token for token (same logprobs, same text).

  * runs tessera-bench's openai-completions and openai-chat backends against
    it (when a tessera-bench path is given).

Usage: http_test.py <tessera-http-test-server> [tessera-bench]; needs TESSERA_SOURCE_DIR,
python3-grpcio, python3-protobuf and protoc (the gRPC check is skipped
without them).
"""
import json
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time

SERVER = os.path.realpath(sys.argv[1])
BENCH = os.path.realpath(sys.argv[2]) if len(sys.argv) > 2 else None
SRC = os.environ["TESSERA_SOURCE_DIR"]
MODEL = os.path.join(SRC, "models", "stories260K.gguf")
MAX_BODY = 1 << 20
HEADER_TIMEOUT = 2  # seconds
failures = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def recv_response(sock, timeout=10):
    """(status, headers dict, body bytes) of one HTTP response, or None on close."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if status == 100:
        return recv_response_after(sock, body, timeout)
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def recv_response_after(sock, rest, timeout):
    class Prefixed:
        def __init__(self):
            self.rest = rest

        def settimeout(self, t):
            sock.settimeout(t)

        def recv(self, n):
            if self.rest:
                out, self.rest = self.rest, b""
                return out
            return sock.recv(n)

    return recv_response(Prefixed(), timeout)


def exchange(raw, timeout=10, pause_after=None):
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    try:
        if pause_after is not None:
            sock.sendall(raw[:pause_after])
            time.sleep(0.2)
            raw = raw[pause_after:]
        try:
            sock.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading it all
        return recv_response(sock, timeout)
    except (ConnectionResetError, socket.timeout):
        return None
    finally:
        sock.close()


def post(path, body, content_type="application/json", extra=b""):
    if isinstance(body, str):
        body = body.encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n"
    return head + body


def get(path, method="GET"):
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def healthy():
    r = exchange(get("/health"))
    return r is not None and r[0] == 200


def check(name, raw, status, param=None, code=None, **kwargs):
    r = exchange(raw, **kwargs)
    problem = None
    if r is None:
        problem = "no response"
    elif r[0] != status:
        problem = f"status {r[0]}, want {status}: {r[2][:200]!r}"
    elif status >= 400:
        try:
            err = json.loads(r[2])["error"]
            assert isinstance(err["message"], str) and err["message"]
            assert isinstance(err["type"], str) and err["type"]
            assert "param" in err and "code" in err
            if param is not None and err["param"] != param:
                problem = f"param {err['param']!r}, want {param!r}"
            if code is not None and err["code"] != code:
                problem = f"code {err['code']!r}, want {code!r}"
        except Exception as e:  # noqa: BLE001
            problem = f"not an OpenAI error body ({e}): {r[2][:200]!r}"
    if problem is None and not healthy():
        problem = "the server is unhealthy afterwards"
    print(("ok   " if problem is None else "FAIL ") + name + ("" if problem is None else ": " + problem))
    if problem:
        failures.append(name)
    return r


def completion(**fields):
    body = {"model": MODEL_ID, "prompt": "Once upon a time", "max_tokens": 2}
    body.update(fields)
    return post("/v1/completions", json.dumps(body))


def chat(**fields):
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    body.update(fields)
    return post("/v1/chat/completions", json.dumps(body))


def bad_request_cases():
    c = "/v1/completions"
    check("valid completion", completion(), 200)
    check("unknown fields are ignored", completion(frobnicate=[1, {"a": 2}], logit_bias={}), 200)
    check("valid chat", chat(), 200)
    check("priority (vLLM's extension)", completion(priority=-1), 200)
    check("Expect: 100-continue", post(c, json.dumps({"model": MODEL_ID, "prompt": "a", "max_tokens": 1}),
                                       extra=b"Expect: 100-continue\r\n"), 200)
    check("malformed JSON", post(c, '{"model": '), 400)
    check("JSON array body", post(c, "[1, 2]"), 400)
    check("empty body", post(c, ""), 400)
    check("trailing garbage", post(c, '{"model": "m", "prompt": "a"} x'), 400)
    check("NaN literal", post(c, '{"model": "%s", "prompt": "a", "temperature": NaN}' % MODEL_ID), 400)
    check("Infinity literal", post(c, '{"model": "%s", "prompt": "a", "top_p": Infinity}' % MODEL_ID), 400)
    check("duplicate keys", post(c, '{"model": "%s", "prompt": "a", "prompt": "b"}' % MODEL_ID), 400)
    check("duplicate keys nested", post(c, '{"model": "%s", "prompt": "a", "x": {"k": 1, "k": 2}}' % MODEL_ID), 400)
    check("invalid UTF-8", post(c, b'{"model": "m", "prompt": "\xff\xfe"}'), 400)
    check("lone surrogate escape", post(c, '{"model": "%s", "prompt": "\\ud800"}' % MODEL_ID), 400)
    check("comments", post(c, '{"model": "%s", /* c */ "prompt": "a"}' % MODEL_ID), 400)
    check("nesting 100 deep", post(c, '{"model": "%s", "prompt": "a", "x": %s%s}' % (MODEL_ID, "[" * 100, "]" * 100)), 400)
    check("nesting 500,000 deep", post(c, "[" * 500000), 400)
    check("prompt is a number", completion(prompt=5), 400, param="prompt")
    check("prompt is an object", completion(prompt={"a": 1}), 400, param="prompt")
    check("two prompts", completion(prompt=["a", "b"]), 400, param="prompt")
    check("empty prompt", completion(prompt=""), 400, param="prompt")
    check("token id out of vocabulary", completion(prompt=[1, 999999]), 400, param="prompt")
    check("negative token id", completion(prompt=[1, -5]), 400, param="prompt")
    check("temperature is a string", completion(temperature="hot"), 400, param="temperature")
    check("temperature negative", completion(temperature=-1), 400, param="temperature")
    check("temperature 1e400", post(c, '{"model": "%s", "prompt": "a", "temperature": 1e400}' % MODEL_ID), 400)
    check("top_p 0", completion(top_p=0), 400, param="top_p")
    check("top_p 2", completion(top_p=2), 400, param="top_p")
    check("top_k huge", completion(top_k=10**12), 400, param="top_k")
    check("min_p 1.5", completion(min_p=1.5), 400, param="min_p")
    check("presence_penalty 3", completion(presence_penalty=3), 400, param="presence_penalty")
    check("frequency_penalty is a bool", completion(frequency_penalty=True), 400, param="frequency_penalty")
    check("repetition_penalty 0", completion(repetition_penalty=0), 400, param="repetition_penalty")
    check("max_tokens is a string", completion(max_tokens="5"), 400, param="max_tokens")
    check("max_tokens 1.5", completion(max_tokens=1.5), 400, param="max_tokens")
    check("max_tokens 0", completion(max_tokens=0), 400, param="max_tokens")
    check("max_tokens -1", completion(max_tokens=-1), 400, param="max_tokens")
    check("max_tokens 1e30", post(c, '{"model": "%s", "prompt": "a", "max_tokens": 1e30}' % MODEL_ID), 400, param="max_tokens")
    check("max_tokens 10^25", post(c, '{"model": "%s", "prompt": "a", "max_tokens": 10000000000000000000000000}' % MODEL_ID), 400, param="max_tokens")
    check("max_tokens beyond the context", completion(max_tokens=1000000), 400)
    check("n 0", completion(n=0), 400, param="n")
    check("n 1000", completion(n=1000), 400, param="n")
    check("seed is a string", completion(seed="7"), 400, param="seed")
    check("stop is a number", completion(stop=5), 400, param="stop")
    check("stop list of numbers", completion(stop=[1]), 400, param="stop")
    check("stop empty string", completion(stop=[""]), 400, param="stop")
    check("too many stop strings", completion(stop=[str(i) for i in range(9)]), 400, param="stop")
    check("stream is a string", completion(stream="yes"), 400, param="stream")
    check("stream_options not an object", completion(stream=True, stream_options=1), 400, param="stream_options")
    check("logprobs 21", completion(logprobs=21), 400, param="top_logprobs")
    check("echo true", completion(echo=True), 400, param="echo")
    check("response_format text", completion(response_format={"type": "text"}), 200)
    check("response_format json_object", chat(response_format={"type": "json_object"}), 400,
          param="response_format")
    check("response_format json_schema", completion(response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}), 400,
        param="response_format")
    check("response_format not an object", completion(response_format="json"), 400,
          param="response_format")
    check("user is a number", completion(user=5), 400, param="user")
    check("ignore_eos is a string", completion(ignore_eos="no"), 400, param="ignore_eos")
    check("priority is a string", completion(priority="high"), 400, param="priority")
    check("priority out of range", completion(priority=10**9), 400, param="priority")
    check("chat priority out of range", chat(priority=-10**9), 400, param="priority")
    check("model missing", post(c, '{"prompt": "a"}'), 400, param="model")
    check("model is a number", completion(model=1), 400, param="model")
    check("unknown model", completion(model="gpt-5"), 404)
    check("chat without messages", post("/v1/chat/completions", json.dumps({"model": MODEL_ID})), 400, param="messages")
    check("chat messages not a list", chat(messages="hi"), 400, param="messages")
    check("chat message without role", chat(messages=[{"content": "hi"}]), 400, param="messages")
    check("chat top_logprobs without logprobs", chat(top_logprobs=2), 400, param="top_logprobs")
    check("chat logprobs is a number", chat(logprobs=1), 400, param="logprobs")
    check("chat content not text", chat(messages=[{"role": "user", "content": 5}]), 400)
    check("apply-template malformed", post("/apply-template", "{"), 400)
    check("unknown route", get("/v2/anything"), 404)
    check("root", get("/"), 404)
    r = check("GET on a POST route", get(c), 405)
    if r and r[1].get("allow") != "POST":
        failures.append("405 without Allow: POST")
    check("POST on /health", post("/health", "{}"), 405)
    check("DELETE /v1/models", get("/v1/models", method="DELETE"), 405)
    check("text/plain body", post(c, json.dumps({"model": MODEL_ID, "prompt": "a"}), content_type="text/plain"), 415)
    check("form body", post(c, "a=b", content_type="application/x-www-form-urlencoded"), 415)
    check("100 MB body (Content-Length)", (f"POST {c} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                          f"Content-Length: {100 << 20}\r\n\r\n").encode() + b"{" * 1000, 413)
    check("chunked body over the limit",
          (f"POST {c} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
           f"{MAX_BODY + 10:x}\r\n").encode() + b" " * (MAX_BODY + 10) + b"\r\n0\r\n\r\n", 413)
    check("20 KB header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431)
    check("garbage request line", b"GARBAGE\r\n\r\n", 400)
    check("bad HTTP version", b"GET /health HTTP/9.9\r\n\r\n", 400)
    check("bad Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400)
    check("bad chunk size", (f"POST {c} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").encode(), 400)
    check("request split in two sends", completion(), 200, pause_after=20)
    head_then_get()


def head_then_get():
    # A response to HEAD carries no body: on a kept-alive connection the next
    # response must parse from its first byte.
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    sock.settimeout(10)
    sock.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    sock.close()
    first, _, rest = data.partition(b"\r\n\r\n")
    report("HEAD is answered without a body, then the next request",
           first.startswith(b"HTTP/1.1 405 ") and rest.startswith(b"HTTP/1.1 200 "))


def bytes_during_a_generation():
    # Bytes sent while a response streams are kept for a pipelined request, up
    # to one request's size; a client that keeps sending is cut off. (On the
    # server whose steps sleep 10 ms: the stream lasts 4 s, longer than
    # sending takes.)
    # This server has the default --http-max-body (8 MiB): 72 MiB is 9 times
    # one request's size.
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    sock.settimeout(10)
    sock.sendall(completion(stream=True, max_tokens=400, ignore_eos=True))
    sent, closed = 0, False
    junk = b"G" * (1 << 20)
    try:
        sock.recv(100)
        while sent < 72 << 20:
            sock.sendall(junk)
            sent += len(junk)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    except socket.timeout:
        pass  # stopped reading without closing: not what is wanted
    sock.close()
    report("a client sending during a generation is cut off after one request's size "
           f"(closed after {sent >> 20} MiB)", closed and healthy())


def slow_and_abandoned_clients():
    # Slowloris: a header sent a byte at a time is cut off after the header timeout.
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    start = time.time()
    closed = False
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    for byte in request:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        r, _, _ = select.select([sock], [], [], 0.2)
        if r and not sock.recv(1024):
            closed = True
            break
        if time.time() - start > HEADER_TIMEOUT + 5:
            break
    sock.close()
    report("slowloris header is cut off", closed and healthy())
    # A body that never comes.
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    sock.settimeout(HEADER_TIMEOUT + 5)
    try:
        closed = sock.recv(1024) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    sock.close()
    report("an abandoned body is cut off", closed and healthy())
    # Half-closed: a partial request then FIN gets a 400 (or nothing) and
    # the connection is closed.
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len")
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(5)
    try:
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        closed = data == b"" or data.startswith(b"HTTP/1.1 400 ")
    except socket.timeout:
        closed = False
    sock.close()
    report("a half-closed partial request is closed", closed and healthy())
    # Half-closed after a whole request: the answer still comes.
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    sock.sendall(get("/health"))
    sock.shutdown(socket.SHUT_WR)
    r = recv_response(sock)
    sock.close()
    report("a half-closed whole request is answered", r is not None and r[0] == 200)
    # A client that vanishes mid-stream, many times over.
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
        sock.sendall(completion(stream=True, max_tokens=500, ignore_eos=True))
        sock.recv(100)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # RST
    running = wait_metric("tessera_requests_running", lambda v: v == 0)
    report("vanished streaming clients free their requests", running and healthy())


def report(name, ok):
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures.append(name)


def metric(name):
    r = exchange(get("/metrics"))
    total = 0.0
    for line in r[2].decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_metric(name, predicate, seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        if predicate(metric(name)):
            return True
        time.sleep(0.1)
    return False


def many_connections(count=2000):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1000), hard))
    socks = []
    for _ in range(count):
        socks.append(socket.create_connection(("127.0.0.1", HTTP_PORT)))
    time.sleep(1)
    held = wait_metric("tessera_http_connections", lambda v: v >= count)
    for s in socks:
        s.sendall(get("/health"))
    answered = 0
    for s in socks:
        r = recv_response(s)
        answered += r is not None and r[0] == 200
    for s in socks:
        s.close()
    print(f"     {answered} of {count} concurrent connections answered")
    report(f"{count} concurrent connections are held and answered", held and answered == count)


def grpc_parity(work):
    try:
        import grpc  # noqa: F401
    except ImportError:
        print("skip gRPC parity: no python3-grpcio")
        return
    subprocess.run(["protoc", f"--proto_path={SRC}/proto", f"--python_out={work}",
                    f"{SRC}/proto/tessera/v1/inference.proto"], check=True)
    sys.path.insert(0, work)
    import grpc
    from tessera.v1 import inference_pb2 as pb
    prompt = "Once upon a time, there was a"
    request = pb.GenerateRequest(text=prompt, logprobs=True)
    request.sampling.temperature = 0
    request.stopping.max_tokens = 60
    with grpc.insecure_channel(f"127.0.0.1:{GRPC_PORT}") as channel:
        call = channel.unary_stream("/tessera.v1.Inference/Generate",
                                    request_serializer=pb.GenerateRequest.SerializeToString,
                                    response_deserializer=pb.GenerateResponse.FromString)
        reply = pb.GenerateResponse()
        for message in call(request, timeout=30):
            reply.text += message.text
            reply.token_ids.extend(message.token_ids)
            reply.logprobs.extend(message.logprobs)
            reply.prompt_token_ids.extend(message.prompt_token_ids)
    r = exchange(completion(prompt=prompt, temperature=0, max_tokens=60, logprobs=0))
    body = json.loads(r[2])
    choice = body["choices"][0]
    grpc_logprobs = [round(t.logprob, 4) for t in reply.logprobs]
    http_logprobs = [round(v, 4) for v in choice["logprobs"]["token_logprobs"]]
    same = (choice["text"] == reply.text and grpc_logprobs == http_logprobs and
            len(reply.token_ids) == body["usage"]["completion_tokens"] == len(choice["logprobs"]["tokens"]))
    report(f"greedy HTTP equals gRPC Generate ({len(reply.token_ids)} tokens)", same)
    grpc_chat(pb, grpc)
    # Token ids as the prompt give the same text as the text prompt.
    r2 = exchange(completion(prompt=list(reply.prompt_token_ids), temperature=0, max_tokens=60))
    body2 = json.loads(r2[2])
    same = "choices" in body2 and body2["choices"][0]["text"] == reply.text
    report("a token-id prompt equals its text", same)
    if not same:
        print(body2)


def grpc_chat(pb, grpc):
    """RenderChat equals /apply-template; Chat streams what the HTTP chat endpoint returns."""
    messages = [{"role": "system", "content": "Tell a story."}, {"role": "user", "content": "Once upon a time"}]
    chat = pb.RenderChatRequest(messages=[pb.ChatMessage(**m) for m in messages])
    with grpc.insecure_channel(f"127.0.0.1:{GRPC_PORT}") as channel:
        render = channel.unary_unary("/tessera.v1.Inference/RenderChat",
                                     request_serializer=pb.RenderChatRequest.SerializeToString,
                                     response_deserializer=pb.RenderChatResponse.FromString)
        rendered = render(chat, timeout=10).prompt
        request = pb.ChatRequest(chat=chat)
        request.sampling.temperature = 0
        request.stopping.max_tokens = 24
        stream = channel.unary_stream("/tessera.v1.Inference/Chat",
                                      request_serializer=pb.ChatRequest.SerializeToString,
                                      response_deserializer=pb.GenerateResponse.FromString)
        text = "".join(m.text for m in stream(request, timeout=30))
        complete = channel.unary_unary("/tessera.v1.Inference/ChatComplete",
                                       request_serializer=pb.ChatRequest.SerializeToString,
                                       response_deserializer=pb.CompleteResponse.FromString)
        unary = complete(request, timeout=30).text
        try:
            render(pb.RenderChatRequest(), timeout=10)
            empty_refused = False
        except grpc.RpcError as e:
            empty_refused = e.code() == grpc.StatusCode.INVALID_ARGUMENT
    r = exchange(post("/apply-template", json.dumps({"messages": messages})))
    report("gRPC RenderChat equals /apply-template", r[0] == 200 and json.loads(r[2])["prompt"] == rendered)
    r = exchange(post("/v1/chat/completions", json.dumps(
        {"model": MODEL_ID, "messages": messages, "max_tokens": 24, "temperature": 0})))
    http_text = json.loads(r[2])["choices"][0]["message"]["content"] if r[0] == 200 else None
    report("gRPC Chat and ChatComplete equal the HTTP chat completion", text == unary == http_text and text)
    report("gRPC RenderChat refuses no messages", empty_refused)


def bench_backends():
    if BENCH is None:
        return
    for backend in ("openai-completions", "openai-chat"):
        out = subprocess.run([BENCH, "--backend", backend, "--base-url", f"http://127.0.0.1:{HTTP_PORT}/v1",
                              "--concurrency", "4", "--num-requests", "8", "--max-tokens", "16",
                              "--ignore-eos", "--input-len", "16", "--warmup", "0", "--json"],
                             capture_output=True, text=True, timeout=120)
        ok = out.returncode == 0
        if ok:
            result = json.loads(out.stdout)
            ok = (result["completed"] == 8 and result["failed"] == 0 and
                  result["total_output_tokens"] == 8 * 16)
        report(f"tessera-bench --backend {backend}", ok)
        if not ok:
            print(out.stdout[-2000:], out.stderr[-2000:])


def front_metrics():
    text = exchange(get("/metrics"))[2].decode()
    http_ok = 'tessera_front_requests_total{front="http",result="success"}' in text
    values = {}
    for line in text.splitlines():
        if line.startswith("tessera_front_requests_total{"):
            values[line.split(" ")[0]] = float(line.rsplit(" ", 1)[1])
    report("requests are counted by front",
           http_ok and values.get('tessera_front_requests_total{front="http",result="success"}', 0) > 0 and
           values.get('tessera_front_requests_total{front="http",result="failure"}', 0) > 0)


def drain(server):
    """SIGTERM while a stream runs: new requests get 503, the stream ends with [DONE], exit 0."""
    sock = socket.create_connection(("127.0.0.1", HTTP_PORT))
    sock.sendall(completion(stream=True, max_tokens=400, ignore_eos=True))
    data = sock.recv(4096)
    server.send_signal(15)
    time.sleep(0.3)
    r = exchange(completion())
    report("a draining server answers 503", r is not None and r[0] == 503)
    r = exchange(get("/health"))
    report("a draining server's health is 503", r is not None and r[0] == 503)
    sock.settimeout(30)
    try:
        while b"0\r\n\r\n" not in data[-16:]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    sock.close()
    report("a stream in flight finishes during the drain", b"data: [DONE]" in data)
    rc = server.wait(timeout=30)
    report("SIGTERM drains and exits 0", rc == 0)


def main():
    global HTTP_PORT, GRPC_PORT, MODEL_ID
    HTTP_PORT, GRPC_PORT = free_port(), free_port()
    work = tempfile.mkdtemp()
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen(
        [SERVER, "--model", MODEL, "--host", "127.0.0.1", "--port", str(GRPC_PORT), "--metrics-port", "0",
         "--http-port", str(HTTP_PORT), "--device", "cpu", "--threads", "1", "--kv-cache-memory", "32M",
         "--http-max-body", str(MAX_BODY), "--http-header-timeout", str(HEADER_TIMEOUT), "--log-level", "warn"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                if healthy():
                    break
            except OSError:
                pass
            time.sleep(0.1)
        models = json.loads(exchange(get("/v1/models"))[2])
        MODEL_ID = models["data"][0]["id"]
        bad_request_cases()
        slow_and_abandoned_clients()
        many_connections()
        grpc_parity(work)
        bench_backends()
        front_metrics()
        server.send_signal(15)
        server.wait(timeout=30)
        # The drain needs a stream still running when SIGTERM comes: a second
        # server whose every step sleeps 10 ms (400 tokens: 4 s).
        server = subprocess.Popen(
            [SERVER, "--model", MODEL, "--host", "127.0.0.1", "--port", str(GRPC_PORT),
             "--metrics-port", "0", "--http-port", str(HTTP_PORT), "--device", "cpu",
             "--threads", "1", "--kv-cache-memory", "32M", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, TESSERA_TESTING_STEP_DELAY_MS="10"))
        for _ in range(100):
            try:
                if healthy():
                    break
            except OSError:
                pass
            time.sleep(0.1)
        bytes_during_a_generation()
        drain(server)
    finally:
        if server.poll() is None:
            server.kill()
        log.close()
        if failures:
            print(open(os.path.join(work, "server.log")).read()[-3000:])
    print(f"{len(failures)} failures" if failures else "PASS")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
