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

// Sums at one frequency, with normalised weights w (sum 1):
//   c = sum w cos, s = sum w sin, yc = sum w y cos, ys = sum w y sin,
//   cc = sum w cos^2, cs = sum w cos sin.
// norm: 0 standard, 1 model, 2 log, 3 psd. yy = sum w y^2; psd_scale = sum(dy^-2) / 2.
template <typename T>
LS_HOST_DEVICE T LombScarglePower(T c, T s, T yc, T ys, T cc, T cs, bool fit_mean, int norm,
                                  T yy, T psd_scale) {
  T ss = T(1) - cc;
  if (fit_mean) {
    cc -= c * c;
    ss -= s * s;
    cs -= c * s;
  }
  // p = v^T M^-1 v for v = (yc, ys), M = [[cc, cs], [cs, ss]].
  const T det = cc * ss - cs * cs;
  const T p = (ss * yc * yc - T(2) * cs * yc * ys + cc * ys * ys) / det;
  switch (norm) {
    case 1: return p / (yy - p);
    case 2: return -log1p(-p / yy);
    case 3: return p * psd_scale;
    default: return p / yy;
  }
}

}  // namespace gpucompute_kernels
