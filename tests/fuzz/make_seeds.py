#!/usr/bin/env python3
"""Writes the generated part of the seed corpora under tests/fuzz/corpus/.

Small GGUF images (every metadata type, tensors, tiny llama and gpt2
vocabularies), tokenizer inputs from tests/data/tokenizers/corpus.jsonl.gz,
tessera.v1 request messages in protobuf wire format, safetensors images,
config.json / index / tokenizer.json files and OpenAI request bodies.
Chat templates are copied by hand (see corpus/template/README.md).
Run from anywhere: python3 tests/fuzz/make_seeds.py
"""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def write(harness, name, data):
    os.makedirs(os.path.join(CORPUS, harness), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(CORPUS, harness, name), "wb") as f:
        f.write(data)


# --- GGUF ------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, i) for i in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml_type, bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    offset = 0
    blobs = b""
    for name, dims, gtype, data in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, offset)
        pad = (-len(data)) % alignment
        blobs += data + b"\0" * pad
        offset += len(data) + pad
    out += b"\0" * ((-len(out)) % alignment)
    return out + blobs


def gguf_seeds():
    every = [
        ("general.architecture", STR, "llama"), ("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 65535),
        ("i16", I16, -300), ("u32", U32, 4000000000), ("i32", I32, -5), ("f32", F32, 0.5),
        ("bool", BOOL, True), ("u64", U64, 2**63), ("i64", I64, -2**40), ("f64", F64, 1e300),
        ("arr.i32", ARR, (I32, [1, -2, 3])), ("arr.f32", ARR, (F32, [1.5, -2.0])),
        ("arr.str", ARR, (STR, ["a", "", "\u00e9"])), ("arr.bool", ARR, (BOOL, [True, False])),
        ("arr.u64", ARR, (U64, [0, 2**64 - 1])),
        ("general.alignment", U32, 64),
    ]
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    f16 = struct.pack("<6H", *[0x3C00] * 6)
    write("gguf", "every_type.gguf", gguf(every, [("t.f32", [4], 0, f32), ("t.f16", [3, 2], 1, f16)],
                                          alignment=64))
    write("gguf", "v2_empty.gguf", gguf([], version=2))
    write("gguf", "nested_array.gguf", gguf([("arr.arr", ARR, (ARR, [(U8, [1, 2])]))]))
    write("gguf", "bf16.gguf", gguf([("general.architecture", STR, "qwen3")],
                                    [("w", [2, 2, 1, 1], 30, b"\x80\x3f" * 4)]))
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    pieces = ["<unk>", "<s>", "</s>"] + byte_tokens + ["\u2581", "\u2581a", "\u2581b", "ab", "\u2581ab", "<|eot_id|>"]
    types = [2, 3, 3] + [6] * 256 + [1, 1, 1, 1, 1, 4]
    write("gguf", "llama_vocab.gguf", gguf([
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, pieces)),
        ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(pieces))])),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
    ]))
    alphabet = [chr(c) for c in range(33, 127)] + ["\u0120", "\u010a"]
    merges = ["H e", "l l", "He ll", "\u0120 w", "o r"]
    toks = alphabet + ["He", "ll", "Hell", "\u0120w", "or", "<|endoftext|>"]
    write("gguf", "gpt2_vocab.gguf", gguf([
        ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "llama-bpe"),
        ("tokenizer.ggml.tokens", ARR, (STR, toks)),
        ("tokenizer.ggml.token_type", ARR, (I32, [1] * (len(toks) - 1) + [3])),
        ("tokenizer.ggml.merges", ARR, (STR, merges)),
    ]))


# --- tokenizer ---------------------------------------------------------------
def tokenizer_seeds():
    with gzip.open(os.path.join(ROOT, "tests/data/tokenizers/corpus.jsonl.gz"), "rt",
                   encoding="utf-8") as f:
        lines = [json.loads(l) for l in f]
    picks = [l for l in lines if l][:2400:60]
    for i, text in enumerate(picks):
        selector = (i % 5) | ((i & 1) << 4) | ((i & 2) << 4) | ((i & 4) << 4)
        write("tokenizer", "text_%02d" % i, bytes([selector]) + text.encode())
    write("tokenizer", "special_llama3", b"\x33<|begin_of_text|>Hi<|eot_id|>\xff\xfe")
    write("tokenizer", "ids_spm", b"\x40" + struct.pack("<8H", 0, 100, 2000, 40000, 65535, 12, 13, 14))


# --- protobuf wire ------------------------------------------------------------
def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def fld(num, v):
    """int -> varint field; bytes/str -> length-delimited; float -> fixed32."""
    if isinstance(v, float):
        return varint(num << 3 | 5) + struct.pack("<f", v)
    if isinstance(v, int):
        return varint(num << 3) + varint(v)
    b = v.encode() if isinstance(v, str) else v
    return varint(num << 3 | 2) + varint(len(b)) + b


