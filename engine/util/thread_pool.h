// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into contiguous chunks that the calling thread
// and the workers claim from a shared counter. Which thread runs a chunk
// does not matter for the result: every index is computed by one thread in a
// fixed order, so reductions inside an index are identical whatever the
// batch or the thread count. Claiming chunks (rather than assigning one per
// thread) keeps the loop moving when a worker is descheduled, as happens on
// a busy machine. Workers spin briefly and then sleep on an atomic wait,
// because engine steps issue hundreds of small parallel regions per token.
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

 private:
  void WorkerLoop();
  // Claims and runs chunks of job `generation` until none is left.
  void RunChunks(uint32_t generation);

  int num_threads_;
  std::vector<std::thread> workers_;
  // The current job, published before `ticket_` names its generation.
  // Atomic because a late worker may read them while the next job is set up
  // (it then fails to claim a chunk, since the ticket has moved on).
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunks_{0};
  // High 32 bits: job generation; low 32 bits: next chunk to claim.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> chunks_done_{0};
  std::atomic<uint32_t> generation_{0};  // workers sleep on this
  std::atomic<bool> stop_{false};
};

}  // namespace tessera
