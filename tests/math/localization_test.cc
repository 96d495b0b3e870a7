// The LETKF's distances and tapers (math/localization.h): the Gaspari-Cohn function's values
// and continuity, DAPPER's radius (e^-1/2 at the radius for the Gaussian, ~0.63 for GC), the
// search radius beyond which nothing is kept, periodic wrapping and great-circle distances.
#include "math/localization.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gpucompute::localization {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(Localization, GaspariCohnIsOneAtZeroContinuousAndZeroFromTwiceItsHalfWidth) {
  const double radius = 2.0, c = kGaspariCohnHalfWidth * radius;
  EXPECT_DOUBLE_EQ(TaperCoefficient(Taper::kGaspariCohn, 0, radius), 1.0);
  // Both branches meet at r = 1 with the value 1 - 5/3 + 5/8 + 1/2 - 1/4 = 5/24.
  EXPECT_NEAR(TaperCoefficient(Taper::kGaspariCohn, c * (1 - 1e-12), radius), 5.0 / 24, 1e-9);
  EXPECT_NEAR(TaperCoefficient(Taper::kGaspariCohn, c * (1 + 1e-12), radius), 5.0 / 24, 1e-9);
  EXPECT_NEAR(TaperCoefficient(Taper::kGaspariCohn, 2 * c * (1 - 1e-9), radius), 0, 1e-12);
  EXPECT_EQ(TaperCoefficient(Taper::kGaspariCohn, 2 * c, radius), 0);
  EXPECT_EQ(TaperCoefficient(Taper::kGaspariCohn, 3 * c, radius), 0);
  // DAPPER's scaling: near exp(-1/2) at the radius (0.633 for its 1.82).
  EXPECT_NEAR(TaperCoefficient(Taper::kGaspariCohn, radius, radius), 0.6334, 1e-3);
  double previous = 1;
  for (double d = 0.01; d < 2 * c; d += 0.01) {  // decreasing, within [0, 1]
    const double v = TaperCoefficient(Taper::kGaspariCohn, d, radius);
    EXPECT_LE(v, previous + 1e-15);
    EXPECT_GE(v, 0);
    previous = v;
  }
}

TEST(Localization, GaussianAndStep) {
  EXPECT_DOUBLE_EQ(TaperCoefficient(Taper::kGaussian, 3.0, 3.0), std::exp(-0.5));
  EXPECT_EQ(TaperCoefficient(Taper::kStep, 3.0, 3.0), 1.0);
  EXPECT_EQ(TaperCoefficient(Taper::kStep, 3.0 + 1e-12, 3.0), 0.0);
}

TEST(Localization, NothingBeyondTheSearchRadiusIsKept) {
  for (Taper t : {Taper::kGaspariCohn, Taper::kGaussian, Taper::kStep}) {
    const double reach = SearchRadius(t, 1.5);
    for (double d = reach * 1.0000001; d < reach * 3; d *= 1.01) {
      EXPECT_LE(TaperCoefficient(t, d, 1.5), kMinCoefficient) << static_cast<int>(t) << " at " << d;
    }
  }
}

TEST(Localization, Distances) {
  const double a[2] = {1, 9}, b[2] = {9, 1}, domain[2] = {10, 10};
  EXPECT_DOUBLE_EQ(Distance(Metric::kEuclidean, a, b, 2, nullptr, 0), std::sqrt(128.0));
  EXPECT_DOUBLE_EQ(Distance(Metric::kPeriodic, a, b, 2, domain, 0), std::sqrt(8.0));  // wraps both
  const double far[2] = {-29, 9};  // -29 is 1 on a circle of 10
  EXPECT_NEAR(Distance(Metric::kPeriodic, a, far, 2, domain, 0), 0, 1e-12);
  const double radius = 6371;
  const double equator0[2] = {0, 0}, equator1[2] = {1, 0}, pole[2] = {123, 90}, date_line[2] = {-179.5, 0},
               date_line2[2] = {179.5, 0};
  EXPECT_NEAR(Distance(Metric::kGreatCircle, equator0, equator1, 2, nullptr, radius), radius * kPi / 180, 1e-9);
  EXPECT_NEAR(Distance(Metric::kGreatCircle, equator0, pole, 2, nullptr, radius), radius * kPi / 2, 1e-9);
  EXPECT_NEAR(Distance(Metric::kGreatCircle, date_line, date_line2, 2, nullptr, radius), radius * kPi / 180, 1e-9);
}

}  // namespace
}  // namespace gpucompute::localization
