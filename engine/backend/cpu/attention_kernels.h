// Row kernels for attention on the CPU: one query row of one head against
// the keys and values of its KV head, softmax(q·Kᵀ·scale + mask)·V.
//
// Keys at or past `visible` are masked (causal and padding masks are −inf
// there), so they add exp(−inf) = 0 to the softmax and nothing to the output;
// the kernels skip them, which gives the same result as computing them.
// Keys before `first` are masked the same way (the sliding window): their
// probabilities are exactly 0. A
// row's result depends only on its own query and keys, in a fixed order, so
// it is the same whether the row is computed in a padded prefill batch or in
// a decode step over the paged cache.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessera::cpu {

// Blocks of keys (or values) a single-row kernel prefetches ahead of the one
// it reads. A head's rows in a paged block are a few KiB at a random
// address, too short a run for the hardware prefetcher to reach full speed,
// so decode rows, which read each block once, would wait on memory.
// Kernels of several rows reuse each block and are bound by arithmetic; the
// extra instructions only slow them down.
constexpr int32_t kPrefetchBlocks = 4;

// An asm statement rather than __builtin_prefetch: GCC 12 deduces that a
// function holding only prefetch builtins has no effect and deletes calls
// to it. kL2Only: into the L2 and out (prefetcht1), for data read a kernel
// call later; otherwise into every cache (prefetcht0).
template <bool kL2Only = false>
inline void PrefetchRange(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = 0; o < bytes; o += 64) {
#if defined(__x86_64__) || defined(__i386__)
    if constexpr (kL2Only) {
      asm volatile("prefetcht1 %0" : : "m"(c[o]));
    } else {
      asm volatile("prefetcht0 %0" : : "m"(c[o]));
    }
#else
    __builtin_prefetch(c + o, 0, kL2Only ? 2 : 3);
#endif
  }
}

// Decode attention runs (sequence, head) items back to back, each a few
// KiB of keys then of values at random addresses. The kernels' own
// prefetch starts each pass cold; so before an item runs, its values and
// the next item's keys are asked for, up to this many bytes each (when the
// KV cache does not fit in the last-level cache: UseKvItemPrefetch). On a
// Zen 4 EPYC, 192 sequences of 192 f16 tokens (BM_DecodeAttention/192/192/1,
// more than the L3) took 5.6 -> 5.1 ms (1.10x); 4, 8 and 16 KiB gained less.
constexpr int64_t kItemPrefetchBytes = 32 * 1024;

// Before block b of `blocks` is read: prefetch(b + kPrefetchBlocks), and at
// b = 0 the first kPrefetchBlocks blocks too. The helpers here that take a
// callable are always inlined: compiled for the baseline ISA, they could not
// inline a kernel's AVX lambda into themselves (isa_target.h), and would
// call it once per row.
template <typename F>
[[gnu::always_inline]] inline void PrefetchAhead(int32_t b, int32_t blocks, F&& prefetch) {
  if (b == 0) {
    for (int32_t i = 0; i < std::min(blocks, kPrefetchBlocks); ++i) prefetch(i);
  }
  if (b + kPrefetchBlocks < blocks) prefetch(b + kPrefetchBlocks);
}

// KV elements are float, uint16_t holding IEEE half precision (the f16 KV
// cache), or int8_t (the int8 cache); kernels convert them to f32 as they
// load them. In the int8 cache each (token, KV head) has an f32 scale, and
// its elements are int8 · scale: each head's part of a block, keys or
// values, is followed by the block_size scales of its tokens
// (scales_offset elements on). The kernels compute with the int8 values
// and apply the scales to the scores (keys) and the probabilities (values).
template <typename T>
inline constexpr bool kScaledKv = std::is_same_v<T, int8_t>;

