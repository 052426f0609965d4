"""What the soak checks on the server afterwards: /metrics (gauges back to 0,
counters that balance with the orchestrator's own counts) and RSS."""

import re
import time
import urllib.request

# Metric names, as in server/metric_names.h.
SUCCESS = "tessera_request_success_total"
FAILURE = "tessera_request_failure_total"
FRONT = "tessera_front_requests_total"
AUTH = "tessera_auth_failures_total"
GAUGES = ["tessera_requests_running", "tessera_requests_waiting", "tessera_kv_cache_usage_ratio",
          "tessera_http_connections"]

SAMPLE = re.compile(r'^([a-z_]+)(?:\{([^}]*)\})? (\S+)$')


def scrape(address):
    """{(name, frozenset(labels)): value} of every sample on /metrics."""
    with urllib.request.urlopen("http://%s/metrics" % address, timeout=10) as reply:
        text = reply.read().decode()
    samples = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def total(samples, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def by_label(samples, name, label):
    out = {}
    for (n, ls), v in samples.items():
        if n == name:
            value = dict(ls).get(label)
            out[value] = out.get(value, 0) + v
    return out


def wait_gauges_zero(address, seconds=20):
    """Polls until every gauge in GAUGES is 0; returns the problems left."""
    deadline = time.time() + seconds
    while True:
        samples = scrape(address)
        left = {g: total(samples, g) for g in GAUGES if total(samples, g) != 0}
        if not left or time.time() > deadline:
            break
        time.sleep(0.5)
    return ["gauge %s = %g, not back to 0 %d s after the load ended" % (g, v, seconds)
            for g, v in left.items()]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def count(tally, kind, outcome=None):
    if outcome is None:
        return tally.started.get(kind, 0)
    return tally.outcomes.get((kind, outcome), 0)


def balance(samples, tally):
    """Compares the server's request counters with the orchestrator's counts.
    Returns (rows for the summary, problems)."""
    # Requests the orchestrator saw succeed.
    ok_known = count(tally, "stream", "OK") + count(tally, "chat", "OK") + count(tally, "greedy", "OK")
    # Cancelled and killed clients: the server says CANCELLED, except for a
    # stream that ended on the server while the signal was on its way (the
    # last message written, the client not yet reading it): that one is a
    # success. Such a success (one of the two ambiguities; see deadlines) must have
    # finished normally (length), never with finish_reason "cancelled".
    interrupted = count(tally, "cancel") + count(tally, "kill")
    want = {
        "INVALID_ARGUMENT": count(tally, "bad"),
        "UNAUTHENTICATED": count(tally, "unauth"),
    }
    success = total(samples, SUCCESS)
    failures = {code: v for code, v in by_label(samples, FAILURE, "code").items() if v}
    cancelled = failures.pop("CANCELLED", 0)
    # Calls whose deadline passed: DEADLINE_EXCEEDED, except when the server
    # read the call late. Its deadline comes from the grpc-timeout header as
    # it reads it, so it is later than the client's by that delay; the
    # client's own timer fires first and cancels, which the server sees as a
    # client cancel once the delay passes kDeadlineSlack (250 ms). On a
    # starved machine some do; most must still be DEADLINE_EXCEEDED.
    deadlines = count(tally, "deadline")
    exceeded = failures.pop("DEADLINE_EXCEEDED", 0)
    late = deadlines - exceeded
    problems = []
    rows = [("success (all finish reasons)", success, "%d known OK + 0..%d interrupted" %
             (ok_known, interrupted)),
            ("failure CANCELLED", cancelled, "%d interrupted + %d late deadlines - those OK" %
             (interrupted, max(late, 0))),
            ("failure DEADLINE_EXCEEDED", exceeded, "%d deadlines" % deadlines)]
    if not deadlines / 2 <= exceeded <= deadlines:
        problems.append("DEADLINE_EXCEEDED %d for %d calls past their deadline (want at least "
                        "half, at most all)" % (exceeded, deadlines))
    if success + cancelled != ok_known + interrupted + late:
        problems.append("success %d + CANCELLED %d != %d known OK + %d interrupted + %d "
                        "deadlines counted CANCELLED" %
                        (success, cancelled, ok_known, interrupted, late))
    if not ok_known <= success <= ok_known + interrupted:
        problems.append("success %d outside [%d, %d]" % (success, ok_known, ok_known + interrupted))
    odd = total(samples, SUCCESS, finish_reason="cancelled")
    if odd:
        problems.append("%d successes with finish_reason=\"cancelled\": a cancelled client "
                        "counted as a success" % odd)
    for code, n in want.items():
        got = failures.pop(code, 0)
        rows.append(("failure " + code, got, str(n)))
        if got != n:
            problems.append("failure{code=\"%s\"} = %d, the orchestrator made %d" % (code, got, n))
    for code, got in failures.items():
        rows.append(("failure " + code, got, "0"))
        problems.append("failure{code=\"%s\"} = %d, the orchestrator expected none" % (code, got))
    for (front, reason), n in sorted(tally.auth.items()):
        got = total(samples, AUTH, front=front, reason=reason)
        rows.append(("auth %s %s" % (front, reason), got, str(n)))
        if got != n:
            problems.append("%s{front=%s,reason=%s} = %d, want %d" % (AUTH, front, reason, got, n))
    auth_total = total(samples, AUTH)
    if auth_total != sum(tally.auth.values()):
        problems.append("%s sums to %d, want %d" % (AUTH, auth_total, sum(tally.auth.values())))
    # The HTTP front carried the chat streams and the keyless HTTP calls only.
    http_ok = total(samples, FRONT, front="http", result="success")
    http_failed = total(samples, FRONT, front="http", result="failure")
    want_http_failed = tally.auth.get(("http", "missing_key"), 0)
    rows.append(("http front success", http_ok, str(count(tally, "chat", "OK"))))
    rows.append(("http front failure", http_failed, str(want_http_failed)))
    if http_ok != count(tally, "chat", "OK") or http_failed != want_http_failed:
        problems.append("http front: %d success / %d failure, want %d / %d" %
                        (http_ok, http_failed, count(tally, "chat", "OK"), want_http_failed))
    return rows, problems
