#include "engine/backend/cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/backend/cuda/module_abi.h"

namespace tessera {
namespace {

std::string ExecutableDir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  std::string exe(path, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

absl::StatusOr<int32_t> ParseDtype(std::string_view dtype) {
  if (dtype == "auto") return kTesseraCudaDtypeAuto;
  if (dtype == "f32") return kTesseraCudaDtypeF32;
  if (dtype == "f16") return kTesseraCudaDtypeF16;
  if (dtype == "bf16") return kTesseraCudaDtypeBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --dtype '", std::string(dtype), "' (expected auto, f16, bf16 or f32)"));
}

// A dlopen handle, closed unless released to the backend's lifetime.
class ModuleHandle {
 public:
  explicit ModuleHandle(void* handle) : handle_(handle) {}
  ~ModuleHandle() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  ModuleHandle(const ModuleHandle&) = delete;
  ModuleHandle& operator=(const ModuleHandle&) = delete;
  void* get() const { return handle_; }
  // The module's code backs the backend's vtable, so once a backend exists
  // the module stays loaded for the rest of the process.
  void Release() { handle_ = nullptr; }

 private:
  void* handle_;
};

}  // namespace

std::vector<std::string> CudaModuleCandidates(const BackendOptions& options) {
  if (!options.cuda_module.empty()) return {std::string(options.cuda_module)};
  if (const char* env = std::getenv("TESSERA_CUDA_MODULE"); env != nullptr && *env != '\0') {
    return {env};
  }
  const std::string dir = ExecutableDir();
  return {absl::StrCat(dir, "/", TESSERA_CUDA_MODULE_FILE),
          absl::StrCat(dir, "/../lib/", TESSERA_CUDA_MODULE_FILE),
          absl::StrCat(dir, "/../lib/tessera/", TESSERA_CUDA_MODULE_FILE)};
}

absl::StatusOr<std::unique_ptr<Backend>> LoadCudaBackend(const BackendOptions& options) {
  if (!(options.gpu_memory_utilization > 0.0f && options.gpu_memory_utilization <= 1.0f)) {
    return absl::InvalidArgumentError("--gpu-memory-utilization must be in (0, 1]");
  }
  auto dtype = ParseDtype(options.dtype);
  if (!dtype.ok()) return dtype.status();
  const std::vector<std::string> candidates = CudaModuleCandidates(options);
  std::string path;
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) {
      path = c;
      break;
    }
  }
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat("CUDA backend module not found (looked for ",
                                            absl::StrJoin(candidates, ", "),
                                            "; set TESSERA_CUDA_MODULE to its path)"));
  }
  ModuleHandle module(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (module.get() == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat("cannot load the CUDA backend module ", path,
                                                      ": ", why ? why : "unknown dlopen error"));
  }
  auto abi = reinterpret_cast<TesseraCudaAbiFn>(dlsym(module.get(), TESSERA_CUDA_ABI_SYMBOL));
  auto create =
      reinterpret_cast<TesseraCudaCreateFn>(dlsym(module.get(), TESSERA_CUDA_CREATE_SYMBOL));
  if (abi == nullptr || create == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a Tessera CUDA backend module (missing entry points)"));
  }
  if (abi() != TESSERA_CUDA_MODULE_ABI) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has backend ABI ", abi(), "; this server needs ",
                     TESSERA_CUDA_MODULE_ABI, " (module and server are from different builds)"));
  }
  const TesseraCudaOptions cuda_options{TESSERA_CUDA_MODULE_ABI, 0, options.gpu_memory_utilization,
                                        *dtype};
  char error[1024] = {0};
  Backend* backend = create(&cuda_options, error, sizeof(error));
  if (backend == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("CUDA backend (", path, "): ", error));
  }
  module.Release();
  return std::unique_ptr<Backend>(backend);
}

}  // namespace tessera
