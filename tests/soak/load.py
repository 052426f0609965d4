"""The soak's load: each worker starts requests with the project's clients
(tessera-bench, tessera-cli) or, for malformed requests and probes, with
Python's grpc, and records in a Tally what it started and what it saw.

Kinds of request and the outcome each is expected to have:
  stream   tessera-bench over gRPC Generate          OK
  chat     tessera-bench over the HTTP chat front    OK
  greedy   tessera-cli generate, temperature 0       OK
  cancel   tessera-cli, SIGINT mid-stream            CANCELLED (or OK, see checks.py)
  kill     tessera-cli, SIGKILL mid-stream           CANCELLED (or OK, see checks.py)
  deadline tessera-cli --timeout shorter than the stream   DEADLINE_EXCEEDED
  bad      invalid fields (tessera-cli, Python)      INVALID_ARGUMENT
  unauth   no key, a wrong key, a malformed header   UNAUTHENTICATED
"""

import json
import os
import random
import select
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import grpc

# Long enough that no cancelled, killed or deadline stream can finish first:
# about 1000 tokens/s for one stream of the soak model on an idle core, and
# prompt + 3500 tokens fit the context of 4096.
LONG_STREAM_TOKENS = 3500


class Tally:
    """Thread-safe counts: requests started by kind, outcomes by (kind, outcome),
    auth refusals by (front, reason), and the problems found."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started = {}
        self.outcomes = {}
        self.auth = {}
        self.problems = []
        self.bench_reports = []
        self.not_connected = {}

    def start(self, kind, n=1):
        with self.lock:
            self.started[kind] = self.started.get(kind, 0) + n

    def outcome(self, kind, outcome, n=1):
        with self.lock:
            key = (kind, outcome)
            self.outcomes[key] = self.outcomes.get(key, 0) + n

    def unreachable(self, kind):
        """A tessera-cli that exited 3: it never connected (the channel was not
        READY when its call failed), so the server never saw its request.
        Taken back from the started count, and counted on its own."""
        with self.lock:
            self.started[kind] -= 1
            self.not_connected[kind] = self.not_connected.get(kind, 0) + 1

    def refused(self, front, reason):
        with self.lock:
            self.auth[(front, reason)] = self.auth.get((front, reason), 0) + 1

    def problem(self, text):
        with self.lock:
            self.problems.append(text)
        print("PROBLEM: " + text, flush=True)


class Env:
    """Where the server is and how to reach it."""

    def __init__(self, args):
        self.cli = args.cli
        self.bench = args.bench
        self.grpc = args.grpc
        self.http = args.http
        self.key = args.key


def cli_command(env, args, key=True, timeout=None):
    cmd = [env.cli, "--server", env.grpc]
    if key:
        cmd += ["--api-key", key if isinstance(key, str) else env.key]
    if timeout is not None:
        cmd += ["--timeout", "%.3f" % timeout]
    return cmd + args


def clean_env():
    """The client's environment, without a TESSERA_API_KEY of the caller's."""
    e = dict(os.environ)
    e.pop("TESSERA_API_KEY", None)
    return e


def run_cli(env, args, key=True, timeout=None, wait=120):
    proc = subprocess.run(cli_command(env, args, key, timeout), capture_output=True, text=True,
                          timeout=wait, env=clean_env())
    return proc.returncode, proc.stdout, proc.stderr


def greedy_tokens(env, tally, prompt):
    """tessera-cli generate at temperature 0: the token ids, or None."""
    tally.start("greedy")
    rc, out, err = run_cli(env, ["generate", prompt, "--temperature", "0", "--max-tokens", "48",
                                 "--ignore-eos", "--json"])
    if rc != 0:
        tally.outcome("greedy", "rc=%d" % rc)
        tally.problem("greedy generate exited %d: %s" % (rc, err.strip()))
        return None
    tally.outcome("greedy", "OK")
    return json.loads(out)["token_ids"]


def random_prompt(rng):
    words = ["once", "upon", "a", "time", "there", "was", "little", "dog", "who", "liked",
             "to", "run", "in", "the", "park", "with", "her", "friend", "sun", "tree"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))


def bench_worker(env, tally, kind, limit, concurrency, extra):
    """One tessera-bench run (`limit`: its --duration or --num-requests);
    every request it started must succeed."""
    cmd = [env.bench, "--api-key", env.key, "--concurrency", str(concurrency),
           "--warmup", "0", "--input-len", "16", "--ignore-eos", "--temperature", "0.8",
           "--timeout", "300", "--json"] + limit + extra
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=7200,
                          env=clean_env())
    if proc.returncode != 0:
        tally.problem("tessera-bench (%s) exited %d: %s" % (kind, proc.returncode,
                                                            proc.stderr.strip()[-500:]))
        return
    report = json.loads(proc.stdout)
    completed, failed = report["completed"], report["failed"]
    tally.start(kind, completed + failed)
    tally.outcome(kind, "OK", completed)
    for code, n in report.get("errors", {}).items():
        tally.outcome(kind, code, n)
    tally.bench_reports.append((kind, report))
    if failed:
        tally.problem("tessera-bench (%s): %d of %d requests failed: %s" %
                      (kind, failed, completed + failed, report.get("errors")))


def wait_first_byte(proc, limit):
    """Waits until the process printed something (the stream has started)."""
    ready, _, _ = select.select([proc.stdout], [], [], limit)
    return bool(ready) and len(os.read(proc.stdout.fileno(), 1)) == 1


def interrupt_worker(env, tally, kind, stop, seed):
    """tessera-cli streams interrupted mid-stream: SIGINT (kind 'cancel': the
    client cancels the call) or SIGKILL (kind 'kill': the connection drops)."""
    rng = random.Random(seed)
    sig = signal.SIGINT if kind == "cancel" else signal.SIGKILL
    while not stop.is_set():
        args = ["generate", random_prompt(rng), "--max-tokens", str(LONG_STREAM_TOKENS),
                "--ignore-eos", "--temperature", "1", "--seed", str(rng.randrange(1 << 30))]
        proc = subprocess.Popen(cli_command(env, args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=clean_env())
        tally.start(kind)
        if not wait_first_byte(proc, 60):
            proc.kill()
            _, err = proc.communicate()
            if proc.returncode == 3:
                tally.unreachable(kind)
                continue
            tally.outcome(kind, "no-output")
            tally.problem("%s: tessera-cli printed nothing within 60 s (exit %d): %s" %
                          (kind, proc.returncode, err.decode(errors="replace").strip()))
            continue
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            tally.problem("%s: tessera-cli did not exit within 60 s of the signal" % kind)
        rc = proc.returncode
        want = 130 if kind == "cancel" else -signal.SIGKILL
        tally.outcome(kind, "interrupted" if rc == 130 else "killed" if rc < 0 else "rc=%d" % rc)
        if rc != want:
            tally.problem("%s: tessera-cli exited %d, want %d: %s" %
                          (kind, rc, want, err.decode(errors="replace").strip()))
        time.sleep(rng.uniform(0.1, 0.4))


def deadline_worker(env, tally, stop, seed):
    """tessera-cli streams whose deadline passes long before they could finish
    (LONG_STREAM_TOKENS take 1.25 s at the fastest seen, 2800 tokens/s)."""
    rng = random.Random(seed)
    while not stop.is_set():
        deadline = rng.uniform(0.4, 0.9)
        args = ["generate", random_prompt(rng), "--max-tokens", str(LONG_STREAM_TOKENS),
                "--ignore-eos", "--temperature", "1"]
        tally.start("deadline")
        rc, _, err = run_cli(env, args, timeout=deadline)
        if rc == 3:
            tally.unreachable("deadline")
            continue
        got = "DEADLINE_EXCEEDED" if rc == 4 and "DEADLINE_EXCEEDED" in err else "rc=%d" % rc
        tally.outcome("deadline", got)
        if got != "DEADLINE_EXCEEDED":
            tally.problem("deadline %.2f s: tessera-cli exited %d: %s" % (deadline, rc, err.strip()))
        time.sleep(rng.uniform(0.1, 0.4))


# Flags the server refuses as INVALID_ARGUMENT (tessera-cli leaves range
# checks to the server). The prompt is a few tokens, the context 4096.
BAD_CLI_FLAGS = [
    ["--temperature", "-1"],
    ["--top-p", "2"],
    ["--min-p", "1.5"],
    ["--max-tokens", "5000"],
    ["--stop", ""],
    ["--logprobs", "50"],
    ["--stop-token-id", "999999"],
]

# Raw requests for Python: (method, bytes) refused as INVALID_ARGUMENT.
BAD_RAW = [
    # GenerateRequest{token_ids: [99999]}: beyond the 32000-token vocabulary.
    ("/tessera.v1.Inference/Generate", b"\x12\x05\x0a\x03\x9f\x8d\x06"),
    # A length-delimited field that runs past the end: not a GenerateRequest.
    ("/tessera.v1.Inference/Generate", b"\x0a\x05ab"),
    # ChatRequest without messages.
    ("/tessera.v1.Inference/Chat", b""),
]


def stream_code(channel, method, body, metadata, timeout=30):
    try:
        for _ in channel.unary_stream(method)(body, metadata=metadata, timeout=timeout):
            pass
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def bad_worker(env, tally, stop, seed):
    rng = random.Random(seed)
    metadata = [("authorization", "Bearer " + env.key)]
    with grpc.insecure_channel(env.grpc) as channel:
        i = 0
        while not stop.is_set():
            if i % 2 == 0:
                flags = BAD_CLI_FLAGS[(i // 2) % len(BAD_CLI_FLAGS)]
                rc, _, err = run_cli(env, ["generate", random_prompt(rng)] + flags)
                if rc == 3:
                    tally.start("bad")
                    tally.unreachable("bad")
                    i += 1
                    continue
                got = "INVALID_ARGUMENT" if rc == 4 and "INVALID_ARGUMENT" in err else "rc=%d" % rc
                what = "tessera-cli generate %s" % " ".join(flags)
            else:
                method, body = BAD_RAW[(i // 2) % len(BAD_RAW)]
                got = stream_code(channel, method, body, metadata)
                err, what = got, "%s %r" % (method, body)
            tally.start("bad")
            tally.outcome("bad", got)
            if got != "INVALID_ARGUMENT":
                tally.problem("bad request %s: got %s, want INVALID_ARGUMENT (%s)" %
                              (what, got, err.strip()))
            i += 1
            time.sleep(rng.uniform(0.05, 0.3))


def http_unauthenticated(env):
    """POST /v1/chat/completions without a key: the HTTP status."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4}).encode()
    request = urllib.request.Request("http://%s/v1/chat/completions" % env.http, data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as e:
        return e.code


def unauth_worker(env, tally, stop, seed):
    """Calls without a valid key; each one is refused and counted by front
    and reason in tessera_auth_failures_total."""
    rng = random.Random(seed)
    wrong = env.key[::-1]
    with grpc.insecure_channel(env.grpc) as channel:
        i = 0
        while not stop.is_set():
            case = i % 4
            tally.start("unauth")
            if case in (0, 1):
                key = False if case == 0 else wrong
                rc, _, err = run_cli(env, ["generate", random_prompt(rng)], key=key)
                if rc == 3:
                    tally.unreachable("unauth")
                    i += 1
                    continue
                got = "UNAUTHENTICATED" if rc == 4 and "UNAUTHENTICATED" in err else "rc=%d" % rc
                front, reason = "grpc", "missing_key" if case == 0 else "invalid_key"
            elif case == 2:
                got = stream_code(channel, "/tessera.v1.Inference/Generate", b"\x0a\x02hi",
                                  [("authorization", "Basic " + env.key)])
                front, reason, err = "grpc", "malformed_header", got
            else:
                status = http_unauthenticated(env)
                got = "UNAUTHENTICATED" if status == 401 else "http %d" % status
                front, reason, err = "http", "missing_key", got
            tally.outcome("unauth", got)
            tally.refused(front, reason)
            if got != "UNAUTHENTICATED":
                tally.problem("unauthenticated call (%s, %s): got %s" % (front, reason, err))
            i += 1
            time.sleep(rng.uniform(0.05, 0.3))


def health_status(channel):
    """grpc.health.v1 Check of the server (""): SERVING, NOT_SERVING... or the error."""
    try:
        reply = channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=5)
    except grpc.RpcError as e:
        return "rpc error " + e.code().name
    return {b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}.get(reply, "reply %r" % reply)


