#include "engine/util/thread_pool.h"

#include <algorithm>

namespace tessera {
namespace {

// Iterations to spin before sleeping; a decode step's ops arrive within
// microseconds of each other, so a short spin avoids most futex round trips.
constexpr int kSpinIterations = 20000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) {
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunk(int chunk) {
  const int64_t n = job_n_;
  const int64_t chunks = job_chunks_;
  const int64_t begin = n * chunk / chunks;
  const int64_t end = n * (chunk + 1) / chunks;
  if (begin < end) (*job_)(begin, end);
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    while (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    if (worker_index < job_chunks_) RunChunk(worker_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_per_thread,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_thread));
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, by_size));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_chunks_ = chunks;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  RunChunk(0);
  while (pending_.load(std::memory_order_acquire) != 0) CpuRelax();
}

}  // namespace tessera
