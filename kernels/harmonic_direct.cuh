// The multi-harmonic (nterms > 1) periodogram by direct sums on the GPU, nvcc-built.
#pragma once

#include <cuda_runtime.h>

#include "kernels/lombscargle_abi.cuh"

namespace gpucompute::kernels {

using gpucompute_kernels::LsBlockWork;
using gpucompute_kernels::LsPeak;

// One series of a batch with nterms > 1, direct method.
struct HarmonicDirectDesc {
  long long sample_offset;    // into t / w / wy
  long long n_freq;
  long long explicit_offset;  // into the explicit frequencies; -1: uniform grid
  long long out_offset;       // elements of power; -1: peak only, power not written
  long long peak_offset;      // the series' first per-block partial peak
  double f0, df;              // uniform grid
  double yy;                  // sum w y^2
  double psd_scale;           // sum(dy^-2) / 2
  int n_samples;
  int nterms;
  int fit_mean;
  int normalization;
};

// Threads (one frequency each) per block: a series' chunk c covers frequencies
// [c * kHarmonicDirectBlock, (c + 1) * kHarmonicDirectBlock) and writes partial
// peak_offset + c.
constexpr int kHarmonicDirectBlock = 128;

// Runs the blocks work[0 .. n_blocks), all of series with nterms == `nterms` (2 .. 8).
template <typename T>
cudaError_t LaunchHarmonicDirect(int nterms, const HarmonicDirectDesc* series,
                                 const LsBlockWork* work, int n_blocks, const double* t,
                                 const T* w, const T* wy, const double* explicit_freqs, T* power,
                                 LsPeak* partials, cudaStream_t stream);

}  // namespace gpucompute::kernels
