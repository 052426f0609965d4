// The engine thread: load, then schedule → forward → sample → postprocess.
#include <algorithm>
#include <cstring>
#include <future>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "engine/format/chat_template_source.h"
#include "engine/format/hf_model.h"
#include "engine/source_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "spdlog/spdlog.h"

namespace tessera {
namespace {

// Default KV budget on the CPU: enough for many sequences on a small machine.
constexpr int64_t kDefaultKvCacheBytes = int64_t{1} << 30;

// EngineOptions::prefill_group_tokens's default on the CPU.
constexpr int32_t kCpuPrefillGroupTokens = 128;

// "auto" picks bf16 products only where the weights are 16-bit already.
std::string ResolveCpuMatmul(const std::string& option, const GgufFile& file) {
  if (option != "auto") return option;
  bool all_16_bit = true;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.dims.size() >= 2 && t.type == GgmlType::kF32) all_16_bit = false;
  }
  return all_16_bit && CpuHasBf16Matmul() ? "bf16" : "f32";
}

}  // namespace

void BuildStepBatch(const StepPlan& plan, int32_t block_size, StepBatch& batch) {
  batch.token_ids.clear();
  batch.positions.clear();
  batch.sample_rows.clear();
  AttentionMetadata& meta = batch.attention;
  meta.seqs.clear();
  meta.slot_mapping.clear();
  meta.block_size = block_size;
  meta.max_q_len = 0;
  meta.max_kv_len = 0;
  for (const ScheduledSequence& s : plan.seqs) {
    const Sequence& seq = *s.seq;
    const int32_t start = static_cast<int32_t>(batch.token_ids.size());
    for (int32_t i = 0; i < s.num_new_tokens; ++i) {
      const int32_t pos = seq.num_computed + i;
      batch.token_ids.push_back(seq.tokens[pos]);
      batch.positions.push_back(pos);
      meta.slot_mapping.push_back(seq.blocks.Slot(pos));
    }
    const int32_t kv_len = seq.num_computed + s.num_new_tokens;
    meta.seqs.push_back({start, s.num_new_tokens, kv_len, seq.blocks.blocks().data()});
    meta.max_q_len = std::max(meta.max_q_len, s.num_new_tokens);
    meta.max_kv_len = std::max(meta.max_kv_len, kv_len);
    if (s.sample) batch.sample_rows.push_back(start + s.num_new_tokens - 1);
  }
  meta.num_tokens = static_cast<int32_t>(batch.token_ids.size());
}

absl::Status Engine::Load() {
  auto source = OpenModelSource(options_.model_path);
  if (!source.ok()) {
    return absl::Status(source.status().code(), absl::StrCat("loading model ", options_.model_path,
                                                             ": ", source.status().message()));
  }
  auto chat_template = FindChatTemplate(*source, options_.model_path, options_.chat_template_path);
  if (!chat_template.ok()) return chat_template.status();
  info_.chat_template = *std::move(chat_template);
  auto tokenizer = OpenSourceTokenizer(*source);
  state_->file = std::move(source->file);
  info_.format = source->format;
  if (!tokenizer.ok()) return tokenizer.status();
  tokenizer_ = std::move(*tokenizer);
  const std::string matmul = ResolveCpuMatmul(options_.cpu_matmul, *state_->file);
  info_.cpu_matmul = matmul;
  BackendOptions backend_options{options_.device, options_.num_threads, matmul};
  backend_options.gpu_memory_utilization = options_.gpu_memory_utilization;
  backend_options.dtype = options_.dtype;
  auto backend = CreateBackend(backend_options);
  if (!backend.ok()) return backend.status();
  auto model = Model::Load(*state_->file, std::move(*backend), options_.max_batched_tokens,
                           options_.max_num_seqs, options_.context_length);
  if (!model.ok()) return model.status();
  state_->model = std::move(*model);
  const ModelConfig& c = state_->model->config();
  if (tokenizer_->vocab_size() != c.vocab_size) {
    spdlog::info("the tokenizer has {} token ids and the model {}: ids from {} on are never "
                 "sampled and are refused in prompts",
                 tokenizer_->vocab_size(), c.vocab_size,
                 std::min(tokenizer_->vocab_size(), c.vocab_size));
  }
  if (auto s = AllocateKvCache(); !s.ok()) return s;
  state_->logits.resize(static_cast<size_t>(options_.max_num_seqs) * c.vocab_size);
  SchedulerOptions so{options_.max_num_seqs, options_.max_batched_tokens, c.context_length};
  so.policy = options_.scheduling_policy == "priority" ? SchedulingPolicy::kPriority
                                                       : SchedulingPolicy::kFcfs;
  so.priority_aging_seconds = options_.priority_aging_seconds;
  so.prefill_group_tokens = options_.prefill_group_tokens >= 0 ? options_.prefill_group_tokens
                            : state_->model->backend().name() == "cpu" ? kCpuPrefillGroupTokens
                                                                       : 0;
  so.prefix_cache_key = PrefixCacheKey();
  FillModelInfo();
  so.vocab_size = info_.vocab_size;
  state_->scheduler = std::make_unique<Scheduler>(so, *tokenizer_, *state_->allocator);
  return absl::OkStatus();
}

static absl::StatusOr<DType> ResolveKvDtype(const std::string& option, const std::string& weights) {
  // int8 is CPU only: the CUDA backend refuses it.
  if (std::optional<DType> named = KvCacheDTypeFromName(option)) return *named;
  // auto: f16 (as llama.cpp's default) for 16-bit and quantized weights,
  // whose products already round to 8 or 16 bits; f32 where any matrix is f32.
  if (option == "auto") return weights.find("f32") == std::string::npos ? DType::kF16 : DType::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV cache dtype '", option, "' (expected auto, f32, f16 or int8)"));
}

