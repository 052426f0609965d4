// A deliberately plain forward pass, written straight from the architecture
// definitions (dense causal attention, no KV cache, no batching, double
// accumulation), used as the reference for the engine's model tests.
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
    eps_ = arch_ == "llama" ? *f.GetFloat(p + "attention.layer_norm_rms_epsilon")
                            : *f.GetFloat(p + "attention.layer_norm_epsilon");
    rope_base_ = *f.GetFloatOr(p + "rope.freq_base", 10000.0);
  }

  // Logits [vocab] after the last token of `ids`.
  std::vector<double> LastLogits(const std::vector<int32_t>& ids) const {
    const int n = static_cast<int>(ids.size());
    const bool llama = arch_ == "llama";
    Matrix x(n * dim_);
    const Matrix emb = Tensor("token_embd.weight");
    for (int t = 0; t < n; ++t) {
      for (int c = 0; c < dim_; ++c) x[t * dim_ + c] = emb[ids[t] * dim_ + c];
    }
    if (!llama) {
      const Matrix pos = Tensor("position_embd.weight");
      for (int t = 0; t < n; ++t) {
        for (int c = 0; c < dim_; ++c) x[t * dim_ + c] += pos[t * dim_ + c];
      }
    }
    for (int l = 0; l < layers_; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      Matrix h = Norm(x, n, b + "attn_norm");
      Matrix q, k, v;
      if (llama) {
        q = Linear(h, n, b + "attn_q.weight");
        k = Linear(h, n, b + "attn_k.weight");
        v = Linear(h, n, b + "attn_v.weight");
        Rope(q, n, heads_);
        Rope(k, n, kv_heads_);
      } else {
        const Matrix qkv = Linear(h, n, b + "attn_qkv.weight", b + "attn_qkv.bias");
        q.resize(n * dim_), k.resize(n * dim_), v.resize(n * dim_);
        for (int t = 0; t < n; ++t) {
          for (int c = 0; c < dim_; ++c) {
            q[t * dim_ + c] = qkv[t * 3 * dim_ + c];
            k[t * dim_ + c] = qkv[t * 3 * dim_ + dim_ + c];
            v[t * dim_ + c] = qkv[t * 3 * dim_ + 2 * dim_ + c];
          }
        }
      }
      const Matrix att = Attention(q, k, v, n);
      const Matrix o = Linear(att, n, b + "attn_output.weight", llama ? "" : b + "attn_output.bias");
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      h = Norm(x, n, b + "ffn_norm");
      Matrix f;
      if (llama) {
        const Matrix g = Linear(h, n, b + "ffn_gate.weight");
        const Matrix u = Linear(h, n, b + "ffn_up.weight");
        Matrix a(g.size());
        for (size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
        f = Linear(a, n, b + "ffn_down.weight");
      } else {
        Matrix u = Linear(h, n, b + "ffn_up.weight", b + "ffn_up.bias");
        for (double& z : u) z = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
        f = Linear(u, n, b + "ffn_down.weight", b + "ffn_down.bias");
      }
      for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
    }
    Matrix last(x.end() - dim_, x.end());
    last = Norm(last, 1, "output_norm");
    const std::string head = f_.FindTensor("output.weight") ? "output.weight" : "token_embd.weight";
    return Linear(last, 1, head);
  }

 private:
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

  // y[n, out] = x[n, in] · Wᵀ + b, with W stored [out, in].
  Matrix Linear(const Matrix& x, int n, const std::string& w_name, const std::string& b_name = "") const {
    const GgufTensorInfo* t = f_.FindTensor(w_name);
    const int in = static_cast<int>(t->dims[0]), out = static_cast<int>(t->dims[1]);
    const Matrix w = Tensor(w_name);
    const Matrix b = b_name.empty() ? Matrix(out, 0.0) : Tensor(b_name);
    Matrix y(n * out);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < out; ++j) {
        double acc = b[j];
        for (int c = 0; c < in; ++c) acc += x[i * in + c] * w[j * in + c];
        y[i * out + j] = acc;
      }
    }
    return y;
  }

  Matrix Norm(const Matrix& x, int n, const std::string& name) const {
    const Matrix w = Tensor(name + ".weight");
    const bool llama = arch_ == "llama";
    const Matrix b = llama ? Matrix(dim_, 0.0) : Tensor(name + ".bias");
    Matrix y(x.size());
    for (int i = 0; i < n; ++i) {
      double mean = 0, sq = 0;
      for (int c = 0; c < dim_; ++c) mean += x[i * dim_ + c] / dim_;
      if (llama) mean = 0;
      for (int c = 0; c < dim_; ++c) sq += (x[i * dim_ + c] - mean) * (x[i * dim_ + c] - mean) / dim_;
      for (int c = 0; c < dim_; ++c) {
        y[i * dim_ + c] = (x[i * dim_ + c] - mean) / std::sqrt(sq + eps_) * w[c] + b[c];
      }
    }
    return y;
  }

  // Adjacent pairs (2i, 2i+1) of each head rotate by t * base^(-2i/head_dim).
  void Rope(Matrix& m, int n, int heads) const {
    const int hd = dim_ / heads_;
    for (int t = 0; t < n; ++t) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < hd / 2; ++i) {
          const double th = t * std::pow(rope_base_, -2.0 * i / hd);
          double* p = &m[(t * heads + h) * hd + 2 * i];
          const double a = p[0], c = p[1];
          p[0] = a * std::cos(th) - c * std::sin(th);
          p[1] = a * std::sin(th) + c * std::cos(th);
        }
      }
    }
  }

  // softmax(QKᵀ/√d + causal mask)V per head; K/V head = head / (heads / kv_heads).
  Matrix Attention(const Matrix& q, const Matrix& k, const Matrix& v, int n) const {
    const int hd = dim_ / heads_, kv_dim = hd * kv_heads_;
    Matrix out(n * dim_, 0.0);
    for (int h = 0; h < heads_; ++h) {
      const int g = h / (heads_ / kv_heads_);
      for (int t = 0; t < n; ++t) {
        std::vector<double> s(n);
        double mx = -1e300, den = 0;
        for (int j = 0; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[t * dim_ + h * hd + d] * k[j * kv_dim + g * hd + d];
          s[j] = j <= t ? dot / std::sqrt(double(hd)) : -INFINITY;
          mx = std::max(mx, s[j]);
        }
        for (double& z : s) den += (z = std::exp(z - mx));
        for (int j = 0; j < n; ++j) {
          for (int d = 0; d < hd; ++d) out[t * dim_ + h * hd + d] += s[j] / den * v[j * kv_dim + g * hd + d];
        }
      }
    }
    return out;
  }

  const GgufFile& f_;
  std::string arch_;
  int dim_, layers_, heads_, kv_heads_;
  double eps_, rope_base_;
};

}  // namespace tessera::testing
