// Random llama / gpt2 models: spec validation, metadata and lazily generated
// weights. Vocabularies are in model_vocab.cc.
#include "engine/model/model_writer.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/model/float16.h"
#include "engine/model/rope_tensors.h"

namespace tessera {
namespace {

// Generous caps that keep every size computation far from overflow.
constexpr uint32_t kMaxDim = 1u << 16;
constexpr uint32_t kMaxLayers = 1u << 12;
constexpr uint32_t kMaxFfn = 1u << 18;
constexpr uint32_t kMaxContext = 1u << 22;
constexpr uint32_t kMaxVocab = 1u << 22;

// How a tensor's values are drawn: mean + stddev * z, z approximately N(0,1).
struct TensorPlan {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order
  float mean = 0.0f;
  float stddev = 0.0f;
};

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fills out[0, size) with values of `type`. Each normal sample is the sum of
// four 16-bit uniforms from one 64-bit draw (Irwin-Hall), rescaled to unit
// variance: cheap, identical on every platform, and bounded at +-3.46 std.
absl::Status FillTensor(uint64_t stream, float mean, float stddev, GgmlType type, uint8_t* out,
                        size_t size) {
  const size_t elem = GgmlTypeSize(type);
  if (elem == 0 || size % elem != 0) {
    return absl::InternalError(
        absl::StrCat("buffer of ", size, " bytes for type ", static_cast<uint32_t>(type)));
  }
  // Sum of four U{0..65535}: mean 131070, variance 4 * (65536^2 - 1) / 12.
  const double kMean = 131070.0;
  const double kInvStd = 1.0 / std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
  uint64_t state = stream;
  const size_t n = size / elem;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = SplitMix64(state);
    const double sum =
        static_cast<double>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
    const float v = mean + stddev * static_cast<float>((sum - kMean) * kInvStd);
    if (type == GgmlType::kF32) {
      std::memcpy(out + i * 4, &v, 4);
    } else {
      const uint16_t h = type == GgmlType::kF16 ? FloatToHalf(v) : FloatToBf16(v);
      std::memcpy(out + i * 2, &h, 2);
    }
  }
  return absl::OkStatus();
}

// FNV-1a.
uint64_t NameHash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

uint32_t KvHeads(const RandomModelSpec& s) { return s.kv_heads == 0 ? s.heads : s.kv_heads; }
uint32_t HeadDim(const RandomModelSpec& s) {
  return s.head_dim == 0 ? s.dim / s.heads : s.head_dim;
}

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::string_view(what.data(), what.size()));
}

