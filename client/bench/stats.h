// Summary statistics of latency samples.
#pragma once

#include <vector>

namespace tessera::bench {

// Mean and percentiles of one set of samples, in the samples' unit.
struct Summary {
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
  long count = 0;
};

// The q-th percentile (q in [0, 100]) of `sorted` (ascending), interpolating
// linearly between the closest ranks as numpy.percentile does by default.
// An empty set gives 0 so that reports never carry NaN.
double Percentile(const std::vector<double>& sorted, double q);

// Mean, p50, p90 and p99 of `samples` (any order). Empty: all zero.
Summary Summarize(std::vector<double> samples);

}  // namespace tessera::bench
