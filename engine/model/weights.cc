#include "engine/model/weights.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/gguf.h"

namespace tessera {
namespace {

class WeightLoader {
 public:
  WeightLoader(const GgufFile& file, Backend& backend) : file_(file), backend_(backend) {}

  // Loads tensor `name` expecting PyTorch-order shape [rows, cols] (a vector
  // when rows == 1). `row_offset`/`rows` select a slice of rows of a larger
  // tensor of `total_rows` (for fused QKV).
  absl::StatusOr<Weight> Get(const std::string& name, int64_t rows, int64_t cols,
                             int64_t total_rows = -1, int64_t row_offset = 0,
                             WeightUse use = WeightUse::kLinear) {
    if (rows == 1) use = WeightUse::kTable;
    if (total_rows < 0) total_rows = rows;
    auto t = Check(name, total_rows, cols, /*count=*/row_offset == 0);
    if (!t.ok()) return t.status();
    const DType dtype = ToDType((*t)->type);
    const uint64_t skip = row_offset * DTypeRowBytes(dtype, cols);
    FileRange source = (*t)->source;
    source.offset += skip;
    return backend_.PrepareWeight((*t)->data + skip, dtype, rows, cols, use, source);
  }

  // A matrix already loaded as a table, prepared again for a linear layer.
  absl::StatusOr<Weight> GetTiedHead(const std::string& name, int64_t rows, int64_t cols) {
    auto t = Check(name, rows, cols, /*count=*/false);
    if (!t.ok()) return t.status();
    return backend_.PrepareWeight((*t)->data, ToDType((*t)->type), rows, cols,
                                  WeightUse::kLinear, (*t)->source);
  }

  // Elements [offset, offset + len) of an F32 vector of `total` elements.
  absl::StatusOr<Weight> GetVectorSlice(const std::string& name, int64_t total, int64_t offset,
                                        int64_t len) {
    auto t = Check(name, 1, total, /*count=*/offset == 0);
    if (!t.ok()) return t.status();
    return backend_.PrepareWeight(reinterpret_cast<const float*>((*t)->data) + offset,
                                  DType::kF32, 1, len, WeightUse::kTable);
  }

  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }

  // Checks an F32 vector of `cols` that the computation does not read (the
  // other of two alternatives), so that it counts as known.
  absl::Status CheckUnused(const std::string& name, int64_t cols) {
    return Check(name, 1, cols, /*count=*/false).status();
  }

  // A tensor that no piece of the architecture read would mean the file
  // describes a model other than the one computed: refused by name.
  absl::Status CheckAllUsed(const std::string& arch) const {
    for (const GgufTensorInfo& t : file_.tensors()) {
      if (used_.count(t.name) == 0) {
        return absl::UnimplementedError(
            absl::StrCat("tensor ", t.name, " is not used by architecture ", arch));
      }
    }
    return absl::OkStatus();
  }
  int64_t num_parameters() const { return num_parameters_; }
  // One type ("f16"), or every type of a mixed file ("q4_K+q6_K").
  std::string DTypeSummary() const {
    std::string out;
    for (const std::string& t : matrix_types_) absl::StrAppend(&out, out.empty() ? "" : "+", t);
    return out;
  }

 private:
  // Finds `name` and checks its dims against [rows, cols] (a 1-D [cols]
  // vector when rows == 1) and its type; counts its parameters once.
  absl::StatusOr<const GgufTensorInfo*> Check(const std::string& name, int64_t rows,
                                              int64_t cols, bool count) {
    const GgufTensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
    used_.insert(name);
    const bool is_vector = rows == 1;
    const bool shape_ok = is_vector ? (t->dims.size() == 1 && t->dims[0] == uint64_t(cols))
                                    : (t->dims.size() == 2 && t->dims[0] == uint64_t(cols) &&
                                       t->dims[1] == uint64_t(rows));
    if (!shape_ok) {
      std::string dims;
      for (auto d : t->dims) absl::StrAppend(&dims, dims.empty() ? "" : ", ", d);
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor %s has dims {%s}, expected {%d, %d}", name, dims, cols, rows));
    }
    if (is_vector && t->type != GgmlType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " must be F32"));
    }
    if (count) {
      num_parameters_ += static_cast<int64_t>(t->num_elements);
      if (!is_vector) matrix_types_.insert(std::string(DTypeName(ToDType(t->type))));
    }
    return t;
  }

  static DType ToDType(GgmlType t) {
    if (auto q = quant::QuantTypeFromGgml(static_cast<uint32_t>(t))) return DTypeOf(*q);
    return t == GgmlType::kF16 ? DType::kF16 : t == GgmlType::kBF16 ? DType::kBF16 : DType::kF32;
  }
  const GgufFile& file_;
  Backend& backend_;
  int64_t num_parameters_ = 0;
  std::set<std::string> matrix_types_;
  std::set<std::string> used_;
};

