// The fast method's sums: on a uniform grid f_k = f0 + k df (k = 0 .. K-1), each harmonic sum
//   H(k) = sum_i a_i exp(2 pi i j f_k t_i)      (a = w or w y, j = 1 .. 2 nterms)
// is one type-1 non-uniform FFT. With the mode shift c = K / 2 and k' = k - c:
//   H(k) = sum_i [a_i exp(2 pi i j (f0 + c df) t_i)] exp(i k' x_i),  x_i = 2 pi j df t_i,
// so each point's strength carries the phase of the grid's centre frequency and its position
// is its time in periods of 1 / (j df). The points are spread onto a periodic fine grid of
// M >= s K cells (s = 1.25 to 2, MakeNufftPlan) with the ES kernel of `width` cells, the grid is FFT'd (exp(+i ...)), and
// mode k' is divided by the kernel's Fourier transform there (computed by Gauss-Legendre
// quadrature). Phases and positions are reduced modulo one period in float64, on times
// re-centred on the series' middle sample (periodogram.h), so nothing grows with f t.
// The accuracy is set by s and the width: ~2e-12 (nterms 1) / 1e-13 (nterms > 1) of sum |a|
// (= 1 for the weights) for float64, 1e-7 for float32. With a floating mean the power needs
// sum w cos^2 - (sum w cos)^2, which is O(theta^4) where every phase theta stays small (the
// grid's lowest frequencies) and so carries the sums' error amplified: there (nterms 1) the
// fast method sums directly instead (LowFrequencyPrefix).
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {

// The geometry of one series' transforms (the same for all its harmonics).
struct NufftPlan {
  int64_t modes = 0;      // K, the grid's frequencies
  int64_t centre = 0;     // c = K / 2: mode k' = k - c
  int64_t grid_size = 0;  // M: the fine grid, a size of math/fft_sizes.h >= s K
  int width = 0;          // kernel support in cells
  double beta = 0;        // ES kernel shape
};
// The plan for `modes` frequencies of a series with `nterms` harmonics (the upsampling factor
// and width depend on both; see nufft.cc).
NufftPlan MakeNufftPlan(int64_t modes, ElementType dtype, int nterms);

// The largest FFT a fast series of at most `max_frequencies` frequencies takes (its grid; a
// window divides it): what a device's cuFFT plans must cover (DeviceContext::Options).
int64_t LargestFftSize(int64_t max_frequencies);

// 1 / (the kernel's Fourier transform) at each mode k = 0 .. K-1 (i.e. k' = k - c).
std::vector<double> NufftCorrection(const NufftPlan& plan);

// The quadrature behind NufftCorrection: with a_k = pi (k - c) width / M,
//   correction[k] = 1 / (width / 2 * sum_q weight_phi[q] cos(a_k x[q])).
// The CUDA path evaluates this same sum on the device (1M modes x ~66 nodes).
struct NufftQuadrature {
  std::vector<double> x;
  std::vector<double> weight_phi;  // Gauss-Legendre weight times the kernel at x
};
NufftQuadrature NufftCorrectionQuadrature(const NufftPlan& plan);

// The leading frequencies of a uniform grid whose phases stay within a tenth of a cycle of the
// reference sample (f_k t_absmax < 1/10, t_absmax the largest |t - t_ref|): there, with a
// floating mean, forms that take cos^2 from cos 2 theta (the fast method, the GPU's matrix
// products) lose to cancellation what the direct sums over cos - 1 keep, so those paths sum
// these frequencies directly. The loss grows as 1 / (f t_absmax)^4: the fast method's float64
// error was 2e-9 of the peak at f t_absmax = 0.05 (Astropy's grid start), so ~1e-10 at the
// bound; the products' float32 error (sums to ~1e-7) ~1e-6 of the power there.
int64_t LowFrequencyPrefix(const UniformGrid& grid, double t_absmax);

// The most sample-frequency pairs the fast method sums directly for its low frequencies
// (grids far finer than 1 / baseline can put many below the bound): above it, the fast method
// keeps its own sums there (with the loss above) rather than cost what the direct method would.
inline constexpr double kMaxLowFrequencyPairs = double{1 << 24};

// One harmonic sum a series needs: of w (weights) or w y, at j times the frequency.
struct HarmonicTerm {
  bool weighted_y = false;
  int j = 1;
};
// The sums the power at `nterms` needs: w at j = 1 .. 2 nterms (j = 1 skipped for nterms = 1
// without fit_mean), then w y at j = 1 .. nterms.
std::vector<HarmonicTerm> HarmonicTerms(int nterms, bool fit_mean);

// Harmonic sums of every HarmonicTerms entry at every frequency of series.grid (uniform),
// by NUFFT on the CPU (FFTW): out[term][k].
std::vector<std::vector<std::complex<double>>> HarmonicSumsFastCpu(const SeriesSpec& series,
                                                                   const PreparedSeries& prepared,
                                                                   ElementType dtype);

// The estimated cost of each method for a series (arbitrary units, comparable): `auto`
// takes the cheaper. Direct: samples x frequencies x terms; fast: FFTs and spreading.
double DirectCost(int64_t samples, int64_t frequencies, int nterms);
double FastCost(int64_t samples, int64_t frequencies, int nterms, ElementType dtype);

// `auto`: fast on uniform grids when FastCost < DirectCost, else direct.
Method AutoMethod(const SeriesSpec& series, ElementType dtype);

}  // namespace gpucompute::periodogram