absl::Status CheckRange(const char* name, uint64_t v, uint64_t max) {
  if (v == 0 || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be in 1..", max, " (got ", v, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateVocab(const RandomModelSpec& s) {
  if (s.vocab_from != nullptr) {
    absl::StatusOr<std::vector<std::string>> tokens =
        s.vocab_from->GetStringArray("tokenizer.ggml.tokens");
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab source has no usable token list: ", tokens.status().message()));
    }
    if (s.vocab_size != 0 && s.vocab_size != tokens->size()) {
      return absl::InvalidArgumentError(absl::StrCat("vocab size ", s.vocab_size,
                                                     " does not match the ", tokens->size(),
                                                     " tokens of the vocab source"));
    }
    return CheckRange("vocab size", tokens->size(), kMaxVocab);
  }
  const uint32_t min_vocab = s.arch == "gpt2" ? 257 : 259;
  if (s.vocab_size < min_vocab || s.vocab_size > kMaxVocab) {
    return absl::InvalidArgumentError(absl::StrCat("vocab size must be in ", min_vocab, "..",
                                                   kMaxVocab, " for a synthetic ", s.arch,
                                                   " vocab (got ", s.vocab_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRandomModelSpec(const RandomModelSpec& s) {
  const bool known = s.arch == "llama" || s.arch == "gpt2" || s.arch == "qwen2" ||
                     s.arch == "qwen3" || s.arch == "phi3" || s.arch == "gemma3";
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arch must be llama, gpt2, qwen2, qwen3, phi3 or gemma3 (got '", s.arch, "')"));
  }
  for (absl::Status st :
       {CheckRange("dim", s.dim, kMaxDim), CheckRange("layers", s.layers, kMaxLayers),
        CheckRange("heads", s.heads, s.dim == 0 ? kMaxDim : s.dim),
        CheckRange("ffn", s.ffn, kMaxFfn), CheckRange("context", s.context, kMaxContext)}) {
    if (!st.ok()) return st;
  }
  if (s.head_dim == 0 && s.dim % s.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", s.dim, " is not divisible by heads ", s.heads));
  }
  if (s.head_dim > kMaxDim) return Invalid("head dim too large");
  if (!(s.output_std > 0.0f) || !std::isfinite(s.output_std) || !(s.weight_std > 0.0f) ||
      !std::isfinite(s.weight_std)) {
    return Invalid("weight stddevs must be positive numbers");
  }
  if (s.rope_scaling != "" && s.rope_scaling != "llama3" && s.rope_scaling != "longrope") {
    return Invalid("rope scaling must be llama3 or longrope");
  }
  if (s.rope_scaling == "llama3" && s.arch != "llama") {
    return Invalid("llama3 rope scaling is llama only");
  }
  if (s.rope_scaling == "longrope" &&
      (s.arch != "phi3" || s.original_context == 0 || s.original_context >= s.context)) {
    return Invalid("longrope is phi3 only, with 0 < original context < context");
  }
  if (s.arch != "gemma3" && (s.sliding_window != 0 || s.logit_softcap)) {
    return Invalid("sliding window and logit softcap are gemma3 only");
  }
  if (s.logit_softcap && !(*s.logit_softcap > 0.0f)) return Invalid("logit softcap must be > 0");
  if (s.arch != "gpt2") {
    if (s.kv_heads > s.heads || s.heads % KvHeads(s) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv-heads ", s.kv_heads, " must divide heads ", s.heads));
    }
    if (HeadDim(s) % 2 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("head dim ", HeadDim(s), " must be even for RoPE"));
    }
    if (s.rope_base && !(std::isfinite(*s.rope_base) && *s.rope_base > 0.0f)) {
      return Invalid("rope base must be a positive number");
    }
  } else {
    if (s.kv_heads != 0 && s.kv_heads != s.heads) return Invalid("kv-heads is not for gpt2");
    if (s.rope_base) return Invalid("rope base is not for gpt2");
    if (s.head_dim != 0) return Invalid("head dim is not for gpt2");
  }
  if (GgmlTypeSize(s.dtype) == 0) return Invalid("dtype must be f32, f16 or bf16");
  return ValidateVocab(s);
}

namespace {

// The attention tensors of one block, by llama.cpp's names for the arch.
void AttentionTensors(const RandomModelSpec& s, const std::string& p, float out_std,
                      std::vector<TensorPlan>& t) {
  const float w_std = s.weight_std;
  const uint64_t dim = s.dim, q_dim = uint64_t{HeadDim(s)} * s.heads;
  const uint64_t kv_dim = uint64_t{HeadDim(s)} * KvHeads(s);
  t.push_back({p + "attn_norm.weight", {dim}, 1.0f, 0.02f});
  if (s.arch == "phi3") {
    t.push_back({p + "attn_qkv.weight", {dim, q_dim + 2 * kv_dim}, 0.0f, w_std});
  } else {
    t.push_back({p + "attn_q.weight", {dim, q_dim}, 0.0f, w_std});
    t.push_back({p + "attn_k.weight", {dim, kv_dim}, 0.0f, w_std});
    t.push_back({p + "attn_v.weight", {dim, kv_dim}, 0.0f, w_std});
  }
  if (s.arch == "qwen2") {
    t.push_back({p + "attn_q.bias", {q_dim}, 0.0f, 0.02f});
    t.push_back({p + "attn_k.bias", {kv_dim}, 0.0f, 0.02f});
    t.push_back({p + "attn_v.bias", {kv_dim}, 0.0f, 0.02f});
  }
  if (s.arch == "qwen3" || s.arch == "gemma3") {
    t.push_back({p + "attn_q_norm.weight", {HeadDim(s)}, 1.0f, 0.1f});
    t.push_back({p + "attn_k_norm.weight", {HeadDim(s)}, 1.0f, 0.1f});
  }
  t.push_back({p + "attn_output.weight", {q_dim, dim}, 0.0f, out_std});
  if (s.arch == "gemma3") t.push_back({p + "post_attention_norm.weight", {dim}, 1.0f, 0.02f});
}

// Llama-family models (llama, qwen2, qwen3, phi3, gemma3). Gemma norms are
// stored as 1 + w, as llama.cpp's converter writes them, so the same mean 1.
std::vector<TensorPlan> LlamaTensors(const RandomModelSpec& s, uint64_t vocab) {
  const uint64_t dim = s.dim, ffn = s.ffn;
  // Projections back into the residual stream are scaled down so its
  // variance stays O(1) after all layers.
  const float w_std = s.weight_std;
  const float out_std = w_std / std::sqrt(2.0f * static_cast<float>(s.layers));
  const float embd_std = s.tied ? s.output_std : 0.02f;
  std::vector<TensorPlan> t = {{"token_embd.weight", {dim, vocab}, 0.0f, embd_std}};
  if (s.rope_scaling == "llama3") t.push_back({kRopeFreqsTensor, {HeadDim(s) / 2}, 0, 0});
  if (s.rope_scaling == "longrope") {
    t.push_back({kRopeFactorsLongTensor, {HeadDim(s) / 2}, 0, 0});
    t.push_back({kRopeFactorsShortTensor, {HeadDim(s) / 2}, 0, 0});
  }
  for (uint32_t i = 0; i < s.layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    AttentionTensors(s, p, out_std, t);
    t.push_back({p + "ffn_norm.weight", {dim}, 1.0f, 0.02f});
    if (s.arch == "phi3") {
      t.push_back({p + "ffn_up.weight", {dim, 2 * ffn}, 0.0f, w_std});
    } else {
      t.push_back({p + "ffn_gate.weight", {dim, ffn}, 0.0f, w_std});
      t.push_back({p + "ffn_up.weight", {dim, ffn}, 0.0f, w_std});
    }
    t.push_back({p + "ffn_down.weight", {ffn, dim}, 0.0f, out_std});
    if (s.arch == "gemma3") t.push_back({p + "post_ffw_norm.weight", {dim}, 1.0f, 0.02f});
  }
  t.push_back({"output_norm.weight", {dim}, 1.0f, 0.02f});
  if (!s.tied) t.push_back({"output.weight", {dim, vocab}, 0.0f, s.output_std});
  return t;
}

std::vector<TensorPlan> Gpt2Tensors(const RandomModelSpec& s, uint64_t vocab) {
  const uint64_t dim = s.dim, ffn = s.ffn;
  const float out_std = 0.02f / std::sqrt(2.0f * static_cast<float>(s.layers));
  const float bias_std = 0.01f;
  const float embd_std = s.tied ? s.output_std : 0.02f;
  std::vector<TensorPlan> t = {{"token_embd.weight", {dim, vocab}, 0.0f, embd_std},
                               {"position_embd.weight", {dim, s.context}, 0.0f, 0.01f}};
  for (uint32_t i = 0; i < s.layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    t.push_back({p + "attn_norm.weight", {dim}, 1.0f, 0.02f});
    t.push_back({p + "attn_norm.bias", {dim}, 0.0f, bias_std});
    t.push_back({p + "attn_qkv.weight", {dim, 3 * dim}, 0.0f, 0.02f});
    t.push_back({p + "attn_qkv.bias", {3 * dim}, 0.0f, bias_std});
    t.push_back({p + "attn_output.weight", {dim, dim}, 0.0f, out_std});
    t.push_back({p + "attn_output.bias", {dim}, 0.0f, bias_std});
    t.push_back({p + "ffn_norm.weight", {dim}, 1.0f, 0.02f});
    t.push_back({p + "ffn_norm.bias", {dim}, 0.0f, bias_std});
    t.push_back({p + "ffn_up.weight", {dim, ffn}, 0.0f, 0.02f});
    t.push_back({p + "ffn_up.bias", {ffn}, 0.0f, bias_std});
    t.push_back({p + "ffn_down.weight", {ffn, dim}, 0.0f, out_std});
    t.push_back({p + "ffn_down.bias", {dim}, 0.0f, bias_std});
  }
  t.push_back({"output_norm.weight", {dim}, 1.0f, 0.02f});
  t.push_back({"output_norm.bias", {dim}, 0.0f, bias_std});
  if (!s.tied) t.push_back({"output.weight", {dim, vocab}, 0.0f, s.output_std});
  return t;
}

// Llama 3.1's frequency factors (convert_hf_to_gguf.py, LlamaModel): 1 for
// short wavelengths, `factor` for long ones, smoothly in between.
std::vector<float> Llama3RopeFactors(uint32_t rot_dim, double base) {
  const double factor = 8.0, low = 1.0, high = 4.0, old_context = 8192.0;
  const double low_wavelen = old_context / low, high_wavelen = old_context / high;
  std::vector<float> out;
  for (uint32_t i = 0; i < rot_dim; i += 2) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(i) / rot_dim);
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_context / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// Phi-3 long-rope factors of the shape Phi-3.5's have: the short ones near
// 1, the long ones growing with the wavelength to tens.
std::vector<float> LongRopeFactors(uint32_t rot_dim, bool long_context) {
  std::vector<float> out;
  const uint32_t pairs = rot_dim / 2;
  for (uint32_t i = 0; i < pairs; ++i) {
    const double x = pairs > 1 ? static_cast<double>(i) / (pairs - 1) : 0.0;
    out.push_back(static_cast<float>(long_context ? 1.0 + 40.0 * x * x : 1.0 + 0.5 * x));
  }
  return out;
}

uint32_t FileType(GgmlType dtype) {
  switch (dtype) {
    case GgmlType::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      return 0;  // LLAMA_FTYPE_ALL_F32
  }
}

void AddMetadata(const RandomModelSpec& s, uint32_t vocab, GgufWriter* w) {
  const std::string& a = s.arch;
  w->SetString("general.architecture", a);
  w->SetString("general.name", s.name.empty() ? "tessera-random-" + a : s.name);
  w->SetUint32("general.file_type", FileType(s.dtype));
  w->SetUint32(a + ".context_length", s.context);
  w->SetUint32(a + ".embedding_length", s.dim);
  w->SetUint32(a + ".block_count", s.layers);
  w->SetUint32(a + ".feed_forward_length", s.ffn);
  w->SetUint32(a + ".attention.head_count", s.heads);
  w->SetUint32(a + ".vocab_size", vocab);
  if (a == "gpt2") {
    w->SetFloat32("gpt2.attention.layer_norm_epsilon", 1e-5f);
    return;
  }
  w->SetUint32(a + ".attention.head_count_kv", KvHeads(s));
  w->SetFloat32(a + ".attention.layer_norm_rms_epsilon", a == "gemma3" ? 1e-6f : 1e-5f);
  w->SetUint32(a + ".rope.dimension_count", HeadDim(s));
  if (s.head_dim != 0 || a == "gemma3") {
    w->SetUint32(a + ".attention.key_length", HeadDim(s));
    w->SetUint32(a + ".attention.value_length", HeadDim(s));
  }
  if (s.rope_base) w->SetFloat32(a + ".rope.freq_base", *s.rope_base);
  // Phi-3's converter always writes a window; llama.cpp ignores it. One the
  // size of the context would change nothing anyway.
  if (a == "phi3") w->SetUint32("phi3.attention.sliding_window", s.context);
  if (s.rope_scaling == "longrope") {
    // As convert_hf_to_gguf.py writes Phi-3.5: the training context, and
    // the factor that scales cos and sin.
    w->SetUint32("phi3.rope.scaling.original_context_length", s.original_context);
    w->SetFloat32("phi3.rope.scaling.attn_factor",
                  static_cast<float>(LongRopeAttnFactor(static_cast<double>(s.context),
                                                        static_cast<double>(s.original_context))));
  }
  if (a == "gemma3") {
    w->SetUint32("gemma3.attention.sliding_window", s.sliding_window ? s.sliding_window : 512);
    if (s.logit_softcap) w->SetFloat32("gemma3.final_logit_softcapping", *s.logit_softcap);
  }
}

}  // namespace

absl::StatusOr<uint64_t> BuildRandomModel(const RandomModelSpec& spec, GgufWriter* writer) {
  if (absl::Status s = ValidateRandomModelSpec(spec); !s.ok()) return s;
  absl::StatusOr<uint32_t> vocab = spec.vocab_size;
  if (spec.vocab_from != nullptr) {
    vocab = CopyVocab(*spec.vocab_from, writer);
  } else if (spec.arch != "gpt2") {
    if (absl::Status s = AddSyntheticLlamaVocab(spec.vocab_size, writer); !s.ok()) return s;
  } else {
    if (absl::Status s = AddSyntheticGpt2Vocab(spec.vocab_size, writer); !s.ok()) return s;
  }
  if (!vocab.ok()) return vocab.status();
  AddMetadata(spec, *vocab, writer);
  const std::vector<TensorPlan> plans =
      spec.arch == "gpt2" ? Gpt2Tensors(spec, *vocab) : LlamaTensors(spec, *vocab);
  uint64_t params = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const TensorPlan& p = plans[i];
    const GgmlType type = p.dims.size() >= 2 ? spec.dtype : GgmlType::kF32;
    absl::StatusOr<uint64_t> bytes = GgmlTensorBytes(p.dims, type);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(p.name, ": ", bytes.status().message()));
    }
    params += *bytes / GgmlTypeSize(type);
    // One stream per (seed, tensor name): a tensor's values do not depend on
    // which other tensors the model has.
    uint64_t mix = spec.seed ^ NameHash(p.name);
    const uint64_t stream = SplitMix64(mix);
    if (IsRopeFactorTensor(p.name)) {
      const std::vector<float> f =
          p.name == kRopeFreqsTensor
              ? Llama3RopeFactors(HeadDim(spec), spec.rope_base.value_or(10000))
              : LongRopeFactors(HeadDim(spec), p.name == kRopeFactorsLongTensor);
      writer->AddTensorStreamed(p.name, p.dims, type, [f](uint8_t* out, size_t size) {
        if (size != f.size() * 4) return absl::InternalError("rope_freqs size");
        std::memcpy(out, f.data(), size);
        return absl::OkStatus();
      });
      continue;
    }
    writer->AddTensorStreamed(p.name, p.dims, type, [stream, p, type](uint8_t* out, size_t size) {
      return FillTensor(stream, p.mean, p.stddev, type, out, size);
    });
  }
  return params;
}

}  // namespace tessera
