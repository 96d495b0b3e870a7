// Philox4x32-10 against the Random123 known-answer vectors (kat_vectors, "philox4x32 10"
// lines: counter, key -> output), and the Box-Muller normals' moments.
#include "math/philox.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "server/ops/assimilate/cpu_assimilate.h"

namespace gpucompute::philox {
namespace {

struct Kat {
  Uint4 ctr;
  uint32_t key0, key1;
  Uint4 want;
};

TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Uint4 got = Philox4x32(k.ctr, k.key0, k.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i;
  }
}

TEST(Philox, SevenRoundsDiffer) {
  // The round count matters (a guard against a loop that ignores it).
  const Uint4 a = Philox4x32(Uint4{{1, 2, 3, 4}}, 5, 6, 10);
  const Uint4 b = Philox4x32(Uint4{{1, 2, 3, 4}}, 5, 6, 7);
  EXPECT_NE(a.v[0], b.v[0]);
}

TEST(Philox, OpenUnitNeverHitsTheEnds) {
  EXPECT_GT(ToOpenUnit(0, 0), 0.0);
  EXPECT_LT(ToOpenUnit(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_TRUE(std::isfinite(std::log(ToOpenUnit(0, 0))));
}

TEST(Philox, NormalIsAPureFunctionOfItsKey) {
  double z0, z1;
  NormalPair(42, 7, 1000, &z0, &z1);
  EXPECT_EQ(Normal(42, 7, 2000), z0);
  EXPECT_EQ(Normal(42, 7, 2001), z1);
  EXPECT_NE(Normal(42, 7, 2000), Normal(43, 7, 2000));
  EXPECT_NE(Normal(42, 7, 2000), Normal(42, 8, 2000));
}

// Moments of 2^21 draws: mean 0, variance 1, skewness 0, kurtosis 3, each within about five
// standard errors; and two problems' streams are uncorrelated.
TEST(Philox, NormalMoments) {
  const int64_t n = int64_t{1} << 21;
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0, cross = 0;
  for (int64_t e = 0; e < n; ++e) {
    const double z = Normal(0x123456789abcdefULL, 3, static_cast<uint64_t>(e));
    const double w = Normal(0x123456789abcdefULL, 4, static_cast<uint64_t>(e));
    s1 += z;
    s2 += z * z;
    s3 += z * z * z;
    s4 += z * z * z * z;
    cross += z * w;
  }
  const double dn = static_cast<double>(n);
  const double mean = s1 / dn, var = s2 / dn - mean * mean;
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(dn));
  EXPECT_NEAR(var, 1.0, 5 * std::sqrt(2 / dn));
  EXPECT_NEAR(s3 / dn, 0.0, 5 * std::sqrt(15 / dn));
  EXPECT_NEAR(s4 / dn, 3.0, 5 * std::sqrt(96 / dn));
  EXPECT_NEAR(cross / dn, 0.0, 5 / std::sqrt(dn));
  // Tail mass: P(|z| > 3) = 0.0026998.
  int64_t tail = 0;
  for (int64_t e = 0; e < n; ++e) tail += std::abs(Normal(99, 0, static_cast<uint64_t>(e))) > 3;
  const double p = 0.0026997960632601866;
  EXPECT_NEAR(static_cast<double>(tail) / dn, p, 5 * std::sqrt(p * (1 - p) / dn));
}

TEST(Philox, DrawnPerturbationsAreCentredAcrossMembers) {
  const int64_t m = 17, N = 9;
  const std::vector<double> z = assimilate::DrawWhitenedPerturbations(5, 2, m, N);
  ASSERT_EQ(z.size(), static_cast<size_t>(m * N));
  for (int64_t i = 0; i < m; ++i) {
    double s = 0, raw = 0;
    for (int64_t j = 0; j < N; ++j) {
      s += z[i * N + j];
      raw += Normal(5, 2, static_cast<uint64_t>(i * N + j));
    }
    EXPECT_NEAR(s, 0.0, 1e-12);
    // Centring subtracts the raw row mean and nothing else.
    for (int64_t j = 0; j < N; ++j) {
      EXPECT_NEAR(z[i * N + j], Normal(5, 2, static_cast<uint64_t>(i * N + j)) - raw / N, 1e-12);
    }
  }
}

}  // namespace
}  // namespace gpucompute::philox
