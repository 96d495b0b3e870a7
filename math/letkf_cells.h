// The LETKF's neighbour search by cells, shared by the CPU backend and the GPU kernels: a point
// maps into a binning space of up to three axes, cut into cells no narrower than 1/k of the
// search reach (k = CellsPerReach(axes): 4, 2 or 1), and the observations within reach of a
// point lie in the cells that meet the box of half-width `reach` around it: at most 2k + 1 an
// axis, 9, 25 or 27 in all. Narrower cells fit that box more closely than cells a reach wide
// (whose 3^axes cells span three reaches an axis): on a plane, 2.5 reaches rather than 3, 31%
// fewer candidates. Header-only, host C++ and CUDA device code (the geometry itself is chosen
// on the host: server/ops/assimilate/letkf_geometry.h).
//
// The binning space: the first three coordinates (Euclidean, periodic: each wrapped into its
// period), or the unit vector of (longitude, latitude) for the great circle (where the chord is
// monotone in the arc, so the reach along each axis is the chord of the search radius).
#pragma once

#include <cmath>
#include <cstdint>

#include "math/host_device.h"
#include "math/localization.h"

namespace gpucompute::localization {

// Binned axes at most.
constexpr int kLetkfMaxAxes = 3;

// Cells a reach along each axis, k: a neighbourhood spans at most 2k + 1 cells an axis (9, 25 or
// 27 in all, and as many runs at most; the kernels hold 27).
GPUCOMPUTE_HOST_DEVICE constexpr int CellsPerReach(int axes) { return axes <= 1 ? 4 : (axes == 2 ? 2 : 1); }

// One problem's localisation and binning, as the neighbour search reads it.
struct LetkfGeometry {
  int dims = 0;     // d, coordinates per point
  int metric = 0;   // Metric
  int taper = 0;    // Taper
  int axes = 0;     // binned axes (1..3)
  double radius = 0;
  double sphere_radius = 0;
  double reach = 0;                   // the search reach in the binning space (with a margin)
  double domain[kLetkfMaxAxes] = {};  // periodic: the binned axes' lengths
  double origin[kLetkfMaxAxes] = {};  // binning space: where cell 0 starts
  double cell[kLetkfMaxAxes] = {};    // cell widths (> reach / CellsPerReach(axes))
  int cells[kLetkfMaxAxes] = {1, 1, 1};
  int64_t total_cells = 1;
};

// A point's coordinates in the binning space.
GPUCOMPUTE_HOST_DEVICE inline void BinningCoordinates(const LetkfGeometry& g, const double* p, double* q) {
  if (g.metric == static_cast<int>(Metric::kGreatCircle)) {
    const double lon = p[0] * kDegree, lat = p[1] * kDegree;
    q[0] = std::cos(lat) * std::cos(lon);
    q[1] = std::cos(lat) * std::sin(lon);
    q[2] = std::sin(lat);
    return;
  }
  for (int a = 0; a < g.axes; ++a) {
    double v = p[a];
    if (g.metric == static_cast<int>(Metric::kPeriodic)) {
      v = std::fmod(v, g.domain[a]);
      if (v < 0) v += g.domain[a];
    }
    q[a] = v;
  }
}

// An observation's cell along axis a (binning coordinate q): within [0, cells).
GPUCOMPUTE_HOST_DEVICE inline int CellOf(const LetkfGeometry& g, int a, double q) {
  double t = std::floor((q - g.origin[a]) / g.cell[a]);
  const double top = g.cells[a] - 1;
  t = !(t >= 0) ? 0 : (t > top ? top : t);  // a NaN's cell: 0
  return static_cast<int>(t);
}

// An observation's cell (binning coordinates q), as an index into the cells' starts.
GPUCOMPUTE_HOST_DEVICE inline int64_t ObservationCell(const LetkfGeometry& g, const double* q) {
  int64_t cell = 0, stride = 1;
  for (int a = 0; a < g.axes; ++a) {
    cell += CellOf(g, a, q[a]) * stride;
    stride *= g.cells[a];
  }
  return cell;
}

// The cells whose observations may lie within reach of a point: those that meet [q - reach,
// q + reach] along each binned axis, at most 2 CellsPerReach(axes) + 1 (the cells are wider
// than reach / CellsPerReach by a margin that outweighs the rounding; periodic axes wrap, fewer
// at the edges of the observations' box), `count` in all.
struct Neighbourhood {
  int lo[kLetkfMaxAxes] = {0, 0, 0};
  int span[kLetkfMaxAxes] = {1, 1, 1};
  int count = 0;
  int pieces = 1;  // runs a row of cells along axis 0: two where a periodic axis 0 wraps
  int runs = 0;    // count / span[0] rows of cells, `pieces` runs each

