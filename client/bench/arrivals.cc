#include "client/bench/arrivals.h"

namespace tessera::bench {

// Scale theta = 1 / (rate * shape) keeps the mean, shape * theta, at 1 / rate.
ArrivalSchedule::ArrivalSchedule(double rate, double burstiness, uint64_t seed)
    : rng_(seed), gamma_(burstiness, 1.0 / (rate * burstiness)) {}

double ArrivalSchedule::NextGapSeconds() { return gamma_(rng_); }

}  // namespace tessera::bench
