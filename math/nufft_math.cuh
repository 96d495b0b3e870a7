// The non-uniform FFT's spreading kernel and its geometry: one definition for the CPU (C++)
// and the CUDA kernels. See server/ops/periodogram/nufft.h for the scheme.
#pragma once

#include "lombscargle_math.cuh"

namespace gpucompute_kernels {

// The "exponential of semicircle" kernel (Barnett, Magland, af Klinteberg 2019) on its
// support z in [-1, 1]: exp(beta (sqrt(1 - z^2) - 1)); 0 outside.
template <typename T>
LS_HOST_DEVICE T EsKernel(T z, T beta) {
  const T u = T(1) - z * z;
  return u > T(0) ? exp(beta * (sqrt(u) - T(1))) : T(0);
}

// Where a point lands on a periodic fine grid of m cells: `cycles` is the point's position
// in periods (any real; only its fractional part matters), first is the first of the
// `width` cells it spreads onto (may be negative or >= m: wrap it), z0 the kernel argument
// of that first cell; cell first + i has argument z0 + i * 2 / width.
template <typename T>
LS_HOST_DEVICE void NufftCells(double cycles, long long m, int width, long long* first, T* z0) {
  const double frac = cycles - floor(cycles);  // [0, 1)
  const double g = frac * static_cast<double>(m);
  const double start = ceil(g - 0.5 * width);
  *first = static_cast<long long>(start);
  *z0 = static_cast<T>((start - g) * (2.0 / width));
}

}  // namespace gpucompute_kernels
