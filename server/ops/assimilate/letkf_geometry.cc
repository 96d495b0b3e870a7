// The LETKF's binning geometry (see letkf_geometry.h).
#include "server/ops/assimilate/letkf_geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/element_type.h"
#include "math/localization.h"

namespace gpucompute::assimilate {
namespace {

using localization::Metric;

// Widens the reach against rounding in the cell arithmetic (an observation at exactly the search
// radius, which the step taper keeps, stays within the neighbourhood), and the cells beyond
// reach / CellsPerReach (so that a neighbourhood spans at most 2 CellsPerReach + 1 cells an axis
// whatever the rounding of its ends).
constexpr double kReachMargin = 1 + 1e-9;
constexpr double kCellMargin = 1 + 1e-6;

}  // namespace

int64_t LetkfMaxCells(int64_t m) { return std::clamp<int64_t>(4 * m, 64, int64_t{1} << 24); }

localization::LetkfGeometry MakeLetkfGeometry(const Problem& p) {
  const Localization& l = p.localization;
  localization::LetkfGeometry g;
  g.dims = static_cast<int>(l.dims);
  g.metric = static_cast<int>(l.metric);
  g.taper = static_cast<int>(l.taper);
  g.radius = l.radius;
  g.sphere_radius = l.sphere_radius;
  const double search = localization::SearchRadius(l.taper, l.radius);
  double extent[localization::kLetkfMaxAxes] = {};
  double reach = search * kReachMargin;
  if (l.metric == Metric::kGreatCircle) {
    g.axes = 3;
    const double angle = search / l.sphere_radius;
    reach = angle >= 3.14159265358979323846 ? 2.0 : 2 * std::sin(angle / 2) * kReachMargin;
    for (int a = 0; a < 3; ++a) {
      g.origin[a] = -1;
      extent[a] = 2;
    }
  } else {
    g.axes = static_cast<int>(std::min<int64_t>(l.dims, localization::kLetkfMaxAxes));
    if (l.metric == Metric::kPeriodic) {
      for (int a = 0; a < g.axes; ++a) {
        g.domain[a] = l.domain[static_cast<size_t>(a)];
        extent[a] = g.domain[a];
      }
    } else {
      std::vector<double> coords(static_cast<size_t>(p.m * l.dims));
      ToDouble(l.obs_coords.dtype, l.obs_coords.bytes.data(), p.m * l.dims, coords.data());
      for (int a = 0; a < g.axes; ++a) {
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
        for (int64_t j = 0; j < p.m; ++j) {
          lo = std::min(lo, coords[static_cast<size_t>(j * l.dims + a)]);
          hi = std::max(hi, coords[static_cast<size_t>(j * l.dims + a)]);
        }
        g.origin[a] = lo;
        extent[a] = hi - lo;
      }
    }
  }
  // Cells per axis: as many as fit at the least width, then coarser until within the budget.
  g.reach = reach;
  const double least = reach / localization::CellsPerReach(g.axes) * kCellMargin;
  const int64_t budget = LetkfMaxCells(p.m);
  double cells[localization::kLetkfMaxAxes] = {1, 1, 1};
  for (int a = 0; a < g.axes; ++a) cells[a] = std::max(1.0, std::floor(std::min(extent[a] / least, 1e9)));
  auto total = [&] {
    double t = 1;
    for (int a = 0; a < g.axes; ++a) t *= cells[a];
    return t;
  };
  while (total() > static_cast<double>(budget)) {
    int widest = 0;
    for (int a = 1; a < g.axes; ++a) widest = cells[a] > cells[widest] ? a : widest;
    const double shrink = std::pow(total() / static_cast<double>(budget), 1.0 / g.axes);
    cells[widest] = std::max(1.0, std::floor(cells[widest] / std::max(shrink, 1.0 + 1e-9)));
  }
  g.total_cells = 1;
  for (int a = 0; a < g.axes; ++a) {
    g.cells[a] = static_cast<int>(cells[a]);
    g.cell[a] = std::max(extent[a] / cells[a], least);
    g.total_cells *= g.cells[a];
  }
  return g;
}

LetkfBins BinObservations(const localization::LetkfGeometry& g, const double* obs_coords, int64_t m) {
  LetkfBins bins;
  std::vector<int> cell(static_cast<size_t>(m));
  bins.cell_start.assign(static_cast<size_t>(g.total_cells) + 1, 0);
  for (int64_t j = 0; j < m; ++j) {
    double q[localization::kLetkfMaxAxes];
    localization::BinningCoordinates(g, obs_coords + j * g.dims, q);
    cell[static_cast<size_t>(j)] = static_cast<int>(localization::ObservationCell(g, q));
    ++bins.cell_start[static_cast<size_t>(cell[static_cast<size_t>(j)]) + 1];
  }
  for (size_t c = 1; c < bins.cell_start.size(); ++c) bins.cell_start[c] += bins.cell_start[c - 1];
  std::vector<int> next(bins.cell_start.begin(), bins.cell_start.end() - 1);
  bins.sorted.resize(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    int& at = next[static_cast<size_t>(cell[static_cast<size_t>(j)])];
    bins.sorted[static_cast<size_t>(at++)] = static_cast<int>(j);
  }
  return bins;
}

int64_t CandidatePairs(const localization::LetkfGeometry& g, const LetkfBins& bins, const double* state_coords,
                       int64_t n) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    total += localization::Neighbourhood(g, state_coords + i * g.dims).Candidates(g, bins.cell_start.data());
  }
  return total;
}

absl::Status TooManyCandidates(int64_t index, int64_t candidates, int64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "problems[", index, "].localization.radius: the neighbour search would examine ", candidates,
      " (state variable, observation) pairs, over the limit of ", limit,
      " (--assimilate_max_letkf_candidates); use a smaller radius, or split the state into several problems"));
}

}  // namespace gpucompute::assimilate