// One (token, KV head) vector of n floats into the int8 cache: q[i] =
// round(x[i] / scale), scale = max|x| / 127, so |x[i] - q[i]·scale| <=
// scale / 2. Returns the scale: NaN, with q all 0, when x holds a NaN or an
// infinity (which then reaches the output, as from a float cache); 0 for a
// vector so small that 127 / max|x| overflows (below 3.7e-37: it is stored
// as zeros, an error under 4e-37).
inline float QuantizeKvInt8(const float* x, int32_t n, int8_t* q) {
  // max |x| on the bit patterns: without the sign, they order as the
  // floats do, and infinities and NaNs lie above the largest finite one.
  // An integer max vectorizes; a float max that keeps NaNs would not.
  uint32_t top = 0;
  for (int32_t i = 0; i < n; ++i) top = std::max(top, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
  const float amax = std::bit_cast<float>(top);
  if (top > std::bit_cast<uint32_t>(std::numeric_limits<float>::max())) {
    for (int32_t i = 0; i < n; ++i) q[i] = 0;
    return std::nanf("");
  }
  // Adding and taking away 1.5 · 2^23 rounds |v| <= 2^22 to the nearest
  // integer, ties to even (as nearbyint in the default rounding mode), with
  // no library call, so the loop vectorizes.
  const float inv = 127.0f / amax, magic = 12582912.0f;
  if (!(inv <= std::numeric_limits<float>::max())) {  // amax 0 or tiny
    for (int32_t i = 0; i < n; ++i) q[i] = 0;
    return 0.0f;
  }
  for (int32_t i = 0; i < n; ++i) {
    const float r = (x[i] * inv + magic) - magic;
    q[i] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, r)));
  }
  return amax / 127.0f;
}

// Values of one KV head. In the paged cache a block holds each head's
// block_size rows contiguously ([kv_heads, block_size, head_dim]), so a head
// reads its rows sequentially; a contiguous (padded) buffer is one block
// with block_table null.
template <typename T>
struct KvRowsT {
  const T* base = nullptr;
  const int32_t* block_table = nullptr;  // null for a contiguous buffer
  int32_t block_size = 16;
  int64_t block_stride = 0;  // elements from one block to the next (all heads)
  int64_t row_stride = 0;    // elements from one row to the next within a block
  int64_t head_offset = 0;   // elements from a block's start to this head's rows
  int64_t scales_offset = 0;  // int8: elements from Run(b) to its block's scales

  // Rows of a paged block (or of the whole contiguous buffer) are
  // row_stride apart: Run(b) is the first row of block b, and RunLength
  // how many of the first n rows, from row j on, it holds.
  const T* Run(int32_t b) const {
    return base + (block_table ? int64_t{block_table[b]} * block_stride : 0) + head_offset;
  }
  int32_t RunLength(int32_t j, int32_t n) const {
    return block_table ? std::min(block_size, n - j) : n - j;
  }

  // int8: the scales of block b's rows.
  const float* Scales(int32_t b) const {
    return reinterpret_cast<const float*>(Run(b) + scales_offset);
  }
  // Bytes of a block's rows of this head, with their scales.
  int64_t RunBytes() const {
    return int64_t{block_size} * (row_stride * int64_t{sizeof(T)} + (kScaledKv<T> ? 4 : 0));
  }

  // Prefetches the rows of the b-th block (a paged cache only).
  void PrefetchRun(int32_t b) const {
    if (block_table) PrefetchRange(Run(b), RunBytes());
  }
  // Into the L2: the first blocks holding n rows, at most `bytes` of them.
  void PrefetchRowsL2(int32_t n, int64_t bytes) const {
    const int64_t run = RunBytes();
    for (int32_t b = 0; block_table && b * block_size < n && (b + 1) * run <= bytes; ++b) {
      PrefetchRange<true>(Run(b), run);
    }
  }

  // Calls f(j, row) for j in [0, n), walking block by block.
  template <typename F>
  [[gnu::always_inline]] void ForEach(int32_t n, F&& f) const {
    if (block_table == nullptr) {
      for (int32_t j = 0; j < n; ++j) f(j, base + head_offset + j * row_stride);
      return;
    }
    for (int32_t b = 0, j = 0; j < n; ++b) {
      const T* row = base + int64_t{block_table[b]} * block_stride + head_offset;
      for (int32_t o = 0; o < block_size && j < n; ++o, ++j, row += row_stride) f(j, row);
    }
  }
};

