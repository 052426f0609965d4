#include "engine/backend/backend.h"

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda_loader.h"
#include "spdlog/spdlog.h"

namespace tessera {

size_t DTypeSize(DType dtype) {
  return dtype == DType::kF32 ? 4 : dtype == DType::kI8 ? 1 : 2;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI8:
      return "int8";
    default:
      return quant::Info(QuantTypeOf(dtype)).name;
  }
}

std::optional<DType> KvCacheDTypeFromName(std::string_view name) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kI8}) {
    if (name == DTypeName(dtype)) return dtype;
  }
  return std::nullopt;
}

size_t KvStorageShape::BytesPerTokenHead() const {
  return head_dim * DTypeSize(dtype) + (dtype == DType::kI8 ? sizeof(float) : 0);
}

size_t KvStorageShape::BytesPerBlock() const {
  return 2ull * num_layers * block_size * num_kv_heads * BytesPerTokenHead();
}

bool CpuHasBf16Matmul() { return cpu::SelectBf16LinearKernel() != nullptr; }

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
  const bool bf16 = options.cpu_matmul == "bf16";
  if (bf16 && !CpuHasBf16Matmul()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--cpu-matmul bf16 needs a CPU with AVX512-BF16 or AMX-BF16 (kernel level avx512-bf16 "
        "or amx; this one runs ",
        cpu::KernelLevelName(cpu::SelectedKernelLevel()), "); use --cpu-matmul f32"));
  }
  if (!bf16 && options.cpu_matmul != "f32") {
    return absl::InvalidArgumentError(absl::StrCat("unknown --cpu-matmul '",
                                                   std::string(options.cpu_matmul),
                                                   "' (expected f32 or bf16)"));
  }
  auto backend = std::make_unique<cpu::CpuBackend>(options.num_threads, bf16);
  spdlog::info("CPU backend: {} threads, kernel level {}, linear kernel {}, quantized kernel {}",
               backend->pool().num_threads(), cpu::KernelLevelName(cpu::SelectedKernelLevel()),
               bf16 ? cpu::Bf16LinearKernelName() : cpu::LinearKernelName(),
               cpu::QuantLinearKernelName());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tessera
