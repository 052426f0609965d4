// tessera-gpu-bandwidth: the device's memory bandwidth as a device-to-device
// cudaMemcpy measures it. Copies a 1 GiB buffer (or argv[1] MiB) 20 times
// after 3 warm-up copies, timed with CUDA events, and prints
//   copy_bandwidth_bytes_per_second <bytes read + bytes written per second>
// counting both the read and the write of every byte (the usual convention
// for a copy; a decode step only reads its weights, so weight bytes × tokens/s
// is compared against this number). Exit 1 without a usable device.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "tessera-gpu-bandwidth: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Owns one device allocation.
struct DeviceMemory {
  void* p = nullptr;
  ~DeviceMemory() {
    if (p != nullptr) cudaFree(p);
  }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const size_t bytes = (mib > 0 ? mib : 1024) << 20;
  constexpr int kWarmup = 3, kRepeats = 20;
  DeviceMemory src, dst;
  Events ev;
  if (!Check(cudaMalloc(&src.p, bytes), "cudaMalloc") ||
      !Check(cudaMalloc(&dst.p, bytes), "cudaMalloc") ||
      !Check(cudaMemset(src.p, 1, bytes), "cudaMemset") ||
      !Check(cudaEventCreate(&ev.start), "cudaEventCreate") ||
      !Check(cudaEventCreate(&ev.stop), "cudaEventCreate")) {
    return 1;
  }
  for (int i = 0; i < kWarmup; ++i) {
    if (!Check(cudaMemcpy(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice), "warm-up copy")) return 1;
  }
  cudaEventRecord(ev.start);
  for (int i = 0; i < kRepeats; ++i) cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(ev.stop);
  if (!Check(cudaEventSynchronize(ev.stop), "copies")) return 1;
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, ev.start, ev.stop);
  const double per_second = 2.0 * static_cast<double>(bytes) * kRepeats / (ms / 1000.0);
  std::printf("copy_bandwidth_bytes_per_second %.6e\n", per_second);
  std::printf("# %zu MiB copied %d times in %.3f ms: %.1f GB/s (read + write)\n", bytes >> 20,
              kRepeats, ms, per_second / 1e9);
  return 0;
}
