// Comparing float outputs in tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::testing {

// Largest |a[i] - b[i]| over the elements of a (b has at least as many).
inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace tessera::testing
