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