#define ASSIGN_OR_RETURN_W(lhs, expr) \
  do {                                \
    auto _r = (expr);                 \
    if (!_r.ok()) return _r.status(); \
    lhs = *_r;                        \
  } while (0)

// One block's tensors, by llama.cpp's names, as the config's pieces ask.
absl::Status LoadAttention(WeightLoader& w, const ModelConfig& c, const std::string& p,
                           LayerWeights& l) {
  const int64_t d = c.dim, q = c.q_dim, kv = c.kv_dim;
  const bool layer_norm = c.norm == NormKind::kLayer;
  ASSIGN_OR_RETURN_W(l.attn_norm, w.Get(p + "attn_norm.weight", 1, d));
  if (layer_norm) ASSIGN_OR_RETURN_W(l.attn_norm_b, w.Get(p + "attn_norm.bias", 1, d));
  if (c.fused_qkv) {
    // The fused matrix [q + 2 kv, dim] holds Q, K and V rows in that order;
    // views of it feed the same three projections (its bias likewise).
    const std::string m = p + "attn_qkv.weight", b = p + "attn_qkv.bias";
    ASSIGN_OR_RETURN_W(l.wq, w.Get(m, q, d, q + 2 * kv, 0));
    ASSIGN_OR_RETURN_W(l.wk, w.Get(m, kv, d, q + 2 * kv, q));
    ASSIGN_OR_RETURN_W(l.wv, w.Get(m, kv, d, q + 2 * kv, q + kv));
    if (c.linear_biases) {
      ASSIGN_OR_RETURN_W(l.bq, w.GetVectorSlice(b, q + 2 * kv, 0, q));
      ASSIGN_OR_RETURN_W(l.bk, w.GetVectorSlice(b, q + 2 * kv, q, kv));
      ASSIGN_OR_RETURN_W(l.bv, w.GetVectorSlice(b, q + 2 * kv, q + kv, kv));
    }
  } else {
    ASSIGN_OR_RETURN_W(l.wq, w.Get(p + "attn_q.weight", q, d));
    ASSIGN_OR_RETURN_W(l.wk, w.Get(p + "attn_k.weight", kv, d));
    ASSIGN_OR_RETURN_W(l.wv, w.Get(p + "attn_v.weight", kv, d));
    if (c.linear_biases || c.qkv_bias) {
      ASSIGN_OR_RETURN_W(l.bq, w.Get(p + "attn_q.bias", 1, q));
      ASSIGN_OR_RETURN_W(l.bk, w.Get(p + "attn_k.bias", 1, kv));
      ASSIGN_OR_RETURN_W(l.bv, w.Get(p + "attn_v.bias", 1, kv));
    }
  }
  if (c.qk_norm) {
    ASSIGN_OR_RETURN_W(l.q_norm, w.Get(p + "attn_q_norm.weight", 1, c.head_dim));
    ASSIGN_OR_RETURN_W(l.k_norm, w.Get(p + "attn_k_norm.weight", 1, c.head_dim));
  }
  ASSIGN_OR_RETURN_W(l.wo, w.Get(p + "attn_output.weight", d, q));
  if (c.linear_biases) ASSIGN_OR_RETURN_W(l.bo, w.Get(p + "attn_output.bias", 1, d));
  if (c.post_norms) {
    ASSIGN_OR_RETURN_W(l.attn_post_norm, w.Get(p + "post_attention_norm.weight", 1, d));
  }
  return absl::OkStatus();
}

