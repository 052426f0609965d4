// A deliberately plain forward pass, written straight from the architecture
// definitions (dense causal attention, no KV cache, no batching, double
// accumulation), used as the reference for the engine's model tests. It reads
// the GGUF metadata and tensors itself, by llama.cpp's names, for llama,
// gpt2, qwen2, qwen3, phi3 and gemma3.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "engine/model/float16.h"
#include "engine/model/gguf.h"

namespace tessera::testing {

using Matrix = std::vector<double>;  // row-major

class NaiveTransformer {
 public:
  explicit NaiveTransformer(const GgufFile& f) : f_(f) {
    arch_ = *f.GetString("general.architecture");
    const std::string p = arch_ + ".";
    dim_ = *f.GetUint(p + "embedding_length");
    layers_ = *f.GetUint(p + "block_count");
    heads_ = *f.GetUint(p + "attention.head_count");
    kv_heads_ = *f.GetUintOr(p + "attention.head_count_kv", heads_);
    hd_ = *f.GetUintOr(p + "attention.key_length", dim_ / heads_);
    gpt2_ = arch_ == "gpt2";
    gemma_ = arch_ == "gemma3";
    neox_ = arch_ == "qwen2" || arch_ == "qwen3" || arch_ == "phi3" || gemma_;
    eps_ = gpt2_ ? *f.GetFloat(p + "attention.layer_norm_epsilon")
                 : *f.GetFloat(p + "attention.layer_norm_rms_epsilon");
    rope_base_ = *f.GetFloatOr(p + "rope.freq_base", 10000.0);
    rot_ = *f.GetUintOr(p + "rope.dimension_count", hd_);
    const double factor = *f.GetFloatOr(p + "rope.scaling.factor", 0.0);
    if (*f.GetStringOr(p + "rope.scaling.type", "none") == "linear") freq_scale_ = 1.0 / factor;
    if (f.FindTensor("rope_freqs.weight")) freq_factors_ = Tensor("rope_freqs.weight");
    window_ = *f.GetUintOr(p + "attention.sliding_window", 0);
    softcap_ = *f.GetFloatOr(p + "final_logit_softcapping", 0.0);
  }

  // Logits [vocab] after the last token of `ids`.
  std::vector<double> LastLogits(const std::vector<int32_t>& ids) const {
    const int n = static_cast<int>(ids.size());
    Matrix x(n * dim_);
    const Matrix emb = Tensor("token_embd.weight");
    const double emb_scale = gemma_ ? std::sqrt(static_cast<double>(static_cast<float>(dim_))) : 1;
    for (int t = 0; t < n; ++t) {
      for (int c = 0; c < dim_; ++c) x[t * dim_ + c] = emb[ids[t] * dim_ + c] * emb_scale;
    }
    if (gpt2_) {
      const Matrix pos = Tensor("position_embd.weight");
      for (int t = 0; t < n; ++t) {
        for (int c = 0; c < dim_; ++c) x[t * dim_ + c] += pos[t * dim_ + c];
      }
    }
    for (int l = 0; l < layers_; ++l) Layer(l, n, x);
    Matrix last(x.end() - dim_, x.end());
    last = Norm(last, 1, dim_, "output_norm");
    const std::string head = f_.FindTensor("output.weight") ? "output.weight" : "token_embd.weight";
    Matrix logits = Linear(last, 1, head);
    if (softcap_ > 0) {
      for (double& z : logits) z = softcap_ * std::tanh(z / softcap_);
    }
    return logits;
  }

