// The binning of an LETKF problem's observations for the GPU's neighbour search (see
// kernels/assimilate/letkf.cuh): which axes are cut into cells, where and how finely. Host
// arithmetic only; tests check it without a GPU.
#pragma once

#include <cstdint>

#include "kernels/assimilate/letkf.cuh"
#include "server/ops/assimilate/assimilate.h"

namespace gpucompute::assimilate {

// The most cells a problem of m observations is binned into: about 4 per observation (so that
// sparse observations do not make the search visit empty cells), at least 64, at most 2^24
// (the cells' starts take 4 bytes each).
int64_t LetkfMaxCells(int64_t m);

// The geometry of problem `p` (a validated LETKF problem). Every observation within the taper's
// search radius of a point lies in the 3^axes cells around the point's cell: each axis's cells
// are at least the search reach wide (the chord of the search radius for the great circle,
// whose points are binned by their unit vectors). Euclidean axes span the observations' range;
// periodic ones the domain. At most LetkfMaxCells(p.m) cells.
kernels::LetkfGeometry MakeLetkfGeometry(const Problem& p);

}  // namespace gpucompute::assimilate
