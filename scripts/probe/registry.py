"""Hostile-client probe: the after-case checks and the case registry (case, add)."""
from common import *  # noqa: F401,F403


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
