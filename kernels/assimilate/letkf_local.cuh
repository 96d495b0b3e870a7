// Device code shared by the LETKF's kernels (letkf.cu, letkf_team.cu; nvcc only): a candidate's
// taper coefficient, the tridiagonal solves, the finish of a row, and the analysis kernels'
// launchers (the cells around a point: math/letkf_cells.h).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/assimilate/letkf.cuh"
#include "kernels/assimilate/warp_ops.cuh"
#include "math/localization.h"

namespace gpucompute::assimilate::kernels {

using localization::BinningCoordinates;
using localization::Neighbourhood;
using localization::ObservationCell;

// The taper coefficient of the observation at coords[j * dims ...] for `point` (0 beyond the
// search reach).
__device__ __forceinline__ double LocalCoefficient(const LetkfGeometry& g, const double* point, const double* coords,
                                                   const double* domain, int j, double search) {
  const double dist = localization::Distance(static_cast<localization::Metric>(g.metric), point,
                                             coords + static_cast<int64_t>(j) * g.dims, g.dims, domain,
                                             g.sphere_radius);
  if (dist > search) return 0;
  return localization::TaperCoefficient(static_cast<localization::Taper>(g.taper), dist, g.radius);
}

// The most runs of neighbouring cells a point has (math/letkf_cells.h).
constexpr int kMaxRuns = 27;

// A point's candidates (the observations in the runs of cells around it, in cell order), a round
// of 32 at a time, one a lane: round(j, c, mask) with the candidate's observation j, its taper
// coefficient c (0 past the last candidate) and the round's ballot of c > kMinCoefficient.
// run_begin and run_size: the warp's kMaxRuns ints each in shared memory. kCountByReduction:
// the candidates counted by a warp reduction, else by a loop over the runs (which is faster
// depends on the caller's register allocation).
template <bool kCountByReduction, typename Round>
__device__ __forceinline__ void ScanCandidates(const LetkfGeometry& geo, const double* point, double search,
                                               const int* cell_start, const int* sorted,
                                               const double* sorted_coords, const double* domain, int* run_begin,
                                               int* run_size, int lane, Round round) {
  int runs = 0, size = 0;  // lane r: run r's candidates
  {
    const Neighbourhood around(geo, point);
    runs = around.runs;
    if (lane < runs) {
      int first = 0, length = 0;
      around.Run(geo, lane, &first, &length);
      run_begin[lane] = cell_start[first];
      size = cell_start[first + length] - run_begin[lane];
      run_size[lane] = size;
    }
  }
  __syncwarp();
  int candidates = 0;
  if constexpr (kCountByReduction) {
    candidates = __reduce_add_sync(kFullWarp, size);
  } else {
    for (int r = 0; r < runs; ++r) candidates += run_size[r];
  }
  int o = 0, pos = lane;  // this lane's candidate: run o, position pos in it
  auto advance = [&]() {
    while (o < runs && pos >= run_size[o]) pos -= run_size[o++];
  };
  advance();
  for (int base = 0; base < candidates; base += 32) {
    int j = 0;
    double c = 0;
    if (o < runs) {
      const int k = run_begin[o] + pos;  // the candidate's place in cell order
      j = sorted[k];
      c = LocalCoefficient(geo, point, sorted_coords, domain, k, search);
    }
    round(j, c, __ballot_sync(kFullWarp, c > localization::kMinCoefficient));
    pos += 32;
    advance();
  }
}

// Row i's Gershgorin bound on the largest eigenvalue of the symmetric tridiagonal T (diagonal
// diag, N values; off-diagonal off, N - 1).
__device__ __forceinline__ double GershgorinRow(const double* diag, const double* off, int N, int i) {
  return diag[i] + (i > 0 ? fabs(off[i - 1]) : 0.0) + (i + 1 < N ? fabs(off[i]) : 0.0);
}

// Solves (T + shift I) x = rhs for that T by LDL^T without pivoting (T + shift I is positive
// definite here: G >= (N-1) I, shift >= 0), x[q * stride] for q < N; l[q * stride] holds L's
// subdiagonal on the way.
__device__ inline void SolveShiftedTridiagonal(const double* diag, const double* off, int N, double shift,
                                               const double* rhs, double* l, double* x, int stride) {
  double delta = diag[0] + shift, f = rhs[0];
  for (int q = 0; q + 1 < N; ++q) {
    const double inv = 1 / delta, lq = off[q] * inv;
    x[q * stride] = f * inv;
    l[q * stride] = lq;
    delta = diag[q + 1] + shift - lq * off[q];
    f = rhs[q + 1] - lq * f;
  }
  double v = f / delta;
  x[(N - 1) * stride] = v;
  for (int q = N - 2; q >= 0; --q) {
    v = x[q * stride] - l[q * stride] * v;
    x[q * stride] = v;
  }
}

// The end of a variable's analysis, as FinishAnalysisRow does it on the CPU: relaxation of the
// analysis anomalies toward the forecast's (RTPP, RTPS), then the row's ensemble variance
// (returned). A thread holds `owned` of the row's members, acc[k] (analysis anomalies, relaxed
// in place) and fore[k] (forecast anomalies); `sum(x)` adds x over every thread of the row's
// team (a barrier). Every thread of the team calls it, with owned 0 where it holds none.
template <int kPer, typename Sum>
__device__ inline double FinishAnalysisMembers(double (&acc)[kPer], const double (&fore)[kPer], int owned,
                                               int N, const ProblemParams& pp, Sum sum) {
  double s = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) s += k < owned ? acc[k] : 0.0;
  const double amean = sum(s) / N;
  const double f = pp.relaxation_factor;
  if (pp.relaxation == 1) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (k < owned) acc[k] = amean + (1 - f) * (acc[k] - amean) + f * fore[k];
    }
  } else if (pp.relaxation == 2) {
    double va = 0, vf = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (k < owned) {
        va += (acc[k] - amean) * (acc[k] - amean);
        vf += fore[k] * fore[k];
      }
    }
    va = sum(va);
    vf = sum(vf);
    if (va > 0) {
      const double factor = 1 - f + f * sqrt(vf / va);
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if (k < owned) acc[k] = amean + factor * (acc[k] - amean);
      }
    }
  }
  double mean = amean;  // unchanged without relaxation: the same sum, bit for bit
  if (pp.relaxation != 0) {
    s = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) s += k < owned ? acc[k] : 0.0;
    mean = sum(s) / N;
  }
  double var = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) var += k < owned ? (acc[k] - mean) * (acc[k] - mean) : 0.0;
  return sum(var) / (N - 1);
}

// The largest N of the team kernel (letkf_team.cu): a warp a variable, lane l holding G's row l in
// registers and row l + 32 in shared memory.
constexpr int kLetkfTeamMaxMembers = 64;

// The team kernel (N <= 64), as LaunchLetkfAnalysis (letkf.cuh) describes it, over the variables
// first ... first + chunk - 1 (chunk <= kLetkfListChunk), with `blocks` blocks that stride over
// them, each adding its rows' variances to partials[block]: listed, the variables with up to
// kLetkfListCap local observations from their lists; else the others, each scanning its
// candidates itself. The one-warp shared-memory kernel (letkf.cu) takes any N <= kMaxLetkfMembers.
template <typename T>
cudaError_t LaunchLetkfTeam(const LetkfGeometry* g, int64_t first, int64_t chunk, int N, int W, const T* a,
                            const double* xbar, const T* obs, const double* state_coords,
                            const double* sorted_coords, const double* domain, const int* sorted,
                            const int* cell_start, const ProblemParams* params, const unsigned long long* candidates,
                            const double* table, const double* chebyshev_table, const LetkfLists& lists,
                            bool listed, T* xa, double* partials, int blocks, cudaStream_t stream);

}  // namespace gpucompute::assimilate::kernels
