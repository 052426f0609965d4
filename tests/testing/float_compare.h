// Comparing float outputs in tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessera::testing {

// Largest |a[i] - b[i]| over the elements of a (b has at least as many).
// NaN where either holds a NaN (std::max would skip it), so that a bound on
// the result fails.
inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float diff = std::fabs(a[i] - b[i]);
    if (std::isnan(diff)) return std::numeric_limits<float>::quiet_NaN();
    d = std::max(d, diff);
  }
  return d;
}

// Largest |a[i] - b[i]| / max(|b[i]|, floor): relative error, measured
// against floor where b is smaller.
inline double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b,
                         double floor = 1e-6) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(double{a[i]} - b[i]) / std::max<double>(std::fabs(b[i]), floor);
    if (std::isnan(diff)) return std::numeric_limits<double>::quiet_NaN();
    d = std::max(d, diff);
  }
  return d;
}

}  // namespace tessera::testing
