// The LETKF's device code (see letkf.cuh).
//
// The one-warp analysis kernel (64 < N <= 128; letkf_team.cu takes N <= 64) is one warp per
// block, with its shared memory:
//   A   N x lda        G, then its Householder form (v below the subdiagonal); lda = N + 1 or
//                      N + 2, whichever is odd
//   Y   16 x (Np + 4)  staged local rows; then two arrays per lane of the tridiagonal solves
//   vectors of Np      b, Householder v and w, Q^T a, Q^T b, sums, T's diagonal, off-diagonal,
//                      tau, the state row; then the staged rows' taper coefficients, c_k dw_k
//                      and indices
// with Np = N rounded up to 8 (the tensor-core tiles). Lanes own rows of A (its leading dimension
// is odd, so a column read by 32 lanes hits 32 different banks per half-warp). The variable's
// coordinates are read where they are, so any number of them fits.
#include "kernels/assimilate/letkf.cuh"

#include <algorithm>
#include <cmath>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/assimilate/letkf_local.cuh"
#include "kernels/assimilate/warp_ops.cuh"
#include "math/inverse_sqrt.h"
#include "math/localization.h"

namespace gpucompute::assimilate::kernels {
namespace {

using localization::Taper;

constexpr int kWarp = 32;
// Shared memory bounds how many warps an SM holds (the kernel is latency-bound): a block is
// one warp, so that as many fit as the memory allows, and the staging area
// is small (its 16 rows also hold the tridiagonal solves' arrays, two per lane).
constexpr int kStageRows = 16;      // local rows staged per update of G
constexpr int kSolveLanes = kStageRows / 2;  // lanes running tridiagonal solves at once
constexpr int kBinThreads = 256;

// ---- binning -------------------------------------------------------------------------------

__global__ void CellKeysKernel(const LetkfGeometry* __restrict__ geometry, int64_t m,
                               const double* __restrict__ coords, unsigned* __restrict__ keys,
                               int* __restrict__ index) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= m) return;
  const LetkfGeometry g = *geometry;
  double q[kLetkfMaxAxes];
  BinningCoordinates(g, coords + j * g.dims, q);
  keys[j] = static_cast<unsigned>(ObservationCell(g, q));
  index[j] = static_cast<int>(j);
}

__global__ void CellStartKernel(const LetkfGeometry* __restrict__ geometry, int64_t m,
                                const unsigned* __restrict__ sorted_keys, int* __restrict__ cell_start) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c > geometry->total_cells) return;
  int64_t lo = 0, hi = m;  // first k with key >= c
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (static_cast<int64_t>(sorted_keys[mid]) < c) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  cell_start[c] = static_cast<int>(lo);
}

// The observations' coordinates in cell order: sorted_coords[k] = coords[sorted[k]] (d each).
__global__ void GatherSortedCoordsKernel(const LetkfGeometry* __restrict__ geometry, int64_t m,
                                         const double* __restrict__ coords, const int* __restrict__ sorted,
                                         double* __restrict__ sorted_coords) {
  const int d = geometry->dims;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < m * d;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = e / d;
    sorted_coords[e] = coords[static_cast<int64_t>(sorted[k]) * d + (e - k * d)];
  }
}

// A thread a variable (striding): its candidates, summed a warp at a time into *count.
__global__ void CountCandidatesKernel(const LetkfGeometry* __restrict__ geometry, int64_t n,
                                      const double* __restrict__ state_coords, const int* __restrict__ cell_start,
                                      unsigned long long* __restrict__ count) {
  const LetkfGeometry g = *geometry;
  unsigned long long mine = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    mine += static_cast<unsigned long long>(Neighbourhood(g, state_coords + i * g.dims).Candidates(g, cell_start));
  }
  for (int o = 16; o > 0; o /= 2) mine += __shfl_xor_sync(kFullWarp, mine, o);
  if (threadIdx.x % kWarp == 0 && mine > 0) atomicAdd(count, mine);
}

