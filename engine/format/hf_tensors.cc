#include "engine/format/hf_tensors.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/float16.h"

namespace tessera {
namespace {

void AddLayer(const HfModelConfig& m, uint32_t i, std::vector<HfTensorSpec>& out) {
  const HfArch& a = *m.arch;
  const std::string hf = absl::StrCat("model.layers.", i, ".");
  const std::string g = absl::StrCat("blk.", i, ".");
  const uint64_t h = m.hidden, q = uint64_t{m.heads} * m.head_dim;
  const uint64_t kv = uint64_t{m.kv_heads} * m.head_dim, f = m.ffn;
  auto add = [&](const std::string& hn, const std::string& gn, std::vector<uint64_t> dims,
                 HfTransform t = HfTransform::kNone) {
    const bool f32 = dims.size() == 1 || gn.ends_with("_norm.weight");
    if (a.norm_plus_one && gn.ends_with("norm.weight")) t = HfTransform::kPlusOne;
    out.push_back({hf + hn, g + gn, std::move(dims), f32, t, false});
  };
  add("input_layernorm.weight", "attn_norm.weight", {h});
  if (a.fused) {
    add("self_attn.qkv_proj.weight", "attn_qkv.weight", {h, q + 2 * kv});
  } else {
    add("self_attn.q_proj.weight", "attn_q.weight", {h, q},
        a.permute_qk ? HfTransform::kPermuteQ : HfTransform::kNone);
    add("self_attn.k_proj.weight", "attn_k.weight", {h, kv},
        a.permute_qk ? HfTransform::kPermuteK : HfTransform::kNone);
    add("self_attn.v_proj.weight", "attn_v.weight", {h, kv});
  }
  if (a.qkv_bias) {
    add("self_attn.q_proj.bias", "attn_q.bias", {q});
    add("self_attn.k_proj.bias", "attn_k.bias", {kv});
    add("self_attn.v_proj.bias", "attn_v.bias", {kv});
  }
  if (a.qk_norm) {
    add("self_attn.q_norm.weight", "attn_q_norm.weight", {m.head_dim});
    add("self_attn.k_norm.weight", "attn_k_norm.weight", {m.head_dim});
  }
  add("self_attn.o_proj.weight", "attn_output.weight", {q, h});
  if (a.sandwich_norms) {
    add("post_attention_layernorm.weight", "post_attention_norm.weight", {h});
    add("pre_feedforward_layernorm.weight", "ffn_norm.weight", {h});
    add("post_feedforward_layernorm.weight", "post_ffw_norm.weight", {h});
  } else {
    add("post_attention_layernorm.weight", "ffn_norm.weight", {h});
  }
  if (a.fused) {
    add("mlp.gate_up_proj.weight", "ffn_up.weight", {h, 2 * f});
  } else {
    add("mlp.gate_proj.weight", "ffn_gate.weight", {h, f});
    add("mlp.up_proj.weight", "ffn_up.weight", {h, f});
  }
  add("mlp.down_proj.weight", "ffn_down.weight", {f, h});
}

bool IsIgnored(const std::string& name) { return name.ends_with(".rotary_emb.inv_freq"); }

absl::StatusOr<GgmlType> SourceType(const HfTensorSpec& s, const SafetensorsTensor& t) {
  switch (t.dtype) {
    case SafetensorsDtype::kF32:
      return GgmlType::kF32;
    case SafetensorsDtype::kF16:
      return GgmlType::kF16;
    case SafetensorsDtype::kBF16:
      return GgmlType::kBF16;
    default:
      return absl::UnimplementedError(absl::StrCat("tensor \"", s.hf_name, "\" has dtype ",
                                                   std::string(SafetensorsDtypeName(t.dtype)),
                                                   "; only BF16, F16 and F32 are supported"));
  }
}

absl::Status CheckShape(const HfTensorSpec& s, const SafetensorsTensor& t) {
  const std::vector<uint64_t> want(s.dims.rbegin(), s.dims.rend());
  if (t.shape == want) return absl::OkStatus();
  auto show = [](const std::vector<uint64_t>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&out, i ? ", " : "", v[i]);
    return out + "]";
  };
  return absl::InvalidArgumentError(absl::StrCat("tensor \"", s.hf_name, "\" has shape ",
                                                 show(t.shape), ", expected ", show(want)));
}

float ReadAsFloat(const uint8_t* p, GgmlType type, uint64_t i) {
  if (type == GgmlType::kF32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return type == GgmlType::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
}

// Uninitialized bytes for a converted tensor. Large ones are 2 MiB aligned
// and backed by transparent huge pages: a 4 KiB page fault per page made the
// Q and K permutation of a 1 GB folder cost more than packing its weights.
absl::StatusOr<std::shared_ptr<uint8_t>> NewTensorBytes(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t align = bytes >= kHugePage ? kHugePage : 64;
  const size_t size = std::max(align, (bytes + align - 1) / align * align);
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(align, size));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for a converted tensor"));
  }
  if (align == kHugePage) madvise(data, size, MADV_HUGEPAGE);
  return std::shared_ptr<uint8_t>(data, [](uint8_t* p) { std::free(p); });
}

