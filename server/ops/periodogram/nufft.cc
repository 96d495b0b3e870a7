// The fast method's sums by NUFFT (see nufft.h).
#include "server/ops/periodogram/nufft.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "math/fft_sizes.h"
#include "math/nufft_math.cuh"

namespace gpucompute::periodogram {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2 * kPi;

// Gauss-Legendre nodes and weights on [-1, 1] (Newton on the Legendre recurrence).
void GaussLegendre(int n, std::vector<double>* x, std::vector<double>* w) {
  x->resize(n);
  w->resize(n);
  for (int i = 0; i < (n + 1) / 2; ++i) {
    double z = std::cos(kPi * (i + 0.75) / (n + 0.5));
    double dp = 0;
    for (int iter = 0; iter < 100; ++iter) {
      double p0 = 1, p1 = z;
      for (int k = 2; k <= n; ++k) {
        const double p2 = ((2 * k - 1) * z * p1 - (k - 1) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      if (n == 1) p0 = 1;
      dp = n * (z * p1 - p0) / (z * z - 1);
      const double dz = p1 / dp;
      z -= dz;
      if (std::abs(dz) < 1e-16) break;
    }
    (*x)[i] = -z;
    (*x)[n - 1 - i] = z;
    (*w)[i] = (*w)[n - 1 - i] = 2 / ((1 - z * z) * dp * dp);
  }
}

// FFTW's planner is not thread-safe; execution of a plan is.
std::mutex& PlannerMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

int64_t LowFrequencyPrefix(const UniformGrid& grid, double t_absmax) {
  if (!(t_absmax > 0) || !(grid.df > 0) || grid.n <= 0) return 0;
  const double k = std::ceil((0.1 / t_absmax - grid.f0) / grid.df);
  if (!(k > 0)) return 0;
  return k >= static_cast<double>(grid.n) ? grid.n : static_cast<int64_t>(k);
}

NufftPlan MakeNufftPlan(int64_t modes, ElementType dtype, int nterms) {
  NufftPlan plan;
  plan.modes = modes;
  plan.centre = modes / 2;
  // FINUFFT's rules (Barnett, Magland, af Klinteberg 2019): for an upsampling factor of 2,
  // width = digits + 1 and beta = 2.30 width; for another factor s, width = ln(1 / eps) /
  // (pi sqrt(1 - 1 / s)) and beta = 0.97 pi (1 - 1 / (2 s)) width. The fast method's time is
  // the memory traffic of the expansion and the FFT, proportional to the grid (s K), so
  // nterms = 1 takes a smaller s: float64 1.25 (0.625 times the traffic of s = 2), float32 1.5.
  // The deconvolution amplifies the grid's rounding at the band edge, more for smaller s:
  // float64's error floor becomes ~2e-12 of sum |a| (6e-14 for s = 2), enough for one term,
  // whose power carries the sums' error about unchanged, but not for the harmonic systems,
  // which multiply it by their condition number (up to ~1e6 where the tests compare): those
  // keep s = 2. Float32 at s = 1.25 amplified its rounding to 4e-4 of the power at a tenth of
  // a cycle over the baseline, where a floating mean cancels the sums (GPU test); s = 1.5
  // amplifies little. Widths measured to give (1,000 points, 4,096 modes, float64 arithmetic)
  // 1.5e-12 (s = 1.25, width 20), 5.5e-10 (s = 1.5, width 12) and 7e-14 / 2e-8 (s = 2, 14 /
  // 8). s = 1.17 (width 22: 1.8e-11 there) failed the Astropy tests' 1e-9 of the peak on small
  // series (1.4e-9 .. 2e-9): float64 stays at 1.25.
  const bool f64 = dtype == ElementType::kFloat64;
  double upsampling = 2;
  if (nterms == 1) {
    upsampling = f64 ? 1.25 : 1.5;
    plan.width = f64 ? 20 : 12;
  } else {
    plan.width = f64 ? 14 : 8;
  }
  const auto fine = static_cast<int64_t>(std::ceil(upsampling * static_cast<double>(modes)));
  plan.grid_size = NextFftSize(std::max<int64_t>(fine, 2 * plan.width));
  // Beta for the grid's actual upsampling (at least the target; small grids get more).
  const double actual = std::min(
      2.0, static_cast<double>(plan.grid_size) / static_cast<double>(std::max<int64_t>(modes, 1)));
  plan.beta = upsampling == 2 ? 2.30 * plan.width : 0.97 * kPi * (1 - 1 / (2 * actual)) * plan.width;
  return plan;
}

int64_t LargestFftSize(int64_t max_frequencies) {
  int64_t largest = 0;
  for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    for (int nterms : {1, 2}) {  // nterms > 1 all take the same grid
      largest = std::max(largest, MakeNufftPlan(max_frequencies, dtype, nterms).grid_size);
    }
  }
  return largest;
}

NufftQuadrature NufftCorrectionQuadrature(const NufftPlan& plan) {
  NufftQuadrature q;
  std::vector<double> w;
  GaussLegendre(3 * plan.width + 24, &q.x, &w);
  q.weight_phi.resize(q.x.size());
  for (size_t i = 0; i < q.x.size(); ++i) {
    q.weight_phi[i] = w[i] * gpucompute_kernels::EsKernel(q.x[i], plan.beta);
  }
  return q;
}

std::vector<double> NufftCorrection(const NufftPlan& plan) {
  const NufftQuadrature quad = NufftCorrectionQuadrature(plan);
  std::vector<double> out(static_cast<size_t>(plan.modes));
  const double half = 0.5 * plan.width;
  for (int64_t k = 0; k < plan.modes; ++k) {
    const double a = kPi * static_cast<double>(k - plan.centre) * plan.width /
                     static_cast<double>(plan.grid_size);
    double sum = 0;
    for (size_t q = 0; q < quad.x.size(); ++q) sum += quad.weight_phi[q] * std::cos(a * quad.x[q]);
    out[k] = 1.0 / (half * sum);
  }
  return out;
}

std::vector<HarmonicTerm> HarmonicTerms(int nterms, bool fit_mean) {
  std::vector<HarmonicTerm> terms;
  for (int j = (nterms == 1 && !fit_mean) ? 2 : 1; j <= 2 * nterms; ++j) terms.push_back({false, j});
  for (int j = 1; j <= nterms; ++j) terms.push_back({true, j});
  return terms;
}

std::vector<std::vector<std::complex<double>>> HarmonicSumsFastCpu(const SeriesSpec& series,
                                                                   const PreparedSeries& prepared,
                                                                   ElementType dtype) {
  const UniformGrid& g = *series.grid.uniform;
  const NufftPlan plan = MakeNufftPlan(g.n, dtype, series.nterms);
  const std::vector<double> correction = NufftCorrection(plan);
  const std::vector<HarmonicTerm> terms = HarmonicTerms(series.nterms, series.fit_mean);
  const int64_t m = plan.grid_size;
  const double fc = g.f0 + static_cast<double>(plan.centre) * g.df;

  fftw_complex* grid = fftw_alloc_complex(static_cast<size_t>(m));
  fftw_plan fft;
  {
    std::lock_guard<std::mutex> lock(PlannerMutex());
    fft = fftw_plan_dft_1d(static_cast<int>(m), grid, grid, FFTW_BACKWARD, FFTW_ESTIMATE);
  }
  std::vector<std::vector<std::complex<double>>> out(terms.size());
  std::vector<double> kernel(plan.width);
  for (size_t term = 0; term < terms.size(); ++term) {
    const HarmonicTerm& h = terms[term];
    const std::vector<double>& a = h.weighted_y ? prepared.wy : prepared.w;
    std::fill(reinterpret_cast<double*>(grid), reinterpret_cast<double*>(grid) + 2 * m, 0.0);
    for (size_t i = 0; i < prepared.t.size(); ++i) {
      const double t = prepared.t[i];
      double r = h.j * fc * t;
      r -= std::nearbyint(r);
      const double re = a[i] * std::cos(kTwoPi * r), im = a[i] * std::sin(kTwoPi * r);
      long long first;
      double z0;
      gpucompute_kernels::NufftCells(h.j * g.df * t, m, plan.width, &first, &z0);
      for (int c = 0; c < plan.width; ++c) {
        kernel[c] = gpucompute_kernels::EsKernel(z0 + c * (2.0 / plan.width), plan.beta);
      }
      int64_t cell = ((first % m) + m) % m;
      for (int c = 0; c < plan.width; ++c) {
        grid[cell][0] += re * kernel[c];
        grid[cell][1] += im * kernel[c];
        if (++cell == m) cell = 0;
      }
    }
    fftw_execute(fft);
    std::vector<std::complex<double>>& sums = out[term];
    sums.resize(static_cast<size_t>(g.n));
    for (int64_t k = 0; k < g.n; ++k) {
      const int64_t mode = k - plan.centre;
      const int64_t at = mode >= 0 ? mode : mode + m;
      sums[k] = std::complex<double>(grid[at][0], grid[at][1]) * correction[k];
    }
  }
  {
    std::lock_guard<std::mutex> lock(PlannerMutex());
    fftw_destroy_plan(fft);
  }
  fftw_free(grid);
  return out;
}

double DirectCost(int64_t samples, int64_t frequencies, int nterms) {
  // ~10 flops per sample-frequency pair and term.
  return 10.0 * static_cast<double>(samples) * static_cast<double>(frequencies) * nterms;
}

// FastCost's fixed part per transform (the extra launches and plans; see FastCost).
constexpr double kFastFixedCostPerTransform = 1e8;

double FastCost(int64_t samples, int64_t frequencies, int nterms, ElementType dtype) {
  const NufftPlan plan = MakeNufftPlan(frequencies, dtype, nterms);
  const double m = static_cast<double>(plan.grid_size);
  const double transforms = static_cast<double>(HarmonicTerms(nterms, true).size());
  // Per transform: the FFT, spreading (a kernel value per cell), the deconvolution and the
  // power's solve, plus a fixed cost for the extra launches: 1e8 (3e8 for nterms 1, the direct
  // sums of 3e7 pairs). On the H200 a small fast request (1,000 x 1,000) took 2.3 ms against
  // the direct kernel's 0.9 ms, so small grids stay direct.
  const double per_transform = 5 * m * std::log2(m) + 20.0 * samples * plan.width +
                               10.0 * frequencies + kFastFixedCostPerTransform;
  return transforms * per_transform;
}

Method AutoMethod(const SeriesSpec& series, ElementType dtype) {
  if (!series.grid.uniform) return Method::kDirect;
  const int64_t n = static_cast<int64_t>(series.t.size());
  const int64_t k = series.grid.size();
  const double direct = DirectCost(n, k, series.nterms);
  // FastCost is at least its fixed part (there is at least one transform): a small series is
  // direct without planning the transform (a small call's decode spent a few us planning it).
  if (direct <= kFastFixedCostPerTransform) return Method::kDirect;
  return FastCost(n, k, series.nterms, dtype) < direct ? Method::kFast : Method::kDirect;
}

}  // namespace gpucompute::periodogram