// The local observations of variables first ... first + chunk - 1, a warp a variable: the
// accepted candidates (ScanCandidates' order) as lists.index / lists.coeff from k * kLetkfListCap
// for the chunk's k-th variable (the first kLetkfListCap), their count (all of them) in
// lists.count[k].
constexpr int kListWarps = kBinThreads / kWarp;
__global__ void __launch_bounds__(kBinThreads) ListLocalKernel(
    const LetkfGeometry* __restrict__ geometry, int64_t first, int64_t chunk, const double* __restrict__ state_coords,
    const double* __restrict__ sorted_coords, const double* __restrict__ domain, const int* __restrict__ sorted,
    const int* __restrict__ cell_start, const ProblemParams* __restrict__ params,
    const unsigned long long* __restrict__ candidate_pairs, const LetkfLists lists) {
  __shared__ int runs[kListWarps][2 * kMaxRuns];
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp;
  const LetkfGeometry& geo = *geometry;
  const double search = localization::SearchRadius(static_cast<Taper>(geo.taper), geo.radius);
  const int64_t rows = *candidate_pairs > params->max_candidates ? 0 : chunk;  // refused: none
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * kListWarps + w; k < rows;
       k += static_cast<int64_t>(gridDim.x) * kListWarps) {
    int listed = 0;
    int* index = lists.index + k * kLetkfListCap;
    double* coeff = lists.coeff + k * kLetkfListCap;
    __syncwarp();  // the last variable's readers of the runs are done
    ScanCandidates<true>(geo, state_coords + (first + k) * geo.dims, search, cell_start, sorted, sorted_coords,
                         domain, runs[w], runs[w] + kMaxRuns, lane, [&](int j, double c, unsigned mask) {
                           const int at = listed + __popc(mask & ((1u << lane) - 1));
                           if (((mask >> lane) & 1) && at < kLetkfListCap) {
                             index[at] = j;
                             coeff[at] = c;
                           }
                           listed += __popc(mask);
                         });
    if (lane == 0) lists.count[k] = listed;
  }
}

size_t Align(size_t b) { return (b + 255) / 256 * 256; }

int KeyBits(int64_t cells) {
  int bits = 1;
  while ((int64_t{1} << bits) < cells) ++bits;
  return bits;
}

size_t SortTempBytes(int64_t m, int64_t cells) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const unsigned*>(nullptr),
                                  static_cast<unsigned*>(nullptr), static_cast<const int*>(nullptr),
                                  static_cast<int*>(nullptr), static_cast<int>(m), 0, KeyBits(cells));
  return bytes;
}

// ---- the analysis --------------------------------------------------------------------------

// A warp's shared memory, in doubles, for N members.
struct WarpLayout {
  int Np, lda, lds;
  size_t a, y, b, v, w, u, z, acc, diag, off, tau, row, coeff, dc, index, total;
  __host__ __device__ explicit WarpLayout(int N) {
    Np = (N + 7) / 8 * 8;
    lda = N % 2 == 0 ? N + 1 : N + 2;
    lds = Np + 4;
    size_t at = 0;
    auto take = [&at](size_t doubles) {
      const size_t here = at;
      at += (doubles + 1) / 2 * 2;  // 16-byte aligned
      return here;
    };
    a = take(static_cast<size_t>(N) * lda);
    y = take(static_cast<size_t>(kStageRows) * lds);
    b = take(Np);
    v = take(Np);
    w = take(Np);
    u = take(Np);
    z = take(Np);
    acc = take(Np);
    diag = take(Np);
    off = take(Np);
    tau = take(Np);
    row = take(Np);
    coeff = take(kStageRows);
    dc = take(kStageRows);
    index = take(kStageRows / 2 + 1);  // ints
    total = at;
  }
};

// One warp's local analysis: its shared arrays and the steps of the kernel.
struct LocalAnalysis {
  int N, lane;
  WarpLayout l;
  double* s;  // the warp's region

  __device__ double* A() const { return s + l.a; }
  __device__ double* Y() const { return s + l.y; }
  __device__ double* V(size_t off) const { return s + off; }
  __device__ int* Index() const { return reinterpret_cast<int*>(s + l.index); }

