// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into contiguous chunks that the calling thread
// and the workers claim from a shared ticket. Which thread runs a chunk
// does not matter for the result: every index is computed by one thread in a
// fixed order, so reductions inside an index are identical whatever the
// batch or the thread count. Claiming chunks (rather than assigning one per
// thread) keeps the loop moving when a worker is descheduled, as happens on
// a busy machine. Workers spin briefly and then sleep on a futex, because
// engine steps issue hundreds of small parallel regions per token.
//
// The ticket is one 64-bit word holding the job's generation, its chunk
// count and the next chunk to claim, so a claim is a single compare-exchange
// on all three: a worker that wakes late for a finished job can never claim
// a chunk of the next one (it would compare against a stale generation).
// The caller does not depend on any worker waking up: it claims chunks itself
// until none is left, then waits only for chunks that were claimed.
// ParallelFor must be called from one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means one per core.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), each of at
  // least min_per_chunk indices (except the last). Runs inline when there is
  // a single chunk or a single thread.
  void ParallelFor(int64_t n, int64_t min_per_chunk,
                   const std::function<void(int64_t, int64_t)>& fn);

  // Most chunks one job is split into (the ticket's chunk field is 16 bits).
  static constexpr int64_t kMaxChunks = 0xffff;

 private:
  void WorkerLoop();
  // Claims and runs chunks of job `generation` until none is left.
  void RunChunks(uint32_t generation);
  // Sleeps until generation_ differs from `seen` (or a spurious wake-up).
  void SleepWhile(uint32_t seen);
  void WakeSleepers();

  int num_threads_;
  std::vector<std::thread> workers_;
  // The current job. Written only while no chunk of any job is claimed or
  // running, and published by the release store of `ticket_`.
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> job_n_{0};
  // Bits 63..32: job generation; 31..16: chunk count; 15..0: next chunk.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> chunks_done_{0};
  std::atomic<uint32_t> generation_{0};  // workers sleep on this (a futex word)
  std::atomic<int32_t> sleepers_{0};     // workers inside SleepWhile
  std::atomic<bool> stop_{false};
};

}  // namespace tessera
