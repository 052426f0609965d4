// One block of kThreads per row. Thread t owns the contiguous chunk
// [t·chunk, (t+1)·chunk) of the vocabulary, so every "first in index order"
// question is answered by a per-thread count or sum, a scan over threads in
// thread order, and a walk inside one chunk. The CPU twin (twins.cc,
// twin::Sample) uses the same chunks and the same order of every sum.
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/device.h"
#include "engine/backend/cuda/device_util.cuh"
#include "engine/backend/cuda/sampling.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = kSampleThreads;

struct Chunk {
  int32_t begin, end;
};

__device__ Chunk ThreadChunk(int32_t vocab) {
  const int32_t chunk = (vocab + kThreads - 1) / kThreads;
  const int32_t begin = min(vocab, static_cast<int32_t>(threadIdx.x) * chunk);
  return {begin, min(vocab, begin + chunk)};
}

__device__ float Scaled(const float* row, int32_t i, float inv_t) {
  const float v = row[i];
  return isnan(v) ? -INFINITY : v * inv_t;
}

// Larger value first, then lower id; NaN never wins.
__device__ void Better(float v, int32_t id, float* best, int32_t* best_id) {
  if (v > *best || (v == *best && id < *best_id)) *best = v, *best_id = id;
}

// Argmax of the row scaled by inv_t (1 for greedy); 0 when nothing beats −inf.
__device__ int32_t ArgMaxRow(const float* row, int32_t vocab, float inv_t) {
  __shared__ float vals[kThreads];
  __shared__ int32_t ids[kThreads];
  const Chunk c = ThreadChunk(vocab);
  float best = -INFINITY;
  int32_t best_id = 0x7fffffff;
  for (int32_t i = c.begin; i < c.end; ++i) Better(Scaled(row, i, inv_t), i, &best, &best_id);
  vals[threadIdx.x] = best, ids[threadIdx.x] = best_id;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      Better(vals[threadIdx.x + stride], ids[threadIdx.x + stride], &vals[threadIdx.x],
             &ids[threadIdx.x]);
    }
    __syncthreads();
  }
  const int32_t id = vals[0] > -INFINITY ? ids[0] : 0;
  __syncthreads();
  return id;
}

// Exclusive prefix of `mine` over threads in thread order, and the total.
template <typename T>
__device__ T ExclusiveScan(T mine, T* total) {
  __shared__ T values[kThreads];
  values[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    T run = 0;
    for (int t = 0; t < kThreads; ++t) {
      const T v = values[t];
      values[t] = run;
      run += v;
    }
    *total = run;
  }
  __syncthreads();
  const T prefix = values[threadIdx.x];
  __syncthreads();
  return prefix;
}

// Draws from the full softmax in index order (SamplePlain).
__device__ int32_t SamplePlainRow(const float* row, int32_t vocab, float inv_t, float max,
                                  double uniform) {
  __shared__ double total;
  __shared__ int32_t chosen, last;
  const Chunk c = ThreadChunk(vocab);
  double local = 0;
  int32_t my_last = -1;
  for (int32_t i = c.begin; i < c.end; ++i) {
    const float p = expf(Scaled(row, i, inv_t) - max);
    local += p;
    if (p > 0.0f) my_last = i;
  }
  const double prefix = ExclusiveScan(local, &total);
  if (threadIdx.x == 0) chosen = -1, last = 0;
  __syncthreads();
  atomicMax(&last, my_last);
  const double target = uniform * total;
  if (prefix <= target && prefix + local > target) {
    double cum = 0;
    for (int32_t i = c.begin; i < c.end; ++i) {
      const float p = expf(Scaled(row, i, inv_t) - max);
      if (p <= 0.0f) continue;
      cum += p;
      if (prefix + cum > target) {
        chosen = i;
        break;
      }
    }
  }
  __syncthreads();
  return chosen >= 0 ? chosen : last;
}

// Monotone in the value: larger float, larger key (−0 counts as +0, as
// float comparison does). Only for values above −inf.
__device__ uint32_t OrderKey(float v) {
  const uint32_t b = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Finite candidates whose key is at least `key`, over the block.
__device__ int32_t CountAtLeast(const float* row, Chunk c, float inv_t, uint64_t key) {
  int32_t n = 0;
  for (int32_t i = c.begin; i < c.end; ++i) {
    const float v = Scaled(row, i, inv_t);
    n += v > -INFINITY && OrderKey(v) >= key;
  }
  return BlockSum(n);
}

// Sorts vals/ids (kThreads slots) into Better order: bitonic, one slot a thread.
__device__ void SortBetterFirst(float* vals, int32_t* ids) {
  for (int k = 2; k <= kThreads; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      const int i = threadIdx.x, other = i ^ j;
      if (other > i) {
        const bool other_better =
            vals[other] > vals[i] || (vals[other] == vals[i] && ids[other] < ids[i]);
        const bool i_better =
            vals[i] > vals[other] || (vals[i] == vals[other] && ids[i] < ids[other]);
        if ((i & k) == 0 ? other_better : i_better) {
          const float v = vals[i];
          const int32_t id = ids[i];
          vals[i] = vals[other], ids[i] = ids[other];
          vals[other] = v, ids[other] = id;
        }
      }
      __syncthreads();
    }
  }
}