  // Adds the `count` staged rows (observation indices in Index(), taper coefficients in coeff)
  // to G and b: G += sum_k c_k y_k y_k^T on the tensor cores (c_k scales the A fragment),
  // b += sum_k c_k dw_k y_k.
  template <typename T>
  __device__ void AddStaged(int count, const double* coeff, const T* __restrict__ obs, int W) const {
    double* y = Y();
    double* dc = V(l.dc);
    const int* idx = Index();
    const int rows = (count + 3) / 4 * 4;
    // Four rows at a time, so that each lane has several independent loads in flight.
    for (int r0 = 0; r0 < rows; r0 += 4) {
      for (int q0 = 0; q0 < l.Np; q0 += kWarp) {
        const int q = q0 + lane;
        double v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int r = r0 + u;
          v[u] = (r < count && q < N) ? static_cast<double>(obs[static_cast<int64_t>(idx[r]) * W + q]) : 0.0;
        }
        if (q < l.Np) {
#pragma unroll
          for (int u = 0; u < 4; ++u) y[(r0 + u) * l.lds + q] = v[u];
        }
      }
    }
    for (int r = lane; r < rows; r += kWarp) {
      dc[r] = r < count ? coeff[r] * static_cast<double>(obs[static_cast<int64_t>(idx[r]) * W + N]) : 0.0;
    }
    __syncwarp();
    const int nt = l.Np / 8, tiles = nt * nt, g = lane >> 2, q4 = lane & 3;
    double* a = A();
    // Four tiles at a time: independent MMA chains.
    for (int t0 = 0; t0 < tiles; t0 += 4) {
      double d0[4], d1[4];
      int ai[4], bj[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int t = min(t0 + u, tiles - 1);
        const int bi = t / nt;
        ai[u] = bi * 8 + g;
        bj[u] = (t - bi * nt) * 8 + g;
        const int col = (t - bi * nt) * 8 + 2 * q4;  // G's rows and columns from N on are padding
        const double* c = a + ai[u] * l.lda + col;
        d0[u] = ai[u] < N && col < N ? c[0] : 0.0;
        d1[u] = ai[u] < N && col + 1 < N ? c[1] : 0.0;
      }
      for (int k = 0; k < rows; k += 4) {
        const double* yr = y + (k + q4) * l.lds;
        const double ck = k + q4 < count ? coeff[k + q4] : 0.0;
#pragma unroll
        for (int u = 0; u < 4; ++u) MmaF64(d0[u], d1[u], ck * yr[ai[u]], yr[bj[u]]);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (t0 + u < tiles) {
          const int t = t0 + u, bi = t / nt;
          const int col = (t - bi * nt) * 8 + 2 * q4;
          double* c = a + ai[u] * l.lda + col;
          if (ai[u] < N && col < N) c[0] = d0[u];
          if (ai[u] < N && col + 1 < N) c[1] = d1[u];
        }
      }
    }
    double* b = V(l.b);
    for (int q = lane; q < N; q += kWarp) {
      double sum = b[q];
      for (int r = 0; r < count; ++r) sum += y[r * l.lds + q] * dc[r];
      b[q] = sum;
    }
    __syncwarp();
  }

  // G = Q T Q^T (LAPACK's SYTD2, lower): T's diagonal and off-diagonal into diag / off, the
  // reflectors' tau into tau and their vectors below A's subdiagonal.
  __device__ void Tridiagonalize() const {
    double* a = A();
    double* hv = V(l.v);
    double* pw = V(l.w);
    double* off = V(l.off);
    double* tau = V(l.tau);
    const int lda = l.lda;
    for (int j = 0; j + 2 < N; ++j) {
      const int r0 = j + 1;
      double xs = 0;
      for (int r = r0 + 1 + lane; r < N; r += kWarp) xs += a[r * lda + j] * a[r * lda + j];
      const double sigma = WarpSum(xs);
      const double alpha = a[r0 * lda + j];
      double t = 0, beta = alpha, scal = 0;
      if (sigma > 0) {
        const double mu = sqrt(alpha * alpha + sigma);
        beta = alpha <= 0 ? mu : -mu;
        t = (beta - alpha) / beta;
        scal = 1 / (alpha - beta);
      }
      for (int r = r0 + 1 + lane; r < N; r += kWarp) hv[r] = a[r * lda + j] * scal;
      if (lane == 0) {
        hv[r0] = 1;
        off[j] = beta;
        tau[j] = t;
      }
      __syncwarp();
      if (t != 0) {
        // p = t A22 v, w = p - (t/2)(p . v) v, A22 -= v w^T + w v^T.
        for (int r = r0 + lane; r < N; r += kWarp) {
          const double* ar = a + r * lda;
          double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          int c = r0;
          for (; c + 3 < N; c += 4) {
            s0 += ar[c] * hv[c];
            s1 += ar[c + 1] * hv[c + 1];
            s2 += ar[c + 2] * hv[c + 2];
            s3 += ar[c + 3] * hv[c + 3];
          }
          for (; c < N; ++c) s0 += ar[c] * hv[c];
          pw[r] = t * ((s0 + s1) + (s2 + s3));
        }
        __syncwarp();
        double kp = 0;
        for (int r = r0 + lane; r < N; r += kWarp) kp += pw[r] * hv[r];
        const double k = 0.5 * t * WarpSum(kp);
        for (int r = r0 + lane; r < N; r += kWarp) pw[r] -= k * hv[r];
        __syncwarp();
        for (int r = r0 + lane; r < N; r += kWarp) {
          double* ar = a + r * lda;
          const double vr = hv[r], wr = pw[r];
#pragma unroll 4
          for (int c = r0; c < N; ++c) ar[c] -= vr * pw[c] + wr * hv[c];
        }
      }
      for (int r = r0 + 1 + lane; r < N; r += kWarp) a[r * lda + j] = hv[r];
      __syncwarp();
    }
    double* diag = V(l.diag);
    for (int q = lane; q < N; q += kWarp) diag[q] = a[q * lda + q];
    if (lane == 0 && N >= 2) {
      off[N - 2] = a[(N - 1) * lda + N - 2];
      tau[N - 2] = 0;
    }
    __syncwarp();
  }

  // x <- H x for reflector j (its vector: 1 at j + 1, then A's column j).
  __device__ void Reflect(int j, double* x) const {
    const double t = V(l.tau)[j];
    if (t == 0) return;
    const double* a = A();
    double s = 0;
    for (int r = j + 1 + lane; r < N; r += kWarp) s += (r == j + 1 ? 1.0 : a[r * l.lda + j]) * x[r];
    s = t * WarpSum(s);
    for (int r = j + 1 + lane; r < N; r += kWarp) x[r] -= s * (r == j + 1 ? 1.0 : a[r * l.lda + j]);
    __syncwarp();
  }

  // In T's basis: acc <- r((N-1)^-1 T) u (the square root's part, without d0 u) and z <- T^-1 z,
  // the tridiagonal solves of the rational terms (and of T itself) one per lane.
  __device__ void Solve(const double* table) const {
    const double* diag = V(l.diag);
    const double* off = V(l.off);
    const double* u = V(l.u);
    double* z = V(l.z);
    double* acc = V(l.acc);
    const double n1 = N - 1;
    double g = 0;  // Gershgorin's bound on T's largest eigenvalue
    for (int i = lane; i < N; i += kWarp) {
      g = fmax(g, GershgorinRow(diag, off, N, i));
    }
    const inverse_sqrt::Rung rung = inverse_sqrt::SelectRung(table, WarpMax(g) / n1);
    for (int i = lane; i < N; i += kWarp) acc[i] = 0;
    const int terms = rung.count + 1;  // the last one: T^-1 z
    double* y = Y();
    for (int first = 0; first < terms; first += kSolveLanes) {
      const int t = first + lane;
      if (lane < kSolveLanes && t < terms) {
        const bool inverse = t == rung.count;
        const double shift = inverse ? 0.0 : n1 * rung.poles[t];
        const double* rhs = inverse ? z : u;
        // L's subdiagonal, then D^-1 L^-1 rhs and the solution: two rows of the staging area
        SolveShiftedTridiagonal(diag, off, N, shift, rhs, y + (2 * lane) * l.lds, y + (2 * lane + 1) * l.lds, 1);
      }
      __syncwarp();
      const int live = min(kSolveLanes, terms - first);
      for (int i = lane; i < N; i += kWarp) {
        double sum = acc[i];
        for (int k = 0; k < live; ++k) {
          const int tk = first + k;
          const double xi = y[(2 * k + 1) * l.lds + i];
          if (tk == rung.count) {
            z[i] = xi;
          } else {
            sum += n1 * rung.weights[tk] * xi;
          }
        }
        acc[i] = sum;
      }
      __syncwarp();
    }
    for (int i = lane; i < N; i += kWarp) acc[i] += rung.d0 * u[i];
    __syncwarp();
  }
};

