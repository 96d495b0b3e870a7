// The LETKF's team kernel (the analysis of letkf.cuh, for N <= 64 members): a block of one or two
// warps, a "team", per variable, thread r owning member r: row r of G in registers, the r-th
// components of a, b and their reflections, and of the analysis row.
//
// Why registers: the Householder tridiagonalisation dominates (about 2/3 N^3 multiply-adds a
// variable). With G in shared memory every multiply-add loads an element of G (the one-warp
// kernel in letkf.cu reads ~17,000 shared-memory wavefronts a variable at N = 50); with row r in
// thread r's registers a step reads only broadcast vectors (two 16-byte loads per four
// multiply-adds), and columns left of the trailing matrix are skipped eight at a time. The
// kernel is latency-bound all the same (four teams an SM, bounded by registers and shared
// memory): docs/design/assimilate.md "The LETKF".
//
// Shared memory (doubles), for N members and R = 32 x warps rows:
//   big      N x (N or N + 1, odd): G handed over from the tensor-core tiles; then the
//            reflectors, v_j in row j (zero at and above j, 1 at j + 1) of N rounded up to 8
//   stage    16 x (R + 4) staged observation rows; then two arrays a solve lane for the
//            tridiagonal solves (16 lanes)
//   list     up to 2R accepted observations (index, taper coefficient) awaiting staging
//   vectors  the step's column and p, T's diagonal, off-diagonal, tau, Q^T a, Q^T b (R each),
//            staged coefficients, the team's reduction slots and the neighbouring cells' ranges
// Steps for variable i:
//   1. The candidates of the neighbouring cells, R at a time (one each thread): those with a
//      taper coefficient above 1e-3 are listed; 16 listed rows at a time are staged (thread r
//      loads column r of each, the next 16 while the tensor cores work) and added to b (thread
//      r) and to G's 8 x 8 tiles on and below the diagonal on the tensor cores (float64
//      m8n8k4; the tiles dealt round-robin to the warps, their accumulators in registers).
//   2. The tiles handed over through shared memory: thread r's row of G in registers.
//   3. SYTD2 (lower), two team reductions (and so two barriers) a step: the column's norm, then
//      p . v with the reflections of Q^T a and Q^T b riding along; v and w are formed from the
//      shared column and p where they are used.
//   4. The solves in T's basis, as the one-warp kernel (letkf.cu): Zolotarev's terms, one a
//      thread of the first sixteen.
//   5. W a back through the stored reflectors, two a reduction; relaxation, variance, the row
//      written.
#include <cmath>

#include "kernels/assimilate/letkf_local.cuh"
#include "kernels/assimilate/warp_ops.cuh"
#include "math/inverse_sqrt.h"

namespace gpucompute::assimilate::kernels {
namespace {

constexpr int kStage = 16;       // observation rows staged per update of G (a multiple of 4)
constexpr int kSolveLanes = 16;  // tridiagonal solves at once
constexpr int kMaxCells = 27;    // 3^kLetkfMaxAxes neighbouring cells

// G's rows are handled in chunks of eight columns (at most 64 columns: eight chunks). A step
// jumps to its first chunk with a switch and falls through the rest, so that the register
// indices stay compile-time constants without a test per chunk.
#define GPUCOMPUTE_EIGHT_CHUNKS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

template <int kWarps>
struct TeamLayout {
  static constexpr int kRows = 32 * kWarps;  // G's rows, one a thread (N <= kRows)
  static constexpr int kLds = kRows + 4;     // staged rows' stride: the tiles' loads conflict-free
  static constexpr int kListCap = 2 * kRows;
  int ldg, ldv;  // strides: G handed over (odd: its rows and columns conflict-free), reflectors
  size_t big, stage, list_coeff, list_index, column, p, diag, off, tau, u, z, coeff, dc, slots, cells, total;

