// The LETKF's binning geometry (letkf_geometry.h) without a GPU: every axis's cells are at least
// the search reach wide and cover the observations (Euclidean), the domain (periodic) or the
// unit cube of the sphere's vectors (great circle), within the cell budget.
#include "server/ops/assimilate/letkf_geometry.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "math/localization.h"

namespace gpucompute::assimilate {
namespace {

using localization::Metric;
using localization::Taper;

struct Letkf {
  Problem p;
  std::vector<double> state, obs;
  // The observations' range along axis a.
  double Extent(int a) const {
    const int64_t d = p.localization.dims;
    double lo = 1e300, hi = -1e300;
    for (int64_t j = 0; j < p.m; ++j) {
      lo = std::min(lo, obs[static_cast<size_t>(j * d + a)]);
      hi = std::max(hi, obs[static_cast<size_t>(j * d + a)]);
    }
    return hi - lo;
  }
};

// An LETKF problem's localisation over m random observations in [0, extent)^d.
Letkf Make(int64_t m, int64_t d, double extent, double radius, Metric metric, uint64_t seed) {
  Letkf l;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, extent);
  l.obs.resize(static_cast<size_t>(m * d));
  for (double& v : l.obs) v = u(rng);
  l.state = {0.0};
  l.p.n = 1;
  l.p.m = m;
  l.p.N = 4;
  l.p.method = Method::kLetkf;
  Localization& loc = l.p.localization;
  loc.dims = d;
  loc.metric = metric;
  loc.radius = radius;
  loc.taper = Taper::kGaspariCohn;
  loc.obs_coords = ArrayView{ElementType::kFloat64,
                             absl::string_view(reinterpret_cast<const char*>(l.obs.data()), l.obs.size() * 8)};
  if (metric == Metric::kPeriodic) loc.domain.assign(static_cast<size_t>(d), extent);
  if (metric == Metric::kGreatCircle) loc.sphere_radius = 6371;
  return l;
}

TEST(LetkfGeometry, EuclideanCellsSpanTheObservationsAtLeastTheReachWide) {
  const Letkf l = Make(5000, 2, 1000, 5, Metric::kEuclidean, 1);
  const kernels::LetkfGeometry g = MakeLetkfGeometry(l.p);
  const double reach = localization::SearchRadius(Taper::kGaspariCohn, 5);
  ASSERT_EQ(g.axes, 2);
  for (int a = 0; a < 2; ++a) {
    double lo = 1e300;
    for (int64_t j = 0; j < l.p.m; ++j) lo = std::min(lo, l.obs[static_cast<size_t>(j * 2 + a)]);
    EXPECT_EQ(g.origin[a], lo);
    EXPECT_GE(g.cell[a], reach);
    EXPECT_GE(g.cells[a] * g.cell[a], l.Extent(a) * (1 - 1e-12));
    EXPECT_EQ(g.cells[a], static_cast<int>(std::floor(l.Extent(a) / (reach * (1 + 1e-9)))));
  }
  EXPECT_EQ(g.total_cells, int64_t{g.cells[0]} * g.cells[1]);
}

TEST(LetkfGeometry, PeriodicCellsDivideTheDomain) {
  const Letkf l = Make(100, 3, 50, 2, Metric::kPeriodic, 2);
  const kernels::LetkfGeometry g = MakeLetkfGeometry(l.p);
  ASSERT_EQ(g.axes, 3);
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(g.domain[a], 50);
    EXPECT_NEAR(g.cells[a] * g.cell[a], 50, 1e-9);
    EXPECT_GE(g.cell[a], localization::SearchRadius(Taper::kGaspariCohn, 2));
  }
}

TEST(LetkfGeometry, TheCellBudgetCoarsensTheGrid) {
  // 10 observations over a huge box with a tiny radius: 10^10 cells at the reach's width.
  const Letkf l = Make(10, 2, 1e6, 1, Metric::kEuclidean, 3);
  const kernels::LetkfGeometry g = MakeLetkfGeometry(l.p);
  EXPECT_LE(g.total_cells, LetkfMaxCells(10));
  for (int a = 0; a < 2; ++a) {
    EXPECT_GE(g.cells[a] * g.cell[a], l.Extent(a) * (1 - 1e-12));
    EXPECT_GE(g.cell[a], localization::SearchRadius(Taper::kGaspariCohn, 1));
  }
}

TEST(LetkfGeometry, MoreThanThreeAxesBinTheFirstThree) {
  const Letkf l = Make(200, 5, 10, 1, Metric::kEuclidean, 4);
  EXPECT_EQ(MakeLetkfGeometry(l.p).axes, 3);
}

TEST(LetkfGeometry, GreatCircleBinsUnitVectorsByTheChord) {
  Letkf l = Make(1000, 2, 1, 500, Metric::kGreatCircle, 5);
  const kernels::LetkfGeometry g = MakeLetkfGeometry(l.p);
  const double angle = localization::SearchRadius(Taper::kGaspariCohn, 500) / 6371;
  ASSERT_EQ(g.axes, 3);
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(g.origin[a], -1);
    EXPECT_GE(g.cell[a], 2 * std::sin(angle / 2));
    EXPECT_GE(g.cells[a] * g.cell[a], 2 - 1e-12);
  }
  // A radius beyond half the circumference: one cell holds everything.
  l.p.localization.radius = 1e5;
  EXPECT_EQ(MakeLetkfGeometry(l.p).total_cells, 1);
}

}  // namespace
}  // namespace gpucompute::assimilate
