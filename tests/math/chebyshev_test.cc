// The Chebyshev series of x^(-1/2) and x^(-1) (math/chebyshev.h) against std::sqrt and division on
// dense grids of every rung's interval, their degrees against the bound of the series' theory,
// and the rung selection.
#include "math/chebyshev.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace gpucompute::chebyshev {
namespace {

std::vector<double> Table() {
  std::vector<double> t(kTableDoubles);
  WriteTable(t.data());
  return t;
}

// The largest relative errors of a rung's x^(-1/2) and x^(-1) on a dense grid of its interval.
std::pair<double, double> WorstErrors(const Rung& r) {
  double worst_sqrt = 0, worst_inv = 0;
  constexpr int kPoints = 20000;
  for (int i = 0; i <= kPoints; ++i) {
    const double x = 1 + (r.kappa - 1) * i / kPoints;
    worst_sqrt = std::max(worst_sqrt, std::fabs(Evaluate(r, x, false) * std::sqrt(x) - 1));
    worst_inv = std::max(worst_inv, std::fabs(Evaluate(r, x, true) * x - 1));
  }
  return {worst_sqrt, worst_inv};
}

TEST(Chebyshev, EveryRungIsWithinItsToleranceOnItsInterval) {
  const std::vector<double> table = Table();
  int usable = 0;
  for (int k = 0; k < kRungs; ++k) {
    const Rung r = Select(table.data(), RungKappa(k));
    ASSERT_EQ(r.kappa, RungKappa(k));
    if (r.degree == 0) continue;
    ++usable;
    const auto [worst_sqrt, worst_inv] = WorstErrors(r);
    // The truncation (1e-15 of f's smallest value) plus Clenshaw's rounding.
    EXPECT_LE(worst_sqrt, 5e-15) << "rung " << k << " [1, " << r.kappa << "] degree " << r.degree;
    EXPECT_LE(worst_inv, 5e-15) << "rung " << k << " [1, " << r.kappa << "] degree " << r.degree;
  }
  EXPECT_GE(usable, 20);  // kappa up to 2^5 at least within the largest degree
}

// The float32 truncation: within 2^-30 (plus the rounding), at most 2/3 of the double degree
// beyond the first rungs, and no longer than needed (one term less misses the tolerance).
TEST(Chebyshev, TheSingleTruncationIsWithinItsTolerance) {
  const std::vector<double> table = Table();
  for (int k = 0; k < kRungs; ++k) {
    const Rung full = Select(table.data(), RungKappa(k));
    Rung r = Select(table.data(), RungKappa(k), Precision::kSingle);
    if (full.degree == 0) {
      EXPECT_EQ(r.degree, 0) << "rung " << k;
      continue;
    }
    ASSERT_EQ(r.inv, full.inv);  // the same series, truncated
    EXPECT_GT(r.degree, 0);
    if (k >= 4) EXPECT_LE(3 * r.degree, 2 * full.degree) << "rung " << k;
    const auto [worst_sqrt, worst_inv] = WorstErrors(r);
    EXPECT_LE(std::max(worst_sqrt, worst_inv), kSingleTolerance * 1.01) << "rung " << k << " degree " << r.degree;
    --r.degree;
    const auto [short_sqrt, short_inv] = WorstErrors(r);
    EXPECT_GT(std::max(short_sqrt, short_inv), kSingleTolerance / 100) << "rung " << k << " degree " << r.degree;
  }
}

// The coefficients of a function analytic inside the Bernstein ellipse of parameter rho decay
// like rho^-n; here rho = (sqrt(kappa) + 1) / (sqrt(kappa) - 1) (the pole at x = 0), so the
// degree is about log(2 / tolerance) / log(rho), and grows with kappa.
TEST(Chebyshev, DegreesFollowTheBernsteinEllipse) {
  const std::vector<double> table = Table();
  int last = 0;
  for (int k = 0; k < kRungs; ++k) {
    const Rung r = Select(table.data(), RungKappa(k));
    if (r.degree == 0) break;
    const double rho = (std::sqrt(r.kappa) + 1) / (std::sqrt(r.kappa) - 1);
    const double expected = std::log(2 / kTolerance) / std::log(rho);
    EXPECT_NEAR(r.degree, expected, 0.25 * expected + 3) << "kappa " << r.kappa;
    EXPECT_GT(r.degree, last);
    last = r.degree;
  }
}

TEST(Chebyshev, SelectsTheLowestRungThatHoldsKappa) {
  const std::vector<double> table = Table();
  EXPECT_EQ(Select(table.data(), 1.0).kappa, RungKappa(0));
  EXPECT_EQ(Select(table.data(), RungKappa(3)).kappa, RungKappa(3));
  EXPECT_EQ(Select(table.data(), RungKappa(3) * 1.0001).kappa, RungKappa(4));
  EXPECT_EQ(Select(table.data(), 1e6).degree, 0);  // beyond the ladder
}

}  // namespace
}  // namespace gpucompute::chebyshev