// Keys of one KV head, stored transposed within each block: a block of
// `block_size` keys is [head_dim][block_size], so the scores of up to 16
// consecutive keys come from one vector FMA per dimension, with no
// horizontal sums. For a contiguous (padded) buffer, the whole sequence is
// one block and block_table is null.
template <typename T>
struct KeyBlocksT {
  const T* base = nullptr;
  const int32_t* block_table = nullptr;
  int32_t block_size = 16;
  int64_t block_stride = 0;  // elements from one block to the next (all heads)
  int64_t head_offset = 0;   // elements from a block's start to this head's keys
  int64_t scales_offset = 0;  // int8: elements from Block(b) to its keys' scales

  // The [head_dim][block_size] keys of the b-th block of the sequence.
  const T* Block(int32_t b) const {
    return base + (block_table ? int64_t{block_table[b]} : b) * block_stride + head_offset;
  }
  // int8: the scales of block b's keys.
  const float* Scales(int32_t b) const {
    return reinterpret_cast<const float*>(Block(b) + scales_offset);
  }
  // Bytes of a block's keys of this head, with their scales.
  int64_t BlockBytes(int32_t head_dim) const {
    return int64_t{block_size} * (head_dim * int64_t{sizeof(T)} + (kScaledKv<T> ? 4 : 0));
  }
  void PrefetchBlock(int32_t b, int32_t head_dim) const {
    if (block_table) PrefetchRange(Block(b), BlockBytes(head_dim));
  }
  // Into the L2: the first blocks holding n keys, at most `bytes` of them.
  void PrefetchKeysL2(int32_t n, int32_t head_dim, int64_t bytes) const {
    const int64_t block = BlockBytes(head_dim);
    for (int32_t b = 0; block_table && b * block_size < n && (b + 1) * block <= bytes; ++b) {
      PrefetchRange<true>(Block(b), block);
    }
  }
};

// Calls add(parity, j, row) for the value rows j < visible, offset by c0,
// where parity is std::true_type for odd j and std::false_type for even j
// (compile-time, so that callers keep their accumulators in registers).
// Walks each run of rows in pairs; a run of a block of odd size may start at
// an odd key. With kPrefetch, each block's rows are prefetched
// kPrefetchBlocks blocks ahead.
template <bool kPrefetch, typename T, typename Add>
[[gnu::always_inline]] inline void ForEachValueRowByParity(const KvRowsT<T>& v, int32_t visible,
                                                            int32_t c0, Add&& add) {
  const int32_t blocks = kPrefetch ? (visible + v.block_size - 1) / v.block_size : 0;
  for (int32_t j = 0, b = 0; j < visible; ++b) {
    PrefetchAhead(b, blocks, [&](int32_t i) { v.PrefetchRun(i); });
    const int32_t count = v.RunLength(j, visible);
    const T* row = v.Run(b) + c0;
    int32_t o = 0;
    if (j & 1) {
      add(std::true_type{}, j, row);
      o = 1;
    }
    for (; o + 2 <= count; o += 2) {
      add(std::false_type{}, j + o, row + o * v.row_stride);
      add(std::true_type{}, j + o + 1, row + (o + 1) * v.row_stride);
    }
    if (o < count) add(std::false_type{}, j + o, row + o * v.row_stride);
    j += count;
  }
}

// x[j] *= scales[j] for j in [first, n), the scales of the b-th block at
// scales_of(b): the int8 cache's per-token scales. Keys before `first` (the
// sliding window) are left alone: their probabilities are 0, and a NaN
// scale there must not turn 0 into NaN.
template <typename F>
[[gnu::always_inline]] inline void ScaleByBlocks(int32_t block_size, int32_t first, int32_t n,
                                                 F&& scales_of, float* x) {
  for (int32_t b = first / block_size, j0 = b * block_size; j0 < n; ++b, j0 += block_size) {
    const float* s = scales_of(b);
    for (int32_t j = std::max(j0, first); j < std::min(j0 + block_size, n); ++j) {
      x[j] *= s[j - j0];
    }
  }
}

