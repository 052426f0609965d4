// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into contiguous chunks. Which thread runs a
// chunk does not matter for the result: every index is computed by one
// thread in a fixed order, so reductions inside an index are identical
// whatever the batch or the thread count. Workers spin briefly and then
// sleep on a futex, because engine steps issue hundreds of small parallel
// regions per token.
//
// Each thread (the caller is thread 0) owns a contiguous share of the
// chunks, held in its own cache line as one 64-bit word: the job's
// generation, the end of what is left and the next chunk, beside the
// count of chunks the thread has run. A thread claims its own chunks from
// the front with a compare-exchange on its own line, which the others
// touch only to publish a job, to take chunks once theirs run out, and (the
// caller) to wait at the end. When its own share is empty, a thread takes
// the others' chunks from the back of theirs, so a late or slower thread's
// work is still shared out, as happens on a busy machine. Claiming from one
// shared counter instead moved a cache line between the cores at every
// chunk (about 0.17 us each on a 2-core VM, 8 chunks per thread). The generation
// in the word means a worker that wakes late for a finished job can never
// claim a chunk of the next one (it would compare against a stale
// generation). The caller does not depend on any worker waking up: it
// claims chunks itself until none is left, then waits only for chunks
// that were claimed. ParallelFor must be called from one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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

  // ParallelFor calls so far, inline ones too: a cheap sign of activity for
  // background work that should keep out of the way (PagePopulator).
  uint64_t jobs_started() const { return jobs_started_.load(std::memory_order_relaxed); }

  // Most chunks one job is split into (a share's range fields are 16 bits).
  static constexpr int64_t kMaxChunks = 0xffff;

 private:
  // One thread's share of the current job, and the chunks it has run.
  struct alignas(64) Share {
    // Bits 63..32: job generation; 31..16: end of what is left; 15..0: next.
    std::atomic<uint64_t> range{0};
    std::atomic<int64_t> done{0};  // chunks of this job that this thread ran
  };

  void WorkerLoop(int self);
  // Claims and runs chunks of job `generation` until none is left: thread
  // `self`'s own share first, then the others'.
  void RunChunks(uint32_t generation, int self);
  // Claims one chunk of share `owner` for thread `self`; -1 when none is
  // left there (or the share belongs to another job).
  int64_t Claim(uint32_t generation, int owner, int self);
  // Sleeps until generation_ differs from `seen` (or a spurious wake-up).
  void SleepWhile(uint32_t seen);
  void WakeSleepers();

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> jobs_started_{0};
  // The current job. Written only while no chunk of any job is claimed or
  // running, and published by the release stores of the shares' ranges.
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunks_{0};
  std::unique_ptr<Share[]> shares_;  // one per thread, the caller's first
  std::atomic<uint32_t> generation_{0};  // workers sleep on this (a futex word)
  std::atomic<int32_t> sleepers_{0};     // workers inside SleepWhile
  std::atomic<bool> stop_{false};
};

}  // namespace tessera
