#!/usr/bin/python3
"""Regenerates tests/data/arch_parity/*.json: llama.cpp's greedy tokens for
small random-weight models written by tessera-make-model.

Usage: generate.py MAKE_MODEL_BINARY [LLAMA_CPP_DIR]
(LLAMA_CPP_DIR defaults to /work/shared/tools/llama.cpp). Each case's model
is written with the exact command stored in its JSON file, served by
llama-server (f32 KV cache), and asked for greedy tokens (temperature 0,
top-k 1, EOS ignored) after a fixed prompt given as token ids.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

PROMPT = [1, 17, 3, 250, 9, 100, 42, 7, 64, 12, 200, 33]
N_PREDICT = 24
VOCAB = "tests/data/arch_parity/printable-vocab.gguf"  # relative to the repository root
COMMON = ["--vocab-from", VOCAB, "--context", "256", "--seed", "20261201"]
# Untied heads are large (peaked distributions); a tied head is the input
# embedding too, so it stays smaller and the layers larger, or the model
# only repeats its input.
UNTIED = ["--output-std", "0.5", "--weight-std", "0.125"]
TIED = ["--tied", "--output-std", "0.15", "--weight-std", "0.3"]
CASES = {
    "llama3": ["--arch", "llama", "--dim", "64", "--layers", "2", "--heads", "4",
               "--kv-heads", "2", "--head-dim", "32", "--ffn", "128", "--rope-base", "500000",
               "--rope-scaling", "llama3"] + UNTIED,
    "llama_tied": ["--arch", "llama", "--dim", "64", "--layers", "2", "--heads", "4",
                   "--ffn", "128"] + TIED,
    "qwen2": ["--arch", "qwen2", "--dim", "64", "--layers", "2", "--heads", "4",
              "--kv-heads", "2", "--ffn", "160", "--rope-base", "1000000"] + UNTIED,
    "qwen3": ["--arch", "qwen3", "--dim", "64", "--layers", "2", "--heads", "4",
              "--kv-heads", "2", "--head-dim", "32", "--ffn", "160", "--rope-base", "1000000"]
             + TIED,
    "phi3": ["--arch", "phi3", "--dim", "96", "--layers", "2", "--heads", "4", "--ffn", "160"]
            + UNTIED,
    "gemma3": ["--arch", "gemma3", "--dim", "64", "--layers", "7", "--heads", "4",
               "--kv-heads", "1", "--head-dim", "32", "--ffn", "128", "--rope-base", "1000000",
               "--sliding-window", "4"] + TIED,
}
# f16 weights: llama.cpp rounds the activations to f16 for these products,
# Tessera multiplies in f32; with peaked distributions the tokens agree.
CASES["qwen2_f16"] = CASES["qwen2"] + ["--dtype", "f16"]
CASES["gemma3_f16"] = CASES["gemma3"] + ["--dtype", "f16"]
# Phi-3.5's long-rope: llama-server's context (-c, one slot; it never goes
# below 256) picks the long factors when it is past the training context
# (--original-context), the short ones otherwise. Tessera is given the same
# context (EngineOptions::context_length).
CASES["phi3_longrope"] = CASES["phi3"] + ["--rope-scaling", "longrope",
                                          "--original-context", "128"]
CASES["phi3_longrope_short"] = CASES["phi3"] + ["--rope-scaling", "longrope",
                                                "--original-context", "256", "--context", "512"]
CONTEXT = {"phi3_longrope_short": 256}


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def wait_healthy(port, proc):
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError("llama-server exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError("llama-server did not become healthy")


def run_case(name, flags, make_model, llama_dir, out_dir, port):
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, name + ".gguf")
        common = COMMON if "--context" not in flags else [
            a for i, a in enumerate(COMMON)
            if a != "--context" and (i == 0 or COMMON[i - 1] != "--context")]
        args = flags + common + ([] if "--dtype" in flags else ["--dtype", "f32"])
        root = os.path.join(out_dir, "..", "..", "..")
        subprocess.run([make_model] + args + ["--out", model], check=True, cwd=root)
        server = os.path.join(llama_dir, "bin", "llama-server")
        context = CONTEXT.get(name, 256)  # -c
        proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-c", str(context),
                                 "-ctk", "f32", "-ctv", "f32", "-t", "2", "--no-warmup",
                                 "-np", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_healthy(port, proc)
            reply = post(port, {"prompt": PROMPT, "n_predict": N_PREDICT, "temperature": 0.0,
                                "top_k": 1, "ignore_eos": True, "cache_prompt": False,
                                "return_tokens": True, "n_probs": 1})
        finally:
            proc.terminate()
            proc.wait()
    data = {
        "make_model_args": args,
        "prompt_ids": PROMPT,
        "generated_ids": reply["tokens"],
        "source": "llama.cpp llama-server (commit 34af94cd9), -ctk f32 -ctv f32, "
                  "temperature 0, top_k 1, ignore_eos",
    }
    if name in CONTEXT:
        data["context"] = CONTEXT[name]
    # ignore_eos makes llama.cpp never pick EOS; its most likely token before
    # that mask, where it differs (an EOS that Tessera, which keeps EOS
    # sampleable, picks there).
    tops = [p["top_logprobs"][0]["id"] for p in reply["completion_probabilities"]]
    data["unmasked_top_ids"] = {str(i): t for i, (t, g) in
                                enumerate(zip(tops, reply["tokens"])) if t != g}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(name, reply["tokens"])


def main():
    make_model = os.path.abspath(sys.argv[1])
    llama_dir = sys.argv[2] if len(sys.argv) > 2 else "/work/shared/tools/llama.cpp"
    out_dir = os.path.dirname(os.path.abspath(__file__))
    only = sys.argv[3:] or list(CASES)
    for i, name in enumerate(only):
        run_case(name, CASES[name], make_model, llama_dir, out_dir, 18650 + i)


if __name__ == "__main__":
    main()
