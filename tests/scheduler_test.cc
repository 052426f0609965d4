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
                                  int32_t block_size = 4,
                                  SchedulingPolicy policy = SchedulingPolicy::kFcfs,
                                  double aging_seconds = 0, int32_t prefill_group_tokens = 0) {
    allocator_ = std::make_unique<BlockAllocator>(blocks, block_size);
    SchedulerOptions options{max_seqs, max_tokens, 2048};
    options.policy = policy;
    options.priority_aging_seconds = aging_seconds;
    options.prefill_group_tokens = prefill_group_tokens;
    return std::make_unique<Scheduler>(options, *tokenizer_, *allocator_);
  }

  std::unique_ptr<Scheduler> MakePriority(int32_t max_seqs, int32_t max_tokens, int32_t blocks,
                                          double aging_seconds = 0) {
    return Make(max_seqs, max_tokens, blocks, 4, SchedulingPolicy::kPriority, aging_seconds);
  }

  // Adds a request whose prompt is `prompt` exactly.
  std::shared_ptr<testing::CollectingSink> AddPrompt(Scheduler& s, uint64_t id,
                                                     std::vector<int32_t> prompt,
                                                     int max_tokens = 8) {
    GenerationRequest r;
    r.id = id;
    r.prompt_ids = std::move(prompt);
    r.sampling.temperature = 0;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    auto sink = std::make_shared<testing::CollectingSink>();
    s.Add(std::move(r), sink);
    return sink;
  }

  static std::vector<uint64_t> Ids(const StepPlan& plan) {
    std::vector<uint64_t> ids;
    for (const auto& s : plan.seqs) ids.push_back(s.seq->request.id);
    return ids;
  }

  // Prompts of different ids share no tokens (no prefix cache hits).
  std::shared_ptr<testing::CollectingSink> Add(Scheduler& s, uint64_t id, int prompt_len,
                                               int max_tokens = 8, int32_t priority = 0,
                                               Clock::time_point arrival = Clock::now()) {
    GenerationRequest r;
    r.id = id;
    r.priority = priority;
    r.arrival = arrival;
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

TEST_F(SchedulerTest, PrefillGroupTokensSpreadsShortPromptsOverSteps) {
  auto s = Make(8, 100, 100, 4, SchedulingPolicy::kFcfs, 0, /*prefill_group_tokens=*/10);
  for (uint64_t id = 1; id <= 5; ++id) Add(*s, id, 4);
  StepPlan p = s->Schedule();
  // 4 + 4 < 10: a third joins; at 12 the step is full.
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(p.num_prefill_tokens, 12);
  Finish(*s, p);
  p = s->Schedule();  // three decodes (not prefill) and the last two prompts
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(p.num_prefill_tokens, 8);
}

TEST_F(SchedulerTest, PrefillGroupTokensLetsAChunkedPromptJoin) {
  auto s = Make(8, 20, 100, 4, SchedulingPolicy::kFcfs, 0, /*prefill_group_tokens=*/4);
  Add(*s, 1, 6);
  Add(*s, 3, 2);   // would finish in the step: waits
  Add(*s, 2, 30);  // too long to finish: joins with a chunk
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(p.seqs[1].num_new_tokens, 14);
  Finish(*s, p);
  p = s->Schedule();  // #1's decode and #2's last 16: #3 still waits
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s->num_waiting(), 1);
  Finish(*s, p);
  p = s->Schedule();  // two decodes, no prefill: #3 joins
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(p.num_prefill_tokens, 2);
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

std::vector<int32_t> Prompt(int32_t first, int32_t count) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < count; ++i) p.push_back(first + i);
  return p;
}

TEST_F(SchedulerTest, CachedPrefixIsNotComputedAgain) {
  auto s = Make(8, 100, 50);
  auto first = AddPrompt(*s, 1, Prompt(20, 10), 1);
  StepPlan p = s->Schedule();
  EXPECT_EQ(p.prefix_cache_queries, 10);
  EXPECT_EQ(p.prefix_cache_hits, 0);
  Finish(*s, p);
  ASSERT_TRUE(first->done);
  EXPECT_EQ(first->finish.cached_prompt_tokens, 0);
  EXPECT_EQ(allocator_->num_used(), 0);
  EXPECT_EQ(allocator_->num_cached(), 2);  // two full blocks of 4
  auto second = AddPrompt(*s, 2, Prompt(20, 10), 1);
  p = s->Schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 2);
  EXPECT_EQ(p.seqs[0].seq->num_computed, 8);
  EXPECT_TRUE(p.seqs[0].sample);
  EXPECT_EQ(p.prefix_cache_hits, 8);
  EXPECT_EQ(p.num_prefill_tokens, 2);
  Finish(*s, p);
  EXPECT_EQ(second->finish.cached_prompt_tokens, 8);
}

