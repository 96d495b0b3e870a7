// The binning of an LETKF problem's observations for the neighbour search of both backends
// (math/letkf_cells.h): which axes are cut into cells, where and how finely; the observations
// sorted by cell on the host (the CPU backend's search); and the candidate pairs a search
// examines, which the limit on a problem's cost counts. Host arithmetic only.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "math/letkf_cells.h"
#include "server/ops/assimilate/assimilate.h"

namespace gpucompute::assimilate {

// The most cells a problem of m observations is binned into: about 4 per observation (so that
// sparse observations do not make the search visit empty cells), at least 64, at most 2^24
// (the cells' starts take 4 bytes each).
int64_t LetkfMaxCells(int64_t m);

// The geometry of problem `p` (a validated LETKF problem). Every observation within the taper's
// search radius of a point lies in the cells that meet the box of half-width `reach` around it:
// each axis's cells are wider than reach / CellsPerReach(axes) (the reach: the search radius,
// or its chord for the great circle, whose points are binned by their unit vectors), so at most
// 2 CellsPerReach + 1 an axis. Euclidean axes span the observations' range; periodic ones the
// domain. At most LetkfMaxCells(p.m) cells.
localization::LetkfGeometry MakeLetkfGeometry(const Problem& p);

// The observations sorted by cell: cell c holds sorted[cell_start[c] .. cell_start[c + 1]), in
// index order within a cell (as the GPU's sort of (cell, index) pairs leaves them).
struct LetkfBins {
  std::vector<int> sorted;      // m observation indices
  std::vector<int> cell_start;  // g.total_cells + 1
};

// Bins m observations (obs_coords: m x g.dims, double) into g's cells.
LetkfBins BinObservations(const localization::LetkfGeometry& g, const double* obs_coords, int64_t m);

// The candidate pairs of a problem: over its n state variables (state_coords: n x g.dims,
// double), the observations in the cells around each, which its search examines and which bound
// its local observations. The GPU counts the same on the device (LaunchLetkfCountCandidates).
int64_t CandidatePairs(const localization::LetkfGeometry& g, const LetkfBins& bins, const double* state_coords,
                       int64_t n);

// RESOURCE_EXHAUSTED for problem `index` of its request, whose `candidates` exceed `limit`.
absl::Status TooManyCandidates(int64_t index, int64_t candidates, int64_t limit);

}  // namespace gpucompute::assimilate
