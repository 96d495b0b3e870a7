// CPU reference periodogram. nterms = 1, direct: on uniform grids each block of kBlock consecutive frequencies
// takes one exact sin/cos per sample and reaches the others by angle addition (rotation), so
// drift is bounded by kBlock steps; phases are reduced modulo one cycle in float64 first.
// nterms > 1, direct: harmonic sums per frequency, then the small solve
// (math/lombscargle_harmonic.cuh). Fast: NUFFT harmonic sums (nufft.h), then the solve.
#include "server/ops/periodogram/cpu_periodogram.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <vector>

#include "math/lombscargle_harmonic.cuh"
#include "math/lombscargle_math.cuh"
#include "server/ops/periodogram/nufft.h"

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

// The q-term power from harmonic sums w_sums[j] = sum w e^{i j theta} (j = 0 .. 2q) and
// y_sums[j] = sum w y e^{i j theta} (j = 0 .. q).
double HarmonicPowerFromSums(const std::complex<double>* w_sums, const std::complex<double>* y_sums,
                             const SeriesSpec& series, const PreparedSeries& p) {
  const int q = series.nterms;
  double cw[2 * gpucompute_kernels::kMaxHarmonicTerms + 1], sw[2 * gpucompute_kernels::kMaxHarmonicTerms + 1];
  double yc[gpucompute_kernels::kMaxHarmonicTerms + 1], ys[gpucompute_kernels::kMaxHarmonicTerms + 1];
  for (int j = 0; j <= 2 * q; ++j) {
    cw[j] = w_sums[j].real();
    sw[j] = w_sums[j].imag();
  }
  for (int j = 0; j <= q; ++j) {
    yc[j] = y_sums[j].real();
    ys[j] = y_sums[j].imag();
  }
  return gpucompute_kernels::HarmonicPower<double>(cw, sw, yc, ys, q, series.fit_mean,
                                                   static_cast<int>(series.normalization), p.yy,
                                                   p.psd_scale);
}

// Direct sums for nterms > 1: per frequency, e^{i theta} once (phase reduced in float64) and
// its powers by complex multiplication.
template <typename T>
void ComputeHarmonicDirect(const SeriesSpec& series, const PreparedSeries& p, int64_t k_begin,
                           int64_t k_end, T* out) {
  const int q = series.nterms;
  std::vector<std::complex<double>> w_sums(2 * q + 1), y_sums(q + 1);
  for (int64_t k = k_begin; k < k_end; ++k) {
    const double f = series.grid.frequency(k);
    std::fill(w_sums.begin(), w_sums.end(), std::complex<double>());
    std::fill(y_sums.begin(), y_sums.end(), std::complex<double>());
    for (size_t i = 0; i < p.t.size(); ++i) {
      double s, c;
      SinCosCycles(f * p.t[i], &s, &c);
      const std::complex<double> e1(c, s);
      std::complex<double> e = e1;
      for (int j = 1; j <= 2 * q; ++j) {
        w_sums[j] += p.w[i] * e;
        if (j <= q) y_sums[j] += p.wy[i] * e;
        e *= e1;
      }
    }
    w_sums[0] = 1.0;  // the weights sum to 1
    out[k - k_begin] = static_cast<T>(HarmonicPowerFromSums(w_sums.data(), y_sums.data(), series, p));
  }
}

template <typename T>
void ComputeTyped(const SeriesSpec& series, const PreparedSeries& p, int64_t k_begin,
                  int64_t k_end, T* out);

// The fast method over the whole grid: NUFFT sums (nufft.h), then the power per frequency;
// with nterms 1 the lowest frequencies (LowFrequencyPrefix) by direct sums, as on the GPU.
template <typename T>
void ComputeFast(const SeriesSpec& series, const PreparedSeries& p, ElementType dtype, T* out) {
  const std::vector<HarmonicTerm> terms = HarmonicTerms(series.nterms, series.fit_mean);
  const auto sums = HarmonicSumsFastCpu(series, p, dtype);
  const int q = series.nterms;
  std::vector<std::complex<double>> w_sums(2 * q + 1), y_sums(q + 1);
  for (int64_t k = 0; k < series.grid.size(); ++k) {
    std::fill(w_sums.begin(), w_sums.end(), std::complex<double>());
    std::fill(y_sums.begin(), y_sums.end(), std::complex<double>());
    w_sums[0] = 1.0;
    for (size_t term = 0; term < terms.size(); ++term) {
      (terms[term].weighted_y ? y_sums : w_sums)[terms[term].j] = sums[term][k];
    }
    out[k] = static_cast<T>(HarmonicPowerFromSums(w_sums.data(), y_sums.data(), series, p));
  }
  if (q == 1) {
    double t_absmax = 0;
    for (double t : p.t) t_absmax = std::max(t_absmax, std::abs(t));
    const int64_t low = LowFrequencyPrefix(*series.grid.uniform, t_absmax);
    const double pairs = static_cast<double>(low) * static_cast<double>(p.t.size());
    if (low > 0 && pairs <= kMaxLowFrequencyPairs) ComputeTyped(series, p, 0, low, out);
  }
}

template <typename T>
void ComputeTyped(const SeriesSpec& series, const PreparedSeries& p, int64_t k_begin,
                  int64_t k_end, T* out) {
  const size_t n = p.t.size();
  if (series.nterms > 1) {
    ComputeHarmonicDirect(series, p, k_begin, k_end, out);
    return;
  }
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

int64_t CpuTaskFrequencies(const SeriesSpec& series, int64_t direct_chunk) {
  return series.method == Method::kFast ? std::max<int64_t>(series.grid.size(), 1) : direct_chunk;
}

void ComputePowerCpu(const SeriesSpec& series, const PreparedSeries& prepared, ElementType dtype,
                     int64_t k_begin, int64_t k_end, void* out) {
  if (series.method == Method::kFast) {
    // One call covers the whole grid (CpuTaskFrequencies).
    if (dtype == ElementType::kFloat32) {
      ComputeFast(series, prepared, dtype, static_cast<float*>(out));
    } else {
      ComputeFast(series, prepared, dtype, static_cast<double*>(out));
    }
    return;
  }
  if (dtype == ElementType::kFloat32) {
    ComputeTyped(series, prepared, k_begin, k_end, static_cast<float*>(out));
  } else {
    ComputeTyped(series, prepared, k_begin, k_end, static_cast<double*>(out));
  }
}

SeriesPower ComputeSeriesCpu(const SeriesSpec& series, ElementType dtype) {
  SeriesPower result;
  const int64_t n = series.grid.size();
  result.power.resize(static_cast<size_t>(n) * ElementSize(dtype));
  ComputePowerCpu(series, Prepare(series), dtype, 0, n, result.power.data());
  FindPeak(dtype, series.grid, &result);
  return result;
}

}  // namespace gpucompute::periodogram
