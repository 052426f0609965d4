#!/usr/bin/python3
"""Parity check of Tessera against llama.cpp on models the test suite never
saw: for each architecture a small random-weight model with a real
vocabulary, written by tessera-make-model as a GGUF file and as a Hugging
Face folder (with the real tokenizer.json where the repository has one).

For each architecture x format:
  * the prompts are tokenized by llama.cpp (llama-server /tokenize, from the
    GGUF vocabulary) and by Tessera (tessera-cli tokenize), ids compared;
  * Tessera generates greedy tokens (temperature 0, EOS ignored) from the
    prompt text, and llama-server generates from the same prompt ids (the
    ones Tessera reports it used) with the GGUF model (f32 KV cache, flash
    attention off, one slot); the generated ids are compared.
The Hugging Face folder holds the GGUF file's weights, so the GGUF file is
llama.cpp's reference for both formats. Where the tokenizer.json's size
differs from config.json's vocab_size (Qwen, Phi-3, Gemma 3 as published),
an extra "hf-padded" row also serves a copy of the folder whose
tokenizer.json is padded (or trimmed) to vocab_size, as some converted
folders ship it: both layouts must give the same tokens. A tokenizer.json
that adds no BOS (the Llama 3 one here; transformers adds none either) is
compared with llama.cpp's ids less their leading BOS, marked "(no BOS*)".

Run through scripts/check-unseen-models.sh. Exit status: 0 all match,
1 a mismatch, 2 an error (a server or a tool failed).
"""
import argparse
import atexit
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spm_tokenizer_json  # noqa: E402
from gguf_meta import read_metadata  # noqa: E402

N_PREDICT = 32
PROMPTS = [
    "The quick brown fox jumps over the lazy dog. It's 2024, and naïve café owners in "
    "Zürich don't stop!",
    "def greet(name):\n    return f\"Hello, {name}!\"  # 東京 — Привет, мир 🎉\n\n\tEnd.",
]

# Shapes and seeds differ from tests/data/arch_parity (dims 64/96 with
# 2 or 7 layers, seed 20261201). Untied heads get a large output std so
# that greedy tokens are not degenerate; tied ones a smaller one (the
# head is the embedding too) and larger layers. Gemma 3 scales the
# embedding by sqrt(dim) and normalizes each layer's output, so its
# embedding std is smaller still, or it only repeats its last input token.
# The final logit softcap is monotonic: it cannot change greedy tokens.
UNTIED = ["--output-std", "0.6", "--weight-std", "0.1"]
TIED = ["--tied", "--output-std", "0.2", "--weight-std", "0.25"]
CASES = [
    {"name": "llama3", "vocab": "ggml-vocab-llama-bpe.gguf", "hf_tokenizer": "llama3",
     "args": ["--arch", "llama", "--dim", "96", "--layers", "3", "--heads", "6", "--kv-heads", "2",
              "--head-dim", "24", "--ffn", "192", "--rope-base", "500000",
              "--rope-scaling", "llama3", "--seed", "31337", "--dtype", "f32"] + UNTIED},
    {"name": "qwen2", "vocab": "ggml-vocab-qwen2.gguf", "hf_tokenizer": "qwen3",
     "args": ["--arch", "qwen2", "--dim", "128", "--layers", "2", "--heads", "8", "--kv-heads", "2",
              "--ffn", "256", "--rope-base", "1000000", "--seed", "4242", "--dtype", "f16"] + UNTIED},
    {"name": "qwen3", "vocab": "ggml-vocab-qwen2.gguf", "hf_tokenizer": "qwen3",
     "args": ["--arch", "qwen3", "--dim", "96", "--layers", "3", "--heads", "4", "--kv-heads", "1",
              "--head-dim", "48", "--ffn", "224", "--rope-base", "1000000", "--seed", "777",
              "--dtype", "f32"] + TIED},
    {"name": "phi3", "vocab": "ggml-vocab-phi-3.gguf", "hf_tokenizer": None,
     "args": ["--arch", "phi3", "--dim", "128", "--layers", "3", "--heads", "4", "--ffn", "320",
              "--seed", "9001", "--dtype", "f32"] + UNTIED},
    # Phi-3.5's long-rope, trained at 256 of 512: the long factors.
    {"name": "phi3.5", "vocab": "ggml-vocab-phi-3.gguf", "hf_tokenizer": None,
     "args": ["--arch", "phi3", "--dim", "192", "--layers", "2", "--heads", "4", "--ffn", "320",
              "--rope-scaling", "longrope", "--original-context", "256",
              "--seed", "3500", "--dtype", "f32"] + UNTIED},
    {"name": "gemma3", "vocab": "ggml-vocab-gemma-3.gguf", "hf_tokenizer": "gemma3",
     "args": ["--arch", "gemma3", "--dim", "128", "--layers", "6", "--heads", "4", "--kv-heads", "2",
              "--head-dim", "48", "--ffn", "512", "--rope-base", "1000000",
              "--sliding-window", "8", "--logit-softcap", "20", "--seed", "2718",
              "--dtype", "f32", "--tied", "--output-std", "0.05", "--weight-std", "0.7"]},
    {"name": "mistral-spm", "vocab": "ggml-vocab-llama-spm.gguf", "hf_tokenizer": None,
     "args": ["--arch", "llama", "--dim", "64", "--layers", "4", "--heads", "4", "--kv-heads", "1",
              "--ffn", "176", "--rope-base", "1000000", "--seed", "5150", "--dtype", "f16"] + UNTIED},
]
COMMON = ["--context", "512"]

