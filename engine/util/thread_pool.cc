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

inline uint32_t RangeGeneration(uint64_t r) { return static_cast<uint32_t>(r >> 32); }
inline int64_t RangeEnd(uint64_t r) { return static_cast<int64_t>((r >> 16) & 0xffff); }
inline int64_t RangeNext(uint64_t r) { return static_cast<int64_t>(r & 0xffff); }
inline uint64_t MakeRange(uint32_t generation, int64_t begin, int64_t end) {
  return (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(end) << 16) |
         static_cast<uint64_t>(begin);
}

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
  shares_ = std::make_unique<Share[]>(static_cast<size_t>(num_threads_));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  WakeSleepers();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::Claim(uint32_t generation, int owner, int self) {
  std::atomic<uint64_t>& range = shares_[owner].range;
  uint64_t r = range.load(std::memory_order_acquire);
  while (true) {
    if (RangeGeneration(r) != generation) return -1;  // a newer job, or none
    const int64_t next = RangeNext(r), end = RangeEnd(r);
    if (next >= end) return -1;
    // The owner takes from the front, the others from the back: one word
    // holds both ends, so every claim is a single compare-exchange.
    const bool own = owner == self;
    const uint64_t claimed = own ? r + 1 : r - (uint64_t{1} << 16);
    if (range.compare_exchange_weak(r, claimed, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      return own ? next : end - 1;
    }
  }
}

void ThreadPool::RunChunks(uint32_t generation, int self) {
  for (int k = 0; k < num_threads_; ++k) {
    const int owner = (self + k) % num_threads_;
    for (int64_t chunk; (chunk = Claim(generation, owner, self)) >= 0;) {
      // Claimed a chunk of this very job: the caller cannot publish another
      // job until this chunk is counted done, so the fields read here are its.
      const int64_t n = job_n_.load(std::memory_order_relaxed);
      const int64_t chunks = job_chunks_.load(std::memory_order_relaxed);
      const int64_t begin = n * chunk / chunks;
      const int64_t end = n * (chunk + 1) / chunks;
      if (begin < end) (*job_.load(std::memory_order_relaxed))(begin, end);
      shares_[self].done.fetch_add(1, std::memory_order_acq_rel);
    }
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

void ThreadPool::WorkerLoop(int self) {
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
    RunChunks(gen, self);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_per_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // One caller at a time (see the header): a plain store, not a locked add,
  // on the path of every job.
  jobs_started_.store(jobs_started_.load(std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
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
  job_chunks_.store(chunks, std::memory_order_relaxed);
  for (int i = 0; i < num_threads_; ++i) {
    shares_[i].done.store(0, std::memory_order_relaxed);
    shares_[i].range.store(MakeRange(gen, chunks * i / num_threads_,
                                     chunks * (i + 1) / num_threads_),
                           std::memory_order_release);
  }
  generation_.store(gen, std::memory_order_seq_cst);
  WakeSleepers();
  RunChunks(gen, 0);
  for (int spin = 0;; ++spin) {
    int64_t done = 0;
    for (int i = 0; i < num_threads_; ++i) done += shares_[i].done.load(std::memory_order_acquire);
    if (done == chunks) break;
    if (spin < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace tessera
