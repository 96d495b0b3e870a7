// Device code shared by the LETKF's kernels (letkf.cu, letkf_team.cu; nvcc only): where a point
// falls in the binning space, the cells around it, and the analysis kernels' launchers.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/assimilate/letkf.cuh"
#include "math/localization.h"

namespace gpucompute::assimilate::kernels {

// A point's coordinates in the binning space.
__host__ __device__ inline void BinningCoordinates(const LetkfGeometry& g, const double* p, double* q) {
  if (g.metric == static_cast<int>(localization::Metric::kGreatCircle)) {
    const double lon = p[0] * localization::kDegree, lat = p[1] * localization::kDegree;
    q[0] = cos(lat) * cos(lon);
    q[1] = cos(lat) * sin(lon);
    q[2] = sin(lat);
    return;
  }
  for (int a = 0; a < g.axes; ++a) {
    double v = p[a];
    if (g.metric == static_cast<int>(localization::Metric::kPeriodic)) {
      v = fmod(v, g.domain[a]);
      if (v < 0) v += g.domain[a];
    }
    q[a] = v;
  }
}

// The cell of binning coordinate q along axis a: within [0, cells) for an observation (`clamp`),
// else within [-2, cells + 1] (a point beyond the observations' box).
__device__ __forceinline__ int CellOf(const LetkfGeometry& g, int a, double q, bool clamp) {
  double t = floor((q - g.origin[a]) / g.cell[a]);
  const double hi = g.cells[a] - 1;
  if (clamp || g.metric == static_cast<int>(localization::Metric::kPeriodic)) {
    t = fmin(fmax(t, 0.0), hi);
  } else {
    t = fmin(fmax(t, -2.0), hi + 2);
  }
  return static_cast<int>(t);
}

// The cells whose observations may lie within reach of a point: up to three a binned axis
// (periodic axes wrap; fewer at the edges of the observations' box), `count` in all.
struct Neighbourhood {
  int lo[kLetkfMaxAxes] = {0, 0, 0};
  int span[kLetkfMaxAxes] = {1, 1, 1};
  int count = 0;

  __device__ Neighbourhood(const LetkfGeometry& g, const double* point) {
    double q[kLetkfMaxAxes];
    BinningCoordinates(g, point, q);
    count = 1;
    for (int ax = 0; ax < g.axes; ++ax) {
      const int cells = g.cells[ax];
      const int c = CellOf(g, ax, q[ax], false);
      if (g.metric == static_cast<int>(localization::Metric::kPeriodic)) {
        lo[ax] = cells < 3 ? 0 : c - 1;  // wraps below
        span[ax] = cells < 3 ? cells : 3;
      } else {
        lo[ax] = max(c - 1, 0);
        span[ax] = max(min(c + 1, cells - 1) - lo[ax] + 1, 0);
      }
      count *= span[ax];
    }
  }

  // The o-th cell (0 <= o < count), as an index into cell_start.
  __device__ int Cell(const LetkfGeometry& g, int o) const {
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
};

// The taper coefficient of observation j for `point` (0 beyond the search reach).
__device__ __forceinline__ double LocalCoefficient(const LetkfGeometry& g, const double* point,
                                                   const double* obs_coords, const double* domain, int j,
                                                   double search) {
  const double dist = localization::Distance(static_cast<localization::Metric>(g.metric), point,
                                             obs_coords + static_cast<int64_t>(j) * g.dims, g.dims, domain,
                                             g.sphere_radius);
  if (dist > search) return 0;
  return localization::TaperCoefficient(static_cast<localization::Taper>(g.taper), dist, g.radius);
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
  s = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) s += k < owned ? acc[k] : 0.0;
  const double mean = sum(s) / N;
  double var = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) var += k < owned ? (acc[k] - mean) * (acc[k] - mean) : 0.0;
  return sum(var) / (N - 1);
}

// The largest N of the team kernel (letkf_team.cu): G's rows in registers, one a thread.
constexpr int kLetkfTeamMaxMembers = 64;

// The analysis kernels, as LaunchLetkfAnalysis (letkf.cuh) describes them, with `blocks` blocks
// that stride over the variables (one partial each): the team kernel for N <= 64, the
// one-warp shared-memory kernel (letkf.cu) for any N <= kMaxLetkfMembers.
template <typename T>
cudaError_t LaunchLetkfTeam(const LetkfGeometry* g, int64_t n, int N, int W, const T* a, const double* xbar,
                            const T* obs, const double* state_coords, const double* obs_coords,
                            const double* domain, const int* sorted, const int* cell_start,
                            const ProblemParams* params, const double* table, T* xa, double* partials,
                            int blocks, cudaStream_t stream);

}  // namespace gpucompute::assimilate::kernels