CHILDREN = []  # running server processes


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Error(Exception):
    pass


class Server:
    """A child server process, its log file and a pid file entry."""

    def __init__(self, argv, log_path, pid_file):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        CHILDREN.append(self)
        if pid_file:
            with open(pid_file, "a") as f:
                f.write("%d\n" % self.proc.pid)

    def tail(self, n=15):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join("    | " + line for line in lines[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self in CHILDREN:
            CHILDREN.remove(self)


def stop_all():
    for child in list(CHILDREN):
        child.stop()


def on_signal(signum, _frame):
    stop_all()
    sys.exit(128 + signum)


# --- llama.cpp ---------------------------------------------------------------

def http_json(port, path, body=None, timeout=300):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return json.loads(e.read())
        except ValueError:
            raise Error("llama-server %s: HTTP %d" % (path, e.code))


class LlamaServer(Server):
    def __init__(self, llama_dir, model, work, pid_file):
        self.port = free_port()
        # Flash attention off: llama.cpp's CPU flash attention is ~1e-3 off
        # in logprobs (one-token prompt: -1.22220 against -1.222927 computed
        # in f64; -1.2229276 with it off), enough to flip near ties.
        argv = [os.path.join(llama_dir, "bin", "llama-server"), "-m", model,
                "--host", "127.0.0.1", "--port", str(self.port), "-c", "512",
                "-ctk", "f32", "-ctv", "f32", "-fa", "off", "-t", "2", "--no-warmup", "-np", "1"]
        super().__init__(argv, os.path.join(work, "llama-server.log"), pid_file)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Error("llama-server exited (status %d) loading %s:\n%s"
                            % (self.proc.returncode, model, self.tail()))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % self.port,
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise Error("llama-server did not become healthy:\n" + self.tail())

    def tokenize(self, text):
        reply = http_json(self.port, "/tokenize", {"content": text, "add_special": True})
        if "tokens" not in reply:
            raise Error("llama-server /tokenize: %s" % json.dumps(reply)[:300])
        return reply["tokens"]

    def _complete(self, ids, n, cache_prompt):
        return http_json(self.port, "/completion", {
            "prompt": ids, "n_predict": n, "temperature": 0.0, "top_k": 1,
            "ignore_eos": True, "cache_prompt": cache_prompt, "return_tokens": True})

    def generate(self, ids, n):
        """Greedy ids after `ids`, and how they were obtained. llama-server
        refuses a reply whose text holds invalid UTF-8 between tokens (its
        "Content-only" output parser), which random models with byte-level
        vocabularies produce; then the tokens are asked for one at a time
        (n_predict 1, the prompt cache keeping the earlier positions, so
        each step decodes one new token, as a single request would)."""
        reply = self._complete(ids, n, cache_prompt=False)
        if "tokens" in reply and len(reply["tokens"]) == n:
            return reply["tokens"], "one request"
        first_error = json.dumps(reply.get("error", reply))[:200]
        out = []
        for _ in range(n):
            step = self._complete(ids + out, 1, cache_prompt=True)
            if "tokens" not in step or len(step["tokens"]) != 1:
                raise Error("llama-server /completion failed at token %d: %s (first: %s)"
                            % (len(out), json.dumps(step)[:200], first_error))
            out += step["tokens"]
        return out, "token by token"


# --- Tessera -----------------------------------------------------------------

class TesseraServer(Server):
    def __init__(self, build, model, work, tag, pid_file):
        self.port = free_port()
        self.cli = os.path.join(build, "client", "tessera-cli")
        argv = [os.path.join(build, "server", "tessera-server"), "--model", model,
                "--host", "127.0.0.1", "--port", str(self.port), "--http-port", "0",
                "--metrics-port", "0", "--device", "cpu", "--threads", "2",
                "--kv-cache-dtype", "f32", "--cpu-matmul", "f32", "--log-level", "warn"]
        super().__init__(argv, os.path.join(work, "tessera-%s.log" % tag), pid_file)
        deadline = time.time() + 180
        while True:
            if self.proc.poll() is not None:
                raise Error("tessera-server exited (status %d) loading %s:\n%s"
                            % (self.proc.returncode, model, self.tail()))
            rc = subprocess.run(self._cli("info", "--wait", "1", "--json"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            if rc == 0:
                return
            if time.time() > deadline:
                raise Error("tessera-server did not start serving %s:\n%s" % (model, self.tail()))
            time.sleep(0.2)

    def _cli(self, *args):
        return [self.cli, "--server", "127.0.0.1:%d" % self.port, "--timeout", "300"] + list(args)

    def _json(self, *args):
        r = subprocess.run(self._cli(*args), capture_output=True)
        if r.returncode != 0:
            raise Error("tessera-cli %s failed (%d): %s" % (args[0], r.returncode,
                                                          r.stderr.decode("utf-8", "replace")[:300]))
        return json.loads(r.stdout)

    def tokenize(self, text):
        return self._json("tokenize", text, "--json")["token_ids"]

    def generate(self, text, n):
        reply = self._json("generate", text, "--json", "--temperature", "0", "--max-tokens", str(n),
                           "--ignore-eos", "--logprobs", "2")
        # Top-2 logprobs per position, to tell a near tie from a real difference.
        top2 = [[(t["token_id"], t["logprob"]) for t in lp.get("top", [])]
                for lp in reply.get("logprobs", [])]
        return reply["prompt_token_ids"], reply["token_ids"], top2


# --- the check ---------------------------------------------------------------

def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def around(ids, i, width=4):
    lo = max(0, i - 1)
    return ids[lo:i + width]


def tokenizer_json_size(tokenizer):
    ids = list(tokenizer["model"]["vocab"].values()) + [t["id"] for t in tokenizer["added_tokens"]]
    return max(ids) + 1


def adds_bos(tokenizer, config):
    """Whether transformers would add BOS with this tokenizer.json and
    tokenizer_config.json (add_special_tokens=True)."""
    if config.get("add_bos_token") is True:
        return True
    post = tokenizer.get("post_processor") or {}
    procs = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
    return any(p.get("type") == "TemplateProcessing" and
               any("SpecialToken" in item for item in p.get("single", [])[:1]) for p in procs)


def write_padded_folder(hf, tokenizer, gguf_tokens, dst):
    """A copy of folder `hf` (weights linked) whose tokenizer.json covers
    exactly the model's vocab_size: the GGUF vocabulary's padding pieces are
    added as special tokens, added tokens beyond vocab_size are dropped (as
    llama.cpp's converter drops them). Works around Engine::Load refusing
    tokenizers whose size differs from config.json's vocab_size."""
    vocab_size = len(gguf_tokens)
    t = json.loads(json.dumps(tokenizer))
    t["added_tokens"] = [a for a in t["added_tokens"] if a["id"] < vocab_size]
    size = tokenizer_json_size(t)
    for i in range(size, vocab_size):
        t["added_tokens"].append({"id": i, "content": gguf_tokens[i], "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False,
                                  "special": True})
    os.makedirs(dst)
    for name in os.listdir(hf):
        if name != "tokenizer.json":
            os.symlink(os.path.join(hf, name), os.path.join(dst, name))
    with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False)
    dropped = len(tokenizer["added_tokens"]) - sum(a["id"] < vocab_size
                                                     for a in tokenizer["added_tokens"])
    how = []
    if vocab_size > size:
        how.append("+%d pad tokens" % (vocab_size - size))
    if dropped:
        how.append("-%d beyond vocab_size" % dropped)
    return ", ".join(how)


def unpacked(path, work):
    """PATH, or where only PATH.gz exists (the repository stores its large
    test data gzipped), a copy of it unpacked into WORK."""
    if os.path.exists(path) or not os.path.exists(path + ".gz"):
        return path
    out = os.path.join(work, os.path.basename(path))
    with gzip.open(path + ".gz", "rb") as f_in, open(out, "wb") as f_out:
        shutil.copyfileobj(f_in, f_out)
    return out


def make_models(case, repo, build, vocab_dir, work):
    """Writes the models; returns (gguf path, [(format, folder, tokenizer
    note, adds_bos)], make-model args)."""
    make = os.path.join(build, "tools", "tessera-make-model")
    vocab = unpacked(os.path.join(vocab_dir, case["vocab"]), work)
    args = case["args"] + COMMON + ["--vocab-from", vocab]
    gguf = os.path.join(work, case["name"] + ".gguf")
    hf = os.path.join(work, case["name"] + "-hf")
    tok_json = os.path.join(work, case["name"] + "-tokenizer.json")
    tok_config = os.path.join(work, case["name"] + "-tokenizer_config.json")
    if case["hf_tokenizer"]:
        src = os.path.join(repo, "tests", "data", "tokenizers", case["hf_tokenizer"])
        with gzip.open(os.path.join(src, "tokenizer.json.gz"), "rb") as f_in, \
                open(tok_json, "wb") as f_out:
            shutil.copyfileobj(f_in, f_out)
        shutil.copyfile(unpacked(os.path.join(src, "tokenizer_config.json"), work), tok_config)
        note = "tokenizers/%s" % case["hf_tokenizer"]
    else:
        spm_tokenizer_json.write(vocab, tok_json, tok_config)
        note = "converted from GGUF"
    for cmd in ([make] + args + ["--out", gguf],
                [make] + args + ["--format", "hf", "--tokenizer-json", tok_json,
                                 "--tokenizer-config", tok_config, "--out", hf]):
        r = subprocess.run(cmd, capture_output=True)
        if r.returncode != 0:
            raise Error("%s failed: %s" % (" ".join(cmd), r.stderr.decode("utf-8", "replace")))
    with open(tok_json, encoding="utf-8") as f:
        tokenizer = json.load(f)
    with open(tok_config, encoding="utf-8") as f:
        config = json.load(f)
    bos = adds_bos(tokenizer, config)
    folders = [("hf", hf, note, bos)]
    gguf_tokens = read_metadata(vocab)["tokenizer.ggml.tokens"]
    if tokenizer_json_size(tokenizer) != len(gguf_tokens):
        how = write_padded_folder(hf, tokenizer, gguf_tokens, hf + "-padded")
        folders.append(("hf-padded", hf + "-padded", "%s %s" % (note, how), bos))
    return gguf, folders, args


def run_case(case, opts, work):
    """Returns the rows of one architecture."""
    case_dir = os.path.join(work, case["name"])
    os.makedirs(case_dir)
    gguf, folders, args = make_models(case, opts.repo, opts.build, opts.vocab_dir, case_dir)
    vocab_name = case["vocab"].replace("ggml-vocab-", "").replace(".gguf", "")
    formats = [("gguf", gguf, "GGUF " + vocab_name, True)] + folders
    tessera = {}
    for fmt, model, _, _ in formats:
        try:
            server = TesseraServer(opts.build, model, case_dir, fmt, opts.pid_file)
        except Error as e:
            tessera[fmt] = {"error": str(e)}
            continue
        try:
            tessera[fmt] = {"tokens": [server.tokenize(p) for p in PROMPTS],
                            "generations": [server.generate(p, N_PREDICT) for p in PROMPTS]}
        except Error as e:
            tessera[fmt] = {"error": str(e)}
        finally:
            server.stop()
    llama = LlamaServer(opts.llama_dir, gguf, case_dir, opts.pid_file)
    try:
        llama_tokens = [llama.tokenize(p) for p in PROMPTS]
        references = {}  # tuple(prompt ids) -> (ids, method)
        for result in tessera.values():
            for prompt_ids, _, _ in result.get("generations", []):
                key = tuple(prompt_ids)
                if key not in references:
                    references[key] = llama.generate(list(prompt_ids), N_PREDICT)
    finally:
        llama.stop()
    bos_id = read_metadata(gguf).get("tokenizer.ggml.bos_token_id")

    rows = []
    for fmt, _, tokenizer_note, file_adds_bos in formats:
        row = {"arch": case["name"], "format": fmt, "details": [], "tokenizer": tokenizer_note,
               "make_model_args": args}
        result = tessera[fmt]
        if "error" in result:
            row.update(tokenize="ERROR", generate="ERROR", status="ERROR")
            row["details"].append(result["error"])
            rows.append(row)
            continue
        tok_fail, gen_fail, methods, no_bos = [], [], set(), 0
        for k, (ours, theirs) in enumerate(zip(result["tokens"], llama_tokens)):
            if not file_adds_bos and theirs[:1] == [bos_id] and ours == theirs[1:]:
                # The tokenizer.json adds no BOS (transformers would not
                # either); llama.cpp's GGUF vocabulary does.
                no_bos += 1
                continue
            d = first_diff(theirs, ours)
            if d is not None:
                tok_fail.append("p%d@%d" % (k + 1, d))
                row["details"].append("tokenize prompt %d differs at %d: llama.cpp %s... tessera %s..."
                                      % (k + 1, d, around(theirs, d), around(ours, d)))
        if no_bos:
            row["details"].append("note: %d prompt(s) equal but for llama.cpp's leading BOS %d: "
                                  "this tokenizer.json adds none (nor would transformers)"
                                  % (no_bos, bos_id))
        for k, (prompt_ids, ours, top2) in enumerate(result["generations"]):
            if prompt_ids != result["tokens"][k]:
                row["details"].append("note: generate's prompt ids for prompt %d differ from "
                                      "tokenize's" % (k + 1))
            theirs, method = references[tuple(prompt_ids)]
            methods.add(method)
            d = first_diff(theirs, ours)
            if d is not None:
                gen_fail.append("p%d@%d" % (k + 1, d))
                gap = ""
                if d < len(top2) and len(top2[d]) == 2:
                    (a, la), (b, lb) = top2[d]
                    gap = " (tessera's top two there: %d %.5f, %d %.5f)" % (a, la, b, lb)
                row["details"].append("generate prompt %d differs at %d: llama.cpp %s... tessera %s...%s"
                                      % (k + 1, d, around(theirs, d), around(ours, d), gap))
        n = len(PROMPTS)
        if tok_fail:
            row["tokenize"] = "MISMATCH " + ",".join(tok_fail)
        else:
            row["tokenize"] = "MATCH %d/%d%s" % (n, n, " (no BOS*)" if no_bos else "")
        row["generate"] = "MISMATCH " + ",".join(gen_fail) if gen_fail else "MATCH %d/%d" % (n, n)
        row["llama_method"] = " / ".join(sorted(methods))
        row["status"] = "MISMATCH" if tok_fail or gen_fail else "MATCH"
        # Not vacuous: how many distinct ids the generations hold.
        row["distinct"] = "/".join(str(len(set(g[1]))) for g in result["generations"])
        row["generated"] = [g[1] for g in result["generations"]]
        rows.append(row)
    return rows


def print_table(rows, out):
    head = ("arch", "format", "tokenizer", "tokenize (ids)", "generate %d greedy" % N_PREDICT,
            "distinct", "result")
    table = [head] + [(r["arch"], r["format"], r["tokenizer"], r["tokenize"], r["generate"],
                       r.get("distinct", "-"), r["status"]) for r in rows]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(head))]
    for line in table:
        out.write("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() + "\n")
    for r in rows:
        for d in r["details"]:
            out.write("%s/%s: %s\n" % (r["arch"], r["format"], d))
    out.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--llama-dir", required=True)
    ap.add_argument("--vocab-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--pid-file", default="")
    ap.add_argument("--json", default="", help="also write the rows as JSON here")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    opts = ap.parse_args()
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    names = [c["name"] for c in CASES]
    wanted = opts.cases.split(",") if opts.cases else names
    unknown = [w for w in wanted if w not in names]
    if unknown:
        log("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(names)))
        return 2
    rows, errors = [], 0
    for case in CASES:
        if case["name"] not in wanted:
            continue
        vocab = os.path.join(opts.vocab_dir, case["vocab"])
        if not os.path.exists(vocab) and not os.path.exists(vocab + ".gz"):
            log("%s: SKIP (no %s)" % (case["name"], case["vocab"]))
            continue
        start = time.time()
        try:
            case_rows = run_case(case, opts, opts.work)
        except Error as e:
            errors += 1
            case_rows = [{"arch": case["name"], "format": "-", "tokenizer": "-", "tokenize": "ERROR",
                          "generate": "ERROR", "status": "ERROR", "details": [str(e)]}]
        for r in case_rows:
            log("%-12s %-9s %s  (tokenize %s, generate %s, llama.cpp %s) %.0fs"
                % (r["arch"], r["format"], r["status"], r["tokenize"], r["generate"],
                   r.get("llama_method", "-"), time.time() - start))
        rows += case_rows
    print_table(rows, sys.stdout)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"prompts": PROMPTS, "n_predict": N_PREDICT, "rows": rows}, f, indent=1,
                      ensure_ascii=False)
    if any(r["status"] == "ERROR" for r in rows) or errors:
        return 2
    return 1 if any(r["status"] != "MATCH" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
