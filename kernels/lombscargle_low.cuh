// Direct sums of one low frequency by a whole thread block (see lombscargle_product.cuh): the
// product form's and the fast method's lowest frequencies (LowFrequencyPrefix). Shared by the
// product kernels and the fast method's power kernels, whose extra blocks run these.
#pragma once

#include "math/lombscargle_math.cuh"
#include "kernels/lombscargle_product.cuh"

namespace gpucompute::kernels {

// Frequency h of the low piece d: threads over samples; sums in float64, over cos - 1 with a
// floating mean (LombScarglePower's `shifted`), reduced by shuffles and shared memory; thread 0
// writes the power (unless out_offset is -1) and the frequency's partial peak at
// peak_offset + h. Every thread of the block must call it.
template <int kThreads, typename T>
__device__ __forceinline__ void LowFrequencyBlock(const ProductSeriesDesc& d, long long h,
                                                  const double* __restrict__ t,
                                                  const T* __restrict__ w, const T* __restrict__ wy,
                                                  T* __restrict__ power, LsPeak* __restrict__ partials) {
  constexpr int kWarps = kThreads / 32;
  __shared__ double s_sums[6][kWarps];
  const double f = d.f_start + static_cast<double>(h) * d.df;
  const bool shifted = d.fit_mean != 0;  // without a floating mean the shift would change yc
  double v[6] = {0, 0, 0, 0, 0, 0};      // c, s, yc, ys, cc, cs
  for (int i = threadIdx.x; i < d.n_samples; i += kThreads) {
    const long long g = d.sample_offset + i;
    double r = f * t[g];
    r -= rint(r);
    double sv, cv;
    sincospi(2.0 * r, &sv, &cv);
    if (shifted) cv -= 1;
    const double wi = w[g], wyi = wy[g], wc = wi * cv;
    v[0] += wc;
    v[1] = fma(wi, sv, v[1]);
    v[2] = fma(wyi, cv, v[2]);
    v[3] = fma(wyi, sv, v[3]);
    v[4] = fma(wc, cv, v[4]);
    v[5] = fma(wc, sv, v[5]);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int q = 0; q < 6; ++q) {
    for (int offset = 16; offset > 0; offset /= 2) v[q] += __shfl_xor_sync(0xffffffffu, v[q], offset);
    if (lane == 0) s_sums[q][warp] = v[q];
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    // Warp 0: lane q < 6 adds sum q over the warps, then lane 0 takes the six.
    double total = 0;
    if (lane < 6) {
      for (int k = 0; k < kWarps; ++k) total += s_sums[lane][k];
    }
    double sums[6];
#pragma unroll
    for (int q = 0; q < 6; ++q) sums[q] = __shfl_sync(0xffffffffu, total, q);
    if (lane == 0) {
      const long long k = d.first_k + h;
      const T out = static_cast<T>(gpucompute_kernels::LombScarglePower<double>(
          sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], d.fit_mean != 0, d.normalization,
          d.yy, d.psd_scale, shifted));
      if (d.out_offset >= 0) power[d.out_offset + k] = out;
      double best = 0;
      long long best_k = -1;
      gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(out), k);
      partials[d.peak_offset + h] = LsPeak{best_k, best};
    }
  }
}

}  // namespace gpucompute::kernels
