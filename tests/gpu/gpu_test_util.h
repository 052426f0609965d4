// Helpers for the GPU tests: skip cleanly without a device, and move
// vectors to and from device memory.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/device.h"
#include "engine/backend/cuda/twins.h"
#include "gtest/gtest.h"

namespace tessera::cuda::testing {

// Empty when a device is usable, else why not.
inline std::string NoGpuReason() {
  auto count = CountDevices();
  return count.ok() ? "" : std::string(count.status().message());
}

#define TESSERA_REQUIRE_GPU()                                           \
  do {                                                                  \
    const std::string reason = ::tessera::cuda::testing::NoGpuReason(); \
    if (!reason.empty()) GTEST_SKIP() << "no usable GPU: " << reason;   \
  } while (0)

template <typename T>
DeviceBuffer Upload(const std::vector<T>& host) {
  auto buffer = DeviceBuffer::Allocate(std::max<size_t>(1, host.size() * sizeof(T)));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!buffer.ok()) return DeviceBuffer();
  EXPECT_EQ(
      cudaMemcpy(buffer->data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
      cudaSuccess);
  return std::move(*buffer);
}

template <typename T>
std::vector<T> Download(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), buffer.data(), count * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

// Raw storage of `values` in dtype (f32 or 16-bit bits).
inline std::vector<uint8_t> Encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> raw(values.size() * DTypeSizeOf(dtype));
  for (size_t i = 0; i < values.size(); ++i) twin::Store(raw.data(), dtype, i, values[i]);
  return raw;
}

inline DeviceBuffer Zeros(size_t bytes) {
  auto buffer = DeviceBuffer::Allocate(std::max<size_t>(1, bytes));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!buffer.ok()) return DeviceBuffer();
  EXPECT_EQ(cudaMemset(buffer->data(), 0, bytes), cudaSuccess);
  return std::move(*buffer);
}

// max |a - b| / (|b| + floor): relative error, absolute near zero.
inline float MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b,
                        float floor = 1.0f) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]) / (std::fabs(b[i]) + floor));
  }
  return worst;
}

}  // namespace tessera::cuda::testing
