// The LETKF on the device (nvcc-built): the observations binned by cell, then a block per state
// variable (at a time) that finds its local observations, forms its local ETKF and writes its
// analysis row: the team kernel of letkf_team.cu (one or two warps, G's rows in registers) for
// N <= 64, the one-warp kernel of letkf.cu (G in shared memory) beyond.
// No per-variable host work and no per-variable global scratch.
//
// Binning. Points are mapped into a binning space of up to three axes: the first three
// coordinates (Euclidean, periodic) or the unit vector of (longitude, latitude) (great circle,
// where the chord is monotone in the arc). Each axis is cut into cells no narrower than the
// search reach (the taper's SearchRadius; a chord for the great circle), so every observation
// within reach of a point lies in the 3^axes cells around the point's cell. The observations are
// sorted by cell (a radix sort of (cell, index) pairs, so the order, and with it every sum, is the
// same from run to run) and each cell's range found by binary search.
//
// The analysis of variable i (docs/design/assimilate.md "The LETKF"):
//   1. The candidates of the neighbouring cells, a block's threads at a time: distance, taper coefficient c; those
//      with c > 1e-3 are staged (their whitened rows, 16 at a time) and added to
//      G = (N-1) I + sum_k c_k y_k y_k^T on the tensor cores (mma.m8n8k4 in float64) and to
//      b = sum_k c_k dw_k y_k.
//   2. G = Q T Q^T by Householder reflections (T tridiagonal).
//   3. In T's basis: wbar = T^-1 Q^T b and W a = sqrt(N-1) T^-1/2 Q^T a, the inverse square root
//      as Zolotarev's rational approximation (math/inverse_sqrt.h, relative error <= 2e-15 for
//      cond(G) up to 1e16) whose terms are tridiagonal solves, one a thread.
//   4. xa = xbar + (a . wbar) + W a, then relaxation and the row's variance (as the CPU
//      reference's FinishAnalysisRow).
// Everything is computed in float64 (float32 inputs and outputs are converted).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/assimilate/assimilate_kernels.cuh"

namespace gpucompute::assimilate::kernels {

// The most members the LETKF kernel takes (its shared memory holds G of order N).
constexpr int kMaxLetkfMembers = 128;
// Binned axes at most.
constexpr int kLetkfMaxAxes = 3;

// One problem's localisation and binning, as the kernels read it.
struct LetkfGeometry {
  int dims = 0;     // d, coordinates per point
  int metric = 0;   // localization::Metric
  int taper = 0;    // localization::Taper
  int axes = 0;     // binned axes (1..3)
  double radius = 0;
  double sphere_radius = 0;
  double domain[kLetkfMaxAxes] = {};  // periodic: the binned axes' lengths
  double origin[kLetkfMaxAxes] = {};  // binning space: where cell 0 starts
  double cell[kLetkfMaxAxes] = {};    // cell widths (>= the search reach)
  int cells[kLetkfMaxAxes] = {1, 1, 1};
  int64_t total_cells = 1;
};

// Device scratch bytes of the binning of m observations into at most `max_cells` cells.
size_t LetkfBinScratchBytes(int64_t m, int64_t max_cells);

// Bins m observations (coordinates obs_coords, m x d, double; g: the problem's geometry, on the
// device, with at most max_cells cells): sorted[k] is the k-th observation in cell order, and
// cell c holds sorted[cell_start[c] .. cell_start[c + 1]) (max_cells + 1 ints).
cudaError_t LaunchLetkfBin(const LetkfGeometry* g, int64_t m, int64_t max_cells, const double* obs_coords,
                           void* scratch, size_t scratch_bytes, int* sorted, int* cell_start,
                           cudaStream_t stream);

// The analysis of one problem (g on the device; d = g->dims coordinates a point). a: n x N inflated state anomalies
// (LaunchCentreState), xbar: their means; obs: m rows of W values [Yw | dw] (LaunchPrepareObs);
// state_coords (n x d), obs_coords (m x d) and domain (d values, periodic) in double; sorted /
// cell_start from LaunchLetkfBin; table: math/inverse_sqrt.h's WriteTable. xa: n x N analysis;
// partials: per-warp sums of row variances, `*warps` of them (for LaunchReduceSpread; at most
// LetkfAnalysisWarps(n)).
template <typename T>
cudaError_t LaunchLetkfAnalysis(const LetkfGeometry* g, int64_t n, int N, int W, const T* a,
                                const double* xbar, const T* obs, const double* state_coords,
                                const double* obs_coords, const double* domain, const int* sorted,
                                const int* cell_start, const ProblemParams* params, const double* table,
                                T* xa, double* partials, int* warps, cudaStream_t stream);

// A bound on the per-warp partials LaunchLetkfAnalysis writes for n variables.
int LetkfAnalysisWarps(int64_t n);

}  // namespace gpucompute::assimilate::kernels