// PermuteRows(src, dst, ..., inverse = false) with src read from the file,
// one scattered read per half of each head. False when the bytes are not
// in a file or the read failed (then the mapping is read instead).
bool ReadPermutedRows(const FileRange& source, uint8_t* dst, uint64_t rows, uint64_t row_bytes,
                      uint32_t groups) {
  if (source.file == nullptr) return false;
  const uint64_t per = rows / groups, half = per / 2;
  std::vector<iovec> parts(half);
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t i = 0; i < 2; ++i) {
      for (uint64_t j = 0; j < half; ++j) {
        parts[j] = {dst + (g * per + j * 2 + i) * row_bytes, row_bytes};
      }
      const uint64_t from = source.offset + (g * per + i * half) * row_bytes;
      if (!source.file->ReadScattered(from, parts).ok()) return false;
    }
  }
  return true;
}

// The tensor's GGUF bytes: the mapped source itself, or an owned buffer
// when a type change or transformation is needed.
absl::StatusOr<const uint8_t*> Convert(const HfModelConfig& m, const HfTensorSpec& s,
                                       const SafetensorsTensor& t, GgmlType src, GgmlType dst,
                                       std::vector<std::shared_ptr<const void>>& owners) {
  if (src == dst && s.transform == HfTransform::kNone) return t.data;
  absl::StatusOr<std::shared_ptr<uint8_t>> bytes =
      NewTensorBytes(t.num_elements * GgmlTypeSize(dst));
  if (!bytes.ok()) return bytes.status();
  std::shared_ptr<uint8_t> buf = *std::move(bytes);
  if (s.transform == HfTransform::kPermuteQ || s.transform == HfTransform::kPermuteK) {
    const uint32_t groups = s.transform == HfTransform::kPermuteQ ? m.heads : m.kv_heads;
    const uint64_t rows = s.dims[1], row_bytes = s.dims[0] * GgmlTypeSize(src);
    if (!ReadPermutedRows(t.source, buf.get(), rows, row_bytes, groups)) {
      PermuteRows(t.data, buf.get(), rows, row_bytes, groups, false);
    }
  } else {
    const float add = s.transform == HfTransform::kPlusOne ? 1.0f : 0.0f;
    float* out = reinterpret_cast<float*>(buf.get());  // dst is F32 here
    for (uint64_t i = 0; i < t.num_elements; ++i) out[i] = ReadAsFloat(t.data, src, i) + add;
  }
  owners.push_back(buf);
  return buf.get();
}

}  // namespace

std::vector<HfTensorSpec> HfTensorSpecs(const HfModelConfig& m) {
  std::vector<HfTensorSpec> out;
  const uint64_t h = m.hidden;
  out.push_back({"model.embed_tokens.weight",
                 "token_embd.weight",
                 {h, m.vocab_size},
                 false,
                 HfTransform::kNone,
                 false});
  for (uint32_t i = 0; i < m.layers; ++i) AddLayer(m, i, out);
  out.push_back({"model.norm.weight",
                 "output_norm.weight",
                 {h},
                 true,
                 m.arch->norm_plus_one ? HfTransform::kPlusOne : HfTransform::kNone,
                 false});
  out.push_back(
      {"lm_head.weight", "output.weight", {h, m.vocab_size}, false, HfTransform::kNone, m.tied});
  return out;
}

void PermuteRows(const uint8_t* src, uint8_t* dst, uint64_t rows, uint64_t row_bytes,
                 uint32_t groups, bool inverse) {
  const uint64_t per = rows / groups, half = per / 2;
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t i = 0; i < 2; ++i) {
      for (uint64_t j = 0; j < half; ++j) {
        const uint64_t hf_row = g * per + i * half + j;  // rotate-halves order
        const uint64_t gg_row = g * per + j * 2 + i;     // adjacent pairs
        const uint64_t from = inverse ? gg_row : hf_row, to = inverse ? hf_row : gg_row;
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<GgufFile>> BuildHfGguf(
    const HfModelConfig& m, const std::map<std::string, HfSourceTensor, std::less<>>& sources,
    std::vector<std::shared_ptr<const void>> owners) {
  std::vector<GgufTensorInfo> infos;
  std::set<std::string, std::less<>> used;
  for (const auto& [name, values] : m.extra_tensors) {
    auto buf = std::make_shared<std::vector<float>>(values);
    infos.push_back({name,
                     {buf->size()},
                     GgmlType::kF32,
                     0,
                     0,
                     0,
                     reinterpret_cast<const uint8_t*>(buf->data()),
                     FileRange{}});
    owners.push_back(buf);
  }
  for (const HfTensorSpec& s : HfTensorSpecs(m)) {
    auto it = sources.find(s.hf_name);
    if (it == sources.end()) {
      if (s.optional) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint has no tensor \"", s.hf_name, "\""));
    }
    const SafetensorsTensor& t = *it->second.tensor;
    used.insert(s.hf_name);
    auto src = SourceType(s, t);
    if (!src.ok()) return src.status();
    if (auto st = CheckShape(s, t); !st.ok()) return st;
    const GgmlType dst = s.f32 ? GgmlType::kF32 : *src;
    absl::StatusOr<const uint8_t*> data = Convert(m, s, t, *src, dst, owners);
    if (!data.ok()) return data.status();
    const FileRange source = *data == t.data ? t.source : FileRange{};
    infos.push_back({s.gguf_name, s.dims, dst, 0, 0, 0, *data, source});
  }
  for (const auto& [name, src] : sources) {
    if (!used.count(name) && !IsIgnored(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected tensor \"", name, "\" in ",
                                                     src.shard, " for model_type ",
                                                     std::string(m.arch->model_type)));
    }
  }
  return GgufFile::FromParts(m.metadata, std::move(infos), std::move(owners));
}

}  // namespace tessera