// A prompt of whole blocks, all cached: the last block is computed again so
// that its last token has logits to sample.
TEST_F(SchedulerTest, FullyCachedPromptStillComputesItsLastToken) {
  auto s = Make(8, 100, 50);
  AddPrompt(*s, 1, Prompt(20, 8), 1);
  Finish(*s, s->Schedule());
  auto again = AddPrompt(*s, 2, Prompt(20, 8), 1);
  StepPlan p = s->Schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 4);
  EXPECT_EQ(p.prefix_cache_hits, 4);
  Finish(*s, p);
  EXPECT_EQ(again->finish.cached_prompt_tokens, 4);
}

// Every block's reference count equals the number of running sequences'
// tables that hold it (all running sequences are in the plan here).
void ExpectRefCountsMatch(const BlockAllocator& alloc, const StepPlan& plan) {
  std::vector<int32_t> holders(alloc.num_blocks(), 0);
  for (const auto& s : plan.seqs) {
    for (int32_t b : s.seq->blocks.blocks()) ++holders[b];
  }
  for (int32_t b = 0; b < alloc.num_blocks(); ++b) {
    ASSERT_EQ(alloc.ref_count(b), holders[b]) << "block " << b;
  }
}

TEST_F(SchedulerTest, SharedPrefixRefCountsThroughCancelAndPreemption) {
  // 12 blocks of 4: a shared 8-token prefix; four sequences growing to 24
  // tokens cannot all fit, so some are preempted and recomputed.
  auto s = Make(8, 100, 12);
  AddPrompt(*s, 1, Prompt(20, 9), 1);
  Finish(*s, s->Schedule());  // caches the 8-token prefix
  std::vector<std::shared_ptr<testing::CollectingSink>> sinks;
  for (uint64_t id = 2; id <= 5; ++id) {
    std::vector<int32_t> prompt = Prompt(20, 8);
    prompt.push_back(100 + static_cast<int32_t>(id));  // distinct last token
    sinks.push_back(AddPrompt(*s, id, prompt, 15));
  }
  bool cancelled = false;
  for (int step = 0; step < 200 && !s->idle(); ++step) {
    StepPlan p = s->Schedule();
    if (p.empty()) break;
    ExpectRefCountsMatch(*allocator_, p);
    if (!cancelled && s->num_preemptions() > 0) {
      s->Cancel(3);
      cancelled = true;
    }
    Finish(*s, p);
  }
  EXPECT_TRUE(s->idle());
  EXPECT_GT(s->num_preemptions(), 0u);
  EXPECT_EQ(sinks[1]->finish.reason, FinishReason::kCancelled);
  for (size_t i : {0, 2, 3}) {
    EXPECT_EQ(sinks[i]->finish.reason, FinishReason::kLength);
    EXPECT_EQ(sinks[i]->finish.cached_prompt_tokens, 8) << i;
    EXPECT_EQ(sinks[i]->token_ids.size(), 15u);
  }
  EXPECT_EQ(allocator_->num_used(), 0);
  EXPECT_GT(allocator_->num_cached(), 0);
  for (int32_t b = 0; b < allocator_->num_blocks(); ++b) EXPECT_EQ(allocator_->ref_count(b), 0);
}

TEST_F(SchedulerTest, PriorityAdmitsMostUrgentFirstFifoWithin) {
  auto s = MakePriority(3, 1000, 1000);
  Add(*s, 1, 5, 8, /*priority=*/1);
  Add(*s, 2, 5, 8, 0);
  Add(*s, 3, 5, 8, 1);
  Add(*s, 4, 5, 8, 0);
  Add(*s, 5, 5, 8, -1);
  // The most urgent class is prefilled alone; then the next class, in
  // arrival order, beside #5's decode.
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{5}));
  Finish(*s, p);
  EXPECT_EQ(Ids(s->Schedule()), (std::vector<uint64_t>{5, 2, 4}));
  EXPECT_EQ(s->num_preemptions(), 0u);  // the batch is full, nobody more urgent waits
}

