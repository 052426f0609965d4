"""Hostile-client probe, section 4: deadlines."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403
from grpc_cases import chat_req
from conn_cases import FREE, per_key_slots_free


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
