// The LETKF's binning geometry (letkf_geometry.h, math/letkf_cells.h): every axis's cells are
// wider than 1/k of the search reach (k = CellsPerReach(axes)) and cover the observations
// (Euclidean), the domain (periodic) or the unit cube of the sphere's vectors (great circle),
// within the cell budget; the bins hold every observation once, and the cells around a point,
// at most 2k + 1 an axis, hold every observation within reach of it (against a brute-force
// search), which the candidate count adds up.
#include "server/ops/assimilate/letkf_geometry.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
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

TEST(LetkfGeometry, EuclideanCellsSpanTheObservationsHalfTheReachWide) {
  const Letkf l = Make(5000, 2, 1000, 5, Metric::kEuclidean, 1);
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
  const double reach = localization::SearchRadius(Taper::kGaspariCohn, 5);
  ASSERT_EQ(g.axes, 2);
  ASSERT_EQ(localization::CellsPerReach(2), 2);
  EXPECT_GE(g.reach, reach);
  EXPECT_LE(g.reach, reach * (1 + 1e-8));
  for (int a = 0; a < 2; ++a) {
    double lo = 1e300;
    for (int64_t j = 0; j < l.p.m; ++j) lo = std::min(lo, l.obs[static_cast<size_t>(j * 2 + a)]);
    EXPECT_EQ(g.origin[a], lo);
    EXPECT_GT(g.cell[a], g.reach / 2);
    EXPECT_GE(g.cells[a] * g.cell[a], l.Extent(a) * (1 - 1e-12));
    EXPECT_EQ(g.cells[a], static_cast<int>(std::floor(l.Extent(a) / (g.reach / 2 * (1 + 1e-6)))));
  }
  EXPECT_EQ(g.total_cells, int64_t{g.cells[0]} * g.cells[1]);
}

TEST(LetkfGeometry, PeriodicCellsDivideTheDomain) {
  const Letkf l = Make(100, 3, 50, 2, Metric::kPeriodic, 2);
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
  ASSERT_EQ(g.axes, 3);
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(g.domain[a], 50);
    EXPECT_NEAR(g.cells[a] * g.cell[a], 50, 1e-9);
    EXPECT_GE(g.cell[a], localization::SearchRadius(Taper::kGaspariCohn, 2));  // three axes: k = 1
  }
}

TEST(LetkfGeometry, TheCellBudgetCoarsensTheGrid) {
  // 10 observations over a huge box with a tiny radius: 10^10 cells at the reach's width.
  const Letkf l = Make(10, 2, 1e6, 1, Metric::kEuclidean, 3);
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
  EXPECT_LE(g.total_cells, LetkfMaxCells(10));
  for (int a = 0; a < 2; ++a) {
    EXPECT_GE(g.cells[a] * g.cell[a], l.Extent(a) * (1 - 1e-12));
    EXPECT_GE(g.cell[a], localization::SearchRadius(Taper::kGaspariCohn, 1) / 2);
  }
}

TEST(LetkfGeometry, MoreThanThreeAxesBinTheFirstThree) {
  const Letkf l = Make(200, 5, 10, 1, Metric::kEuclidean, 4);
  EXPECT_EQ(MakeLetkfGeometry(l.p).axes, 3);
}

TEST(LetkfGeometry, GreatCircleBinsUnitVectorsByTheChord) {
  Letkf l = Make(1000, 2, 1, 500, Metric::kGreatCircle, 5);
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
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

// Random state points (n x d) over the observations' box, and a little beyond it.
std::vector<double> Points(int64_t n, int64_t d, double extent, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.1 * extent, 1.1 * extent);
  std::vector<double> points(static_cast<size_t>(n * d));
  for (double& v : points) v = u(rng);
  return points;
}

