// Open-loop arrival times: constant spacing 1/rate, or a Poisson process (exponential gaps of
// mean 1/rate, seeded). Computed before the level starts so that the pacer only waits.
#pragma once

#include <cstdint>
#include <vector>

#include "client/load/config.h"

namespace gpucompute::load {

// Arrival times in nanoseconds from 0: every arrival before `horizon_ns`, or, when `count` is
// positive, exactly `count` arrivals (horizon ignored). The first arrival is at 0 (constant) or
// after one exponential gap (Poisson).
std::vector<int64_t> ArrivalTimes(Arrival arrival, double rate, int64_t horizon_ns, int64_t count,
                                  uint64_t seed);

}  // namespace gpucompute::load
