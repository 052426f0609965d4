#include "engine/backend/cuda/device.h"

#include "absl/strings/str_cat.h"

namespace tessera::cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  // The failing call also left `error` as the thread's last error. Clear it
  // (a sticky error stays regardless): the status returned here reports it,
  // and once the engine has consumed that, the next launch's LaunchStatus
  // must not report it again and fail a later step.
  cudaGetLastError();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  cudaGetLastError();  // a failed cuBLAS launch may leave one too (see CudaStatus)
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusName(status), " (",
                                          cublasGetStatusString(status), ")"));
}

absl::Status LaunchStatus(absl::string_view kernel) {
  return CudaStatus(cudaGetLastError(), absl::StrCat("launching ", kernel));
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  void* p = nullptr;
  // cudaMalloc of 0 bytes returns null, which is a valid empty buffer.
  if (bytes > 0) {
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later calls work
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaMalloc of ", bytes, " bytes: ", cudaGetErrorString(e)));
    }
  }
  return DeviceBuffer(p, bytes);
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) {
    if (auto s = CudaStatus(cudaMallocHost(&p, bytes), "cudaMallocHost"); !s.ok()) return s;
  }
  return PinnedBuffer(p, bytes);
}

absl::StatusOr<Stream> Stream::Create() {
  cudaStream_t s = nullptr;
  if (auto st =
          CudaStatus(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      !st.ok()) {
    return st;
  }
  return Stream(s);
}

absl::StatusOr<Event> Event::Create() {
  cudaEvent_t e = nullptr;
  if (auto st = CudaStatus(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      !st.ok()) {
    return st;
  }
  return Event(e);
}

absl::StatusOr<CublasHandle> CublasHandle::Create(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  if (auto s = CublasStatus(cublasCreate(&h), "cublasCreate"); !s.ok()) return s;
  CublasHandle handle(h);
  if (auto s = CublasStatus(cublasSetStream(h, stream), "cublasSetStream"); !s.ok()) return s;
  return handle;
}

absl::StatusOr<int> CountDevices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("cudaGetDeviceCount failed: ", cudaGetErrorString(e)));
  }
  if (count == 0) return absl::FailedPreconditionError("no CUDA devices");
  return count;
}

}  // namespace tessera::cuda
