// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor splits [0, n) into contiguous chunks, one per thread, with the
// calling thread taking chunk 0. The split depends only on n and the thread
// count, so any reduction done inside one index is independent of how the
// work is divided: results are identical whatever the batch. Workers spin
// briefly and then sleep on an atomic wait, because engine steps issue
// hundreds of small parallel regions per token.
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

  // Calls fn(begin, end) over disjoint ranges covering [0, n). Runs inline
  // when n < min_per_thread * 2 or the pool has one thread.
  void ParallelFor(int64_t n, int64_t min_per_thread,
                   const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int worker_index);
  void RunChunk(int chunk_index);

  int num_threads_;
  std::vector<std::thread> workers_;
  // The current job, published before `generation_` is bumped.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tessera
