"""Hostile-client probe, section 3: connection abuse."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403
from grpc_cases import MIB, chat_req
from http_cases import hs


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


def others_served(other_call, ok):
    """Once a slow reader's stream is under way: another client's call
    (`other_call()` returns its code, `ok` when it worked) is served within
    1.5 s, and the engine goes idle."""
    time.sleep(0.3)
    t = time.monotonic()
    code = other_call()
    took = time.monotonic() - t
    if code != ok or took > 1.5:
        return "other client: %s after %.2f s" % (code, took)
    idle = wait_idle(10)
    return "others served, engine not blocked" if idle else "engine still busy after 10 s"


def slow_reader_grpc():
    """A raw HTTP/2 client with a stream window of 0 starts a long Generate
    and never reads: the engine must not wait on it (others are served at
    normal speed, and its generation finishes in the engine)."""
    c = h2raw.Conn(HOST, MAIN["grpc"], settings=struct.pack(">HI", 4, 0))
    try:
        c.request(SVC + "Generate", ser(long_gen(150)), md())
        return others_served(
            lambda: stream(WORK_CH, "Generate", gen(max_tokens=5), md(BOB), timeout=10)[0], "OK")
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
        return others_served(lambda: hs(completion(max_tokens=5)), "200")
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