// An urgent request arriving while less urgent prompts are being prefilled in
// chunks gets the next step's prefill budget, beside the running decodes,
// and no less urgent prefill shares that step.
TEST_F(SchedulerTest, UrgentPrefillIsNotBatchedWithLessUrgentPrefill) {
  auto s = MakePriority(4, 16, 1000);
  Add(*s, 1, 5, 8, 0);
  Finish(*s, s->Schedule());          // #1 decodes from now on
  Add(*s, 2, 40, 8, 0);               // a long prompt: chunks of 15
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2}));
  Finish(*s, p);
  Add(*s, 3, 6, 8, -1);
  p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{3}));  // #1's decode and #2's next chunk wait
  EXPECT_EQ(p.num_prefill_tokens, 6);
  Finish(*s, p);
  p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{3, 1, 2}));  // decodes, then #2 resumes
  EXPECT_EQ(p.num_prefill_tokens, 14);
  EXPECT_EQ(s->num_preemptions(), 0u);
  for (int i = 0; i < 40 && !s->idle(); ++i) Finish(*s, s->Schedule());
  EXPECT_TRUE(s->idle());
  EXPECT_EQ(allocator_->num_used(), 0);
}

// While a more urgent request waits for its prefill, less urgent decodes
// pause and its prefill takes the whole budget; they resume with its first
// decode. Aging lifts the pause of a sequence that has waited long enough.
TEST_F(SchedulerTest, UrgentPrefillPausesLessUrgentDecodes) {
  const Clock::time_point now = Clock::now();
  auto s = MakePriority(4, 16, 1000, /*aging_seconds=*/1.0);
  Add(*s, 1, 5, 30, 1, now);
  Add(*s, 2, 5, 30, 1, now - std::chrono::seconds(10));  // aged key -9: ahead of #3
  Finish(*s, s->Schedule());
  Add(*s, 3, 20, 8, 0, now);
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{2, 3}));  // #1 pauses; #2 has aged past #3
  EXPECT_EQ(p.num_prefill_tokens, 15);
  Finish(*s, p);
  p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(p.num_prefill_tokens, 5);
  Finish(*s, p);
  p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{2, 3, 1}));  // every decode again
  EXPECT_EQ(p.num_prefill_tokens, 0);
  EXPECT_EQ(s->num_preemptions(), 0u);
}

// Decodes of the urgent request's own class go first only while they leave
// its prefill the same number of steps: a 32-token prompt fills two 16-token
// steps exactly, so they follow it; a 28-token one leaves 2 tokens a step.
TEST_F(SchedulerTest, SameClassDecodesYieldOnlyWhereTheyWouldDelayAnUrgentPrefill) {
  for (const int prompt : {32, 28}) {
    SCOPED_TRACE(prompt);
    auto s = MakePriority(4, 16, 1000);
    Add(*s, 1, 5, 30, -1);
    Add(*s, 2, 5, 30, -1);
    Finish(*s, s->Schedule());
    Add(*s, 3, prompt, 8, -1);
    for (int step = 0; step < 2; ++step) {
      StepPlan p = s->Schedule();
      const std::vector<uint64_t> want =
          prompt == 32 ? std::vector<uint64_t>{3} : std::vector<uint64_t>{1, 2, 3};
      EXPECT_EQ(Ids(p), want);
      EXPECT_EQ(p.num_prefill_tokens, prompt / 2);
      Finish(*s, p);
    }
    EXPECT_EQ(Ids(s->Schedule()), (std::vector<uint64_t>{1, 2, 3}));
  }
}

// Same-class decodes past the room wait for the prefill; when the urgent
// request cannot be placed at all (a full batch of its own class), they run.
TEST_F(SchedulerTest, DeferredDecodesRunWhenTheUrgentPrefillCannot) {
  auto s = MakePriority(4, 16, 1000);
  for (uint64_t id : {1, 2, 3}) Add(*s, id, 5, 30, -1);
  Finish(*s, s->Schedule());
  Add(*s, 4, 14, 8, -1);  // room for 2 decode tokens
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2, 4}));
  EXPECT_EQ(p.num_tokens, 16);
  s.reset();  // before its allocator goes
  auto t = MakePriority(2, 16, 1000);
  Add(*t, 1, 5, 30, -1);
  Add(*t, 2, 5, 30, -1);
  Finish(*t, t->Schedule());
  Add(*t, 3, 16, 8, -1);  // no room, and no slot: it waits
  EXPECT_EQ(Ids(t->Schedule()), (std::vector<uint64_t>{1, 2}));
}

// The running count, not only the step's, bounds the batch: an urgent
// request preempts the least urgent running sequence even when that one's
// prefill was not placed this step.
TEST_F(SchedulerTest, UrgentRequestPreemptsAPrefillingSequenceWhenTheBatchIsFull) {
  auto s = MakePriority(2, 1000, 1000);
  Add(*s, 1, 5, 8, 0);
  Add(*s, 2, 5, 8, 0);
  Finish(*s, s->Schedule());
  Add(*s, 3, 5, 8, -1);
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{3}));  // #1's decode pauses for #3's prefill
  EXPECT_EQ(s->num_preemptions(), 1u);
  EXPECT_EQ(s->num_running(), 2);
  EXPECT_EQ(s->num_waiting(), 1);
}

