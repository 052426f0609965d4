#!/usr/bin/env python3
"""Hostile-client probe of tessera-server (the entry point and runner; the cases
are in the *_cases.py modules next to it). Started by
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
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the modules

from common import ARGS, DRAIN, MAIN, TLS  # noqa: E402  (parses --config)
from registry import CASES, CHECKS, Skip  # noqa: E402
import time  # noqa: E402

# The cases, registered in the order they run.
import grpc_cases  # noqa: E402,F401
import http_cases  # noqa: E402,F401
import conn_cases  # noqa: E402,F401
import deadline_cases  # noqa: E402,F401
import auth_cases  # noqa: E402,F401
import tls_cases  # noqa: E402,F401
import drain_cases  # noqa: E402,F401
import compress_cases  # noqa: E402,F401


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
