#!/usr/bin/python3
"""Regenerates tests/data/quant_parity: small random-weight models written by
tessera-make-model (f16), quantized by llama.cpp's llama-quantize, and
llama-server's greedy tokens on each quantized file, with the top three
log-probabilities of every step.

Usage: generate.py MAKE_MODEL_BINARY [LLAMA_CPP_DIR]
The quantized files are committed (they are what the test loads); the f16
originals are rebuilt from the flags in each case's JSON.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "arch_parity"))
from generate import PROMPT, N_PREDICT, post, wait_healthy  # noqa: E402

VOCAB = "tests/data/arch_parity/printable-vocab.gguf"
OUTPUT_STD = os.environ.get("OUTPUT_STD", "1.0")
WEIGHT_STD = os.environ.get("WEIGHT_STD", "0.02")
MODEL = ["--arch", "llama", "--dim", "256", "--layers", "1", "--heads", "4", "--kv-heads", "2",
         "--ffn", "256", "--vocab-from", VOCAB, "--context", "256", "--seed", "20261201",
         "--output-std", OUTPUT_STD, "--weight-std", WEIGHT_STD, "--dtype", "f16"]
TYPES = ["Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ4_NL"]


def run_case(qtype, make_model, llama_dir, out_dir, port):
    root = os.path.join(out_dir, "..", "..", "..")
    quantized = os.path.join(out_dir, qtype.lower() + ".gguf")
    with tempfile.TemporaryDirectory() as tmp:
        f16 = os.path.join(tmp, "f16.gguf")
        subprocess.run([make_model] + MODEL + ["--out", f16], check=True, cwd=root,
                       stdout=subprocess.DEVNULL)
        subprocess.run([os.path.join(llama_dir, "bin", "llama-quantize"), f16, quantized, qtype,
                        "2"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = os.path.join(llama_dir, "bin", "llama-server")
    proc = subprocess.Popen([server, "-m", quantized, "--port", str(port), "-c", "256",
                             "-ctk", "f32", "-ctv", "f32", "-t", "2", "--no-warmup", "-np", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(port, proc)
        reply = post(port, {"prompt": PROMPT, "n_predict": N_PREDICT, "temperature": 0.0,
                            "top_k": 1, "ignore_eos": True, "cache_prompt": False,
                            "return_tokens": True, "n_probs": 3})
    finally:
        proc.terminate()
        proc.wait()
    data = {
        "model_file": os.path.basename(quantized),
        "make_model_args": MODEL,
        "quantize": qtype,
        "prompt_ids": PROMPT,
        "generated_ids": reply["tokens"],
        # Per generated token: llama.cpp's three most likely tokens and their
        # log-probabilities (of the raw logits).
        "top_logprobs": [[[t["id"], t["logprob"]] for t in step["top_logprobs"]]
                         for step in reply["completion_probabilities"]],
        "source": "llama.cpp llama-quantize and llama-server (commit 34af94cd9), -ctk f32 "
                  "-ctv f32, temperature 0, top_k 1, ignore_eos",
    }
    with open(os.path.join(out_dir, qtype.lower() + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(qtype, reply["tokens"])


def main():
    make_model = os.path.abspath(sys.argv[1])
    llama_dir = sys.argv[2] if len(sys.argv) > 2 else "/work/shared/tools/llama.cpp"
    out_dir = os.path.dirname(os.path.abspath(__file__))
    for i, qtype in enumerate(sys.argv[3:] or TYPES):
        run_case(qtype, make_model, llama_dir, out_dir, 18700 + i)


if __name__ == "__main__":
    main()
