// CPU reference periodogram. On uniform grids each block of kBlock consecutive frequencies
// takes one exact sin/cos per sample and reaches the others by angle addition (rotation), so
// drift is bounded by kBlock steps; phases are reduced modulo one cycle in float64 first.
#include "server/ops/periodogram/cpu_periodogram.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/lombscargle_math.cuh"

namespace gpucompute::periodogram {
namespace {

constexpr int kBlock = 32;
constexpr double kTwoPi = 6.283185307179586476925286766559;

// sin and cos of 2*pi*x, with x reduced to [-1/2, 1/2] first.
inline void SinCosCycles(double x, double* s, double* c) {
  const double r = x - std::nearbyint(x);
  *s = std::sin(kTwoPi * r);
  *c = std::cos(kTwoPi * r);
}

struct Sums {
  double c = 0, s = 0, yc = 0, ys = 0, cc = 0, cs = 0;
  void Add(double w, double wy, double cos_v, double sin_v) {
    c += w * cos_v;
    s += w * sin_v;
    yc += wy * cos_v;
    ys += wy * sin_v;
    cc += w * cos_v * cos_v;
    cs += w * cos_v * sin_v;
  }
};

double Power(const Sums& a, const SeriesSpec& series, const PreparedSeries& p) {
  return gpucompute_kernels::LombScarglePower<double>(
      a.c, a.s, a.yc, a.ys, a.cc, a.cs, series.fit_mean, static_cast<int>(series.normalization),
      p.yy, p.psd_scale);
}

template <typename T>
void ComputeTyped(const SeriesSpec& series, const PreparedSeries& p, int64_t k_begin,
                  int64_t k_end, T* out) {
  const size_t n = p.t.size();
  if (!series.grid.uniform) {
    for (int64_t k = k_begin; k < k_end; ++k) {
      const double f = series.grid.explicit_frequencies[k];
      Sums a;
      for (size_t i = 0; i < n; ++i) {
        double s, c;
        SinCosCycles(f * p.t[i], &s, &c);
        a.Add(p.w[i], p.wy[i], c, s);
      }
      out[k - k_begin] = static_cast<T>(Power(a, series, p));
    }
    return;
  }
  const UniformGrid& g = *series.grid.uniform;
  std::array<Sums, kBlock> acc;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kBlock) {
    const int count = static_cast<int>(std::min<int64_t>(kBlock, k_end - k0));
    acc.fill(Sums{});
    const double f0 = g.f0 + static_cast<double>(k0) * g.df;
    for (size_t i = 0; i < n; ++i) {
      double s, c, ds, dc;
      SinCosCycles(f0 * p.t[i], &s, &c);
      SinCosCycles(g.df * p.t[i], &ds, &dc);
      for (int j = 0; j < count; ++j) {
        acc[j].Add(p.w[i], p.wy[i], c, s);
        const double c_next = c * dc - s * ds;
        s = s * dc + c * ds;
        c = c_next;
      }
    }
    for (int j = 0; j < count; ++j) out[k0 - k_begin + j] = static_cast<T>(Power(acc[j], series, p));
  }
}

}  // namespace

void ComputePowerCpu(const SeriesSpec& series, const PreparedSeries& prepared, ComputeType dtype,
                     int64_t k_begin, int64_t k_end, void* out) {
  if (dtype == ComputeType::kFloat32) {
    ComputeTyped(series, prepared, k_begin, k_end, static_cast<float*>(out));
  } else {
    ComputeTyped(series, prepared, k_begin, k_end, static_cast<double*>(out));
  }
}

SeriesPower ComputeSeriesCpu(const SeriesSpec& series, ComputeType dtype) {
  SeriesPower result;
  const int64_t n = series.grid.size();
  result.power.resize(static_cast<size_t>(n) * ElementSize(dtype));
  ComputePowerCpu(series, Prepare(series), dtype, 0, n, result.power.data());
  FindPeak(dtype, series.grid, &result);
  return result;
}

}  // namespace gpucompute::periodogram
