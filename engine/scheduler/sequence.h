// A request as the scheduler tracks it.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/kv_cache/block_allocator.h"
#include "engine/request.h"
#include "engine/sampler/sampler.h"
#include "engine/scheduler/stop_matcher.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera {

enum class SequenceState {
  kWaiting,   // queued, or preempted and waiting to be recomputed
  kRunning,   // holds KV blocks and is scheduled every step
  kFinished,  // reported; about to be destroyed
};

struct Sequence {
  Sequence(GenerationRequest req, std::shared_ptr<GenerationSink> s, const Tokenizer& tokenizer,
           BlockTable table, int32_t vocab_size);

  GenerationRequest request;
  std::shared_ptr<GenerationSink> sink;
  std::vector<int32_t> tokens;      // prompt followed by generated tokens
  int32_t num_prompt = 0;
  int32_t num_computed = 0;         // leading tokens whose K/V are in the cache
  BlockTable blocks;
  SequenceSampler sampler;
  IncrementalDetokenizer detokenizer;
  StopMatcher stop_matcher;
  SequenceState state = SequenceState::kWaiting;
  bool cancel_requested = false;
  int32_t num_preemptions = 0;
  // Prompt tokens found in the prefix cache when first admitted (-1: not
  // admitted yet).
  int32_t num_cached_prompt = -1;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;

  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  // Tokens not yet in the cache.
  int32_t num_uncomputed() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
};

}  // namespace tessera