 private:
  void Layer(int l, int n, Matrix& x) const {
    const std::string b = "blk." + std::to_string(l) + ".";
    // gemma3: five sliding-window layers, then one global (llama.cpp's pattern).
    const bool sliding = gemma_ && l % 6 < 5;
    Matrix h = Norm(x, n, dim_, b + "attn_norm");
    const int q_dim = hd_ * heads_, kv_dim = hd_ * kv_heads_;
    Matrix q, k, v;
    if (Has(b + "attn_qkv.weight")) {
      const Matrix qkv = Linear(h, n, b + "attn_qkv.weight", b + "attn_qkv.bias");
      const int w = q_dim + 2 * kv_dim;
      q = Columns(qkv, n, w, 0, q_dim);
      k = Columns(qkv, n, w, q_dim, kv_dim);
      v = Columns(qkv, n, w, q_dim + kv_dim, kv_dim);
    } else {
      q = Linear(h, n, b + "attn_q.weight", b + "attn_q.bias");
      k = Linear(h, n, b + "attn_k.weight", b + "attn_k.bias");
      v = Linear(h, n, b + "attn_v.weight", b + "attn_v.bias");
    }
    if (Has(b + "attn_q_norm.weight")) {
      q = Norm(q, n * heads_, hd_, b + "attn_q_norm");
      k = Norm(k, n * kv_heads_, hd_, b + "attn_k_norm");
    }
    if (!gpt2_) {
      const double base = sliding ? 10000.0 : rope_base_;
      const double scale = sliding ? 1.0 : freq_scale_;
      Rope(q, n, heads_, base, scale, !sliding);
      Rope(k, n, kv_heads_, base, scale, !sliding);
    }
    const Matrix att = Attention(q, k, v, n, sliding ? window_ : 0);
    Matrix o = Linear(att, n, b + "attn_output.weight", b + "attn_output.bias");
    if (gemma_) o = Norm(o, n, dim_, b + "post_attention_norm");
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = Norm(x, n, dim_, b + "ffn_norm");
    Matrix f = FeedForward(h, n, b);
    if (gemma_) f = Norm(f, n, dim_, b + "post_ffw_norm");
    for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
  }

  static double GeluTanh(double z) {
    return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
  }

  Matrix FeedForward(const Matrix& h, int n, const std::string& b) const {
    if (gpt2_) {
      Matrix u = Linear(h, n, b + "ffn_up.weight", b + "ffn_up.bias");
      for (double& z : u) z = GeluTanh(z);
      return Linear(u, n, b + "ffn_down.weight", b + "ffn_down.bias");
    }
    Matrix g, u;
    if (arch_ == "phi3") {  // ffn_up holds [gate | up] per token
      const Matrix gu = Linear(h, n, b + "ffn_up.weight");
      const int ffn = static_cast<int>(gu.size() / n / 2);
      g = Columns(gu, n, 2 * ffn, 0, ffn);
      u = Columns(gu, n, 2 * ffn, ffn, ffn);
    } else {
      g = Linear(h, n, b + "ffn_gate.weight");
      u = Linear(h, n, b + "ffn_up.weight");
    }
    Matrix a(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      a[i] = (gemma_ ? GeluTanh(g[i]) : g[i] / (1 + std::exp(-g[i]))) * u[i];
    }
    return Linear(a, n, b + "ffn_down.weight");
  }

  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

  static Matrix Columns(const Matrix& m, int n, int width, int from, int count) {
    Matrix out(size_t(n) * count);
    for (int t = 0; t < n; ++t) {
      for (int c = 0; c < count; ++c) out[t * count + c] = m[size_t(t) * width + from + c];
    }
    return out;
  }

  Matrix Tensor(const std::string& name) const {
    const GgufTensorInfo* t = f_.FindTensor(name);
    Matrix m(t->num_elements);
    for (size_t i = 0; i < m.size(); ++i) {
      const auto* h = reinterpret_cast<const uint16_t*>(t->data);
      m[i] = t->type == GgmlType::kF32   ? reinterpret_cast<const float*>(t->data)[i]
             : t->type == GgmlType::kF16 ? HalfToFloat(h[i])
                                         : Bf16ToFloat(h[i]);
    }
    return m;
  }

