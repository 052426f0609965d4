#include "engine/util/thread_pool.h"

#include <algorithm>

namespace tessera {
namespace {

// Spins before sleeping (workers) or yielding (the caller); a decode step's
// ops arrive within microseconds of each other.
constexpr int kSpinIterations = 16000;
// Chunks per thread: a few, so a late thread's share can be taken by others.
constexpr int64_t kChunksPerThread = 8;

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
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(uint32_t generation) {
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  while (true) {
    if ((ticket >> 32) != generation) return;  // a newer job, or none
    const int64_t chunk = static_cast<int64_t>(ticket & 0xffffffffu);
    const int64_t chunks = job_chunks_.load(std::memory_order_relaxed);
    if (chunk >= chunks) return;
    if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel)) continue;
    // Claimed: job `generation` stays current until its chunks are all done,
    // so the fields read below are its own.
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    const int64_t begin = n * chunk / chunks;
    const int64_t end = n * (chunk + 1) / chunks;
    if (begin < end) (*job_.load(std::memory_order_relaxed))(begin, end);
    chunks_done_.fetch_add(1, std::memory_order_acq_rel);
    ticket = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  while (true) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
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
    RunChunks(gen);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_per_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_chunk));
  const int64_t chunks = std::min<int64_t>(num_threads_ * kChunksPerThread, by_size);
  if (chunks <= 1 || num_threads_ == 1) {
    fn(0, n);
    return;
  }
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunks_.store(chunks, std::memory_order_relaxed);
  chunks_done_.store(0, std::memory_order_relaxed);
  ticket_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  RunChunks(gen);
  for (int spin = 0; chunks_done_.load(std::memory_order_acquire) != chunks; ++spin) {
    if (spin < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace tessera
