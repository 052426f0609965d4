#!/usr/bin/env python3
"""Writes tests/data/vocab/special.jsonl: llama.cpp's token ids for strings
with special-token text, with and without parse_special, no BOS.

  tests/scripts/make_gguf_special_reference.py /path/to/llama.cpp/bin

Each line: {"vocab": NAME, "text": ..., "parse_special": [...], "plain": [...]}.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

STRINGS = {
    "phi-3": ["<|user|>\nHello<|end|>\n<|assistant|>", "<|user|>   spaced  <|end|>  x",
              "</s>  after<s> b<unk> c"],
    "llama-spm": ["<s> [INST] hi [/INST]</s>", "a<s>b", "  <unk>x"],
    "llama-bpe": ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
                  "x <|eot_id|> y<|eom_id|>", "<|reserved_special_token_5|>z"],
    "qwen2": ["<|im_start|>user\n</s> hi<|im_end|>\n", "<think>x</think> <tool_call>",
              "<|endoftext|><|fim_prefix|>a"],
    "gemma-3": ["<start_of_turn>user\nHi  there<end_of_turn>\n<bos>", "<unused0>  <mask>x",
                "   \n\n  tabs\t\tend"],
}


def tokenize(binary, lib, vocab, text, parse_special):
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        cmd = [os.path.join(binary, "llama-tokenize"), "-m", vocab, "-f", path, "--ids",
               "--log-disable", "--no-bos"]
        if not parse_special:
            cmd.append("--no-parse-special")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=lib)).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        os.unlink(path)


def vocab_file(data, name, tmp):
    """NAME's vocabulary: data/ggml-vocab-NAME.gguf, or where it is stored
    gzipped (.gguf.gz), a copy unpacked into TMP."""
    path = os.path.join(data, f"ggml-vocab-{name}.gguf")
    if os.path.exists(path):
        return path
    out = os.path.join(tmp, os.path.basename(path))
    with gzip.open(path + ".gz", "rb") as f_in, open(out, "wb") as f_out:
        shutil.copyfileobj(f_in, f_out)
    return out


def main():
    binary = sys.argv[1]
    lib = os.path.join(binary, "..", "lib")
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.path.join(here, "..", "data", "vocab")
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, strings in STRINGS.items():
            vocab = vocab_file(data, name, tmp)
            for s in strings:
                lines.append(json.dumps({"vocab": name, "text": s,
                                         "parse_special": tokenize(binary, lib, vocab, s, True),
                                         "plain": tokenize(binary, lib, vocab, s, False)}))
    with open(os.path.join(data, "special.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
