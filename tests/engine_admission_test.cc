// Admission under concurrent submitters: requests accepted but not finished
// never exceed the queue limit plus the running batch, however submissions
// interleave with the engine thread taking them into the scheduler.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testing/engine_harness.h"

namespace tessera {
namespace {

using testing::GreedyRequest;

// Counts requests accepted and not yet finished, and the most seen at once.
class Outstanding {
 public:
  void Accepted() { Update(+1); }
  void Finished() { Update(-1); }
  int most() const {
    std::lock_guard<std::mutex> lock(mu_);
    return most_;
  }

 private:
  void Update(int delta) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += delta;
    most_ = std::max(most_, now_);
  }
  mutable std::mutex mu_;
  int now_ = 0;
  int most_ = 0;
};

class CountingSink : public GenerationSink {
 public:
  explicit CountingSink(Outstanding* outstanding) : outstanding_(outstanding) {}
  void OnTokens(TokenEvent) override {}
  void OnFinish(FinishEvent) override { outstanding_->Finished(); }

 private:
  Outstanding* outstanding_;
};

TEST(Admission, ConcurrentSubmittersNeverOvershootTheQueue) {
  constexpr int kMaxQueued = 4;
  constexpr int kMaxSeqs = 2;
  EngineOptions options;
  options.model_path = testing::SourcePath("models/stories260K.gguf");
  options.device = "cpu";
  options.num_threads = 1;
  options.max_num_seqs = kMaxSeqs;
  options.max_queued_requests = kMaxQueued;
  auto created = Engine::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  Engine& engine = **created;
  const std::vector<int32_t> prompt = engine.tokenizer().Encode("Once upon a time", true);

  Outstanding outstanding;
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> accepted{0}, refused{0};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      while (std::chrono::steady_clock::now() < end) {
        GenerationRequest r = GreedyRequest(next_id.fetch_add(1), prompt, 3);
        r.stopping.ignore_eos = true;
        // Counted before Submit: the request may finish before it returns.
        outstanding.Accepted();
        absl::Status s = engine.Submit(std::move(r), std::make_shared<CountingSink>(&outstanding));
        if (s.ok()) {
          accepted.fetch_add(1);
        } else {
          outstanding.Finished();
          ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
          refused.fetch_add(1);
        }
      }
    });
  }
  // What the engine itself reports as waiting, polled throughout.
  std::atomic<int> most_waiting{0};
  std::thread poller([&] {
    while (std::chrono::steady_clock::now() < end) {
      most_waiting.store(std::max(most_waiting.load(), engine.Stats().requests_waiting));
    }
  });
  for (auto& t : submitters) t.join();
  poller.join();
  EXPECT_LE(most_waiting.load(), kMaxQueued);
  ASSERT_TRUE(engine.WaitIdle(std::chrono::seconds(60)));
  EXPECT_GT(accepted.load(), 10);
  EXPECT_GT(refused.load(), 0);
  // The submitter that counted itself before a refused Submit adds at most
  // one per thread to what the engine held.
  EXPECT_LE(outstanding.most(), kMaxQueued + kMaxSeqs + 4)
      << accepted.load() << " accepted, " << refused.load() << " refused";
}

}  // namespace
}  // namespace tessera
