#include "engine/util/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

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

inline uint32_t TicketGeneration(uint64_t t) { return static_cast<uint32_t>(t >> 32); }
inline int64_t TicketChunks(uint64_t t) { return static_cast<int64_t>((t >> 16) & 0xffff); }
inline int64_t TicketNext(uint64_t t) { return static_cast<int64_t>(t & 0xffff); }

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the generation counter is used as a futex word");

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, nullptr, nullptr, 0);
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
  WakeSleepers();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(uint32_t generation) {
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  while (true) {
    if (TicketGeneration(ticket) != generation) return;  // a newer job, or none
    const int64_t chunk = TicketNext(ticket);
    const int64_t chunks = TicketChunks(ticket);
    if (chunk >= chunks) return;
    if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      continue;
    }
    // Claimed a chunk of this very job: the caller cannot publish another
    // job until this chunk is counted done, so the fields read here are its.
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    const int64_t begin = n * chunk / chunks;
    const int64_t end = n * (chunk + 1) / chunks;
    if (begin < end) (*job_.load(std::memory_order_relaxed))(begin, end);
    chunks_done_.fetch_add(1, std::memory_order_acq_rel);
    ticket = ticket_.load(std::memory_order_acquire);
  }
}

// The futex compares the word in the kernel, so a new generation stored
// before the wait starts is never slept through. sleepers_ lets the caller
// skip the wake-up system call when every worker is spinning or working.
void ThreadPool::SleepWhile(uint32_t seen) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (generation_.load(std::memory_order_seq_cst) == seen) {
    Futex(&generation_, FUTEX_WAIT_PRIVATE, seen);
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void ThreadPool::WakeSleepers() {
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    Futex(&generation_, FUTEX_WAKE_PRIVATE, INT_MAX);
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
      SleepWhile(seen);
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
  const int64_t chunks =
      std::min({int64_t(num_threads_) * kChunksPerThread, by_size, kMaxChunks});
  if (chunks <= 1 || num_threads_ == 1) {
    fn(0, n);
    return;
  }
  // No chunk of the previous job is claimed or running now (it returned
  // only after all were done), so the job fields may be rewritten.
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  chunks_done_.store(0, std::memory_order_relaxed);
  ticket_.store((static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(chunks) << 16),
                std::memory_order_release);
  generation_.store(gen, std::memory_order_seq_cst);
  WakeSleepers();
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
