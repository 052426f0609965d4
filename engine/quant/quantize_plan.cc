#include "engine/quant/quantize_plan.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <numeric>

#include "engine/quant/quant.h"

namespace tessera::quant {
namespace {

constexpr uint32_t kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12,
                   kQ5_K = 13, kQ6_K = 14;

struct MixName {
  QuantMix mix;
  std::string_view name;
  uint32_t base;
};
constexpr std::array<MixName, 10> kMixes = {{
    {QuantMix::kQ4_0, "Q4_0", kQ4_0},
    {QuantMix::kQ4_1, "Q4_1", kQ4_1},
    {QuantMix::kQ8_0, "Q8_0", kQ8_0},
    {QuantMix::kQ5_0, "Q5_0", kQ5_0},
    {QuantMix::kQ5_1, "Q5_1", kQ5_1},
    {QuantMix::kQ4_K_S, "Q4_K_S", kQ4_K},
    {QuantMix::kQ4_K_M, "Q4_K_M", kQ4_K},
    {QuantMix::kQ5_K_S, "Q5_K_S", kQ5_K},
    {QuantMix::kQ5_K_M, "Q5_K_M", kQ5_K},
    {QuantMix::kQ6_K, "Q6_K", kQ6_K},
}};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Elements per block of a ggml type (1 for the float types).
int64_t BlockElems(uint32_t ggml_type) {
  const std::optional<QuantType> qt = QuantTypeFromGgml(ggml_type);
  return qt ? Info(*qt).block_elems : 1;
}

// ggml_n_dims: trailing dims of 1 do not count.
int CountDims(const std::vector<uint64_t>& dims) {
  int n = static_cast<int>(dims.size());
  while (n > 1 && dims[n - 1] == 1) --n;
  return n;
}

// llama-quantize leaves these as they are.
bool IsQuantizable(const PlanTensor& t) {
  const std::string_view name = t.name;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  if (CountDims(t.dims) < 2) return false;
  for (std::string_view skip : {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel",
                                "per_layer_model_proj", "ssm_conv1d.weight",
                                "shortconv.conv.weight", "time_mix_", "attn_rel_b.weight"}) {
    if (Contains(name, skip)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

// The block index of "blk.N.*", -1 for other names.
int LayerOf(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// llama.cpp's rule for spending more bits on a layer.
bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
         (i_layer - n_layers / 8) % 3 == 2;
}

struct Counters {
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
  int n_layer = 0;
  bool has_output = false;
};

// The type llama.cpp prefers for a quantizable tensor, before fallbacks.
uint32_t PreferredType(QuantMix mix, const PlanTensor& t, Counters& c) {
  const uint32_t base = QuantMixBaseType(mix);
  const bool k_mix = mix == QuantMix::kQ4_K_M || mix == QuantMix::kQ5_K_M;
  const std::string& name = t.name;
  if (name == "output.weight" || (!c.has_output && name == "token_embd.weight")) {
    if (static_cast<int64_t>(t.dims[0]) % BlockElems(base) != 0) return kQ8_0;
    return base != kQ8_0 ? kQ6_K : base;
  }
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return base;
  // A fused attn_qkv counts as the layer's attn_v.
  if (Contains(name, "attn_v.weight") || Contains(name, "attn_qkv.weight")) {
    const bool more = k_mix && UseMoreBits(c.i_attention_wv, c.n_attention_wv);
    const bool first = mix == QuantMix::kQ4_K_S && c.i_attention_wv < 4;
    ++c.i_attention_wv;
    return more ? kQ6_K : first ? kQ5_K : base;
  }
  if (Contains(name, "attn_k.weight") || Contains(name, "attn_q.weight")) return base;
  if (Contains(name, "ffn_down")) {
    const bool more = k_mix && UseMoreBits(c.i_ffn_down, c.n_layer);
    const bool first = mix == QuantMix::kQ4_K_S && c.i_ffn_down < c.n_layer / 8;
    ++c.i_ffn_down;
    return more ? kQ6_K : first ? kQ5_K : base;
  }
  return base;
}

// Rows that are not whole blocks: llama.cpp's fallback types, then F16.
PlannedType WithFallback(uint32_t type, uint64_t row) {
  if (row % static_cast<uint64_t>(BlockElems(type)) == 0) return {type, false};
  switch (type) {
    case kQ4_K: type = kQ5_0; break;
    case kQ5_K: type = kQ5_1; break;
    case kQ6_K: type = kQ8_0; break;
    default: type = kGgmlF16; break;
  }
  if (row % static_cast<uint64_t>(BlockElems(type)) != 0) type = kGgmlF16;
  return {type, true};
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::optional<QuantMix> QuantMixFromName(std::string_view name) {
  for (const MixName& m : kMixes) {
    if (EqualsIgnoreCase(m.name, name)) return m.mix;
  }
  return std::nullopt;
}

std::string_view QuantMixName(QuantMix mix) {
  for (const MixName& m : kMixes) {
    if (m.mix == mix) return m.name;
  }
  return "unknown";
}

uint32_t QuantMixBaseType(QuantMix mix) {
  for (const MixName& m : kMixes) {
    if (m.mix == mix) return m.base;
  }
  return kQ8_0;
}

std::vector<PlannedType> PlanQuantization(QuantMix mix, const std::vector<PlanTensor>& tensors,
                                          int n_layer) {
  Counters c;
  c.n_layer = n_layer;
  for (const PlanTensor& t : tensors) {
    if (Contains(t.name, "attn_v.weight") || Contains(t.name, "attn_qkv.weight") ||
        Contains(t.name, "attn_kv_b.weight")) {
      ++c.n_attention_wv;
    } else if (t.name == "output.weight") {
      c.has_output = true;
    }
  }
  // llama.cpp's order: by block index (non-block tensors first), then name.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = LayerOf(tensors[a].name), lb = LayerOf(tensors[b].name);
    if (la != lb) return la < lb;
    return tensors[a].name < tensors[b].name;
  });
  std::vector<PlannedType> out(tensors.size());
  for (size_t i : order) {
    const PlanTensor& t = tensors[i];
    out[i] = {t.ggml_type, false};
    if (!IsQuantizable(t)) continue;
    out[i] = WithFallback(PreferredType(mix, t, c), t.dims[0]);
  }
  return out;
}

}  // namespace tessera::quant
