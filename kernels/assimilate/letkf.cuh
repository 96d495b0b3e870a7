// The LETKF on the device (nvcc-built): the observations binned by cell, then a block per state
// variable (at a time) that finds its local observations, forms its local ETKF and writes its
// analysis row: the team kernel of letkf_team.cu (one warp, G's rows l in registers, l + 32 in
// shared memory; a Chebyshev series for well-conditioned G) for N <= 64, the one-warp kernel of
// letkf.cu (G in shared memory) beyond. For the team kernel a kernel of its own lists each
// variable's local observations first, a chunk of variables at a time (LetkfLists).
// No per-variable host work.
//
// Binning (math/letkf_cells.h, shared with the CPU backend): every observation within the
// search reach of a point lies in the cells around it (at most 27, as up to 18 runs of
// consecutive cells). The observations are
// sorted by cell (a radix sort of (cell, index) pairs, so the order, and with it every sum, is the
// same from run to run) and each cell's range found by binary search.
//
// The analysis of variable i (docs/design/assimilate.md "The LETKF"):
//   1. The candidates of the neighbouring cells, a block's threads at a time: distance, taper coefficient c; those
//      with c > 1e-3 are staged (their whitened rows, 16 at a time) and added to
//      G = (N-1) I + sum_k c_k y_k y_k^T on the tensor cores (mma.m8n8k4 in float64) and to
//      b = sum_k c_k dw_k y_k.
//   2. G = Q T Q^T by Householder reflections (T tridiagonal). (The team kernel takes a
//      well-conditioned G by Chebyshev series in G applied to a instead of 2 and 3:
//      math/chebyshev.h.)
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
#include "math/letkf_cells.h"

namespace gpucompute::assimilate::kernels {

// The most members the LETKF kernel takes (its shared memory holds G of order N).
constexpr int kMaxLetkfMembers = 128;
using localization::kLetkfMaxAxes;
using localization::LetkfGeometry;

// Device scratch bytes of the binning of m observations into at most `max_cells` cells.
size_t LetkfBinScratchBytes(int64_t m, int64_t max_cells);

// Bins m observations (coordinates obs_coords, m x d, double; g: the problem's geometry, on the
// device, with at most max_cells cells): sorted[k] is the k-th observation in cell order,
// sorted_coords its coordinates (m x d: one load fewer on the neighbour search's chain), and
// cell c holds sorted[cell_start[c] .. cell_start[c + 1]) (max_cells + 1 ints).
cudaError_t LaunchLetkfBin(const LetkfGeometry* g, int64_t m, int64_t max_cells, const double* obs_coords,
                           void* scratch, size_t scratch_bytes, int* sorted, int* cell_start,
                           double* sorted_coords, cudaStream_t stream);

// The candidate pairs of one problem (g on the device): over its n variables (state_coords,
// n x d, double), the observations in the cells around each (cell_start from LaunchLetkfBin),
// as server/ops/assimilate/letkf_geometry.h's CandidatePairs counts them, into *count.
cudaError_t LaunchLetkfCountCandidates(const LetkfGeometry* g, int64_t n, const double* state_coords,
                                       const int* cell_start, unsigned long long* count, cudaStream_t stream);

// The team kernel's lists (N <= 64): a chunk of variables at a time, each variable's local
// observations (index and taper coefficient, in the scan's order) are listed by a kernel of its
// own, at up to kLetkfListCap a variable, before their analyses; variables with more are analysed
// by the team kernel scanning its candidates itself. count: kLetkfListChunk ints, index and
// coeff: kLetkfListChunk * kLetkfListCap each.
constexpr int kLetkfListCap = 128;
constexpr int64_t kLetkfListChunk = int64_t{1} << 16;
struct LetkfLists {
  int* count;
  int* index;
  double* coeff;
};

// Device scratch bytes of the lists for n variables of N members (0 where N > 64: the
// one-warp kernel scans its candidates itself); LetkfListsAt lays them out from `at`.
size_t LetkfListBytes(int64_t n, int N);
LetkfLists LetkfListsAt(void* at, int64_t n);

// The analysis of one problem (g on the device; d = g->dims coordinates a point). a: n x N
// inflated state anomalies (LaunchCentreState), xbar: their means; obs: m rows of W values
// [Yw | dw] (LaunchPrepareObs); state_coords (n x d) and domain (d values, periodic) in double;
// sorted, cell_start and sorted_coords from LaunchLetkfBin; candidates: the count of
// LaunchLetkfCountCandidates (over params->max_candidates: no variable is analysed); table:
// math/inverse_sqrt.h's WriteTable, chebyshev_table: math/chebyshev.h's (read for N <= 64);
// lists: LetkfListsAt over LetkfListBytes(n, N) bytes of scratch (unused for N > 64).
// xa: n x N analysis; partials: per-warp sums of row variances, `*warps` of them (for
// LaunchReduceSpread; at most LetkfAnalysisWarps(n)).
template <typename T>
cudaError_t LaunchLetkfAnalysis(const LetkfGeometry* g, int64_t n, int N, int W, const T* a,
                                const double* xbar, const T* obs, const double* state_coords,
                                const double* sorted_coords, const double* domain, const int* sorted,
                                const int* cell_start, const ProblemParams* params,
                                const unsigned long long* candidates, const double* table,
                                const double* chebyshev_table, const LetkfLists& lists, T* xa, double* partials,
                                int* warps, cudaStream_t stream);

// A bound on the per-warp partials LaunchLetkfAnalysis writes for n variables.
int LetkfAnalysisWarps(int64_t n);

}  // namespace gpucompute::assimilate::kernels
