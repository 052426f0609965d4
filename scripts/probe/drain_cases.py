"""Hostile-client probe, section 7: drain (drain server; SIGTERM with long streams
running)."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403


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
