// The fast (NUFFT) periodogram on the GPU, nvcc-built: spreading onto the fine grids, the
// deconvolution table, and the power from the transformed grids with per-block peaks. The
// scheme and its parameters are server/ops/periodogram/nufft.h's; the FFT between spreading and
// power is cuFFT's, run by the host code.
#pragma once

#include <cuda_runtime.h>

#include "kernels/lombscargle_abi.cuh"
#include "kernels/lombscargle_product.cuh"

namespace gpucompute::kernels {

using gpucompute_kernels::LsPeak;

// One fast-method series of a batch (host-packed, read by the kernels).
struct NufftSeriesDesc {
  long long sample_offset;  // into t / w / wy
  long long grid_offset;    // complex cells; transform i of the series at grid_offset + i * grid_size
  long long grid_size;      // M
  long long modes;          // K: frequencies of the uniform grid
  long long centre;         // c: mode k' = k - c
  long long out_offset;     // elements of power; -1: peak only, power not written
  long long peak_offset;    // the series' first per-block partial peak
  // Windowed (pruned) form, when every point's cells fall within a window of L cells centred
  // on cell 0 with L a divisor of M and R = M / L >= 4 (grids much finer than 1 / baseline):
  // the points are spread onto L cells (cell n at n + L / 2 mod M), then with mode
  // k'' = R k' + r,
  //   X[k''] = (-1)^k' FFT_L(x_m exp(2 pi i r (m - L / 2) / M))[k'],
  // so R twiddled copies and FFTs of L points replace one of M (cuFFT's M-point transforms
  // take several passes over memory; these take one). 0: the full grid.
  long long window;         // L
  long long window_offset;  // complex cells of the spread windows (transform i at + i L)
  // Windowed power kernel: k - c = R q + r for q in [q_min, q_min + q_count), tiles of
  // kWindowTile q x kWindowTile r per block (reads along q, writes along r, through shared
  // memory).
  long long q_min;
  long long q_count;
  long long low;            // modes k < low are summed directly (LowFrequencyPrefix): skipped
  double two_over_m;        // 2 / M
  double fc;                // f0 + c df: the centre frequency carried by the strengths
  double df;
  double beta;              // ES kernel shape
  double yy;                // sum w y^2
  double psd_scale;         // sum(dy^-2) / 2
  int n_samples;
  int width;                // kernel support in cells
  int nterms;
  int fit_mean;
  int normalization;
  int first_transform;      // into the transform table
  int n_transforms;
  int pad;
};

// One transform (one harmonic sum of one series): HarmonicTerms' entry.
struct NufftTransform {
  int series;      // into the NufftSeriesDesc table
  int j;           // harmonic
  int weighted_y;  // 1: strengths w y, 0: w
  int pad;
};

// Threads per block of the power kernel: a series takes ceil(K / kNufftPowerBlock) blocks, and
// as many partial peaks.
constexpr int kNufftPowerBlock = 256;
constexpr int kWindowTile = 32;
// The widest spreading kernel the spreading kernel handles (cells per point).
constexpr int kNufftMaxWidth = 24;

// Blocks (and partial peaks) of the power kernel for a series: windowed with R copies and
// q_count values of q, or the full grid's.
inline long long NufftPowerBlocks(long long modes, long long copies, long long q_count) {
  if (copies > 0) {
    return ((copies + kWindowTile - 1) / kWindowTile) * ((q_count + kWindowTile - 1) / kWindowTile);
  }
  return (modes + kNufftPowerBlock - 1) / kNufftPowerBlock;
}

// Spreads every transform's points onto its fine grid, or its window for windowed series
// (complex T, zeroed by the caller): n_transforms transforms, max_samples the largest series'
// sample count.
template <typename T>
cudaError_t LaunchNufftSpread(const NufftSeriesDesc* series, const NufftTransform* transforms,
                              int n_transforms, int max_samples, const double* t, const T* w,
                              const T* wy, T* grid, T* windows, cudaStream_t stream);

// For a windowed series (series[index], n_transforms transforms, host copy `host` of its
// descriptor): the R twiddled copies of each window into its grid.
template <typename T>
cudaError_t LaunchNufftExpand(const NufftSeriesDesc* series, int index, const NufftSeriesDesc& host,
                              const T* windows, T* grid, cudaStream_t stream);

// The correction's quadrature (nufft.h's NufftQuadrature: 3 width + 24 nodes), passed to the
// kernel by value (1.5 KiB of its parameter space): no device buffer and no copy from the host.
constexpr int kMaxCorrectionNodes = 3 * kNufftMaxWidth + 24;
struct NufftCorrectionNodes {
  int count = 0;
  double x[kMaxCorrectionNodes];
  double weight_phi[kMaxCorrectionNodes];
};

// correction[k] = 1 / (width / 2 * sum_q weight_phi[q] cos(pi (k - centre) width / M x[q])) for
// k < modes (nufft.h's NufftCorrection, evaluated on the device). cudaErrorInvalidValue for
// more than kMaxCorrectionNodes nodes.
cudaError_t LaunchNufftCorrection(const NufftCorrectionNodes& nodes, long long modes,
                                  long long centre, long long grid_size, int width,
                                  double* correction, cudaStream_t stream);

// A fast series' low piece (its modes k < low summed directly, lombscargle_low.cuh): its
// descriptor desc[index] and the samples. desc null: none.
template <typename T>
struct NufftLowPiece {
  const ProductSeriesDesc* desc = nullptr;
  int index = 0;
  const double* t = nullptr;
  const T* w = nullptr;
  const T* wy = nullptr;
};

// The power of one series (series[index], `host` its host copy) from its transformed grids:
// mode k read at (k - centre) mod M of each transform, times correction[k]; power written at
// out_offset (unless -1) and one partial peak per block at peak_offset + block. The series'
// transforms must be in HarmonicTerms' order: w at j = 1 .. 2 nterms (j = 1 left out for
// nterms = 1 without fit_mean), then w y at j = 1 .. nterms. Modes below host.low are the
// low piece's: the same launch runs them in host.low extra blocks (when low.desc is set), so
// that their few hundred thousand pairs overlap the power's memory traffic.
template <typename T>
cudaError_t LaunchNufftPower(const NufftSeriesDesc* series, int index, const NufftSeriesDesc& host,
                             const T* grid, const double* correction, T* power, LsPeak* partials,
                             const NufftLowPiece<T>& low, cudaStream_t stream);

}  // namespace gpucompute::kernels
