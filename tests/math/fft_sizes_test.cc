// The FFT size ladder (math/fft_sizes.h) against brute force: NextFftSize is the smallest
// ladder size at or above n, sizes are at most 12.5% apart from 90 on, every even divisor of a
// size is a size (what the windowed NUFFT takes), and FftSizesBetween lists exactly the sizes
// in range.
#include "math/fft_sizes.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

TEST(FftSizes, NextIsTheSmallestLadderSizeAtOrAbove) {
  int64_t next = 2;  // the smallest size >= n, by brute force walking n upward
  for (int64_t n = 1; n <= 200000; ++n) {
    if (next < n) {
      next = n;
      while (!IsFftSize(next)) ++next;
    }
    ASSERT_EQ(NextFftSize(n), next) << n;
  }
  EXPECT_EQ(NextFftSize(int64_t{1} << 40), int64_t{1} << 40);
  EXPECT_EQ(NextFftSize((int64_t{1} << 40) + 1), (int64_t{1} << 37) * 9);
}

TEST(FftSizes, AreEvenWithAnOddPartFromTheList) {
  for (int64_t n : {2, 6, 10, 18, 30, 54, 90, 16, 1280, 11520, 1310720}) EXPECT_TRUE(IsFftSize(n)) << n;
  for (int64_t n : {0, 1, 3, 5, 45, 14, 42, 50, 70, 100, 162, 250, 1250000}) EXPECT_FALSE(IsFftSize(n)) << n;
}

TEST(FftSizes, AreAtMostOneEighthApartFromNinety) {
  // From 90 = 2 x 45 every odd part has an even multiple in each octave.
  for (int64_t n = 90; n < (int64_t{1} << 30); n = NextFftSize(n + 1)) {
    EXPECT_LE(static_cast<double>(NextFftSize(n + 1)), 1.125 * static_cast<double>(n)) << n;
  }
}

TEST(FftSizes, EveryEvenDivisorOfASizeIsASize) {
  for (int64_t s : FftSizesBetween(2, int64_t{1} << 16)) {
    for (int64_t d = 2; d <= s; d += 2) {
      if (s % d == 0) EXPECT_TRUE(IsFftSize(d)) << d << " divides " << s;
    }
  }
}

TEST(FftSizes, BetweenListsExactlyTheSizesInRange) {
  std::vector<int64_t> brute;
  for (int64_t n = 100; n <= 5000; ++n) {
    if (IsFftSize(n)) brute.push_back(n);
  }
  EXPECT_EQ(FftSizesBetween(100, 5000), brute);
  EXPECT_TRUE(FftSizesBetween(1000, 999).empty());
}

}  // namespace
}  // namespace gpucompute