  // y[n, out] = x[n, in] · Wᵀ + b, with W stored [out, in]; b only if present.
  Matrix Linear(const Matrix& x, int n, const std::string& w_name, const std::string& b_name = "") const {
    const GgufTensorInfo* t = f_.FindTensor(w_name);
    const int in = static_cast<int>(t->dims[0]), out = static_cast<int>(t->dims[1]);
    const Matrix w = Tensor(w_name);
    const Matrix b = (b_name.empty() || !Has(b_name)) ? Matrix(out, 0.0) : Tensor(b_name);
    Matrix y(size_t(n) * out);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < out; ++j) {
        double acc = b[j];
        for (int c = 0; c < in; ++c) acc += x[size_t(i) * in + c] * w[size_t(j) * in + c];
        y[size_t(i) * out + j] = acc;
      }
    }
    return y;
  }

  // RMSNorm (LayerNorm with bias for gpt2) of n rows of `width`.
  Matrix Norm(const Matrix& x, int n, int width, const std::string& name) const {
    const Matrix w = Tensor(name + ".weight");
    const Matrix b = gpt2_ ? Tensor(name + ".bias") : Matrix(width, 0.0);
    Matrix y(x.size());
    for (int i = 0; i < n; ++i) {
      const double* xi = &x[size_t(i) * width];
      double mean = 0, sq = 0;
      if (gpt2_) {
        for (int c = 0; c < width; ++c) mean += xi[c] / width;
      }
      for (int c = 0; c < width; ++c) sq += (xi[c] - mean) * (xi[c] - mean) / width;
      for (int c = 0; c < width; ++c) {
        y[size_t(i) * width + c] = (xi[c] - mean) / std::sqrt(sq + eps_) * w[c] + b[c];
      }
    }
    return y;
  }

  // Pair i of each head rotates by t · scale · base^(-2i/rot) / factor[i]:
  // pairs (2i, 2i+1) in llama, (i, i + rot/2) in the NEOX archs.
  void Rope(Matrix& m, int n, int heads, double base, double scale, bool factors) const {
    for (int t = 0; t < n; ++t) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < rot_ / 2; ++i) {
          double th = t * scale * std::pow(base, -2.0 * i / rot_);
          if (factors && !freq_factors_.empty()) th /= freq_factors_[i];
          double* p = &m[(size_t(t) * heads + h) * hd_];
          const int i0 = neox_ ? i : 2 * i, i1 = neox_ ? i + rot_ / 2 : 2 * i + 1;
          const double a = p[i0], c = p[i1];
          p[i0] = a * std::cos(th) - c * std::sin(th);
          p[i1] = a * std::sin(th) + c * std::cos(th);
        }
      }
    }
  }

  double AttentionScale() const {
    if (gemma_ && layers_ == 62) return 1.0 / std::sqrt(double(dim_ / heads_));
    return 1.0 / std::sqrt(double(hd_));
  }

  // softmax(QKᵀ·scale + causal mask [+ window])V per head; K/V head = head / group.
  Matrix Attention(const Matrix& q, const Matrix& k, const Matrix& v, int n, int window) const {
    const int q_dim = hd_ * heads_, kv_dim = hd_ * kv_heads_;
    Matrix out(size_t(n) * q_dim, 0.0);
    for (int h = 0; h < heads_; ++h) {
      const int g = h / (heads_ / kv_heads_);
      for (int t = 0; t < n; ++t) {
        std::vector<double> s(n);
        double mx = -1e300, den = 0;
        for (int j = 0; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < hd_; ++d) dot += q[t * q_dim + h * hd_ + d] * k[j * kv_dim + g * hd_ + d];
          const bool seen = j <= t && (window == 0 || t - j < window);
          s[j] = seen ? dot * AttentionScale() : -INFINITY;
          mx = std::max(mx, s[j]);
        }
        for (double& z : s) den += (z = std::exp(z - mx));
        for (int j = 0; j < n; ++j) {
          for (int d = 0; d < hd_; ++d) out[t * q_dim + h * hd_ + d] += s[j] / den * v[j * kv_dim + g * hd_ + d];
        }
      }
    }
    return out;
  }

  const GgufFile& f_;
  std::string arch_;
  bool gpt2_ = false, gemma_ = false, neox_ = false;
  int dim_, layers_, heads_, kv_heads_, hd_, rot_;
  int window_ = 0;
  double eps_, rope_base_, freq_scale_ = 1.0, softcap_ = 0.0;
  Matrix freq_factors_;
};

}  // namespace tessera::testing
