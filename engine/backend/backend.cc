#include "engine/backend/backend.h"

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda_loader.h"
#include "spdlog/spdlog.h"

namespace tessera {

size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    default:
      return quant::Info(QuantTypeOf(dtype)).name;
  }
}

size_t KvStorageShape::BytesPerBlock() const {
  return 2ull * num_layers * block_size * num_kv_heads * head_dim * DTypeSize(dtype);
}

bool CpuHasAmxBf16() { return cpu::AmxAvailable(); }

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", std::string(options.device), "' (expected cpu, cuda or auto)"));
  }
  if (options.device != "cpu") {
    auto cuda = LoadCudaBackend(options);
    if (cuda.ok()) {
      spdlog::info("device {}: CUDA backend", std::string(options.device));
      return cuda;
    }
    if (options.device == "cuda" || absl::IsInvalidArgument(cuda.status())) {
      return absl::Status(cuda.status().code(),
                          absl::StrCat("--device ", std::string(options.device), ": ",
                                       cuda.status().message()));
    }
    spdlog::info("device auto: {}; using the CPU", std::string(cuda.status().message()));
  }
  const bool amx = options.cpu_matmul == "bf16";
  if (amx && !cpu::AmxAvailable()) {
    return absl::FailedPreconditionError(
        "--cpu-matmul bf16 needs a CPU with AMX-BF16 (and a kernel that grants AMX state); use "
        "--cpu-matmul f32");
  }
  if (!amx && options.cpu_matmul != "f32") {
    return absl::InvalidArgumentError(absl::StrCat("unknown --cpu-matmul '",
                                                   std::string(options.cpu_matmul),
                                                   "' (expected f32 or bf16)"));
  }
  auto backend = std::make_unique<cpu::CpuBackend>(options.num_threads, amx);
  spdlog::info("CPU backend: {} threads, linear kernel {}", backend->pool().num_threads(),
               amx ? "amx-bf16" : cpu::LinearKernelName());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tessera