def request_seeds():
    ids = fld(1, b"".join(varint(i) for i in [1, 15043, 3186, 31999]))  # packed TokenIds.ids
    sampling = fld(1, 0.7) + fld(2, 0.9) + fld(3, 40) + fld(4, 1234)
    stopping = fld(1, 32) + fld(2, "\n\n") + fld(2, "User:")
    write("request", "generate_text", b"\x00" + fld(1, "Once upon a time") + fld(3, sampling)
          + fld(4, stopping) + fld(5, 3) + fld(6, 1) + fld(7, "req-1") + fld(8, 5))
    write("request", "generate_ids", b"\x00" + fld(2, ids) + fld(4, fld(1, 2047)))
    write("request", "generate_bad", b"\x00" + fld(1, "x") + fld(3, fld(1, -1.0)) + fld(5, 99))
    write("request", "tokenize", b"\x01" + fld(1, "Hello world") + fld(2, 1))
    write("request", "detokenize", b"\x02" + fld(1, b"".join(varint(i) for i in [1, 2, 31999, 32000])))
    chat = fld(1, fld(1, "user") + fld(2, "Hi")) + fld(2, "[]") + fld(3, 1)
    write("request", "chat", b"\x03" + fld(1, chat) + fld(2, sampling) + fld(3, stopping) + fld(6, "c"))


# --- formats -------------------------------------------------------------------
def safetensors(header, data):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def format_seeds():
    st = safetensors({"__metadata__": {"format": "pt"},
                      "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                      "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
                      "c": {"dtype": "I64", "shape": [], "data_offsets": [22, 30]}}, bytes(30))
    write("format", "safetensors", b"\x00" + st)
    write("format", "safetensors_empty", b"\x00" + safetensors({}, b""))
    llama = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
             "vocab_size": 300, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
             "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False,
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    write("format", "config_llama.json", b"\x01" + json.dumps(llama).encode())
    for mt in ["qwen2", "qwen3", "gemma3_text", "phi3", "mistral"]:
        c = dict(llama, model_type=mt)
        del c["rope_scaling"]
        if mt == "gemma3_text":
            c.update(head_dim=16, sliding_window=128, query_pre_attn_scalar=16)
        write("format", "config_%s.json" % mt, b"\x01" + json.dumps(c).encode())
    index = {"metadata": {"total_size": 30},
             "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    write("format", "index.json", b"\x02" + json.dumps(index).encode())
    base = os.path.join(ROOT, "tests/data/tokenizers/tiny-spm")
    with gzip.open(os.path.join(base, "tokenizer.json.gz")) as f:
        tj = f.read()
    with open(os.path.join(base, "tokenizer_config.json"), "rb") as f:
        tc = f.read()
    write("format", "tokenizer_tiny_spm.json", b"\x03" + tj + b"\n#tokenizer_config.json\n" + tc)
    bytelevel = {"version": "1.0", "normalizer": {"type": "NFC"},
                 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\s+|\\d{1,3}|."},
                      "behavior": "Isolated", "invert": False},
                     {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                      "use_regex": False}]},
                 "added_tokens": [{"id": 10, "content": "<s>", "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": True}],
                 "post_processor": {"type": "TemplateProcessing",
                                    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                               {"Sequence": {"id": "A", "type_id": 0}}],
                                    "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [10], "tokens": ["<s>"]}}},
                 "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                             "use_regex": True},
                 "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
                           "byte_fallback": False, "ignore_merges": True,
                           "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "He": 5, "ll": 6,
                                     "Hell": 7, "Hello": 8, "w": 9, "<s>": 10},
                           "merges": [["H", "e"], ["l", "l"], ["He", "ll"], ["Hell", "o"]]}}
    write("format", "tokenizer_bytelevel.json", b"\x03" + json.dumps(bytelevel).encode()
          + b"\n#tokenizer_config.json\n" + b'{"bos_token": "<s>"}')
    # Components that match the empty string, or strip more than there is.
    variants = {
        "replace_regex": ("normalizer", {"type": "Replace", "pattern": {"Regex": "x*"}, "content": "_"}),
        "split_boundary": ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "\\b"},
                                             "behavior": "Isolated", "invert": False}),
        "split_inverted": ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "$"},
                                             "behavior": "MergedWithNext", "invert": True}),
        "strip_decoder": ("decoder", {"type": "Strip", "content": " ", "start": 10**9, "stop": 10**9}),
    }
    for name, (key, component) in variants.items():
        t = dict(bytelevel, **{key: component})
        write("format", "tokenizer_%s.json" % name, b"\x03" + json.dumps(t).encode()
              + b"\n#tokenizer_config.json\n" + b'{"bos_token": "<s>"}')


# --- OpenAI bodies --------------------------------------------------------------
def openai_seeds():
    bodies = {
        "completion": {"model": "m", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7,
                       "top_p": 0.9, "n": 2, "stop": ["\n", "END"], "seed": 42, "logprobs": 2,
                       "presence_penalty": 0.5, "frequency_penalty": -0.5, "stream": True,
                       "stream_options": {"include_usage": True}, "echo": False, "user": "u"},
        "completion_ids": {"model": "m", "prompt": [1, 2, 3, 31999], "max_tokens": 1},
        "chat": {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                 "max_completion_tokens": 32, "logprobs": True, "top_logprobs": 3, "top_k": 20,
                 "min_p": 0.05, "repetition_penalty": 1.1, "stop": "\n\n", "priority": -3},
        "chat_tools": {"model": "m", "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}],
            "tool_choice": "auto", "add_generation_prompt": False},
        "template": {"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True},
        "bad_types": {"model": 1, "prompt": {"a": 1}, "max_tokens": "9", "n": 99, "temperature": 1e308},
    }
    for name, body in bodies.items():
        write("openai", name + ".json", json.dumps(body))
    write("openai", "nested.json", "[" * 70 + "]" * 70)
    write("openai", "escapes.json", '{"prompt": "\\ud83d\\ude00 \\u00e9 \\n \\"", "max_tokens": 1e2}')


if __name__ == "__main__":
    gguf_seeds()
    tokenizer_seeds()
    request_seeds()
    format_seeds()
    openai_seeds()