TEST_F(SchedulerTest, FcfsIgnoresPriority) {
  auto s = Make(2, 1000, 1000);
  Add(*s, 1, 5, 8, 5);
  Add(*s, 2, 5, 8, 0);
  Add(*s, 3, 5, 8, -5);
  EXPECT_EQ(Ids(s->Schedule()), (std::vector<uint64_t>{1, 2}));
  Add(*s, 4, 5, 8, -9);
  s->Schedule();
  EXPECT_EQ(s->num_preemptions(), 0u);
}

TEST_F(SchedulerTest, MoreUrgentRequestPreemptsLeastUrgentWhenBatchIsFull) {
  auto s = MakePriority(2, 1000, 1000);
  Add(*s, 1, 5, 4, 1);
  auto low = Add(*s, 2, 5, 4, 2);
  Finish(*s, s->Schedule());
  Add(*s, 3, 5, 4, 2);  // as urgent as #2, later: waits
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s->num_preemptions(), 0u);
  Finish(*s, p);
  Add(*s, 4, 5, 4, 0);
  p = s->Schedule();
  EXPECT_EQ(s->num_preemptions(), 1u);
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{4}));  // #1's decode pauses for #4's prefill
  EXPECT_EQ(s->num_waiting(), 2);
  Finish(*s, p);
  for (int i = 0; i < 40 && !s->idle(); ++i) Finish(*s, s->Schedule());
  EXPECT_TRUE(s->idle());
  EXPECT_EQ(low->finish.reason, FinishReason::kLength);
  EXPECT_EQ(low->token_ids.size(), 4u);
  EXPECT_EQ(allocator_->num_used(), 0);
}

TEST_F(SchedulerTest, MoreUrgentRequestPreemptsWhenKvCacheIsFull) {
  // 6 blocks of 4: #1 holds 4 (16 tokens); #2 needs 3.
  auto s = MakePriority(8, 1000, 6);
  Add(*s, 1, 16, 4, 1);
  Finish(*s, s->Schedule());
  Add(*s, 2, 9, 4, 3);  // less urgent: waits for blocks
  StepPlan p = s->Schedule();
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{1}));
  Finish(*s, p);
  Add(*s, 3, 9, 4, 0);
  p = s->Schedule();
  // #2 would fit now, but the preempted #1 is more urgent than it.
  EXPECT_EQ(Ids(p), (std::vector<uint64_t>{3}));
  EXPECT_EQ(s->num_preemptions(), 1u);
  for (int i = 0; i < 40 && !s->idle(); ++i) Finish(*s, s->Schedule());
  EXPECT_TRUE(s->idle());
  EXPECT_EQ(s->num_preemptions(), 1u);
}

// With aging, a request is served before any request arriving more than
// (its priority - the other's) × aging seconds after it, and not before one
// that arrives sooner than that.
TEST_F(SchedulerTest, AgingBoundsStarvation) {
  const Clock::time_point now = Clock::now();
  for (double waited : {4.0, 6.0}) {
    auto s = MakePriority(1, 1000, 1000, /*aging_seconds=*/1.0);
    const auto arrival = now - std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(waited));
    Add(*s, 1, 5, 4, /*priority=*/5, arrival);
    Add(*s, 2, 5, 4, /*priority=*/0, now);
    EXPECT_EQ(Ids(s->Schedule()), (std::vector<uint64_t>{waited > 5 ? 1u : 2u})) << waited;
  }
  auto strict = MakePriority(1, 1000, 1000, /*aging_seconds=*/0);
  Add(*strict, 1, 5, 4, 5, now - std::chrono::hours(1));
  Add(*strict, 2, 5, 4, 0, now);
  EXPECT_EQ(Ids(strict->Schedule()), (std::vector<uint64_t>{2}));
}

// Aging orders sequences the same way at any time, so a preempted sequence
// never preempts back the one that displaced it.
TEST_F(SchedulerTest, AgedPreemptionDoesNotPingPong) {
  const Clock::time_point now = Clock::now();
  auto s = MakePriority(1, 1000, 1000, 1.0);
  Add(*s, 1, 5, 30, 3, now - std::chrono::seconds(2));  // key: -2 + 3 = 1
  Finish(*s, s->Schedule());
  Add(*s, 2, 5, 30, 0, now);  // key 0: more urgent
  for (int i = 0; i < 100 && !s->idle(); ++i) Finish(*s, s->Schedule());
  EXPECT_TRUE(s->idle());
  EXPECT_EQ(s->num_preemptions(), 1u);
}

}  // namespace
}  // namespace tessera
