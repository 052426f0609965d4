"""Writes a Hugging Face tokenizer.json (and tokenizer_config.json) for a
SentencePiece ("llama") vocabulary stored in a GGUF file, laid out as
transformers' LlamaConverter writes Llama 2's (legacy): BPE model with byte
fallback and fused unknowns, Prepend + Replace normalizers, no
pre-tokenizer, <s> added by a TemplateProcessing post-processor. The merges
are what SentencePieceExtractor derives from the pieces and scores: every
split of a piece into two pieces of the vocabulary, ordered by the merged
piece's score (highest first), ties by the halves' ids.

Used for the architectures whose real tokenizer.json is not in the
repository (phi-3, Llama 2 / Mistral style SentencePiece vocabularies).
"""
import json

from gguf_meta import read_metadata

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def build(gguf_path):
    meta = read_metadata(gguf_path)
    if meta.get("tokenizer.ggml.model") != "llama":
        raise ValueError("%s is not a SentencePiece ('llama') vocabulary" % gguf_path)
    tokens = meta["tokenizer.ggml.tokens"]
    scores = meta["tokenizer.ggml.scores"]
    types = meta["tokenizer.ggml.token_type"]
    # Padding pieces ([PAD...], type UNKNOWN beyond the unknown token, or
    # UNUSED) are not in the HF tokenizer; the model's vocab_size covers them.
    unk_id = meta.get("tokenizer.ggml.unknown_token_id", 0)
    keep = [i for i in range(len(tokens))
            if types[i] != UNUSED and not (types[i] == UNKNOWN and i != unk_id)]
    vocab = {tokens[i]: i for i in keep}
    mergeable = [i for i in keep if types[i] in (NORMAL, USER_DEFINED)]
    merges = []
    for i in mergeable:
        piece = tokens[i]
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        merges.extend((scores[i], left, right) for _, _, left, right in local)
    merges.sort(key=lambda m: -m[0])  # stable: ties keep the order above
    added = []
    for i in keep:
        if types[i] in (UNKNOWN, CONTROL, USER_DEFINED):
            added.append({"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False,
                          "special": types[i] != USER_DEFINED})
    bos = tokens[meta.get("tokenizer.ggml.bos_token_id", 1)]
    bos_id = vocab[bos]
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", True))
    single = ([{"SpecialToken": {"id": bos, "type_id": 0}}] if add_bos else []) + \
        [{"Sequence": {"id": "A", "type_id": 0}}]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": single,
            "pair": single + [{"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": tokens[unk_id],
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[left, right] for _, left, right in merges]},
    }
    eos = tokens[meta.get("tokenizer.ggml.eos_token_id", 2)]
    config = {"add_bos_token": add_bos,
              "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
              "bos_token": bos, "eos_token": eos, "unk_token": tokens[unk_id], "legacy": True,
              "clean_up_tokenization_spaces": False, "tokenizer_class": "LlamaTokenizer"}
    return tokenizer, config


def write(gguf_path, tokenizer_json_path, tokenizer_config_path):
    tokenizer, config = build(gguf_path)
    with open(tokenizer_json_path, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(tokenizer_config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
