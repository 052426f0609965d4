// RAII owners of CUDA resources (device memory, pinned host memory, a
// stream, an event, a cuBLAS handle) and the conversion of CUDA and cuBLAS
// error codes into absl::Status. Every owner is move-only and releases its
// resource in its destructor; none is ever held by a raw owning pointer.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::cuda {

// OK for cudaSuccess; else INTERNAL naming `what` and CUDA's error string.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view what);
// The error of the last kernel launch (cudaGetLastError), as above.
absl::Status LaunchStatus(absl::string_view kernel);

// Owns a handle and a destroy function; the base of the owners below.
template <typename T, cudaError_t (*Destroy)(T)>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(T handle) : handle_(handle) {}
  ~CudaHandle() { Reset(); }
  CudaHandle(CudaHandle&& other) noexcept : handle_(std::exchange(other.handle_, T{})) {}
  CudaHandle& operator=(CudaHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, T{});
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  T get() const { return handle_; }

 private:
  void Reset() {
    if (handle_ != T{}) Destroy(handle_);
    handle_ = T{};
  }
  T handle_{};
};

inline cudaError_t FreeDevice(void* p) { return cudaFree(p); }
inline cudaError_t FreeHost(void* p) { return cudaFreeHost(p); }

// Device memory from cudaMalloc.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // A moved-from buffer is empty (size 0), so that code which grows a buffer
  // when size() is too small never keeps a null pointer.
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : memory_(std::move(o.memory_)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    memory_ = std::move(o.memory_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  void* data() const { return memory_.get(); }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(memory_.get());
  }

 private:
  DeviceBuffer(void* p, size_t bytes) : memory_(p), size_(bytes) {}
  CudaHandle<void*, FreeDevice> memory_;
  size_t size_ = 0;
};

// Page-locked host memory from cudaMallocHost, for asynchronous uploads.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // A moved-from buffer is empty (size 0), so that code which grows a buffer
  // when size() is too small never keeps a null pointer.
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : memory_(std::move(o.memory_)), size_(std::exchange(o.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    memory_ = std::move(o.memory_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes);
  void* data() const { return memory_.get(); }
  size_t size() const { return size_; }

 private:
  PinnedBuffer(void* p, size_t bytes) : memory_(p), size_(bytes) {}
  CudaHandle<void*, FreeHost> memory_;
  size_t size_ = 0;
};

class Stream {
 public:
  static absl::StatusOr<Stream> Create();
  cudaStream_t get() const { return stream_.get(); }

 private:
  explicit Stream(cudaStream_t s) : stream_(s) {}
  CudaHandle<cudaStream_t, cudaStreamDestroy> stream_;
};

class Event {
 public:
  static absl::StatusOr<Event> Create();
  cudaEvent_t get() const { return event_.get(); }

 private:
  explicit Event(cudaEvent_t e) : event_(e) {}
  CudaHandle<cudaEvent_t, cudaEventDestroy> event_;
};

inline cudaError_t DestroyCublas(cublasHandle_t h) {
  return cublasDestroy(h) == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

// A cuBLAS handle bound to one stream.
class CublasHandle {
 public:
  CublasHandle() = default;  // no handle
  static absl::StatusOr<CublasHandle> Create(cudaStream_t stream);
  cublasHandle_t get() const { return handle_.get(); }

 private:
  explicit CublasHandle(cublasHandle_t h) : handle_(h) {}
  CudaHandle<cublasHandle_t, DestroyCublas> handle_;
};

// The number of CUDA devices, or the driver's error (no driver, no device).
absl::StatusOr<int> CountDevices();

}  // namespace tessera::cuda
