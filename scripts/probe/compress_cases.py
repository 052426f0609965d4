"""Hostile-client probe: compressed messages (grpc-encoding: gzip), then the final
checks that nothing leaked over the whole run."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403
from conn_cases import FREE, per_key_slots_free, rss_mib


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
