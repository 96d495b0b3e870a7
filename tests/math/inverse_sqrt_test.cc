// The rational approximations of x^(-1/2) (math/inverse_sqrt.h) against std::sqrt on dense grids
// of every rung's interval, and the rung selection.
#include "math/inverse_sqrt.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace gpucompute::inverse_sqrt {
namespace {

std::vector<double> Table() {
  std::vector<double> t(kTableDoubles);
  WriteTable(t.data());
  return t;
}

TEST(InverseSqrt, EveryRungIsWithinItsErrorOnItsInterval) {
  const std::vector<double> table = Table();
  for (int k = 0; k < kRungs; ++k) {
    const double bound = kRungTable[k].bound;
    const Rung r = SelectRung(table.data(), bound);
    ASSERT_EQ(r.count, kRungTable[k].count) << "rung " << k;
    double worst = 0;
    constexpr int kPoints = 20000;
    for (int i = 0; i <= kPoints; ++i) {
      const double x = std::pow(bound, static_cast<double>(i) / kPoints);
      worst = std::max(worst, std::fabs(Evaluate(r, x) * std::sqrt(x) - 1));
    }
    // The table's error (2e-15 at most) plus the evaluation's rounding.
    EXPECT_LE(worst, 5e-15) << "rung " << k << " [1, " << bound << "]";
  }
}

TEST(InverseSqrt, PolesAndWeightsArePositive) {
  for (int t = 0; t < kTerms; ++t) {
    EXPECT_GT(kPoles[t], 0) << t;
    EXPECT_GT(kWeights[t], 0) << t;
  }
}

TEST(InverseSqrt, SelectsTheLowestRungThatHoldsTheBound) {
  const std::vector<double> table = Table();
  EXPECT_EQ(SelectRung(table.data(), 1.0).count, kRungTable[0].count);
  EXPECT_EQ(SelectRung(table.data(), 10.0).count, kRungTable[0].count);
  EXPECT_EQ(SelectRung(table.data(), 10.5).count, kRungTable[1].count);
  EXPECT_EQ(SelectRung(table.data(), 3e7).count, kRungTable[7].count);
  EXPECT_EQ(SelectRung(table.data(), 1e20).count, kRungTable[kRungs - 1].count);  // the top one
}

}  // namespace
}  // namespace gpucompute::inverse_sqrt
