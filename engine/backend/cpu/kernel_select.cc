// Which kernels the CPU backend runs: the kernel level (kernels.h) chosen
// once per process, and the kernels of each level (the CPU feature checks
// are in cpu_features.cc).
#include <cstdlib>
#include <string>

#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/quant_linear.h"
#include "spdlog/spdlog.h"

namespace tessera::cpu {

bool CpuSupportsLevel(CpuKernelLevel level) {
  switch (level) {
    case CpuKernelLevel::kPortable:
      return true;
    case CpuKernelLevel::kAvx2:
      return CpuHasAvx2Kernels();
    case CpuKernelLevel::kAvxVnni:
      return CpuHasAvxVnni();
    case CpuKernelLevel::kAvx512:
      return CpuHasAvx512Kernels();
    case CpuKernelLevel::kAvx512Vnni:
      return CpuHasAvx512Vnni();
    case CpuKernelLevel::kAvx512Bf16:
      return CpuHasAvx512Vnni() && CpuHasAvx512Bf16();
    case CpuKernelLevel::kAmx:
      return CpuHasAvx512Kernels() && AmxAvailable();
  }
  return false;
}

const char* KernelLevelName(CpuKernelLevel level) {
  switch (level) {
    case CpuKernelLevel::kPortable:
      return "portable";
    case CpuKernelLevel::kAvx2:
      return "avx2";
    case CpuKernelLevel::kAvxVnni:
      return "avx-vnni";
    case CpuKernelLevel::kAvx512:
      return "avx512";
    case CpuKernelLevel::kAvx512Vnni:
      return "avx512-vnni";
    case CpuKernelLevel::kAvx512Bf16:
      return "avx512-bf16";
    case CpuKernelLevel::kAmx:
      return "amx";
  }
  return "?";
}

namespace {

CpuKernelLevel BestLevel() {
  CpuKernelLevel best = CpuKernelLevel::kPortable;
  for (CpuKernelLevel level : kAllKernelLevels) {
    if (CpuSupportsLevel(level)) best = level;
  }
  return best;
}

CpuKernelLevel ChooseLevel() {
  const char* env = std::getenv("TESSERA_CPU_KERNEL");
  const std::string want = env ? env : "auto";
  const CpuKernelLevel best = BestLevel();
  if (want == "auto" || want.empty()) return best;
  for (CpuKernelLevel level : kAllKernelLevels) {
    if (want != KernelLevelName(level)) continue;
    if (CpuSupportsLevel(level)) return level;
    spdlog::warn("TESSERA_CPU_KERNEL={}: this CPU cannot run it; using {}", want,
                 KernelLevelName(best));
    return best;
  }
  spdlog::warn(
      "TESSERA_CPU_KERNEL={} is not portable, avx2, avx-vnni, avx512, avx512-vnni, avx512-bf16, "
      "amx or auto; using {}",
      want, KernelLevelName(best));
  return best;
}

}  // namespace

CpuKernelLevel SelectedKernelLevel() {
  static const CpuKernelLevel level = ChooseLevel();
  return level;
}

CpuKernelPath PathOfLevel(CpuKernelLevel level) {
  switch (level) {
    case CpuKernelLevel::kPortable:
      return CpuKernelPath::kPortable;
    case CpuKernelLevel::kAvx2:
    case CpuKernelLevel::kAvxVnni:
      return CpuKernelPath::kAvx2;
    default:
      return CpuKernelPath::kAvx512;
  }
}

CpuKernelPath SelectedKernelPath() { return PathOfLevel(SelectedKernelLevel()); }

const char* KernelPathName(CpuKernelPath path) {
  switch (path) {
    case CpuKernelPath::kPortable:
      return "portable";
    case CpuKernelPath::kAvx2:
      return "avx2";
    case CpuKernelPath::kAvx512:
      return "avx512";
  }
  return "?";
}

LinearKernel SelectLinearKernel() {
  switch (SelectedKernelPath()) {
    case CpuKernelPath::kAvx512:
      return &LinearAvx512;
    case CpuKernelPath::kAvx2:
      return &LinearAvx2;
    default:
      return &LinearPortable;
  }
}

const char* LinearKernelName() { return KernelPathName(SelectedKernelPath()); }

QuantLinearKernel QuantLinearKernelOf(CpuKernelLevel level) {
  switch (level) {
    case CpuKernelLevel::kPortable:
      return &QuantLinearPortable;
    case CpuKernelLevel::kAvxVnni:
      return &QuantLinearAvxVnni;
    case CpuKernelLevel::kAvx2:
    case CpuKernelLevel::kAvx512:
      return &QuantLinearAvx2;
    case CpuKernelLevel::kAmx:
      if (AmxInt8Available()) return &QuantLinearAmx;
      return CpuHasAvx512Vnni() ? Avx512VnniKernel() : &QuantLinearAvx2;
    default:  // avx512-vnni and avx512-bf16
      return CpuHasAvx512Vnni() ? Avx512VnniKernel() : &QuantLinearAvx2;
  }
}

QuantLinearKernel Avx512VnniKernel() {
  return UseGfniKernel() ? &QuantLinearAvx512VnniGfni : &QuantLinearAvx512Vnni;
}

QuantizeActivationsFn SelectQuantizeActivations() {
  switch (SelectedKernelPath()) {
    case CpuKernelPath::kAvx512:
      return &QuantizeActivationsAvx512;
    case CpuKernelPath::kAvx2:
      return &QuantizeActivationsAvx2;
    default:
      return &QuantizeActivations;
  }
}

QuantLinearKernel SelectQuantLinearKernel() { return QuantLinearKernelOf(SelectedKernelLevel()); }

const char* QuantLinearKernelName() {
  const QuantLinearKernel k = SelectQuantLinearKernel();
  if (k == &QuantLinearAmx) return "amx-int8";
  if (k == &QuantLinearAvx512Vnni) return "avx512-vnni";
  if (k == &QuantLinearAvx512VnniGfni) return "avx512-vnni+gfni";
  if (k == &QuantLinearAvxVnni) return "avx-vnni";
  return k == &QuantLinearAvx2 ? "avx2" : "portable";
}

Bf16LinearKernel SelectBf16LinearKernel() {
  switch (SelectedKernelLevel()) {
    case CpuKernelLevel::kAvx512Bf16:
      return &LinearAvx512Bf16;
    case CpuKernelLevel::kAmx:
      return &LinearAmx;
    default:
      return nullptr;
  }
}

const char* Bf16LinearKernelName() {
  const Bf16LinearKernel k = SelectBf16LinearKernel();
  if (k == nullptr) return "none";
  return k == &LinearAmx ? "amx-bf16" : "avx512-bf16";
}

}  // namespace tessera::cpu
