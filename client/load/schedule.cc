// Constant and Poisson arrival schedules.
#include "client/load/schedule.h"

#include <cmath>
#include <random>

namespace gpucompute::load {

std::vector<int64_t> ArrivalTimes(Arrival arrival, double rate, int64_t horizon_ns, int64_t count,
                                  uint64_t seed) {
  std::vector<int64_t> times;
  if (!(rate > 0)) return times;
  const double gap_ns = 1e9 / rate;
  const bool by_count = count > 0;
  if (by_count) times.reserve(static_cast<size_t>(count));
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> exponential(1.0);
  double t = arrival == Arrival::kConstant ? 0.0 : exponential(rng) * gap_ns;
  for (int64_t i = 0;; ++i) {
    if (by_count ? i >= count : t >= static_cast<double>(horizon_ns)) break;
    times.push_back(static_cast<int64_t>(std::llround(t)));
    // Constant: i-th arrival at i * gap (no accumulated rounding).
    t = arrival == Arrival::kConstant ? static_cast<double>(i + 1) * gap_ns
                                      : t + exponential(rng) * gap_ns;
  }
  return times;
}

}  // namespace gpucompute::load
