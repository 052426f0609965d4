// tessera-bench's run loop (Runner) with calls that end as soon as they
// start: when requests are sent, closed loop, with and without a ramp-up.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "client/bench/runner.h"

namespace tessera::bench {
namespace {

// Reports success from Start and deletes itself, as a real call does at its
// final status.
class InstantCall final : public BenchCall {
 public:
  InstantCall(int64_t index, CallObserver* observer) : index_(index), observer_(observer) {}
  void Start() override {
    RequestRecord record;
    record.index = index_;
    record.ok = true;
    CallObserver* observer = observer_;
    observer->Detach(this);
    delete this;
    observer->Finished(std::move(record));
  }
  void Cancel() override {}

 private:
  int64_t index_;
  CallObserver* observer_;
};

// The send times of a closed-loop run, in request order.
std::vector<double> SendTimes(int64_t num_requests, int concurrency, double ramp_up) {
  const std::atomic<bool> interrupted{false};
  Runner runner(
      [](tessera::v1::GenerateRequest, int64_t index, double, std::atomic<int64_t>*,
         CallObserver* observer) -> BenchCall* { return new InstantCall(index, observer); },
      [](int64_t) { return tessera::v1::GenerateRequest(); }, 5.0, &interrupted);
  RunPlan plan;
  plan.num_requests = num_requests;
  plan.max_in_flight = concurrency;
  plan.ramp_up_seconds = ramp_up;
  RunOutcome outcome = runner.Run(plan);
  std::sort(outcome.records.begin(), outcome.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  std::vector<double> times;
  for (const RequestRecord& record : outcome.records) times.push_back(record.sent_at);
  return times;
}

TEST(RunnerTest, WithoutRampUpTheFirstRequestsGoAtOnce) {
  const std::vector<double> times = SendTimes(6, 4, 0.0);
  ASSERT_EQ(times.size(), 6u);
  for (double t : times) EXPECT_LT(t, 0.1);
}

TEST(RunnerTest, RampUpSpreadsTheFirstConcurrencyRequestsEvenly) {
  // 4 in flight over 0.4 s: sends at 0, 0.1, 0.2 and 0.3 s; the rest follow
  // as slots free (here at once, since calls end instantly).
  const std::vector<double> times = SendTimes(6, 4, 0.4);
  ASSERT_EQ(times.size(), 6u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(times[i], 0.1 * i - 1e-6) << "request " << i;
    EXPECT_LT(times[i], 0.1 * i + 0.09) << "request " << i;
  }
  for (int i = 4; i < 6; ++i) {
    EXPECT_GE(times[i], 0.3) << "request " << i;
    EXPECT_LT(times[i], 0.39) << "request " << i;
  }
}

}  // namespace
}  // namespace tessera::bench
