// The FFT sizes of the fast periodogram: every NUFFT grid and window is an even number
// 2^a o with the odd part o one of kFftOddParts. Seven sizes an octave, at most 12.5% apart from
// 90 on, so a grid rounded up to one has ~4% more cells on average (12% at most) than the
// smallest even 2^a 3^b 5^c.
// The set is closed under the divisors the windowed form takes (every divisor of 45, 27, 15, 9,
// 5 or 3 is in the list), so the CUDA backend can make a cuFFT plan for each size up to the
// largest a request may need when a device starts, and none while serving
// (server/device/fft_plans.h). The CPU path (FFTW) uses the same sizes, so both compute the
// same transforms.
#pragma once

#include <cstdint>
#include <vector>

namespace gpucompute {

inline constexpr int64_t kFftOddParts[] = {1, 3, 5, 9, 15, 27, 45};

// Whether `n` is a ladder size: even and 2^a o with o in kFftOddParts.
constexpr bool IsFftSize(int64_t n) {
  if (n < 2 || n % 2 != 0) return false;
  while (n % 2 == 0) n /= 2;
  for (int64_t o : kFftOddParts) {
    if (n == o) return true;
  }
  return false;
}

// The smallest ladder size >= n (n <= 2^61).
constexpr int64_t NextFftSize(int64_t n) {
  int64_t best = 0;
  for (int64_t o : kFftOddParts) {
    int64_t size = 2 * o;
    while (size < n) size *= 2;
    if (best == 0 || size < best) best = size;
  }
  return best;
}

// The ladder sizes in [lo, hi], ascending.
inline std::vector<int64_t> FftSizesBetween(int64_t lo, int64_t hi) {
  std::vector<int64_t> sizes;
  for (int64_t n = NextFftSize(lo); n <= hi; n = NextFftSize(n + 1)) sizes.push_back(n);
  return sizes;
}

}  // namespace gpucompute