template <typename T>
__global__ void __launch_bounds__(kWarp) LetkfAnalysisKernel(
    const LetkfGeometry* __restrict__ geometry, int64_t n, int N, int W, const T* __restrict__ anomalies,
    const double* __restrict__ xbar, const T* __restrict__ obs, const double* __restrict__ state_coords,
    const double* __restrict__ sorted_coords, const double* __restrict__ domain, const int* __restrict__ sorted,
    const int* __restrict__ cell_start, const ProblemParams* __restrict__ params,
    const unsigned long long* __restrict__ candidates, const double* __restrict__ table, T* __restrict__ xa,
    double* __restrict__ partials) {
  extern __shared__ double smem[];
  const LetkfGeometry geo = *geometry;
  const int lane = threadIdx.x % kWarp;
  const WarpLayout layout(N);
  LocalAnalysis la{N, lane, layout, smem};
  const int64_t warp = blockIdx.x;
  const int64_t warps = gridDim.x;
  const ProblemParams pp = *params;
  const int d = geo.dims;
  const double search = localization::SearchRadius(static_cast<Taper>(geo.taper), geo.radius);
  double* row = la.V(layout.row);
  double* coeffs = la.V(layout.coeff);
  int* idx = la.Index();
  double variance_sum = 0;
  const int64_t rows = *candidates > pp.max_candidates ? 0 : n;  // refused: none
  for (int64_t i = warp; i < rows; i += warps) {
    const double* point = state_coords + i * d;
    for (int q = lane; q < N; q += kWarp) row[q] = static_cast<double>(anomalies[i * N + q]);
    double* a = la.A();
    for (int k = lane; k < N * layout.lda; k += kWarp) a[k] = 0;
    for (int q = lane; q < layout.Np; q += kWarp) la.V(layout.b)[q] = 0;
    __syncwarp();
    // 1. The local observations, into G and b.
    const Neighbourhood around(geo, point);
    int staged = 0, total = 0;
    for (int r = 0; r < around.runs; ++r) {
      int first = 0, length = 0;
      around.Run(geo, r, &first, &length);
      const int begin = cell_start[first], end = cell_start[first + length];
      for (int base = begin; base < end; base += kWarp) {
        const int k = base + lane;
        int j = 0;
        double coeff = 0;
        if (k < end) {
          j = sorted[k];
          coeff = LocalCoefficient(geo, point, sorted_coords, domain, k, search);
        }
        const bool accept = coeff > localization::kMinCoefficient;
        const unsigned mask = __ballot_sync(0xffffffffu, accept);
        const int count = __popc(mask);
        const int rank = __popc(mask & ((1u << lane) - 1));
        // A round's accepted observations (up to 32) fill the staging area (16 rows) in pieces.
        for (int done = 0; done < count;) {
          const int take = min(kStageRows - staged, count - done);
          if (accept && rank >= done && rank < done + take) {
            idx[staged + rank - done] = j;
            coeffs[staged + rank - done] = coeff;
          }
          staged += take;
          done += take;
          __syncwarp();
          if (staged == kStageRows) {
            la.AddStaged(staged, coeffs, obs, W);
            staged = 0;
          }
        }
        total += count;
      }
    }
    if (staged > 0) la.AddStaged(staged, coeffs, obs, W);
    double* u = la.V(layout.u);
    double* z = la.V(layout.z);
    double* acc = la.V(layout.acc);
    if (total > 0) {
      for (int q = lane; q < N; q += kWarp) a[q * layout.lda + q] += N - 1;
      __syncwarp();
      // 2. G = Q T Q^T; 3. W a and wbar in T's basis, then back.
      la.Tridiagonalize();
      for (int q = lane; q < N; q += kWarp) {
        u[q] = row[q];
        z[q] = la.V(layout.b)[q];
      }
      __syncwarp();
      for (int j = 0; j + 2 < N; ++j) {
        la.Reflect(j, u);
        la.Reflect(j, z);
      }
      la.Solve(table);
      double dot = 0;  // a . wbar = (Q^T a) . (T^-1 Q^T b)
      for (int q = lane; q < N; q += kWarp) dot += u[q] * z[q];
      dot = WarpSum(dot);
      for (int j = N - 3; j >= 0; --j) la.Reflect(j, acc);
      for (int q = lane; q < N; q += kWarp) acc[q] += dot;
    } else {
      for (int q = lane; q < N; q += kWarp) acc[q] = row[q];
    }
    __syncwarp();
    // 4. Relaxation, the row's variance, the mean back (FinishAnalysisRow); lane holds members
    // lane, lane + 32, ...
    constexpr int kPerLane = kMaxLetkfMembers / kWarp;
    double mine[kPerLane], fore[kPerLane];
    const int owned = lane < N ? (N - 1 - lane) / kWarp + 1 : 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      mine[k] = k < owned ? acc[lane + k * kWarp] : 0.0;
      fore[k] = k < owned ? row[lane + k * kWarp] : 0.0;
    }
    variance_sum += FinishAnalysisMembers(mine, fore, owned, N, pp, [](double x) { return WarpSum(x); });
    const double mean = xbar[i];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      if (k < owned) xa[i * N + lane + k * kWarp] = static_cast<T>(mine[k] + mean);
    }
    __syncwarp();
  }
  if (lane == 0) partials[warp] = variance_sum;
}