  __host__ __device__ explicit TeamLayout(int N) {
    size_t at = 0;
    auto take = [&at](size_t doubles) {
      const size_t here = at;
      at += (doubles + 1) / 2 * 2;  // 16-byte aligned
      return here;
    };
    ldg = N % 2 == 1 ? N : N + 1;
    ldv = (N + 7) / 8 * 8;  // whole chunks of eight columns
    const size_t handover = static_cast<size_t>(N) * ldg, reflectors = static_cast<size_t>(N - 2) * ldv;
    const size_t solves = 2 * static_cast<size_t>(N) * kSolveLanes;
    big = take(handover > reflectors ? handover : reflectors);
    stage = take(solves > kStage * kLds ? solves : kStage * kLds);
    list_coeff = take(kListCap);
    list_index = take(kListCap / 2);  // ints
    column = take(kRows);
    p = take(kRows);
    diag = take(kRows);
    off = take(kRows);
    tau = take(kRows);
    u = take(kRows);
    z = take(kRows);
    coeff = take(kStage);
    dc = take(kStage);
    slots = take(2 * 4 * kWarps);
    cells = take(kMaxCells);  // ints: each cell's first sorted position and count
    total = at;
  }
};

// Reductions over the team, each one also a barrier. Partial sums go through one of two slot
// sets in turn: a set is written again only after the next reduction's barrier, which every
// thread passes after reading it.
template <int kWarps>
struct Team {
  int warp, lane;
  double* slots;
  int parity = 0;

  __device__ void Sync() const {
    if constexpr (kWarps == 1) {
      __syncwarp();
    } else {
      __syncthreads();
    }
  }

  // Sums each v[k] over the team (the same order in every thread). K values cost K - 1 + 5
  // shuffles, not 5 K: the first levels halve the values a lane carries (lane l ends with the
  // warp's sum of v[l % K]); the warps' sums then meet in shared memory.
  template <int K>
  __device__ void Sum(double (&v)[K]) {
    static_assert(K >= 1 && K <= 4, "up to four sums at once");
    constexpr int kPow = K == 1 ? 1 : (K == 2 ? 2 : 4);
    double x[kPow];
#pragma unroll
    for (int k = 0; k < kPow; ++k) x[k] = k < K ? v[k] : 0.0;
    double mine = x[0];
    if constexpr (kPow == 4) {
      const bool odd = lane & 1;
      double keep0 = odd ? x[1] : x[0], keep1 = odd ? x[3] : x[2];
      keep0 += __shfl_xor_sync(kFullWarp, odd ? x[0] : x[1], 1);
      keep1 += __shfl_xor_sync(kFullWarp, odd ? x[2] : x[3], 1);
      const bool two = lane & 2;
      mine = (two ? keep1 : keep0) + __shfl_xor_sync(kFullWarp, two ? keep0 : keep1, 2);
    } else if constexpr (kPow == 2) {
      const bool odd = lane & 1;
      mine = (odd ? x[1] : x[0]) + __shfl_xor_sync(kFullWarp, odd ? x[0] : x[1], 1);
    }
#pragma unroll
    for (int o = kPow; o < 32; o *= 2) mine += __shfl_xor_sync(kFullWarp, mine, o);
    double* s = slots + parity * 4 * kWarps;
    parity ^= 1;
    if (lane < K) s[warp * 4 + lane] = mine;
    Sync();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      double t = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) t += s[w * 4 + k];
      v[k] = t;
    }
  }

  __device__ double Sum(double v) {
    double a[1] = {v};
    Sum(a);
    return a[0];
  }

  __device__ double Max(double v) {
    v = WarpMax(v);
    if constexpr (kWarps == 1) {
      __syncwarp();
      return v;
    } else {
      double* s = slots + parity * 4 * kWarps;
      parity ^= 1;
      if (lane == 0) s[warp * 4] = v;
      __syncthreads();
      double m = s[0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) m = fmax(m, s[w * 4]);
      return m;
    }
  }

  // The number of set lanes in warps before this one (`total`: in the team) of a ballot.
  __device__ int Exclusive(unsigned mask, int& total) {
    if constexpr (kWarps == 1) {
      total = __popc(mask);
      __syncwarp();
      return 0;
    } else {
      double* s = slots + parity * 4 * kWarps;
      parity ^= 1;
      if (lane == 0) s[warp * 4] = __popc(mask);
      __syncthreads();
      int before = 0;
      total = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const int c = static_cast<int>(s[w * 4]);
        if (w < warp) before += c;
        total += c;
      }
      return before;
    }
  }
};