absl::Status LoadFeedForward(WeightLoader& w, const ModelConfig& c, const std::string& p,
                             LayerWeights& l) {
  const int64_t d = c.dim, f = c.ffn_dim;
  ASSIGN_OR_RETURN_W(l.ffn_norm, w.Get(p + "ffn_norm.weight", 1, d));
  if (c.norm == NormKind::kLayer) {
    ASSIGN_OR_RETURN_W(l.ffn_norm_b, w.Get(p + "ffn_norm.bias", 1, d));
  }
  if (c.fused_gate_up) {
    // Phi-3's ffn_up [2 ffn, dim]: gate rows first, then up rows (llama.cpp's
    // swiglu takes silu of the first half, as Phi3MLP's chunk(2) does).
    ASSIGN_OR_RETURN_W(l.w_gate, w.Get(p + "ffn_up.weight", f, d, 2 * f, 0));
    ASSIGN_OR_RETURN_W(l.w_up, w.Get(p + "ffn_up.weight", f, d, 2 * f, f));
  } else {
    if (c.ffn != FfnKind::kGelu) ASSIGN_OR_RETURN_W(l.w_gate, w.Get(p + "ffn_gate.weight", f, d));
    ASSIGN_OR_RETURN_W(l.w_up, w.Get(p + "ffn_up.weight", f, d));
  }
  if (c.linear_biases) ASSIGN_OR_RETURN_W(l.b_up, w.Get(p + "ffn_up.bias", 1, f));
  ASSIGN_OR_RETURN_W(l.w_down, w.Get(p + "ffn_down.weight", d, f));
  if (c.linear_biases) ASSIGN_OR_RETURN_W(l.b_down, w.Get(p + "ffn_down.bias", 1, d));
  if (c.post_norms) {
    ASSIGN_OR_RETURN_W(l.ffn_post_norm, w.Get(p + "post_ffw_norm.weight", 1, d));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeights> LoadWeights(const GgufFile& file, const ModelConfig& c,
                                         Backend& backend) {
  WeightLoader w(file, backend);
  ModelWeights m;
  ASSIGN_OR_RETURN_W(m.token_embedding, w.Get("token_embd.weight", c.vocab_size, c.dim,
                                               -1, 0, WeightUse::kTable));
  if (c.learned_positions) {
    ASSIGN_OR_RETURN_W(m.position_embedding, w.Get("position_embd.weight", c.context_length,
                                                   c.dim, -1, 0, WeightUse::kTable));
  }
  if (c.rope_freq_factors) {
    ASSIGN_OR_RETURN_W(m.rope_freqs, w.Get(c.rope_factors_tensor, 1, c.rope_dim / 2));
  }
  if (!c.rope_factors_unused.empty()) {
    if (auto s = w.CheckUnused(c.rope_factors_unused, c.rope_dim / 2); !s.ok()) return s;
  }
  m.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    if (auto s = LoadAttention(w, c, p, m.layers[i]); !s.ok()) return s;
    if (auto s = LoadFeedForward(w, c, p, m.layers[i]); !s.ok()) return s;
  }
  ASSIGN_OR_RETURN_W(m.output_norm, w.Get("output_norm.weight", 1, c.dim));
  if (c.norm == NormKind::kLayer) {
    ASSIGN_OR_RETURN_W(m.output_norm_b, w.Get("output_norm.bias", 1, c.dim));
  }
  if (w.Has("output.weight")) {
    ASSIGN_OR_RETURN_W(m.output, w.Get("output.weight", c.vocab_size, c.dim));
  } else {
    // Tied head: the embedding table again, prepared for a linear layer (the
    // parameters are counted once).
    ASSIGN_OR_RETURN_W(m.output, w.GetTiedHead("token_embd.weight", c.vocab_size, c.dim));
    m.tied_output = true;
  }
  if (auto s = w.CheckAllUsed(c.arch_name); !s.ok()) return s;
  m.num_parameters = w.num_parameters();
  m.dtype_name = w.DTypeSummary();
  return m;
}

}  // namespace tessera