// Enough warps to fill the GPU several times over; each strides over the variables (the team
// kernel's, over a chunk's: kTeamBlocks at most).
int LaunchedWarps(int64_t n) { return static_cast<int>(std::min<int64_t>(n, int64_t{1} << 16)); }
constexpr int64_t kTeamBlocks = 8192;


}  // namespace

size_t LetkfBinScratchBytes(int64_t m, int64_t max_cells) {
  return 2 * Align(static_cast<size_t>(m) * sizeof(unsigned)) + Align(static_cast<size_t>(m) * sizeof(int)) +
         Align(SortTempBytes(m, max_cells));
}

cudaError_t LaunchLetkfBin(const LetkfGeometry* g, int64_t m, int64_t max_cells, const double* obs_coords,
                           void* scratch, size_t scratch_bytes, int* sorted, int* cell_start,
                           double* sorted_coords, cudaStream_t stream) {
  char* at = static_cast<char*>(scratch);
  auto* keys = reinterpret_cast<unsigned*>(at);
  at += Align(static_cast<size_t>(m) * sizeof(unsigned));
  auto* sorted_keys = reinterpret_cast<unsigned*>(at);
  at += Align(static_cast<size_t>(m) * sizeof(unsigned));
  auto* index = reinterpret_cast<int*>(at);
  at += Align(static_cast<size_t>(m) * sizeof(int));
  size_t temp = scratch_bytes - static_cast<size_t>(at - static_cast<char*>(scratch));
  CellKeysKernel<<<static_cast<unsigned>((m + kBinThreads - 1) / kBinThreads), kBinThreads, 0, stream>>>(
      g, m, obs_coords, keys, index);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  e = cub::DeviceRadixSort::SortPairs(at, temp, keys, sorted_keys, index, sorted, static_cast<int>(m), 0,
                                      KeyBits(max_cells), stream);
  if (e != cudaSuccess) return e;
  CellStartKernel<<<static_cast<unsigned>((max_cells + kBinThreads) / kBinThreads), kBinThreads, 0, stream>>>(
      g, m, sorted_keys, cell_start);
  e = cudaGetLastError();
  if (e != cudaSuccess || m == 0) return e;
  const int64_t blocks = std::min<int64_t>((m * kLetkfMaxAxes + kBinThreads - 1) / kBinThreads, 4096);
  GatherSortedCoordsKernel<<<static_cast<unsigned>(blocks), kBinThreads, 0, stream>>>(g, m, obs_coords, sorted,
                                                                                      sorted_coords);
  return cudaGetLastError();
}

