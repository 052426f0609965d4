// Loads the CUDA backend module (libtessera_cuda.so) at run time. The server
// and every engine library stay free of cudart and cuBLAS: they are linked
// only into the module.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace tessera {

// Where the module is looked for, in order: options.cuda_module when set;
// else $TESSERA_CUDA_MODULE when set; else next to the running executable,
// then in ../lib and ../lib/tessera relative to it.
std::vector<std::string> CudaModuleCandidates(const BackendOptions& options);

// Opens the module and creates its backend on device 0. Errors name the
// cause: NOT_FOUND (no module file at any candidate path), FAILED_PRECONDITION
// (dlopen's error text, a missing symbol, an ABI mismatch, or the module's
// own message: the CUDA driver's error string or "no CUDA devices"), and
// INVALID_ARGUMENT for bad options.
absl::StatusOr<std::unique_ptr<Backend>> LoadCudaBackend(const BackendOptions& options);

}  // namespace tessera