// The staged rows' products on warp kW's tiles: tile t of those on and below the diagonal
// (numbered row by row) belongs to warp t % kWarps, its accumulators at t / kWarps.
template <int kWarps, int kCols, int kW, int kPer>
__device__ __forceinline__ void AddTiles(double (&d0)[kPer], double (&d1)[kPer], const double* stage,
                                         const double* coeff, int rows, int N, int lane) {
  constexpr int kT = kCols / 8, kLds = TeamLayout<kWarps>::kLds;
  const int g = lane >> 2, q4 = lane & 3;
  for (int k = 0; k < rows; k += 4) {
    const double* yr = stage + (k + q4) * kLds;
    const double ck = coeff[k + q4];
    double yv[kT], ya[kT];
#pragma unroll
    for (int I = 0; I < kT; ++I) {
      yv[I] = 8 * I < N ? yr[8 * I + g] : 0.0;
      ya[I] = ck * yv[I];
    }
    int t = 0;
#pragma unroll
    for (int I = 0; I < kT; ++I) {
#pragma unroll
      for (int J = 0; J <= I; ++J, ++t) {
        if (t % kWarps == kW && 8 * I < N) MmaF64(d0[t / kWarps], d1[t / kWarps], ya[I], yv[J]);
      }
    }
  }
}

// Warp kW's tiles into the handover area (rows below N only).
template <int kWarps, int kCols, int kW, int kPer>
__device__ __forceinline__ void StoreTiles(const double (&d0)[kPer], const double (&d1)[kPer], double* big, int ldg,
                                           int N, int lane) {
  constexpr int kT = kCols / 8;
  const int g = lane >> 2, q4 = lane & 3;
  int t = 0;
#pragma unroll
  for (int I = 0; I < kT; ++I) {
#pragma unroll
    for (int J = 0; J <= I; ++J, ++t) {
      if (t % kWarps == kW && 8 * I + g < N) {
        const int c = 8 * J + 2 * q4;
        double* at = big + (8 * I + g) * ldg + c;
        if (c < N) at[0] = d0[t / kWarps];
        if (c + 1 < N) at[1] = d1[t / kWarps];
      }
    }
  }
}