// The k best (value desc, id asc) finite candidates into vals/ids; returns
// how many (fewer than k when fewer are finite).
__device__ int32_t SelectTopK(const float* row, int32_t vocab, float inv_t, int32_t k, float* vals,
                              int32_t* ids) {
  __shared__ int32_t kept, tie_total;
  const Chunk c = ThreadChunk(vocab);
  // T: the largest key with at least k candidates at or above it; 0 keeps
  // every finite candidate (there are at most k).
  uint64_t lo = 0, hi = uint64_t{1} << 32;
  if (CountAtLeast(row, c, inv_t, 1) > k) {
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (CountAtLeast(row, c, inv_t, mid) >= k ? lo : hi) = mid;
    }
  }
  const int32_t above = lo == 0 ? 0 : CountAtLeast(row, c, inv_t, lo + 1);
  const int32_t ties_needed = lo == 0 ? 0 : k - above;
  if (threadIdx.x == 0) kept = 0;
  vals[threadIdx.x] = -INFINITY, ids[threadIdx.x] = 0x7fffffff;
  int32_t my_ties = 0;
  for (int32_t i = c.begin; i < c.end; ++i) {
    const float v = Scaled(row, i, inv_t);
    my_ties += v > -INFINITY && lo > 0 && OrderKey(v) == lo;
  }
  const int32_t tie_rank = ExclusiveScan(my_ties, &tie_total);  // syncs: kept and padding set
  for (int32_t i = c.begin, rank = tie_rank; i < c.end; ++i) {
    const float v = Scaled(row, i, inv_t);
    if (!(v > -INFINITY)) continue;
    const uint64_t key = OrderKey(v);
    const bool tie = lo > 0 && key == lo;
    if (key > lo || (tie && rank++ < ties_needed)) {
      const int32_t slot = atomicAdd(&kept, 1);
      vals[slot] = v, ids[slot] = i;
    }
  }
  __syncthreads();
  SortBetterFirst(vals, ids);
  return kept;
}

// top-k, then min-p, then top-p, then the draw, exactly in
// SequenceSampler::SampleTruncated's order and arithmetic (one thread).
__device__ int32_t SampleTopKRow(const float* row, int32_t vocab, float inv_t, float max,
                                 const DeviceSamplingParams& p) {
  __shared__ float vals[kThreads];
  __shared__ int32_t ids[kThreads];
  __shared__ int32_t chosen;
  const int32_t n = SelectTopK(row, vocab, inv_t, p.top_k, vals, ids);
  if (threadIdx.x == 0) chosen = TruncatedDraw(vals, ids, n, max, p);
  __syncthreads();
  return chosen;
}

__global__ void SampleKernel(const float* logits, int32_t vocab, const DeviceSamplingParams* params,
                             int32_t* tokens) {
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  const DeviceSamplingParams p = params[blockIdx.x];
  int32_t token;
  if (IsGreedy(p)) {
    token = ArgMaxRow(row, vocab, 1.0f);
  } else {
    const float inv_t = 1.0f / p.temperature;
    float m = -INFINITY;
    const Chunk c = ThreadChunk(vocab);
    for (int32_t i = c.begin; i < c.end; ++i) m = fmaxf(m, Scaled(row, i, inv_t));
    m = BlockMax(m);
    if (!isfinite(m)) {
      token = ArgMaxRow(row, vocab, inv_t);
    } else if (p.top_k > 0 && p.top_k < vocab) {
      token = SampleTopKRow(row, vocab, inv_t, m, p);
    } else {
      token = SamplePlainRow(row, vocab, inv_t, m, p.uniform);
    }
  }
  if (threadIdx.x == 0) tokens[blockIdx.x] = token;
}

}  // namespace

absl::Status LaunchSample(const float* logits, int32_t rows, int32_t vocab,
                          const DeviceSamplingParams* host_params,
                          const DeviceSamplingParams* params, int32_t* tokens,
                          cudaStream_t stream) {
  if (rows <= 0) return absl::OkStatus();
  if (vocab <= 0) return absl::InvalidArgumentError("sampling: empty vocabulary");
  for (int32_t r = 0; r < rows; ++r) {
    if (!SupportedOnDevice(host_params[r], vocab)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampling row ", r, " needs the host sampler"));
    }
  }
  SampleKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, tokens);
  return LaunchStatus("SampleKernel");
}

}  // namespace tessera::cuda
