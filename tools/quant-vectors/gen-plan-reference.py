#!/usr/bin/python3
"""Writes tests/data/quant/plan_reference.json: the tensor types llama.cpp's
llama-quantize (no importance matrix) chooses for small models of several
architectures and shapes, for each file type tessera-quantize writes.

  /usr/bin/python3 tools/quant-vectors/gen-plan-reference.py MAKE_MODEL [LLAMA_CPP_DIR]

Each model entry lists its block count and, per file type, every tensor's
[name, dims (ggml order), input type, llama-quantize's output type]; a file
type llama-quantize refuses for a model is recorded as null.
"""
import json
import os
import subprocess
import sys
import tempfile

MIXES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
         "Q6_K"]

# name -> tessera-make-model flags
MODELS = {
    "llama-16L": "--dim 256 --layers 16 --heads 4 --kv-heads 2 --ffn 256 --vocab-size 300 --dtype f16",
    "llama-8L-f32": "--dim 256 --layers 8 --heads 4 --ffn 512 --vocab-size 300 --dtype f32",
    "llama-3L-ffn96": "--dim 256 --layers 3 --heads 2 --kv-heads 1 --ffn 96 --vocab-size 300 --dtype f16",
    "llama-tied-bf16": "--dim 256 --layers 2 --heads 4 --ffn 512 --vocab-size 300 --dtype bf16 --tied",
    "llama-dim96": "--dim 96 --layers 2 --heads 2 --ffn 256 --vocab-size 300 --dtype f16",
    "llama-dim160": "--dim 160 --layers 2 --heads 2 --ffn 256 --vocab-size 300 --dtype f32",
    "phi3-4L": "--arch phi3 --dim 256 --layers 4 --heads 4 --ffn 320 --vocab-size 300 --dtype f16",
    "qwen2-2L": "--arch qwen2 --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 --vocab-size 300 --dtype f16",
    "gemma3-2L": "--arch gemma3 --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 --vocab-size 300 --dtype f16",
    "gpt2-2L": "--arch gpt2 --dim 256 --layers 2 --heads 4 --ffn 1024 --vocab-size 300 --dtype f16",
}


def read_gguf(path, gguf):
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    block_count = int(r.fields[f"{arch}.block_count"].parts[-1][0])
    tensors = [(t.name, [int(d) for d in t.shape], t.tensor_type.name.lower()) for t in r.tensors]
    return block_count, tensors


def main():
    make_model = sys.argv[1]
    llama = sys.argv[2] if len(sys.argv) > 2 else "/work/shared/tools/llama.cpp"
    sys.path.insert(0, os.path.join(llama, "gguf-py"))
    import gguf  # noqa: E402
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(llama, "lib"))
    out = {"llama_cpp_commit": "34af94cd9ab277632e27caeec2d41de2fd091b31", "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in MODELS.items():
            src = os.path.join(tmp, name + ".gguf")
            subprocess.run([make_model, *flags.split(), "--seed", "1", "--out", src],
                           check=True, stdout=subprocess.DEVNULL)
            block_count, inputs = read_gguf(src, gguf)
            entry = {"name": name, "flags": flags, "block_count": block_count, "mixes": {}}
            for mix in MIXES:
                dst = os.path.join(tmp, f"{name}-{mix}.gguf")
                rc = subprocess.run([os.path.join(llama, "bin", "llama-quantize"), src, dst, mix, "1"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
                if rc != 0:
                    entry["mixes"][mix] = None
                    continue
                _, outputs = read_gguf(dst, gguf)
                out_types = {n: t for n, _, t in outputs}
                entry["mixes"][mix] = [[n, d, t, out_types[n]] for n, d, t in inputs]
            out["models"].append(entry)
            print(name, {m: (v is not None) for m, v in entry["mixes"].items()})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                        "quant", "plan_reference.json")
    # One tensor per line keeps the file readable and its diffs small.
    text = json.dumps(out, separators=(",", ":"))
    text = text.replace("],[", "],\n[").replace(":[[", ":[\n[")
    with open(path, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
