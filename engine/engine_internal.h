// State owned by the engine thread.
#pragma once

#include <memory>
#include <vector>

#include "engine/kv_cache/block_allocator.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/scheduler/scheduler.h"

namespace tessera {

struct EngineState {
  std::unique_ptr<GgufFile> file;          // the mapped model file; weights point into it
  std::unique_ptr<Model> model;
  std::unique_ptr<BlockAllocator> allocator;
  std::unique_ptr<Scheduler> scheduler;
  StepBatch batch;                         // reused every step
  std::vector<float> logits;               // [max_num_seqs, vocab], host
  std::vector<SampledToken> sampled;       // reused every step
};

// Fills `batch` from the plan: packed token ids and positions, per-sequence
// attention slices and the KV slot of every new token.
void BuildStepBatch(const StepPlan& plan, int32_t block_size, StepBatch& batch);

}  // namespace tessera
