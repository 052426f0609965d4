// Scheduler decisions under token, sequence and KV-block budgets, driven
// directly (no model): the test plays the engine's part between Schedule()
// and Postprocess().
#include <memory>

#include "engine/model/gguf.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"

namespace tessera {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = *GgufFile::Open(testing::SourcePath("models/stories260K.gguf"));
    tokenizer_ = *Tokenizer::FromGguf(*file_);
  }

  std::unique_ptr<Scheduler> Make(int32_t max_seqs, int32_t max_tokens, int32_t blocks,
                                  int32_t block_size = 4) {
    allocator_ = std::make_unique<BlockAllocator>(blocks, block_size);
    return std::make_unique<Scheduler>(SchedulerOptions{max_seqs, max_tokens, 2048}, *tokenizer_,
                                       *allocator_);
  }

  // Prompts of different ids share no tokens (no prefix cache hits).
  std::shared_ptr<testing::CollectingSink> Add(Scheduler& s, uint64_t id, int prompt_len,
                                               int max_tokens = 8, int32_t priority = 0) {
    GenerationRequest r;
    r.id = id;
    r.priority = priority;
    for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(10 + (id % 10) * 45 + i % 45);
    r.sampling.temperature = 0;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    auto sink = std::make_shared<testing::CollectingSink>();
    s.Add(std::move(r), sink);
    return sink;
  }

  // Completes a step as the engine would, sampling token 300 for every
  // sampled sequence.
  static void Finish(Scheduler& s, const StepPlan& plan) {
    std::vector<SampledToken> sampled;
    for (const auto& seq : plan.seqs) {
      if (seq.sample) sampled.push_back({300, 0.0f, {}});
    }
    s.Postprocess(plan, sampled);
  }

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<BlockAllocator> allocator_;
};

TEST_F(SchedulerTest, TokenBudgetChunksPrefill) {
  auto s = Make(8, 10, 100);
  Add(*s, 1, 8);
  Add(*s, 2, 5);
  StepPlan p = s->Schedule();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 8);
  EXPECT_TRUE(p.seqs[0].sample);
  EXPECT_EQ(p.seqs[1].num_new_tokens, 2);  // chunk of the second prompt
  EXPECT_FALSE(p.seqs[1].sample);
  EXPECT_EQ(p.num_tokens, 10);
  Finish(*s, p);
  p = s->Schedule();  // decode of #1 plus the rest of #2's prompt
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(p.seqs[1].num_new_tokens, 3);
  EXPECT_TRUE(p.seqs[1].sample);
  EXPECT_EQ(p.num_prefill_tokens, 3);
}

TEST_F(SchedulerTest, SequenceBudgetLimitsAdmission) {
  auto s = Make(2, 100, 100);
  Add(*s, 1, 3);
  Add(*s, 2, 3);
  Add(*s, 3, 3);
  StepPlan p = s->Schedule();
  EXPECT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(s->num_waiting(), 1);
  EXPECT_EQ(s->num_running(), 2);
}

TEST_F(SchedulerTest, GroupsWaitingPromptsBySimilarLength) {
  auto s = Make(3, 1000, 1000);
  Add(*s, 1, 20);  // oldest: always first
  Add(*s, 2, 3);
  Add(*s, 3, 40);
  Add(*s, 4, 19);
  Add(*s, 5, 22);
  StepPlan p = s->Schedule();
  ASSERT_EQ(p.seqs.size(), 3u);
  EXPECT_EQ(p.seqs[0].seq->request.id, 1u);
  EXPECT_EQ(p.seqs[1].seq->request.id, 4u);  // |19 - 20| = 1
  EXPECT_EQ(p.seqs[2].seq->request.id, 5u);  // |22 - 20| = 2
  EXPECT_EQ(s->num_waiting(), 2);
}

TEST_F(SchedulerTest, PreemptsNewestWhenBlocksRunOut) {
  // 6 blocks of 4 tokens: two prompts of 8 take 4 blocks; growing both past
  // 12 tokens needs 8 blocks, so the newer one is preempted.
  auto s = Make(8, 100, 6);
  Add(*s, 1, 8, 16);
  Add(*s, 2, 8, 16);
  for (int step = 0; step < 12 && s->num_preemptions() == 0; ++step) Finish(*s, s->Schedule());
  EXPECT_EQ(s->num_preemptions(), 1u);
  EXPECT_EQ(s->num_running(), 1);
  EXPECT_EQ(s->num_waiting(), 1);
}

TEST_F(SchedulerTest, CancelFinishesAndFreesBlocks) {
  auto s = Make(8, 100, 50);
  auto sink = Add(*s, 1, 8);
  Finish(*s, s->Schedule());
  EXPECT_GT(allocator_->num_used(), 0);
  s->Cancel(1);
  StepPlan p = s->Schedule();
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(sink->done);
  EXPECT_EQ(sink->finish.reason, FinishReason::kCancelled);
  EXPECT_EQ(allocator_->num_used(), 0);
  EXPECT_TRUE(s->idle());
}

TEST_F(SchedulerTest, MaxTokensFinishesWithLength) {
  auto s = Make(8, 100, 50);
  auto sink = Add(*s, 1, 4, 3);
  for (int i = 0; i < 3; ++i) Finish(*s, s->Schedule());
  EXPECT_TRUE(sink->done);
  EXPECT_EQ(sink->finish.reason, FinishReason::kLength);
  EXPECT_EQ(sink->finish.completion_tokens, 3);
  EXPECT_EQ(allocator_->num_used(), 0);
}

}  // namespace
}  // namespace tessera
