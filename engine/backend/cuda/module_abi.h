// The C entry points of the CUDA backend module (libtessera_cuda.so), which
// CreateBackend loads with dlopen (engine/backend/cuda_loader.cc). The server
// binary never links CUDA; everything CUDA lives behind these two symbols.
//
// The backend crosses the boundary as a C++ object (tessera::Backend), so the
// module and the server must agree on backend.h: TESSERA_CUDA_MODULE_ABI is
// bumped whenever backend.h or the structs below change, and both sides check
// it (the loader calls the ABI function before anything else; the factory
// refuses options of another version).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {
class Backend;
}

#define TESSERA_CUDA_MODULE_ABI 5

extern "C" {

// Weight dtype on the device (--dtype).
enum TesseraCudaDtype : int32_t {
  kTesseraCudaDtypeAuto = 0,  // f16/bf16 weights stay as they are; f32 ones become f16
  kTesseraCudaDtypeF32 = 1,   // exact products, for parity runs
  kTesseraCudaDtypeF16 = 2,
  kTesseraCudaDtypeBf16 = 3,
};

struct TesseraCudaOptions {
  int32_t abi_version;           // the caller's TESSERA_CUDA_MODULE_ABI
  int32_t device_index;          // CUDA device ordinal
  float gpu_memory_utilization;  // (0, 1]: fraction of free device memory for the KV pool
  int32_t weight_dtype;          // a TesseraCudaDtype
};

// Returns the module's TESSERA_CUDA_MODULE_ABI.
typedef int32_t (*TesseraCudaAbiFn)(void);
// Returns a new backend that the caller owns, or null with a NUL-terminated
// message naming the cause (no device, driver error, ...) in error.
typedef tessera::Backend* (*TesseraCudaCreateFn)(const TesseraCudaOptions* options, char* error,
                                                 size_t error_size);
}

#define TESSERA_CUDA_ABI_SYMBOL "tessera_cuda_module_abi"
#define TESSERA_CUDA_CREATE_SYMBOL "tessera_cuda_create_backend"
// The module's file name, looked for next to the server binary.
#define TESSERA_CUDA_MODULE_FILE "libtessera_cuda.so"
