// Arrival times of an open-loop benchmark.
#pragma once

#include <cstdint>
#include <random>

namespace tessera::bench {

// Draws the gaps between request arrivals, in seconds. Gaps follow a gamma
// distribution with shape `burstiness` and mean 1 / `rate`: burstiness 1 is
// a Poisson process, smaller values are burstier and larger ones more
// regular (the coefficient of variation is 1 / sqrt(burstiness)), as in
// vLLM's benchmark_serving.
class ArrivalSchedule {
 public:
  // rate: requests per second, > 0. burstiness: > 0.
  ArrivalSchedule(double rate, double burstiness, uint64_t seed);

  // The gap before the next arrival, in seconds.
  double NextGapSeconds();

 private:
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
};

}  // namespace tessera::bench