template <int kWarps, int kCols, typename T>
__global__ void __launch_bounds__(32 * kWarps) LetkfTeamKernel(
    const LetkfGeometry* __restrict__ geometry, int64_t n, int N, int W, const T* __restrict__ anomalies,
    const double* __restrict__ xbar, const T* __restrict__ obs, const double* __restrict__ state_coords,
    const double* __restrict__ obs_coords, const double* __restrict__ domain, const int* __restrict__ sorted,
    const int* __restrict__ cell_start, const ProblemParams* __restrict__ params,
    const unsigned long long* __restrict__ candidate_pairs, const double* __restrict__ table, T* __restrict__ xa,
    double* __restrict__ partials) {
  using Layout = TeamLayout<kWarps>;
  constexpr int kRows = Layout::kRows, kT = kCols / 8, kTiles = kT * (kT + 1) / 2;
  static_assert(kCols % 8 == 0 && kCols <= kRows, "G's rows: whole chunks of eight columns, one row a thread");
  constexpr int kPer = (kTiles + kWarps - 1) / kWarps;
  constexpr int kLds = Layout::kLds;
  extern __shared__ __align__(16) double smem[];  // 16 bytes: the double2 loads
  const Layout l(N);
  const int r = threadIdx.x, warp = r / 32, lane = r % 32;
  Team<kWarps> team{warp, lane, smem + l.slots};
  double* big = smem + l.big;
  double* stage = smem + l.stage;
  double* list_coeff = smem + l.list_coeff;
  int* list_index = reinterpret_cast<int*>(smem + l.list_index);
  double* column = smem + l.column;
  double* pvec = smem + l.p;
  double* diag = smem + l.diag;
  double* off = smem + l.off;
  double* tau = smem + l.tau;
  double* uvec = smem + l.u;
  double* zvec = smem + l.z;
  double* coeff = smem + l.coeff;
  double* dc = smem + l.dc;
  int* cell_begin = reinterpret_cast<int*>(smem + l.cells);
  int* cell_count = cell_begin + kMaxCells;
  const LetkfGeometry& geo = *geometry;
  const ProblemParams& pp = *params;
  const double search = localization::SearchRadius(static_cast<localization::Taper>(geo.taper), geo.radius);
  const double n1 = N - 1;
  double variance_sum = 0;
  const int64_t rows = *candidate_pairs > pp.max_candidates ? 0 : n;  // refused: none
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const double* point = state_coords + i * geo.dims;
    const double a_r = r < N ? static_cast<double>(anomalies[i * N + r]) : 0.0;
    // 1. The local observations, into G's tiles and b.
    const Neighbourhood around(geo, point);
    team.Sync();  // the last variable's readers of shared memory are done
    if (r < around.count) {
      const int cell = around.Cell(geo, r);
      cell_begin[r] = cell_start[cell];
      cell_count[r] = cell_start[cell + 1] - cell_begin[r];
    }
    team.Sync();
    double d0[kPer], d1[kPer];
#pragma unroll
    for (int s = 0; s < kPer; ++s) d0[s] = d1[s] = 0;
    double b_r = 0;
    // Adds the `count` listed observations, 16 at a time; the next 16 rows are loaded (thread r:
    // their column r) while the tensor cores work on the staged ones.
    auto add_listed = [&](int count) {
      team.Sync();
      double next_rows[kStage];
      auto fetch = [&](int b0) {
        const int staged = min(kStage, count - b0);
#pragma unroll
        for (int k = 0; k < kStage; ++k) {
          next_rows[k] = k < staged && r < N
                             ? static_cast<double>(obs[static_cast<int64_t>(list_index[b0 + k]) * W + r])
                             : 0.0;
        }
      };
      fetch(0);
      for (int b0 = 0; b0 < count; b0 += kStage) {
        const int staged = min(kStage, count - b0), rows = (staged + 3) / 4 * 4;
#pragma unroll
        for (int k = 0; k < kStage; ++k) {
          if (k < rows) stage[k * kLds + r] = next_rows[k];
        }
        if (r < rows) {
          const double c = r < staged ? list_coeff[b0 + r] : 0.0;
          coeff[r] = c;
          dc[r] = r < staged ? c * static_cast<double>(obs[static_cast<int64_t>(list_index[b0 + r]) * W + N]) : 0.0;
        }
        team.Sync();
        if (b0 + kStage < count) fetch(b0 + kStage);
        for (int k = 0; k < staged; ++k) b_r += dc[k] * stage[k * kLds + r];
        if (warp == 0) {
          AddTiles<kWarps, kCols, 0>(d0, d1, stage, coeff, rows, N, lane);
        } else if constexpr (kWarps > 1) {
          AddTiles<kWarps, kCols, 1>(d0, d1, stage, coeff, rows, N, lane);
        }
        team.Sync();
      }
    };
    int candidates = 0;
    for (int o = 0; o < around.count; ++o) candidates += cell_count[o];
    int o = 0, pos = r;  // this thread's candidate: cell o, position pos in it
    auto advance = [&]() {
      while (o < around.count && pos >= cell_count[o]) pos -= cell_count[o++];
    };
    advance();
    int listed = 0, total = 0;
    for (int base = 0; base < candidates; base += kRows) {
      int j = 0;
      double c = 0;
      if (o < around.count) {
        j = sorted[cell_begin[o] + pos];
        c = LocalCoefficient(geo, point, obs_coords, domain, j, search);
      }
      const bool accept = c > localization::kMinCoefficient;
      const unsigned mask = __ballot_sync(kFullWarp, accept);
      int round = 0;
      const int before = team.Exclusive(mask, round);
      if (listed + round > Layout::kListCap) {
        add_listed(listed);
        listed = 0;
      }
      if (accept) {
        const int at = listed + before + __popc(mask & ((1u << lane) - 1));
        list_index[at] = j;
        list_coeff[at] = c;
      }
      listed += round;
      total += round;
      pos += kRows;
      advance();
    }
    if (listed > 0) add_listed(listed);
    double acc_r = a_r;
    if (total > 0) {
      // 2. G's tiles handed over: row r into registers.
      if (warp == 0) {
        StoreTiles<kWarps, kCols, 0>(d0, d1, big, l.ldg, N, lane);
      } else if constexpr (kWarps > 1) {
        StoreTiles<kWarps, kCols, 1>(d0, d1, big, l.ldg, N, lane);
      }
      team.Sync();
      double g[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        double x = 0;
        if (r < N && c < N) x = c / 8 <= r / 8 ? big[r * l.ldg + c] : big[c * l.ldg + r];
        g[c] = c == r && r < N ? x + n1 : x;
      }
      team.Sync();
      // 3. G = Q T Q^T, with u = Q^T a and z = Q^T b on the way. Two barriers a step: the
      // column's entries below the subdiagonal and p go to shared memory before the reductions
      // that need them anyway, so v and w are formed from them where they are used.
      double col = g[0], next = g[1];  // G[r][j], G[r][j + 1] at step j
      double u_r = a_r, z_r = b_r;
      for (int j = 0; j + 2 < N; ++j) {
        if (r == j) diag[j] = col;
        const bool below = r > j + 1 && r < N;
        column[r] = below ? col : 0.0;
        double red[2] = {below ? col * col : 0.0, r == j + 1 ? col : 0.0};
        team.Sum(red);
        const double sigma = red[0], alpha = red[1];
        double t = 0, beta = alpha, scal = 0;
        if (sigma > 0) {  // mu = |(alpha, x)|, beta = -sign(alpha) mu, t = (beta - alpha) / beta
          const double s2 = alpha * alpha + sigma, rs = rsqrt(s2), mu = s2 * rs;
          beta = alpha <= 0 ? mu : -mu;
          t = 1 + fabs(alpha) * rs;
          scal = alpha <= 0 ? -rs / t : rs / t;  // 1 / (alpha - beta)
        }
        const double v_r = r == j + 1 ? 1.0 : (below ? col * scal : 0.0);
        double* hv = big + j * l.ldv;  // v_j, for the back-transformation and syr2
        if (r < l.ldv) hv[r] = v_r;
        if (r == 0) {
          off[j] = beta;
          tau[j] = t;
        }
        const bool rows_left = 32 * warp + 31 > j && 32 * warp < N;  // this warp holds trailing rows
        double wk_r = 0;  // w_r - k v_r
        if (t != 0) {
          // p = t G22 v, with v = e_{j+1} + scal x: G's column j + 1 plus scal times G x.
          double p = 0;
          if (rows_left) {
            double s[4] = {0, 0, 0, 0};
            switch ((j + 2) / 8) {  // from the chunk holding column j + 2 on
#define GPUCOMPUTE_SYMV_CHUNK(C)                                                   \
  case C:                                                                          \
    if constexpr (8 * (C) < kCols) {                                               \
      if (8 * (C) >= N) break;                                                     \
      const double2* x2 = reinterpret_cast<const double2*>(column + 8 * (C));      \
      _Pragma("unroll") for (int e = 0; e < 4; ++e) {                              \
        const double2 xx = x2[e];                                                  \
        s[e] = fma(g[8 * (C) + 2 * e], xx.x, s[e]);                                \
        s[e] = fma(g[8 * (C) + 2 * e + 1], xx.y, s[e]);                            \
      }                                                                            \
    }                                                                              \
    [[fallthrough]];
              GPUCOMPUTE_EIGHT_CHUNKS(GPUCOMPUTE_SYMV_CHUNK)
#undef GPUCOMPUTE_SYMV_CHUNK
              default:
                break;
            }
            p = r > j ? t * (next + scal * ((s[0] + s[1]) + (s[2] + s[3]))) : 0.0;
          }
          pvec[r] = p;
          double dots[3] = {p * v_r, v_r * u_r, v_r * z_r};
          team.Sum(dots);
          // w = p - k v; G22 -= v w^T + w v^T = v p^T + (w - k v) v^T.
          const double k = 0.5 * t * dots[0];
          wk_r = p - 2 * k * v_r;
          u_r -= t * dots[1] * v_r;
          z_r -= t * dots[2] * v_r;
          if (rows_left) {
            switch ((j + 1) / 8) {  // from the chunk holding column j + 1 on
#define GPUCOMPUTE_SYR2_CHUNK(C)                                                               \
  case C:                                                                                      \
    if constexpr (8 * (C) < kCols) {                                                           \
      if (8 * (C) >= N) break;                                                                 \
      const double2* v2 = reinterpret_cast<const double2*>(hv + 8 * (C));                      \
      const double2* p2 = reinterpret_cast<const double2*>(pvec + 8 * (C));                    \
      _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                          \
        const double2 vv = v2[e], pp = p2[e];                                                  \
        g[8 * (C) + 2 * e] = fma(-v_r, pp.x, fma(-wk_r, vv.x, g[8 * (C) + 2 * e]));            \
        g[8 * (C) + 2 * e + 1] = fma(-v_r, pp.y, fma(-wk_r, vv.y, g[8 * (C) + 2 * e + 1]));    \
      }                                                                                        \
    }                                                                                          \
    [[fallthrough]];
              GPUCOMPUTE_EIGHT_CHUNKS(GPUCOMPUTE_SYR2_CHUNK)
#undef GPUCOMPUTE_SYR2_CHUNK
              default:
                break;
            }
          }
        }
        // The next step's column: G[r][j + 1] as syr2 left it (v_{j+1} = 1), and G[r][j + 2].
        col = t != 0 ? fma(-v_r, pvec[j + 1], next - wk_r) : next;
        switch (j + 2) {  // a jump, not a chain of selects
#define GPUCOMPUTE_PICK(c)                       \
  case c:                                        \
    if constexpr ((c) < kCols) next = g[c];      \
    break;
#define GPUCOMPUTE_PICK_CHUNK(C)                                                               \
  GPUCOMPUTE_PICK(8 * (C)) GPUCOMPUTE_PICK(8 * (C) + 1) GPUCOMPUTE_PICK(8 * (C) + 2)            \
  GPUCOMPUTE_PICK(8 * (C) + 3) GPUCOMPUTE_PICK(8 * (C) + 4) GPUCOMPUTE_PICK(8 * (C) + 5)        \
  GPUCOMPUTE_PICK(8 * (C) + 6) GPUCOMPUTE_PICK(8 * (C) + 7)
          GPUCOMPUTE_EIGHT_CHUNKS(GPUCOMPUTE_PICK_CHUNK)
#undef GPUCOMPUTE_PICK_CHUNK
#undef GPUCOMPUTE_PICK
          default:
            break;
        }
      }
      if (r == N - 2) diag[N - 2] = col;
      if (r == N - 1) {
        off[N - 2] = col;
        diag[N - 1] = next;
      }
      uvec[r] = u_r;
      zvec[r] = z_r;
      team.Sync();
      // 4. In T's basis: acc = r((N-1)^-1 T) u, z = T^-1 z, a solve a lane.
      double bound = 0;  // Gershgorin's bound on T's largest eigenvalue
      if (r < N) bound = GershgorinRow(diag, off, N, r);
      const inverse_sqrt::Rung rung = inverse_sqrt::SelectRung(table, team.Max(bound) / n1);
      const int terms = rung.count + 1;  // the last one: T^-1 z
      double* lv = stage;                // L's subdiagonal, [i][lane]
      double* xv = stage + N * kSolveLanes;  // D^-1 L^-1 rhs, then the solution
      acc_r = 0;
      for (int first = 0; first < terms; first += kSolveLanes) {
        const int term = first + r;
        if (r < kSolveLanes && term < terms) {
          const bool inverse = term == rung.count;
          const double shift = inverse ? 0.0 : n1 * rung.poles[term];
          const double* rhs = inverse ? zvec : uvec;
          SolveShiftedTridiagonal(diag, off, N, shift, rhs, lv + r, xv + r, kSolveLanes);
        }
        team.Sync();
        const int live = min(kSolveLanes, terms - first);
        if (r < N) {
          for (int k = 0; k < live; ++k) {
            const double x = xv[r * kSolveLanes + k];
            if (first + k == rung.count) {
              z_r = x;
            } else {
              acc_r += n1 * rung.weights[first + k] * x;
            }
          }
        }
        team.Sync();
      }
      acc_r += rung.d0 * u_r;
      // 5. Back from T's basis: W a = Q acc = H_0 H_1 ... H_{N-3} acc, two reflectors a
      // reduction: H_j, then H_{j-1}, whose dot follows from the first with v_{j-1} . v_j
      // (the compact WY form of the pair). a . wbar = u . z rides along with the first.
      double dot = 0;
      for (int j = N - 3; j >= 0; j -= 2) {
        const double t1 = tau[j], t0 = j > 0 ? tau[j - 1] : 0.0;
        const double v1 = r < N ? big[j * l.ldv + r] : 0.0;
        const double v0 = r < N && j > 0 ? big[(j - 1) * l.ldv + r] : 0.0;
        double dots[4] = {v1 * acc_r, v0 * acc_r, v0 * v1, j == N - 3 ? u_r * z_r : 0.0};
        team.Sum(dots);
        if (j == N - 3) dot = dots[3];
        const double a1 = t1 * dots[0];
        acc_r -= a1 * v1;
        acc_r -= t0 * (dots[1] - a1 * dots[2]) * v0;
      }
      if (N == 2) dot = team.Sum(u_r * z_r);  // no reflector
      if (r < N) acc_r += dot;
    }
    // Relaxation, the row's variance, the mean back (FinishAnalysisRow).
    double acc[1] = {acc_r};
    const double fore[1] = {a_r};
    variance_sum += FinishAnalysisMembers(acc, fore, r < N ? 1 : 0, N, pp,
                                          [&](double x) { return team.Sum(x); });
    acc_r = acc[0];
    if (r < N) xa[i * N + r] = static_cast<T>(acc_r + xbar[i]);
  }
  if (r == 0) partials[blockIdx.x] = variance_sum;
}