cudaError_t LaunchLetkfCountCandidates(const LetkfGeometry* g, int64_t n, const double* state_coords,
                                       const int* cell_start, unsigned long long* count, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(count, 0, sizeof(*count), stream);
  if (e != cudaSuccess || n == 0) return e;
  const int64_t blocks = std::min<int64_t>((n + kBinThreads - 1) / kBinThreads, 4096);
  CountCandidatesKernel<<<static_cast<unsigned>(blocks), kBinThreads, 0, stream>>>(g, n, state_coords, cell_start,
                                                                                   count);
  return cudaGetLastError();
}

int LetkfAnalysisWarps(int64_t n) { return LaunchedWarps(n); }

namespace {
int64_t ListChunk(int64_t n) { return std::min(n, kLetkfListChunk); }
}  // namespace

size_t LetkfListBytes(int64_t n, int N) {
  if (N > kLetkfTeamMaxMembers) return 0;
  const auto c = static_cast<size_t>(ListChunk(n));
  return Align(c * sizeof(int)) + Align(c * kLetkfListCap * sizeof(int)) + c * kLetkfListCap * sizeof(double);
}

LetkfLists LetkfListsAt(void* at, int64_t n) {
  const auto c = static_cast<size_t>(ListChunk(n));
  char* p = static_cast<char*>(at);
  LetkfLists lists{};
  lists.count = reinterpret_cast<int*>(p);
  p += Align(c * sizeof(int));
  lists.index = reinterpret_cast<int*>(p);
  p += Align(c * kLetkfListCap * sizeof(int));
  lists.coeff = reinterpret_cast<double*>(p);
  return lists;
}

