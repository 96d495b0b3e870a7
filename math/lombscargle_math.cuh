// Lomb-Scargle power from per-frequency sums: one definition for the CPU reference (C++) and
// the CUDA kernels (NVRTC). See server/ops/periodogram/periodogram.h for the conventions.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#include <cmath>
#define LS_HOST_DEVICE inline
#endif

namespace gpucompute_kernels {

// The power in a normalization from p = v^T M^-1 v (normalised weights; see periodogram.h):
// norm 0 standard p / yy, 1 model p / (yy - p), 2 log -log(1 - p / yy), 3 psd p * psd_scale.
template <typename T>
LS_HOST_DEVICE T NormalizePower(T p, int norm, T yy, T psd_scale) {
  switch (norm) {
    case 1: return p / (yy - p);
    case 2: return -log1p(-p / yy);
    case 3: return p * psd_scale;
    default: return p / yy;
  }
}

// Sums at one frequency, with normalised weights w (sum 1):
//   c = sum w cos, s = sum w sin, yc = sum w y cos, ys = sum w y sin,
//   cc = sum w cos^2, cs = sum w cos sin.
// norm: 0 standard, 1 model, 2 log, 3 psd. yy = sum w y^2; psd_scale = sum(dy^-2) / 2.
// shifted (fit_mean only): the sums were taken over cos - 1 instead of cos. With a floating
// mean this changes nothing in exact arithmetic (the mean absorbs the constant), but when the
// phases cluster near 0 (low frequencies: t is centred on a sample) the centred sums
// cc - c^2, ss - s^2 no longer cancel against 1, which float32 needs.
template <typename T>
LS_HOST_DEVICE T LombScarglePower(T c, T s, T yc, T ys, T cc, T cs, bool fit_mean, int norm,
                                  T yy, T psd_scale, bool shifted = false) {
  // sum w sin^2 = 1 - sum w cos^2; shifted: 1 - sum w (1 + c')^2 = -2 c' - c'c'.
  T ss = shifted ? -(c + c) - cc : T(1) - cc;
  if (fit_mean) {
    cc -= c * c;
    ss -= s * s;
    cs -= c * s;
  }
  // p = v^T M^-1 v for v = (yc, ys), M = [[cc, cs], [cs, ss]]. M's entries are at most 1
  // (the weights sum to 1): its Cholesky pivots cc and det / cc at or below 32 units of
  // rounding mean singular to working precision, and the power is NaN (as in
  // lombscargle_harmonic.cuh).
  const T det = cc * ss - cs * cs;
  const T tol = sizeof(T) == 4 ? T(3.8e-6) : T(7.1e-15);
  if (!(cc > tol) || !(det > tol * cc)) return T(0) / T(0);
  const T p = (ss * yc * yc - T(2) * cs * yc * ys + cc * ys * ys) / det;
  return NormalizePower(p, norm, yy, psd_scale);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Peak bookkeeping shared by the periodogram kernel and the peak reduction: the larger value
// wins, the smaller index among equals; index -1 (no value yet, or NaN) always loses.
__device__ __forceinline__ void BetterPeak(double& v, long long& i, double v2, long long i2) {
  if (i2 < 0 || !(v2 == v2)) return;
  if (i < 0 || v2 > v || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
}

// Reduces (v, i) over a block of kThreads threads (a multiple of 32); thread 0 gets the result.
template <int kThreads>
__device__ __forceinline__ void BlockReducePeak(double& v, long long& i) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const double v2 = __shfl_down_sync(0xffffffffu, v, offset);
    const long long i2 = __shfl_down_sync(0xffffffffu, i, offset);
    BetterPeak(v, i, v2, i2);
  }
  __shared__ double s_v[kThreads / 32];
  __shared__ long long s_i[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // the shared arrays may still be read by a previous use
  if (lane == 0) {
    s_v[warp] = v;
    s_i[warp] = i;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? s_v[lane] : 0.0;
    i = lane < kThreads / 32 ? s_i[lane] : -1;
    for (int offset = 16; offset > 0; offset /= 2) {
      const double v2 = __shfl_down_sync(0xffffffffu, v, offset);
      const long long i2 = __shfl_down_sync(0xffffffffu, i, offset);
      BetterPeak(v, i, v2, i2);
    }
  }
}
#endif

}  // namespace gpucompute_kernels
