// The LETKF's binning geometry (see letkf_geometry.h).
#include "server/ops/assimilate/letkf_geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/element_type.h"
#include "math/localization.h"

namespace gpucompute::assimilate {
namespace {

using localization::Metric;

// Widens cells against rounding in the cell arithmetic (an observation at exactly the search
// radius, which the step taper keeps, stays in a neighbouring cell).
constexpr double kReachMargin = 1 + 1e-9;

}  // namespace

int64_t LetkfMaxCells(int64_t m) { return std::clamp<int64_t>(4 * m, 64, int64_t{1} << 24); }

kernels::LetkfGeometry MakeLetkfGeometry(const Problem& p) {
  const Localization& l = p.localization;
  kernels::LetkfGeometry g;
  g.dims = static_cast<int>(l.dims);
  g.metric = static_cast<int>(l.metric);
  g.taper = static_cast<int>(l.taper);
  g.radius = l.radius;
  g.sphere_radius = l.sphere_radius;
  const double search = localization::SearchRadius(l.taper, l.radius);
  double extent[kernels::kLetkfMaxAxes] = {};
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
    g.axes = static_cast<int>(std::min<int64_t>(l.dims, kernels::kLetkfMaxAxes));
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
  // Cells per axis: as many as fit at the reach's width, then coarser until within the budget.
  const int64_t budget = LetkfMaxCells(p.m);
  double cells[kernels::kLetkfMaxAxes] = {1, 1, 1};
  for (int a = 0; a < g.axes; ++a) cells[a] = std::max(1.0, std::floor(std::min(extent[a] / reach, 1e9)));
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
    g.cell[a] = std::max(extent[a] / cells[a], reach);
    g.total_cells *= g.cells[a];
  }
  return g;
}

}  // namespace gpucompute::assimilate