template <typename T>
cudaError_t LaunchLetkfAnalysis(const LetkfGeometry* g, int64_t n, int N, int W, const T* a,
                                const double* xbar, const T* obs, const double* state_coords,
                                const double* sorted_coords, const double* domain, const int* sorted,
                                const int* cell_start, const ProblemParams* params,
                                const unsigned long long* candidates, const double* table,
                                const double* chebyshev_table, const LetkfLists& lists, T* xa, double* partials,
                                int* warps, cudaStream_t stream) {
  if (N < 2 || N > kMaxLetkfMembers) return cudaErrorInvalidValue;
  const int blocks = LaunchedWarps(n);
  *warps = blocks;
  if (N <= kLetkfTeamMaxMembers) {
    // A chunk at a time: the lists, the listed variables' analyses, the others' (if any:
    // their blocks return at once otherwise). Each block adds to its partial.
    cudaError_t e = cudaMemsetAsync(partials, 0, static_cast<size_t>(blocks) * sizeof(double), stream);
    for (int64_t first = 0; first < n && e == cudaSuccess; first += kLetkfListChunk) {
      const int64_t chunk = std::min(kLetkfListChunk, n - first);
      const int64_t list_blocks = std::min<int64_t>((chunk + kListWarps - 1) / kListWarps, 4096);
      ListLocalKernel<<<static_cast<unsigned>(list_blocks), kBinThreads, 0, stream>>>(
          g, first, chunk, state_coords, sorted_coords, domain, sorted, cell_start, params, candidates, lists);
      e = cudaGetLastError();
      for (const bool listed : {true, false}) {
        if (e != cudaSuccess) break;
        e = LaunchLetkfTeam<T>(g, first, chunk, N, W, a, xbar, obs, state_coords, sorted_coords, domain, sorted,
                               cell_start, params, candidates, table, chebyshev_table, lists, listed, xa, partials,
                               static_cast<int>(std::min<int64_t>(chunk, kTeamBlocks)), stream);
      }
    }
    return e;
  }
  const size_t smem = WarpLayout(N).total * sizeof(double);
  cudaError_t e = cudaFuncSetAttribute(LetkfAnalysisKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  LetkfAnalysisKernel<T><<<blocks, kWarp, smem, stream>>>(g, n, N, W, a, xbar, obs, state_coords,
                                                               sorted_coords, domain, sorted, cell_start, params,
                                                               candidates, table, xa, partials);
  return cudaGetLastError();
}

#define GPUCOMPUTE_INSTANTIATE(T)                                                                        \
  template cudaError_t LaunchLetkfAnalysis<T>(                                                           \
      const LetkfGeometry*, int64_t, int, int, const T*, const double*, const T*, const double*, \
      const double*, const double*, const int*, const int*, const ProblemParams*,                        \
      const unsigned long long*, const double*, const double*, const LetkfLists&, T*, double*, int*,      \
      cudaStream_t);
GPUCOMPUTE_INSTANTIATE(float)
GPUCOMPUTE_INSTANTIATE(double)
#undef GPUCOMPUTE_INSTANTIATE

}  // namespace gpucompute::assimilate::kernels