class HealthPoller(threading.Thread):
    """Polls health every second until stopped; every answer but SERVING is a problem."""

    def __init__(self, env, tally, rss):
        super().__init__(daemon=True)
        self.env, self.tally, self.rss = env, tally, rss
        self.stop = threading.Event()
        self.polls = 0
        self.rss_trace = []  # (seconds since start, KiB), every 5 s

    def run(self):
        start = time.time()
        with grpc.insecure_channel(self.env.grpc) as channel:
            while not self.stop.is_set():
                status = health_status(channel)
                if self.polls % 5 == 0:
                    self.rss_trace.append((time.time() - start, self.rss()))
                self.polls += 1
                if status != "SERVING":
                    self.tally.problem("health at %s: %s" % (time.strftime("%H:%M:%S"), status))
                self.stop.wait(1.0)


def run_phase(env, tally, seed, seconds=None, requests=None):
    """The whole mix, for `seconds`, or until the streaming clients made
    `requests` requests (a phase measured in work, not time: a warm-up that
    lasts on a starved machine); then waits for every client to end."""
    stop = threading.Event()
    if seconds is not None:
        limits = [["--duration", "%.1f" % seconds]] * 2
    else:
        limits = [["--num-requests", str(requests)], ["--num-requests", str(requests // 2)]]
    benches = [
        (bench_worker, (env, tally, "stream", limits[0], 32,
                        ["--server", env.grpc, "--max-tokens", "48"])),
        (bench_worker, (env, tally, "chat", limits[1], 16,
                        ["--backend", "openai-chat", "--base-url", "http://" + env.http,
                         "--max-tokens", "32"])),
    ]
    others = [
        (interrupt_worker, (env, tally, "cancel", stop, seed + 1)),
        (interrupt_worker, (env, tally, "kill", stop, seed + 2)),
        (deadline_worker, (env, tally, stop, seed + 3)),
        (bad_worker, (env, tally, stop, seed + 4)),
        (unauth_worker, (env, tally, stop, seed + 5)),
    ]
    bench_threads = [start_guarded(tally, fn, fn_args) for fn, fn_args in benches]
    other_threads = [start_guarded(tally, fn, fn_args) for fn, fn_args in others]
    if seconds is not None:
        stop.wait(seconds)
    for t in bench_threads:
        t.join()
    stop.set()
    for t in other_threads:
        t.join()


def start_guarded(tally, fn, fn_args):
    def guarded():
        try:
            fn(*fn_args)
        except Exception as e:  # a crash of the harness is a failure too
            tally.problem("%s crashed: %r" % (fn.__name__, e))
    t = threading.Thread(target=guarded, daemon=True)
    t.start()
    return t
