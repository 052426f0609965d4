// The module's two C entry points (module_abi.h). Nothing else is exported.
#include <cstdio>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/module_abi.h"

namespace {

void WriteError(char* error, size_t size, absl::string_view message) {
  if (error == nullptr || size == 0) return;
  std::snprintf(error, size, "%.*s", static_cast<int>(message.size()), message.data());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int32_t tessera_cuda_module_abi(void) {
  return TESSERA_CUDA_MODULE_ABI;
}

extern "C" __attribute__((visibility("default"))) tessera::Backend* tessera_cuda_create_backend(
    const TesseraCudaOptions* options, char* error, size_t error_size) {
  if (options == nullptr || options->abi_version != TESSERA_CUDA_MODULE_ABI) {
    WriteError(error, error_size, "caller and module were built with different backend ABIs");
    return nullptr;
  }
  tessera::cuda::CudaBackendOptions o;
  o.device = options->device_index;
  o.gpu_memory_utilization = options->gpu_memory_utilization;
  o.auto_dtype = options->weight_dtype == kTesseraCudaDtypeAuto;
  switch (options->weight_dtype) {
    case kTesseraCudaDtypeF32:
      o.dtype = tessera::DType::kF32;
      break;
    case kTesseraCudaDtypeBf16:
      o.dtype = tessera::DType::kBF16;
      break;
    default:
      o.dtype = tessera::DType::kF16;
      break;
  }
  auto backend = tessera::cuda::CudaBackend::Create(o);
  if (!backend.ok()) {
    WriteError(error, error_size, backend.status().message());
    return nullptr;
  }
  return backend->release();
}
