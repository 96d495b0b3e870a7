// Random, unevenly sampled test series shared by the periodogram tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram::testing {

// n sorted times over [t0, t0 + baseline], y = amplitude*sin(2 pi f t + phase) + offset +
// noise, and dy in [0.5, 1.5] when with_dy.
inline SeriesSpec RandomSeries(std::mt19937_64& rng, int n, double f, bool with_dy,
                               double t0 = 0, double baseline = 10, double noise = 0.3) {
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> g(0, 1);
  SeriesSpec s;
  s.t.resize(n);
  for (double& t : s.t) t = t0 + baseline * u(rng);
  std::sort(s.t.begin(), s.t.end());
  const double phase = 6.283 * u(rng), offset = 3 * g(rng);
  for (int i = 0; i < n; ++i) {
    s.y.push_back(1.5 * std::sin(6.283185307179586 * f * (s.t[i] - t0) + phase) + offset + noise * g(rng));
    if (with_dy) s.dy.push_back(0.5 + u(rng));
  }
  return s;
}

}  // namespace gpucompute::periodogram::testing
