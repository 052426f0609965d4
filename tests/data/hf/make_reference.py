#!/usr/bin/python3
"""Writes reference.json: values computed the way llama.cpp's
convert_hf_to_gguf.py computes them (LlamaModel.permute with numpy reshape
and swapaxes; the llama3 rope_freqs factors in float32), for the C++ tests."""
import json
import math

import numpy as np


def permute(weights, n_head, n_head_kv):
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def llama3_factors(base, dim, factor, low_freq_factor, high_freq_factor, old_context_len):
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = []
    for freq in freqs.astype(np.float32):
        wavelen = np.float32(2 * math.pi) / freq
        if wavelen < high_freq_wavelen:
            out.append(1.0)
        elif wavelen > low_freq_wavelen:
            out.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return [float(np.float32(x)) for x in out]


rows = np.arange(24).reshape(24, 1)
ref = {
    "permute_q_rows_24_heads_3": permute(rows, 3, 3)[:, 0].tolist(),
    "permute_k_rows_16_heads_4_kv_2": permute(np.arange(16).reshape(16, 1), 4, 2)[:, 0].tolist(),
    "llama3": {
        "rope_theta": 500000.0, "head_dim": 64, "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
        "factors": llama3_factors(500000.0, 64, 32.0, 1.0, 4.0, 8192),
    },
}
with open("reference.json", "w") as f:
    json.dump(ref, f, indent=1)
    f.write("\n")