TEST(LetkfBins, HoldEveryObservationOnceInItsCellInIndexOrder) {
  const Letkf l = Make(3000, 2, 100, 1, Metric::kPeriodic, 6);
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
  const LetkfBins bins = BinObservations(g, l.obs.data(), l.p.m);
  ASSERT_EQ(bins.cell_start.size(), static_cast<size_t>(g.total_cells) + 1);
  EXPECT_EQ(bins.cell_start.front(), 0);
  EXPECT_EQ(bins.cell_start.back(), l.p.m);
  std::vector<int> seen(static_cast<size_t>(l.p.m), 0);
  for (int64_t c = 0; c < g.total_cells; ++c) {
    for (int k = bins.cell_start[c]; k < bins.cell_start[c + 1]; ++k) {
      const int j = bins.sorted[static_cast<size_t>(k)];
      ++seen[static_cast<size_t>(j)];
      double q[localization::kLetkfMaxAxes];
      localization::BinningCoordinates(g, l.obs.data() + j * 2, q);
      EXPECT_EQ(localization::ObservationCell(g, q), c);
      if (k > bins.cell_start[c]) EXPECT_LT(bins.sorted[static_cast<size_t>(k - 1)], j);
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

// Every observation within the search radius of a point (brute force) is among the candidates
// of the cells around it, for each metric and taper; CandidatePairs adds the candidates up.
void ExpectCandidatesCoverTheReach(Letkf&& l, Taper taper, int64_t n, uint64_t seed) {
  Localization& loc = l.p.localization;
  loc.taper = taper;
  const int64_t d = loc.dims;
  const std::vector<double> points =
      loc.metric == Metric::kGreatCircle ? Points(n, d, 1, seed) : Points(n, d, l.Extent(0), seed);
  std::vector<double> lonlat = points;
  if (loc.metric == Metric::kGreatCircle) {
    for (int64_t i = 0; i < n; ++i) {  // longitude in [-36, 396), latitude in [-90, 90]
      lonlat[static_cast<size_t>(i * 2)] = 360 * points[static_cast<size_t>(i * 2)];
      lonlat[static_cast<size_t>(i * 2 + 1)] = std::clamp(180 * points[static_cast<size_t>(i * 2 + 1)] - 90, -90.0, 90.0);
    }
  }
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
  const LetkfBins bins = BinObservations(g, l.obs.data(), l.p.m);
  const double search = localization::SearchRadius(taper, loc.radius);
  int64_t candidates = 0, within = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* point = lonlat.data() + i * d;
    const localization::Neighbourhood around(g, point);
    std::vector<bool> listed(static_cast<size_t>(l.p.m), false);
    for (int o = 0; o < around.count; ++o) {
      const int c = around.Cell(g, o);
      for (int k = bins.cell_start[c]; k < bins.cell_start[c + 1]; ++k) listed[bins.sorted[k]] = true;
    }
    candidates += around.Candidates(g, bins.cell_start.data());
    for (int64_t j = 0; j < l.p.m; ++j) {
      const double dist = localization::Distance(loc.metric, point, l.obs.data() + j * d, static_cast<int>(d),
                                                 loc.domain.data(), loc.sphere_radius);
      if (dist <= search) {
        ++within;
        EXPECT_TRUE(listed[static_cast<size_t>(j)]) << "point " << i << ", observation " << j;
      }
    }
  }
  EXPECT_EQ(CandidatePairs(g, bins, lonlat.data(), n), candidates);
  EXPECT_GE(candidates, within);
  EXPECT_GT(within, 0);
}

// A neighbourhood spans at most 2k + 1 cells an axis (27 in all), at cell edges too, where the
// rounding of the box's ends is closest to a cell boundary; its runs of consecutive cells hold
// them in order (periodic: split where axis 0 wraps).
TEST(LetkfBins, NeighbourhoodsSpanAtMostTwoKPlusOneCellsAnAxisInRuns) {
  for (const auto& [d, metric] : {std::pair{1, Metric::kPeriodic}, {2, Metric::kPeriodic}, {2, Metric::kEuclidean},
                                  {3, Metric::kEuclidean}}) {
    const Letkf l = Make(3000, d, 97.3, 1.7, metric, 20 + d);
    const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
    const int k = localization::CellsPerReach(g.axes);
    std::mt19937_64 rng(30 + d);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < 20000; ++i) {
      double point[3];
      for (int a = 0; a < d; ++a) {  // on a cell boundary, or a few ulps off it, or anywhere
        const double edge = g.origin[a] + std::floor(u(rng) * g.cells[a]) * g.cell[a];
        point[a] = i % 3 == 0 ? edge : (i % 3 == 1 ? std::nextafter(edge, -1e300) : g.origin[a] + u(rng) * 97.3);
      }
      const localization::Neighbourhood around(g, point);
      ASSERT_LE(around.count, 27);
      for (int a = 0; a < d; ++a) ASSERT_LE(around.span[a], 2 * k + 1) << "axis " << a << " of " << d;
      // The runs hold the cells in Cell's order.
      ASSERT_LE(around.runs, 27);
      std::vector<int> cells, runs;
      for (int o = 0; o < around.count; ++o) cells.push_back(around.Cell(g, o));
      for (int r = 0; r < around.runs; ++r) {
        int first = 0, length = 0;
        around.Run(g, r, &first, &length);
        ASSERT_GT(length, 0);
        for (int c = first; c < first + length; ++c) runs.push_back(c);
      }
      ASSERT_EQ(runs, cells) << "point " << i << " of " << d << " axes";
    }
  }
}

// On a plane, the cells half a reach wide hold about 2.5^2 / 9 of the candidates of cells a reach
// wide (a box of 2.5 reaches an axis, not 3).
TEST(LetkfBins, HalfReachCellsHoldFewerCandidatesOnAPlane) {
  const Letkf l = Make(20000, 2, 200, 2, Metric::kPeriodic, 40);
  const localization::LetkfGeometry g = MakeLetkfGeometry(l.p);
  const LetkfBins bins = BinObservations(g, l.obs.data(), l.p.m);
  const std::vector<double> points = Points(2000, 2, 200, 41);
  const double reach = g.reach, density = 20000.0 / (200.0 * 200.0);
  const double per_point = static_cast<double>(CandidatePairs(g, bins, points.data(), 2000)) / 2000;
  EXPECT_LT(per_point, 0.75 * 9 * reach * reach * density);
  EXPECT_GT(per_point, 0.6 * 9 * reach * reach * density);
}

TEST(LetkfBins, CandidatesCoverTheReachEuclidean) {
  ExpectCandidatesCoverTheReach(Make(2000, 2, 100, 3, Metric::kEuclidean, 7), Taper::kGaspariCohn, 300, 8);
  ExpectCandidatesCoverTheReach(Make(1000, 3, 20, 1, Metric::kEuclidean, 9), Taper::kGaussian, 200, 10);
}

TEST(LetkfBins, CandidatesCoverTheReachPeriodic) {
  ExpectCandidatesCoverTheReach(Make(2000, 2, 100, 3, Metric::kPeriodic, 11), Taper::kGaspariCohn, 300, 12);
  ExpectCandidatesCoverTheReach(Make(500, 1, 40, 2, Metric::kPeriodic, 13), Taper::kStep, 200, 14);
}

TEST(LetkfBins, CandidatesCoverTheReachGreatCircle) {
  Letkf l = Make(2000, 2, 1, 300, Metric::kGreatCircle, 15);
  for (int64_t j = 0; j < l.p.m; ++j) {  // (longitude, latitude) in degrees
    l.obs[static_cast<size_t>(j * 2)] = 360 * l.obs[static_cast<size_t>(j * 2)] - 180;
    l.obs[static_cast<size_t>(j * 2 + 1)] = 180 * l.obs[static_cast<size_t>(j * 2 + 1)] - 90;
  }
  ExpectCandidatesCoverTheReach(std::move(l), Taper::kGaspariCohn, 300, 16);
}

}  // namespace
}  // namespace gpucompute::assimilate
