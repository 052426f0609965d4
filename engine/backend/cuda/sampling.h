// Token sampling on the device (semantics in sampling_params.h): one block
// per row of logits [rows, vocab] f32; params [rows] and tokens [rows] in
// device memory. Fails (INVALID_ARGUMENT) before launching when a row is not
// SupportedOnDevice; checks the host copy `host_params`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/backend/cuda/sampling_params.h"

namespace tessera::cuda {

absl::Status LaunchSample(const float* logits, int32_t rows, int32_t vocab,
                          const DeviceSamplingParams* host_params,
                          const DeviceSamplingParams* params, int32_t* tokens, cudaStream_t stream);

}  // namespace tessera::cuda
