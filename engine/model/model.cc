#include "engine/model/model.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/model/gguf.h"

namespace tessera {

Model::Model(const ModelConfig& config, std::unique_ptr<Backend> backend)
    : config_(config), backend_(std::move(backend)) {
  const float scale = config.attention_scale > 0.0f
                          ? config.attention_scale
                          : 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  attention_shape_ =
      AttentionShape{config.num_heads, config.num_kv_heads, config.head_dim, scale};
  sliding_attention_shape_ = attention_shape_;
  sliding_attention_shape_.window = config.sliding_window;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const GgufFile& file,
                                                   std::unique_ptr<Backend> backend,
                                                   int32_t max_batched_tokens,
                                                   int32_t max_sampled_rows,
                                                   int32_t max_context) {
  auto config = ReadModelConfig(file);
  if (!config.ok()) return config.status();
  if (auto s = LimitContext(*config, max_context); !s.ok()) return s;
  std::unique_ptr<Model> model(new Model(*config, std::move(backend)));
  auto weights = LoadWeights(file, model->config_, *model->backend_);
  if (!weights.ok()) return weights.status();
  model->weights_ = std::move(*weights);
  auto s = model->AllocateActivations(max_batched_tokens, max_sampled_rows);
  if (!s.ok()) return s;
  return model;
}

absl::Status Model::AllocateActivations(int32_t max_tokens, int32_t max_sampled) {
  max_tokens_ = max_tokens;
  max_sampled_ = max_sampled;
  const size_t t = max_tokens, f = sizeof(float);
  const ModelConfig& c = config_;
  struct Spec { std::unique_ptr<Buffer>* buf; size_t bytes; };
  const Spec specs[] = {
      {&x_, t * c.dim * f},          {&xb_, t * c.dim * f},
      {&q_, t * c.q_dim * f},        {&k_, t * c.kv_dim * f},
      {&v_, t * c.kv_dim * f},       {&att_, t * c.q_dim * f},
      {&hb_, t * c.ffn_dim * f},     {&hb2_, t * c.ffn_dim * f},
      {&ids_, t * 4},                {&pos_, t * 4},
      {&rows_, size_t(max_sampled) * 4},
      {&last_, size_t(max_sampled) * c.dim * f},
      {&last_n_, size_t(max_sampled) * c.dim * f},
      {&logits_, size_t(max_sampled) * c.vocab_size * f},
  };
  for (const Spec& s : specs) {
    auto b = backend_->Allocate(s.bytes);
    if (!b.ok()) return b.status();
    *s.buf = std::move(*b);
  }
  return absl::OkStatus();
}

size_t Model::KvBytesPerBlock(int32_t block_size, DType dtype) const {
  return KvStorageShape{config_.num_layers, 0, block_size, config_.num_kv_heads,
                        config_.head_dim, dtype}
      .BytesPerBlock();
}

absl::Status Model::AllocateKvCache(int32_t num_blocks, int32_t block_size, DType dtype) {
  return backend_->AllocateKvCache(KvStorageShape{config_.num_layers, num_blocks, block_size,
                                                  config_.num_kv_heads, config_.head_dim, dtype});
}

void Model::Norm(const float* x, const Weight& w, const Weight& b, int32_t n, float* out) {
  if (config_.norm == NormKind::kRms) {
    backend_->RmsNorm(x, w, config_.norm_eps, n, out);
  } else {
    backend_->LayerNorm(x, w, b, config_.norm_eps, n, out);
  }
}

// Per-head RMSNorm of Q and K (qwen3, gemma3), then RoPE with the layer's
// base: sliding layers use their own base and no frequency scale or factors.
void Model::QkNormAndRope(int32_t l, int32_t n) {
  const LayerWeights& w = weights_.layers[l];
  const ModelConfig& c = config_;
  if (c.qk_norm) {
    backend_->RmsNorm(q_->f32(), w.q_norm, c.norm_eps, n * c.num_heads, q_->f32());
    backend_->RmsNorm(k_->f32(), w.k_norm, c.norm_eps, n * c.num_kv_heads, k_->f32());
  }
  if (!c.use_rope) return;
  RopeSpec rope{c.rope_dim, c.rope_base, c.rope_freq_scale, c.rope_style,
                static_cast<const float*>(weights_.rope_freqs.data), c.rope_attn_factor};
  if (c.IsSlidingLayer(l)) rope = RopeSpec{c.rope_dim, c.rope_base_sliding, 1.0f, c.rope_style};
  const auto* pos = static_cast<const int32_t*>(pos_->data());
  backend_->RopeExt(q_->f32(), n, c.num_heads, c.head_dim, rope, pos);
  backend_->RopeExt(k_->f32(), n, c.num_kv_heads, c.head_dim, rope, pos);
}

// x += post_norm(Wo · attention(rope(qk_norm(Q, K)), V)), Q, K, V from norm(x).
void Model::AttentionBlock(int32_t l, int32_t n, const AttentionMetadata& meta) {
  const LayerWeights& w = weights_.layers[l];
  const ModelConfig& c = config_;
  Norm(x_->f32(), w.attn_norm, w.attn_norm_b, n, xb_->f32());
  const LinearOutput qkv[] = {
      {&w.wq, &w.bq, q_->f32()},  // [n, q_dim]
      {&w.wk, &w.bk, k_->f32()},  // [n, kv_dim]
      {&w.wv, &w.bv, v_->f32()},  // [n, kv_dim]
  };
  backend_->LinearMany(xb_->f32(), n, qkv);
  QkNormAndRope(l, n);
  backend_->KvAppend(l, k_->f32(), v_->f32(), meta);
  const AttentionShape& shape = c.IsSlidingLayer(l) ? sliding_attention_shape_ : attention_shape_;
  backend_->Attention(l, q_->f32(), shape, meta, att_->f32());     // [n, q_dim]
  backend_->Linear(att_->f32(), n, w.wo, &w.bo, xb_->f32());       // [n, dim]
  if (c.post_norms) backend_->RmsNorm(xb_->f32(), w.attn_post_norm, c.norm_eps, n, xb_->f32());
  backend_->Add(x_->f32(), xb_->f32(), int64_t(n) * c.dim);
}

// x += post_norm(FFN(norm(x))): SwiGLU, GELU-tanh gated, or a GELU MLP.
void Model::FeedForwardBlock(int32_t l, int32_t n) {
  const LayerWeights& w = weights_.layers[l];
  const ModelConfig& c = config_;
  const int64_t hidden = int64_t(n) * c.ffn_dim;
  Norm(x_->f32(), w.ffn_norm, w.ffn_norm_b, n, xb_->f32());
  if (c.ffn == FfnKind::kGelu) {
    backend_->Linear(xb_->f32(), n, w.w_up, &w.b_up, hb_->f32());     // [n, ffn]
    backend_->Gelu(hb_->f32(), hidden);
  } else {
    const LinearOutput gate_up[] = {
        {&w.w_gate, nullptr, hb_->f32()},  // [n, ffn]
        {&w.w_up, nullptr, hb2_->f32()},   // [n, ffn]
    };
    backend_->LinearMany(xb_->f32(), n, gate_up);
    if (c.ffn == FfnKind::kSwiGlu) {
      backend_->SwiGlu(hb_->f32(), hb2_->f32(), hidden, hb_->f32());  // [n, ffn]
    } else {
      backend_->GeGlu(hb_->f32(), hb2_->f32(), hidden, hb_->f32());   // [n, ffn]
    }
  }
  backend_->Linear(hb_->f32(), n, w.w_down, &w.b_down, xb_->f32());   // [n, dim]
  if (c.post_norms) backend_->RmsNorm(xb_->f32(), w.ffn_post_norm, c.norm_eps, n, xb_->f32());
  backend_->Add(x_->f32(), xb_->f32(), int64_t(n) * c.dim);
}

absl::Status Model::Forward(const StepBatch& batch, std::span<float> logits) {
  const int32_t n = batch.num_tokens();
  const int32_t s = static_cast<int32_t>(batch.sample_rows.size());
  if (n <= 0 || n > max_tokens_ || s > max_sampled_ ||
      logits.size() < size_t(s) * config_.vocab_size) {
    return absl::InternalError(absl::StrCat("step of ", n, " tokens / ", s,
                                            " sampled rows exceeds the reserved sizes"));
  }
  auto* ids = static_cast<int32_t*>(ids_->data());
  auto* pos = static_cast<int32_t*>(pos_->data());
  auto* rows = static_cast<int32_t*>(rows_->data());
  backend_->CopyFromHost(batch.token_ids.data(), ids, n);
  backend_->CopyFromHost(batch.positions.data(), pos, n);
  backend_->CopyFromHost(batch.sample_rows.data(), rows, s);

  backend_->Embedding(weights_.token_embedding, ids, n, x_->f32());           // [n, dim]
  if (config_.embedding_scale > 0.0f) {
    backend_->Scale(x_->f32(), int64_t(n) * config_.dim, config_.embedding_scale);
  }
  if (config_.learned_positions) {
    backend_->AddPositionEmbedding(x_->f32(), weights_.position_embedding, pos, n);
  }
  for (int32_t l = 0; l < config_.num_layers; ++l) {
    AttentionBlock(l, n, batch.attention);
    FeedForwardBlock(l, n);
  }
  if (s == 0) return absl::OkStatus();
  // The head runs only on the rows that are sampled.
  backend_->GatherRows(x_->f32(), config_.dim, rows, s, last_->f32());        // [s, dim]
  Norm(last_->f32(), weights_.output_norm, weights_.output_norm_b, s, last_n_->f32());
  backend_->Linear(last_n_->f32(), s, weights_.output, nullptr, logits_->f32());  // [s, vocab]
  if (config_.final_logit_softcap > 0.0f) {
    backend_->Softcap(logits_->f32(), int64_t(s) * config_.vocab_size, config_.final_logit_softcap);
  }
  backend_->CopyToHost(logits_->f32(), logits.data(), size_t(s) * config_.vocab_size);
  backend_->Synchronize();
  return absl::OkStatus();
}

}  // namespace tessera