  GPUCOMPUTE_HOST_DEVICE Neighbourhood(const LetkfGeometry& g, const double* point) {
    double q[kLetkfMaxAxes];
    BinningCoordinates(g, point, q);
    count = 1;
    for (int ax = 0; ax < g.axes; ++ax) {
      const int cells = g.cells[ax];
      const double u = (q[ax] - g.origin[ax]) / g.cell[ax], r = g.reach / g.cell[ax];
      const double first = std::floor(u - r), last = std::floor(u + r);
      if (g.metric == static_cast<int>(Metric::kPeriodic)) {
        const bool all = !(last - first + 1 < cells);  // (and a NaN's)
        lo[ax] = all ? 0 : static_cast<int>(first);    // wraps below
        span[ax] = all ? cells : static_cast<int>(last - first) + 1;
      } else {
        const double from = std::fmax(first, 0.0), to = std::fmin(last, cells - 1.0);  // a NaN's: all
        lo[ax] = to >= from ? static_cast<int>(from) : 0;
        span[ax] = to >= from ? static_cast<int>(to - from) + 1 : 0;
      }
      count *= span[ax];
    }
    const int end = lo[0] + span[0];
    pieces = g.metric == static_cast<int>(Metric::kPeriodic) && (lo[0] < 0 || end > g.cells[0]) ? 2 : 1;
    runs = span[0] > 0 ? count / span[0] * pieces : 0;
  }

  // Run r (0 <= r < runs): `length` cells from `first` (an index into the cells' starts), whose
  // observations are consecutive in the sorted order (the cells' index runs fastest along axis
  // 0). The runs, in turn, hold the cells in the order of Cell.
  GPUCOMPUTE_HOST_DEVICE void Run(const LetkfGeometry& g, int r, int* first, int* length) const {
    const int row = r / pieces, cells = g.cells[0];
    const int start = lo[0] < 0 ? lo[0] + cells : lo[0];  // the row's first cell along axis 0
    const int base = Cell(g, row * span[0]) - start;       // the row's cell 0 along axis 0
    const int head = pieces == 1 ? span[0] : cells - start;  // cells before the wrap
    *first = base + (r % pieces == 0 ? start : 0);
    *length = r % pieces == 0 ? head : span[0] - head;
  }

  // The o-th cell (0 <= o < count), as an index into the cells' starts.
  GPUCOMPUTE_HOST_DEVICE int Cell(const LetkfGeometry& g, int o) const {
    int cell = 0, stride = 1;
    for (int ax = 0; ax < g.axes; ++ax) {
      int c = lo[ax] + o % span[ax];
      o /= span[ax];
      if (c < 0) c += g.cells[ax];
      if (c >= g.cells[ax]) c -= g.cells[ax];
      cell += c * stride;
      stride *= g.cells[ax];
    }
    return cell;
  }

  // The observations in these cells (cell c holds cell_start[c] .. cell_start[c + 1]): the
  // candidates a search examines for the point, a bound on its local observations.
  GPUCOMPUTE_HOST_DEVICE int64_t Candidates(const LetkfGeometry& g, const int* cell_start) const {
    int64_t total = 0;
    for (int r = 0; r < runs; ++r) {
      int first = 0, length = 0;
      Run(g, r, &first, &length);
      total += cell_start[first + length] - cell_start[first];
    }
    return total;
  }
};

}  // namespace gpucompute::localization