// int8 cache: scores[j] *= key j's scale for j in [first, n); nothing for
// float caches. The kernels' scores are q·k_j·scale with k_j's int8 values.
template <typename T>
[[gnu::always_inline]] inline void ApplyKeyScales(const KeyBlocksT<T>& k, int32_t first,
                                                  int32_t n, float* scores) {
  if constexpr (kScaledKv<T>) {
    ScaleByBlocks(k.block_size, first, n, [&](int32_t b) { return k.Scales(b); }, scores);
  }
}

// int8 cache: probs[j] *= value row j's scale for j in [first, n), so that
// the weighted sum of the int8 rows is that of the rows they stand for.
template <typename T>
[[gnu::always_inline]] inline void ApplyValueScales(const KvRowsT<T>& v, int32_t first,
                                                    int32_t n, float* probs) {
  if constexpr (kScaledKv<T>) {
    ScaleByBlocks(v.block_size, first, n, [&](int32_t b) { return v.Scales(b); }, probs);
  }
}

// The row sees keys [first, visible); scores: scratch of at least `visible`
// floats; out: [head_dim].
template <typename T>
using AttendRowFn = void (*)(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                             int32_t head_dim, float scale, int32_t first, int32_t visible,
                             float* scores, float* out);

template <typename T>
void AttendRowPortable(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                       int32_t head_dim, float scale, int32_t first, int32_t visible,
                       float* scores, float* out);
template <typename T>
void AttendRowAvx512(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                     int32_t head_dim, float scale, int32_t first, int32_t visible,
                     float* scores, float* out);
template <typename T>
void AttendRowAvx2(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                   int32_t head_dim, float scale, int32_t first, int32_t visible,
                   float* scores, float* out);

// The kernel of the selected path (SelectedKernelPath() in kernels.h, so
// TESSERA_CPU_KERNEL forces it too).
template <typename T>
AttendRowFn<T> SelectAttendRow();

// The most query rows an AttendRowsFn takes at once.
constexpr int kMaxAttendRows = 8;

// Up to kMaxAttendRows query rows of one head against the same keys and
// values, each seeing its own range of keys [first[r], visible[r]). Every
// row's result equals AttendRow's for it, bit for bit; the rows only share
// loads. scores[r] needs room for the largest visible count.
template <typename T>
using AttendRowsFn = void (*)(const float* const* q, int rows, const KeyBlocksT<T>& k,
                              const KvRowsT<T>& v, int32_t head_dim, float scale,
                              const int32_t* first, const int32_t* visible, float* const* scores,
                              float* const* out);

template <typename T>
void AttendRowsPortable(const float* const* q, int rows, const KeyBlocksT<T>& k,
                        const KvRowsT<T>& v, int32_t head_dim, float scale, const int32_t* first,
                        const int32_t* visible, float* const* scores, float* const* out);
template <typename T>
void AttendRowsAvx512(const float* const* q, int rows, const KeyBlocksT<T>& k,
                      const KvRowsT<T>& v, int32_t head_dim, float scale, const int32_t* first,
                      const int32_t* visible, float* const* scores, float* const* out);
template <typename T>
void AttendRowsAvx2(const float* const* q, int rows, const KeyBlocksT<T>& k,
                    const KvRowsT<T>& v, int32_t head_dim, float scale, const int32_t* first,
                    const int32_t* visible, float* const* scores, float* const* out);

template <typename T>
AttendRowsFn<T> SelectAttendRows();

// dst[i] = half(src[i]), rounding to nearest even: FloatToHalf's bits for
// every input (NaN, infinities and subnormals included), on each path.
void FloatsToHalves(const float* src, uint16_t* dst, int64_t n);
void FloatsToHalvesAvx512(const float* src, uint16_t* dst, int64_t n);
void FloatsToHalvesAvx2(const float* src, uint16_t* dst, int64_t n);

}  // namespace tessera::cpu
