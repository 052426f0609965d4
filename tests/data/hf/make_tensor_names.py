#!/usr/bin/python3
"""Writes tensor_names.json: for each supported family, the tensors of a
2-layer Hugging Face checkpoint (names as the transformers models save them)
and the GGUF name gguf-py's TensorNameMap gives each. Run with
PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 make_tensor_names.py."""
import json

import gguf

LAYER = {
    "llama": ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
              "self_attn.v_proj.weight", "self_attn.o_proj.weight",
              "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
              "mlp.down_proj.weight"],
    "phi3": ["input_layernorm.weight", "self_attn.qkv_proj.weight", "self_attn.o_proj.weight",
             "post_attention_layernorm.weight", "mlp.gate_up_proj.weight", "mlp.down_proj.weight"],
}
LAYER["mistral"] = LAYER["llama"]  # convert_hf_to_gguf.py: MistralForCausalLM is a LlamaModel
LAYER["qwen2"] = LAYER["llama"] + ["self_attn.q_proj.bias", "self_attn.k_proj.bias",
                                   "self_attn.v_proj.bias"]
LAYER["qwen3"] = LAYER["llama"] + ["self_attn.q_norm.weight", "self_attn.k_norm.weight"]
LAYER["gemma3_text"] = LAYER["qwen3"] + ["pre_feedforward_layernorm.weight",
                                         "post_feedforward_layernorm.weight"]
ARCH = {"llama": gguf.MODEL_ARCH.LLAMA, "mistral": gguf.MODEL_ARCH.LLAMA,
        "qwen2": gguf.MODEL_ARCH.QWEN2,
        "qwen3": gguf.MODEL_ARCH.QWEN3, "phi3": gguf.MODEL_ARCH.PHI3,
        "gemma3_text": gguf.MODEL_ARCH.GEMMA3}

out = {}
for model_type, arch in ARCH.items():
    names = gguf.get_tensor_name_map(arch, 2)
    hf = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    hf += [f"model.layers.{b}.{n}" for b in range(2) for n in LAYER[model_type]]
    pairs = []
    for n in hf:
        g = names.get_name(n, try_suffixes=(".weight", ".bias"))
        assert g is not None, n
        pairs.append([n, g])
    out[model_type] = sorted(pairs)
with open("tensor_names.json", "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