absl::Status Engine::AllocateKvCache() {
  const ModelConfig& c = state_->model->config();
  const int32_t bs = options_.block_size;
  auto dtype = ResolveKvDtype(options_.kv_cache_dtype, state_->model->weights().dtype_name);
  if (!dtype.ok()) return dtype.status();
  info_.kv_cache_dtype = std::string(DTypeName(*dtype));
  if (*dtype == DType::kI8 && state_->model->backend().name() != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-dtype int8 is CPU only; the ", std::string(state_->model->backend().name()),
        " backend takes auto, f16 or f32"));
  }
  const size_t per_block = state_->model->KvBytesPerBlock(bs, *dtype);
  Backend& backend = state_->model->backend();
  const StepLimits limits{options_.max_batched_tokens, options_.max_num_seqs, c.context_length,
                          AttentionShape{c.num_heads, c.num_kv_heads, c.head_dim, 1.0f}};
  if (auto s = backend.ReserveWorkspace(limits); !s.ok()) return s;
  const int64_t useful_blocks =
      int64_t(options_.max_num_seqs) * ((c.context_length + bs - 1) / bs);
  // A device backend offers its own budget (a fraction of free memory).
  const int64_t offered = backend.KvCacheBudgetBytes();
  const int64_t budget = options_.kv_cache_bytes > 0 ? options_.kv_cache_bytes
                         : offered > 0              ? offered
                                                    : kDefaultKvCacheBytes;
  int64_t blocks = budget / static_cast<int64_t>(per_block);
  if (options_.kv_cache_bytes == 0) blocks = std::min(blocks, useful_blocks);
  const int64_t min_blocks = (c.context_length + bs - 1) / bs;
  if (blocks < min_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache of ", blocks, " blocks cannot hold one full context (", min_blocks,
        " blocks of ", bs, " tokens, ", per_block, " bytes each); raise --kv-cache-memory"));
  }
  blocks = std::min<int64_t>(blocks, 1 << 30);
  PrefixCacheOptions prefix;
  prefix.enabled = options_.enable_prefix_caching;
  state_->allocator =
      std::make_unique<BlockAllocator>(static_cast<int32_t>(blocks), bs, std::move(prefix));
  spdlog::info("KV cache: {} blocks of {} tokens, {} ({:.1f} MiB)", blocks, bs,
               info_.kv_cache_dtype, blocks * per_block / 1048576.0);
  return state_->model->AllocateKvCache(static_cast<int32_t>(blocks), bs, *dtype);
}

// Whatever besides the tokens decides a block's K/V within this engine: the
// model file and how products and the cache are computed.
uint64_t Engine::PrefixCacheKey() const {
  const std::string key = absl::StrCat(options_.model_path, "|", state_->file->tensors().size(), "|",
                                       info_.cpu_matmul, "|", info_.kv_cache_dtype, "|",
                                       options_.device, "|", options_.dtype);
  std::vector<int32_t> bytes(key.begin(), key.end());
  return DefaultBlockHash(0, bytes, 0);
}

// RoPE as Model::QkNormAndRope applies it: the scaling of the full-context
// layers, and the sliding-window layers with their own unscaled base.
static void FillRopeInfo(const ModelConfig& c, const GgufFile& file, ModelInfo& info) {
  for (int32_t l = 0; l < c.num_layers; ++l) {
    if (c.IsSlidingLayer(l)) info.sliding_window_layers.push_back(l);
  }
  if (!info.sliding_window_layers.empty()) info.sliding_window = c.sliding_window;
  if (!c.use_rope) return;
  info.rope_freq_base = c.rope_base;
  if (!info.sliding_window_layers.empty()) info.rope_freq_base_sliding = c.rope_base_sliding;
  info.rope_scaling = "none";
  if (c.rope_freq_factors) {
    info.rope_scaling = c.rope_original_context > 0 ? "longrope" : "llama3";
    const GgufTensorInfo* t = file.FindTensor(c.rope_factors_tensor);
    if (t != nullptr && t->type == GgmlType::kF32) {
      float largest = 0.0f;
      for (uint64_t i = 0; i < t->num_elements; ++i) {
        float f;
        std::memcpy(&f, t->data + i * sizeof(float), sizeof(float));
        largest = std::max(largest, f);
      }
      info.rope_scaling_factor = largest;
    }
  } else if (c.rope_freq_scale != 1.0f) {
    info.rope_scaling = "linear";
    info.rope_scaling_factor = 1.0f / c.rope_freq_scale;
  }
}

void Engine::FillModelInfo() {
  const ModelConfig& c = state_->model->config();
  info_.name = c.name.empty() ? options_.model_path.substr(options_.model_path.rfind('/') + 1)
                              : c.name;
  info_.architecture = c.arch_name;
  info_.tokenizer_model = std::string(tokenizer_->model_name());
  info_.device = std::string(state_->model->backend().name());
  info_.weight_dtype = state_->model->weights().dtype_name;
  info_.vocab_size = std::min(tokenizer_->vocab_size(), c.vocab_size);
  info_.context_length = c.context_length;
  info_.embedding_dim = c.dim;
  info_.num_layers = c.num_layers;
  info_.num_heads = c.num_heads;
  info_.num_kv_heads = c.num_kv_heads;
  info_.num_parameters = state_->model->weights().num_parameters;
  info_.bos_id = tokenizer_->bos_id();
  info_.eos_id = tokenizer_->eos_id();
  info_.add_bos = tokenizer_->add_bos();
  info_.prefix_caching = options_.enable_prefix_caching;
  info_.scheduling_policy = options_.scheduling_policy;
  FillRopeInfo(c, *state_->file, info_);
}

}  // namespace tessera
