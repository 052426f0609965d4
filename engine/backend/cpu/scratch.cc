#include "engine/backend/cpu/scratch.h"

#include <vector>

namespace tessera::cpu {

float* ThreadScratchF32(size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

}  // namespace tessera::cpu