template <int kWarps, int kCols, typename T>
cudaError_t LaunchTeam(const LetkfGeometry* g, int64_t n, int N, int W, const T* a, const double* xbar,
                       const T* obs, const double* state_coords, const double* obs_coords, const double* domain,
                       const int* sorted, const int* cell_start, const ProblemParams* params,
                       const unsigned long long* candidates, const double* table, T* xa, double* partials,
                       int blocks, cudaStream_t stream) {
  const size_t smem = TeamLayout<kWarps>(N).total * sizeof(double);
  cudaError_t e = cudaFuncSetAttribute(LetkfTeamKernel<kWarps, kCols, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  LetkfTeamKernel<kWarps, kCols, T><<<blocks, 32 * kWarps, smem, stream>>>(
      g, n, N, W, a, xbar, obs, state_coords, obs_coords, domain, sorted, cell_start, params, candidates, table, xa,
      partials);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchLetkfTeam(const LetkfGeometry* g, int64_t n, int N, int W, const T* a, const double* xbar,
                            const T* obs, const double* state_coords, const double* obs_coords,
                            const double* domain, const int* sorted, const int* cell_start,
                            const ProblemParams* params, const unsigned long long* candidates,
                            const double* table, T* xa, double* partials, int blocks, cudaStream_t stream) {
  if (N < 2 || N > kLetkfTeamMaxMembers) return cudaErrorInvalidValue;
  if (N <= 32) {
    return LaunchTeam<1, 32, T>(g, n, N, W, a, xbar, obs, state_coords, obs_coords, domain, sorted, cell_start,
                                params, candidates, table, xa, partials, blocks, stream);
  }
  if (N <= 56) {  // G's rows in 56 registers, not 64: room for the steps' loads in flight
    return LaunchTeam<2, 56, T>(g, n, N, W, a, xbar, obs, state_coords, obs_coords, domain, sorted, cell_start,
                                params, candidates, table, xa, partials, blocks, stream);
  }
  return LaunchTeam<2, 64, T>(g, n, N, W, a, xbar, obs, state_coords, obs_coords, domain, sorted, cell_start, params,
                              candidates, table, xa, partials, blocks, stream);
}

#define GPUCOMPUTE_INSTANTIATE(T)                                                                              \
  template cudaError_t LaunchLetkfTeam<T>(const LetkfGeometry*, int64_t, int, int, const T*, const double*,   \
                                          const T*, const double*, const double*, const double*, const int*,  \
                                          const int*, const ProblemParams*, const unsigned long long*,        \
                                          const double*, T*, double*, int, cudaStream_t);
GPUCOMPUTE_INSTANTIATE(float)
GPUCOMPUTE_INSTANTIATE(double)
#undef GPUCOMPUTE_INSTANTIATE

#undef GPUCOMPUTE_EIGHT_CHUNKS

}  // namespace gpucompute::assimilate::kernels
