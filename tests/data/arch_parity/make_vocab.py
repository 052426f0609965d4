#!/usr/bin/python3
"""Writes tests/data/arch_parity/printable-vocab.gguf: a 300-token
SentencePiece-style vocab whose pieces are all plain printable text (no byte
tokens), so that llama-server can return any generated token as text.

Usage: make_vocab.py [GGUF_PY_DIR]  (default /work/shared/tools/llama.cpp/gguf-py)
"""
import os
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/shared/tools/llama.cpp/gguf-py")
import gguf  # noqa: E402

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "printable-vocab.gguf")
w = gguf.GGUFWriter(out, arch="llama")
# A newline byte token and Phi-3's end tokens, which llama.cpp's vocab
# loader looks up by name, then 294 plain pieces.
tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<|endoftext|>", "<|end|>"] + [
    "\u2581w%d" % i for i in range(294)]
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores([0.0] * 6 + [-float(i) for i in range(294)])
w.add_token_types([2, 3, 3, 6, 3, 3] + [1] * 294)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out)
