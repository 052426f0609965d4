// What llama.cpp derives for Gemma 3 from a GGUF file's shape, in one place
// for the model config and the Hugging Face folder reader and writer.
#pragma once

#include <cstdint>

namespace tessera {

// Gemma 3's query_pre_attn_scalar (queries are scaled by its inverse square
// root). GGUF files do not store it: llama.cpp takes head_dim, except for
// the 27B model (62 layers), whose config sets hidden / heads.
inline uint32_t Gemma3QueryPreAttnScalar(uint32_t layers, uint32_t hidden, uint32_t heads,
                                         uint32_t head_dim) {
  return layers == 62 && heads != 0 ? hidden / heads : head_dim;
}

}  // namespace tessera
