// The LETKF's team kernel (the analysis of letkf.cuh, for N <= 64 members): one warp, a "team",
// per variable. Lane l owns member l and, for N > 32, member l + 32: row l of G in registers,
// row l + 32 in shared memory, and those members' components of a, b, their reflections and
// the analysis row.
//
// Why this shape: the analysis is latency-bound (a chain of dependent steps a variable) and
// wants many variables in flight an SM. The neighbour search runs before it, in a kernel of its
// own at full occupancy, so that its registers and its waits on the candidates' loads stay out
// of this one (docs/design/assimilate.md "The LETKF" has the timings). Row l in registers costs
// no shared-memory load a multiply-add (a step reads only broadcast vectors, two 16-byte loads
// per four multiply-adds, each serving both of a lane's rows); row l + 32 in shared memory
// (its loads 16-byte and conflict-free) keeps a thread under 255 registers and a team near 27 KB, so that eight teams
// share an SM at N = 50; one warp needs no barriers, only shuffles and __syncwarp. Most local
// problems are well conditioned (G = (N-1) I + a modest positive part): for them a Chebyshev
// series in G (N^2 multiply-adds a term, no reductions) replaces the Householder
// tridiagonalisation (about 2/3 N^3 multiply-adds in 3N dependent reductions). Row l + 32 keeps
// its reflector components in the entries each step retires (LAPACK's storage); row l's go to a
// packed array (a register written at a run-time index would cost a jump and a reshuffle of the
// row's registers a step). docs/design/assimilate.md "The LETKF".
//
// Shared memory (in doubles; TeamLayout), for N members and R = 32 or 64 members a team:
//   stage    16 staged observation rows (stride R + 4 doubles, or R + 8 floats for float32
//            problems); then G's first 32 rows handed over from the tensor-core tiles (stride
//            33); then two arrays a solve lane for the tridiagonal solves (eight lanes)
//   list     up to 2R accepted observations (index, taper coefficient) awaiting staging, the
//            staged coefficients, the reduction slots and the runs of neighbouring cells
//   second   rows 32 ... N - 1 of G (stride: the row's columns + 2, 2 mod 4 doubles)
//   reflectors  rows 0 ... 31 of v_j for j < 30 (rows j + 2 ... 31 each, packed)
//   vectors  the step's column, v and p, T's diagonal, off-diagonal, tau, Q^T a, Q^T b (R each;
//            column and v double as the Chebyshev path's buffers of T_k a)
//   While the rows are staged, float32 problems' next 16 rows lie over second, reflectors and
//   vectors, unused until the tiles are handed over.
// Steps for variable i:
//   1. Its local observations, from the list ListLocalKernel (letkf.cu) wrote (up to
//      kLetkfListCap; a variable with more scans the candidates of the neighbouring cells' runs
//      itself, 32 at a time, one a lane: ScanCandidates); 16 listed rows at a time are staged
//      (lane l loads columns l and l + 32 of each, the next 16 while the tensor cores work:
//      float64 rows through registers, float32 ones by cp.async into a second buffer) and added to G's
//      8 x 8 tiles on and below the diagonal on the tensor cores (float64 m8n8k4, or m16n8k4 for
//      two tiles of a column block in float32 problems' kernels; the accumulators in registers);
//      in the paired teams with N < kCols each row's innovation rides in column N, so that the
//      tiles' row N is b (the others sum b apart).
//   2. The tiles handed over through shared memory: row l into registers, row l + 32 into place.
//      Gershgorin's bound on G / (N - 1) picks the path: the Chebyshev series while their degree
//      is at most 4N (math/chebyshev.h: kappa up to 45 for N >= 32; float32 problems take the
//      series truncated for their results), else the tridiagonal form.
//   Chebyshev path (ChebyshevAnalysis): W a and a . G^-1 b from series in G applied to a, one
//      product G v a term through shared memory, one reduction at the end.
//   Tridiagonal path (HouseholderAnalysis):
//   3. Tridiagonalize: SYTD2 (lower), two warp reductions a step: the column's norm, then p . v
//      with the reflections of Q^T a and Q^T b riding along; v and w formed where they are used.
//   4. SolveInTridiagonalBasis: Zolotarev's terms, a solve a lane of the first eight.
//   5. BackFromTridiagonalBasis: W a back through the stored reflectors, two a reduction.
//   Then relaxation, variance, the row written.
#include <cmath>
#include <type_traits>

#include "kernels/assimilate/letkf_local.cuh"
#include "kernels/assimilate/warp_ops.cuh"
#include "math/chebyshev.h"
#include "math/inverse_sqrt.h"

namespace gpucompute::assimilate::kernels {
namespace {

constexpr int kStage = 16;       // observation rows staged per update of G (a multiple of 4)
constexpr int kSolveLanes = 8;   // tridiagonal solves at once
constexpr int kHandoverLd = 33;  // G's first 32 rows handed over: an odd stride, rows and columns conflict-free

// G's rows are handled in chunks of eight columns (at most 64 columns: eight chunks). A step
// jumps to its first chunk with a switch and falls through the rest, so that the register
// indices stay compile-time constants without a test per chunk.
#define GPUCOMPUTE_EIGHT_CHUNKS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define GPUCOMPUTE_EIGHT_COLUMNS(X, C) \
  X(8 * (C)) X(8 * (C) + 1) X(8 * (C) + 2) X(8 * (C) + 3) X(8 * (C) + 4) X(8 * (C) + 5) X(8 * (C) + 6) X(8 * (C) + 7)

// The first 32 rows' components of the reflectors v_j, j < 30 (rows j + 2 ... 31, packed): the
// offset of v_j's.
__host__ __device__ constexpr int ReflectorOffset(int j) { return 30 * j - j * (j - 1) / 2; }

// Float32 observation rows are staged as they are, by cp.async (no registers, no conversion
// until the tiles' loads); float64 ones through registers. Measured with the builds alternated:
// cp.async staging took the N = 50 float32 kernel from 62.2 to 57.7 ms, and the float64 one
// from 71.6 to 76.5 ms.
template <typename T>
inline constexpr bool kStagedAsync = std::is_same_v<T, float>;
template <typename T>
using StagedType = std::conditional_t<kStagedAsync<T>, T, double>;

// Float32 problems' tiles take two at a time (AddTiles), float64 ones one: measured with the
// builds alternated (H100, N = 50), the pairs took the float32 kernel from 57.5 to 55.0 ms and
// the float64 one from 72.2 to 81.1 ms (its register allocation at the ceiling; no spill in the
// paths it ran).
template <typename T>
inline constexpr bool kPairedTiles = std::is_same_v<T, float>;

// Offsets (in doubles) in a team's shared memory; T: the staged rows' element type.
template <bool kPair, typename T>
struct TeamLayout {
  static constexpr int kRows = kPair ? 64 : 32;  // members a team covers: lane l, and l + 32
  // Staged rows' stride in elements: the tiles' loads (rows q, columns g: q kLds + g for q < 4,
  // g < 8) conflict-free.
  static constexpr int kLds = kRows + (sizeof(T) == 8 ? 4 : 8);
  static constexpr int kListCap = 2 * kRows;
  int ldb;  // the second rows' stride
  size_t stage, stage_next, second, reflectors, list_coeff, list_index, column, v, p, diag, off, tau, u, z, coeff,
      dc, slots, runs, total;

  __host__ __device__ TeamLayout(int N, int cols) {
    size_t at = 0;
    auto take = [&at](size_t doubles) {
      const size_t here = at;
      at += (doubles + 1) / 2 * 2;  // 16-byte aligned
      return here;
    };
    ldb = cols + 2;  // 2 mod 4 (cols: whole chunks): eight lanes' 16-byte loads meet 32 banks
    auto larger = [](size_t x, size_t y) { return x > y ? x : y; };
    const size_t staged = (kStage * kLds * sizeof(T) + 15) / 16 * 2, handover = 32 * kHandoverLd;  // in doubles
    const size_t solves = 2 * static_cast<size_t>(N) * kSolveLanes;
    stage = take(larger(larger(staged, handover), solves));
    // Live while observations are staged: the list, the staged coefficients, the runs.
    list_coeff = take(kListCap);
    list_index = take(kListCap / 2);  // ints
    coeff = take(kStage);
    dc = take(kStage);
    slots = take(8);
    runs = take(kMaxRuns);  // ints: each run's first sorted position and count
    // Unused until the tiles are handed over: float32 problems' next staged rows lie over them.
    stage_next = at;
    second = take(kPair ? static_cast<size_t>(N - 32) * ldb : 0);
    reflectors = take(ReflectorOffset(30));
    column = take(kRows);
    v = take(kRows);
    p = take(kRows);
    diag = take(kRows);
    off = take(kRows);
    tau = take(kRows);
    u = take(kRows);
    z = take(kRows);
    total = kStagedAsync<T> ? larger(at, stage_next + staged) : at;
  }
};

// Sums over the team's warp, in every lane (the same order in each). The partial sums meet in
// one of two slot sets in turn: a set is written again only after the next reduction's
// __syncwarp, which every lane passes after reading it. The __syncwarp also publishes the
// shared-memory writes made before the reduction.
struct TeamSums {
  int lane;
  double* slots;
  int parity = 0;

  // K values cost K - 1 + 5 shuffles, not 5 K: the first levels halve the values a lane
  // carries (lane l ends with the warp's sum of v[l % K]).
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
    double* s = slots + parity * 4;
    parity ^= 1;
    if (lane < K) s[lane] = mine;
    __syncwarp();
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = s[k];
  }

  __device__ double Sum(double v) {
    double a[1] = {v};
    Sum(a);
    return a[0];
  }
};

// The staged rows' products on the tiles on and below the diagonal (numbered row by row), the
// tiles of rows and columns 0 ... last. kPaired: two tiles of a column block at a time (one
// m16n8k4 MMA for the tiles (I, J) and (I + 1, J), which share B), else one m8n8k4 a tile.
template <int kCols, int kLds, bool kPaired, int kTiles, typename T>
__device__ __forceinline__ void AddTiles(double (&d0)[kTiles], double (&d1)[kTiles], const T* stage,
                                         const double* coeff, int rows, int last, int lane) {
  constexpr int kT = kCols / 8;
  const int g = lane >> 2, q4 = lane & 3;
  for (int k = 0; k < rows; k += 4) {
    const T* yr = stage + (k + q4) * kLds;
    const double ck = coeff[k + q4];
    double yv[kT], ya[kT];
#pragma unroll
    for (int I = 0; I < kT; ++I) {
      yv[I] = 8 * I <= last ? static_cast<double>(yr[8 * I + g]) : 0.0;
      ya[I] = ck * yv[I];
    }
    if constexpr (kPaired) {
#pragma unroll
      for (int J = 0; J < kT; ++J) {  // column block J's tiles I = J ... kT - 1, the last alone when odd
#pragma unroll
        for (int I = J; I < kT; I += 2) {
          const int t = I * (I + 1) / 2 + J, u = (I + 1) * (I + 2) / 2 + J;
          if (I + 1 < kT && 8 * (I + 1) <= last) {
            MmaF64Pair(d0[t], d1[t], d0[u], d1[u], ya[I], ya[I + 1], yv[J]);
          } else if (8 * I <= last) {
            MmaF64(d0[t], d1[t], ya[I], yv[J]);
          }
        }
      }
    } else {
      int t = 0;
#pragma unroll
      for (int I = 0; I < kT; ++I) {
#pragma unroll
        for (int J = 0; J <= I; ++J, ++t) {
          if (8 * I <= last) MmaF64(d0[t], d1[t], ya[I], yv[J]);
        }
      }
    }
  }
}

// The tiles into place: G's first 32 rows into the handover area, its other rows into the second
// rows, row N (b, from the innovations staged as column N) into row_n when kRowN.
template <int kCols, bool kRowN, int kTiles>
__device__ __forceinline__ void StoreTiles(const double (&d0)[kTiles], const double (&d1)[kTiles], double* handover,
                                           double* second, double* row_n, int ldb, int N, int lane) {
  constexpr int kT = kCols / 8;
  const int g = lane >> 2, q4 = lane & 3;
  int t = 0;
#pragma unroll
  for (int I = 0; I < kT; ++I) {
#pragma unroll
    for (int J = 0; J <= I; ++J, ++t) {
      const int row = 8 * I + g, c = 8 * J + 2 * q4;
      if (row < N || (kRowN && row == N)) {
        double* at = kRowN && row == N ? row_n + c
                                       : (8 * I < 32 ? handover + row * kHandoverLd + c : second + (row - 32) * ldb + c);
        if (c < N) at[0] = d0[t];
        if (c + 1 < N) at[1] = d1[t];
      }
    }
  }
}

// A team's vectors in shared memory (TeamLayout), for the analysis paths.
struct TeamVectors {
  double *stage, *refl_a, *column, *vvec, *pvec, *diag, *off, *tau, *uvec, *zvec;
};

// G v for the lane's rows (row l in g, row rb in row_b when has_b), v in shared memory (zero
// from N on, as are g and row_b): a 16-byte broadcast load of v and one of row rb per two
// columns, over all kCols columns without a test (one block the compiler can pipeline: the
// loads of later columns in flight while earlier ones are multiplied), in four partial sums a
// row (short dependent chains).
template <int kCols, bool kPair, int kOwn>
__device__ __forceinline__ void Product(const double (&g)[kCols], const double* row_b, bool has_b, const double* v,
                                        double (&gv)[kOwn]) {
  constexpr int kSums = 4;
  double sa[kSums] = {}, sb[kSums] = {};
  const double2* v2 = reinterpret_cast<const double2*>(v);
  const double2* b2 = reinterpret_cast<const double2*>(row_b);
#pragma unroll
  for (int e = 0; e < kCols / 2; ++e) {
    const double2 vv = v2[e];
    sa[e % kSums] = fma(g[2 * e + 1], vv.y, fma(g[2 * e], vv.x, sa[e % kSums]));
    if (kPair && has_b) {
      const double2 bb = b2[e];
      sb[e % kSums] = fma(bb.y, vv.y, fma(bb.x, vv.x, sb[e % kSums]));
    }
  }
#pragma unroll
  for (int w = kSums / 2; w > 0; w /= 2) {
#pragma unroll
    for (int k = 0; k < w; ++k) {
      sa[k] += sa[k + w];
      sb[k] += sb[k + w];
    }
  }
  gv[0] = sa[0];
  if constexpr (kPair) gv[1] = sb[0];
}

// The Chebyshev series for G's analysis (math/chebyshev.h), or degree 0 for the Householder
// path. G' = G / (N - 1) has its spectrum in [1, kappa] with kappa Gershgorin's bound on G over
// N - 1 (G >= (N - 1) I); the series is taken while its degree is at most 4N: a term costs one
// product G v (N^2 multiply-adds, no reduction), the tridiagonalisation with its solves about
// N^3 multiply-adds in 3N dependent reductions. Float32 results take the series truncated for
// them (about 0.6 of the degree).
template <int kCols>
__device__ __forceinline__ chebyshev::Rung SeriesFor(const double (&g)[kCols], const double* row_b, bool has_b,
                                                     int N, const double* table, chebyshev::Precision precision) {
  double bound = 0;
#pragma unroll
  for (int c = 0; c < kCols; ++c) bound += fabs(g[c]);  // zero beyond N
  if (has_b) {
    double s = 0;
    for (int c = 0; c < N; ++c) s += fabs(row_b[c]);
    bound = fmax(bound, s);
  }
  chebyshev::Rung series = chebyshev::Select(table, WarpMax(bound) / (N - 1), precision);
  if (series.degree > 4 * N) series.degree = 0;
  return series;
}

// Steps 3 to 5 of the Chebyshev path: W a = p(G') a with p the series of x^(-1/2), and
// a . wbar = a . G^-1 b = b . q(G') a / (N - 1) with q that of x^(-1) (G symmetric), both sums
// of the same T_k(t) a, t = (2 G' - (kappa + 1) I) / (kappa - 1), from the three-term recurrence
// T_{k+1} = 2 t T_k - T_{k-1}: one product with G a term, through shared memory (two buffers, so
// one __syncwarp a term; the other holds T_{k-1} a), and one reduction at the end. acc gets
// W a + a . wbar for the lane's members.
template <int kCols, bool kPair, int kOwn>
__device__ __forceinline__ void ChebyshevAnalysis(const double (&g)[kCols], const double* row_b,
                                                  const TeamVectors& m, TeamSums& team, int N, int lane,
                                                  const chebyshev::Rung& series, const double (&fore)[kOwn],
                                                  const double (&b)[kOwn], double (&acc)[kOwn]) {
  const int rb = lane + 32;
  const bool has_b = kPair && rb < N;
  const double n1 = N - 1, scale = 2 / ((series.kappa - 1) * n1), shift = -(series.kappa + 1) / (series.kappa - 1);
  double now[kOwn], sum_sqrt[kOwn], sum_inv[kOwn];  // T_k(t) a and the two sums, the lane's members
#pragma unroll
  for (int k = 0; k < kOwn; ++k) {
    now[k] = fore[k];
    sum_sqrt[k] = series.inv_sqrt[0] * fore[k];
    sum_inv[k] = series.inv[0] * fore[k];
  }
  double cs = series.inv_sqrt[1], ci = series.inv[1];  // the next term's coefficients, loaded a term ahead
  for (int k = 0; k < series.degree; ++k) {
    const bool more = k + 1 < series.degree;
    const double cs_next = more ? series.inv_sqrt[k + 2] : 0.0, ci_next = more ? series.inv[k + 2] : 0.0;
    double* v = k % 2 == 0 ? m.column : m.vvec;
    const double* v_prev = k % 2 == 0 ? m.vvec : m.column;
    v[lane] = now[0];
    if constexpr (kPair) v[rb] = has_b ? now[1] : 0.0;
    __syncwarp();
    double gv[kOwn];
    Product<kCols, kPair>(g, row_b, has_b, v, gv);
    const double twice = k == 0 ? 1.0 : 2.0;
#pragma unroll
    for (int o = 0; o < kOwn; ++o) {
      const double prev = k == 0 ? 0.0 : v_prev[o == 0 ? lane : rb];
      now[o] = twice * fma(scale, gv[o], shift * now[o]) - prev;
      sum_sqrt[o] = fma(cs, now[o], sum_sqrt[o]);
      sum_inv[o] = fma(ci, now[o], sum_inv[o]);
    }
    cs = cs_next;
    ci = ci_next;
  }
  double dot = b[0] * sum_inv[0];
  if constexpr (kPair) dot += b[1] * sum_inv[1];
  dot = team.Sum(dot) / n1;
#pragma unroll
  for (int k = 0; k < kOwn; ++k) acc[k] = sum_sqrt[k] + dot;
}

// Step 3 of the Householder path: G = Q T Q^T (row l in g, row rb in row_b; LAPACK's SYTD2,
// lower), with u = Q^T a and z = Q^T b on the way (u and z come in holding a and b). T's
// diagonal, off-diagonal and tau go to m, and u and z too; the reflectors' components stay in
// row_b's retired entries (row rb) and m.refl_a (rows below 32). A step's column entries and p
// go to shared memory before the reductions, whose __syncwarp publishes them.
template <int kCols, bool kPair, int kOwn>
__device__ __forceinline__ void Tridiagonalize(double (&g)[kCols], double* row_b, const TeamVectors& m, TeamSums& team,
                                               int N, int lane, double (&u)[kOwn], double (&z)[kOwn]) {
  const int rb = lane + 32;
  const bool has_b = kPair && rb < N;
  double col = g[0], next = g[1];  // row l's G[l][j], G[l][j + 1] at step j
  for (int j = 0; j + 2 < N; ++j) {
    const bool rows_a = j < 31;  // rows l > j remain in the trailing matrix (uniform)
    double col_b = 0, next_b = 0;
    if (has_b) {
      col_b = row_b[j];
      next_b = row_b[j + 1];
    }
    if (lane == j) m.diag[j] = col;
    if (has_b && rb == j) m.diag[j] = col_b;
    const bool below = lane > j + 1 && lane < N, below_b = has_b && rb > j + 1;
    m.column[lane] = below ? col : 0.0;
    if constexpr (kPair) m.column[rb] = below_b ? col_b : 0.0;
    double red[2] = {(below ? col * col : 0.0) + (below_b ? col_b * col_b : 0.0),
                     lane == j + 1 ? col : (has_b && rb == j + 1 ? col_b : 0.0)};
    team.Sum(red);
    const double sigma = red[0], alpha = red[1];
    double t = 0, beta = alpha, scal = 0;
    if (sigma > 0) {  // mu = |(alpha, x)|, beta = -sign(alpha) mu, t = (beta - alpha) / beta
      const double s2 = alpha * alpha + sigma, rs = rsqrt(s2), mu = s2 * rs;
      beta = alpha <= 0 ? mu : -mu;
      t = 1 + fabs(alpha) * rs;
      scal = alpha <= 0 ? -rs / t : rs / t;  // 1 / (alpha - beta)
    }
    const double v_a = lane == j + 1 ? 1.0 : (below ? col * scal : 0.0);
    const double v_b = has_b && rb == j + 1 ? 1.0 : (below_b ? col_b * scal : 0.0);
    m.vvec[lane] = v_a;
    if constexpr (kPair) m.vvec[rb] = v_b;
    if (has_b) row_b[j] = v_b;  // the reflector's components: row rb's in the entry the step retires
    if (below && j < 30) m.refl_a[ReflectorOffset(j) + lane - (j + 2)] = v_a;
    if (lane == 0) {
      m.off[j] = beta;
      m.tau[j] = t;
    }
    double wk_a = 0, wk_b = 0;  // w - k v
    if (t != 0) {
      // p = t G22 v, with v = e_{j+1} + scal x: G's column j + 1 plus scal times G x.
      double s[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
      switch ((j + 2) / 8) {  // from the chunk holding column j + 2 on
#define GPUCOMPUTE_SYMV_CHUNK(C)                                                \
  case C:                                                                       \
    if constexpr (8 * (C) < kCols) {                                            \
      if (8 * (C) >= N) break;                                                  \
      const double2* x2 = reinterpret_cast<const double2*>(m.column + 8 * (C)); \
      const double2* b2 = reinterpret_cast<const double2*>(row_b + 8 * (C));    \
      _Pragma("unroll") for (int e = 0; e < 4; ++e) {                           \
        const double2 xx = x2[e];                                               \
        if (rows_a) {                                                           \
          s[e] = fma(g[8 * (C) + 2 * e], xx.x, s[e]);                           \
          s[e] = fma(g[8 * (C) + 2 * e + 1], xx.y, s[e]);                       \
        }                                                                       \
        if (has_b) {                                                            \
          const double2 bb = b2[e];                                             \
          sb[e] = fma(bb.x, xx.x, sb[e]);                                       \
          sb[e] = fma(bb.y, xx.y, sb[e]);                                       \
        }                                                                       \
      }                                                                         \
    }                                                                           \
    [[fallthrough]];
        GPUCOMPUTE_EIGHT_CHUNKS(GPUCOMPUTE_SYMV_CHUNK)
#undef GPUCOMPUTE_SYMV_CHUNK
        default:
          break;
      }
      const double p_a = lane > j && lane < N ? t * (next + scal * ((s[0] + s[1]) + (s[2] + s[3]))) : 0.0;
      const double p_b = has_b && rb > j ? t * (next_b + scal * ((sb[0] + sb[1]) + (sb[2] + sb[3]))) : 0.0;
      m.pvec[lane] = p_a;
      if constexpr (kPair) m.pvec[rb] = p_b;
      double dots[3] = {p_a * v_a + p_b * v_b, v_a * u[0], v_a * z[0]};
      if constexpr (kPair) {
        dots[1] += v_b * u[1];
        dots[2] += v_b * z[1];
      }
      team.Sum(dots);
      // w = p - k v; G22 -= v w^T + w v^T = v p^T + (w - k v) v^T.
      const double k = 0.5 * t * dots[0];
      wk_a = p_a - 2 * k * v_a;
      wk_b = p_b - 2 * k * v_b;
      u[0] -= t * dots[1] * v_a;
      z[0] -= t * dots[2] * v_a;
      if constexpr (kPair) {
        u[1] -= t * dots[1] * v_b;
        z[1] -= t * dots[2] * v_b;
      }
      switch ((j + 1) / 8) {  // from the chunk holding column j + 1 on
#define GPUCOMPUTE_SYR2_CHUNK(C)                                                              \
  case C:                                                                                     \
    if constexpr (8 * (C) < kCols) {                                                          \
      if (8 * (C) >= N) break;                                                                \
      const double2* v2 = reinterpret_cast<const double2*>(m.vvec + 8 * (C));                 \
      const double2* p2 = reinterpret_cast<const double2*>(m.pvec + 8 * (C));                 \
      double2* b2 = reinterpret_cast<double2*>(row_b + 8 * (C));                              \
      _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                         \
        const double2 vv = v2[e], pq = p2[e];                                                 \
        if (rows_a) {                                                                         \
          g[8 * (C) + 2 * e] = fma(-v_a, pq.x, fma(-wk_a, vv.x, g[8 * (C) + 2 * e]));         \
          g[8 * (C) + 2 * e + 1] = fma(-v_a, pq.y, fma(-wk_a, vv.y, g[8 * (C) + 2 * e + 1])); \
        }                                                                                     \
        if (has_b) {                                                                          \
          double2 bb = b2[e];                                                                 \
          bb.x = fma(-v_b, pq.x, fma(-wk_b, vv.x, bb.x));                                     \
          bb.y = fma(-v_b, pq.y, fma(-wk_b, vv.y, bb.y));                                     \
          b2[e] = bb;                                                                         \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    [[fallthrough]];
        GPUCOMPUTE_EIGHT_CHUNKS(GPUCOMPUTE_SYR2_CHUNK)
#undef GPUCOMPUTE_SYR2_CHUNK
        default:
          break;
      }
    }
    if (rows_a) {
      // The next step's column: G[l][j + 1] as syr2 left it (v_{j+1} = 1), and G[l][j + 2].
      col = t != 0 ? fma(-v_a, m.pvec[j + 1], next - wk_a) : next;
      switch (j + 2) {  // a jump, not a chain of selects
#define GPUCOMPUTE_PICK(c)                  \
  case c:                                   \
    if constexpr ((c) < kCols) next = g[c]; \
    break;
#define GPUCOMPUTE_PICK_CHUNK(C) GPUCOMPUTE_EIGHT_COLUMNS(GPUCOMPUTE_PICK, C)
        GPUCOMPUTE_EIGHT_CHUNKS(GPUCOMPUTE_PICK_CHUNK)
#undef GPUCOMPUTE_PICK_CHUNK
#undef GPUCOMPUTE_PICK
        default:
          break;
      }
    }
  }
  // T's last entries: rows N - 2 and N - 1 after the last step.
  auto last_entries = [&](int row, double at_n2, double at_n1) {
    if (row == N - 2) m.diag[N - 2] = at_n2;
    if (row == N - 1) {
      m.off[N - 2] = at_n2;
      m.diag[N - 1] = at_n1;
    }
  };
  if (lane < N) last_entries(lane, col, next);
  if (has_b) last_entries(rb, row_b[N - 2], row_b[N - 1]);
  m.uvec[lane] = u[0];
  m.zvec[lane] = z[0];
  if constexpr (kPair) {
    m.uvec[rb] = u[1];
    m.zvec[rb] = z[1];
  }
  __syncwarp();
}

// Step 4 of the Householder path, in T's basis: acc = r((N-1)^-1 T) u (Zolotarev's terms) and
// z = T^-1 z, a tridiagonal solve a lane (eight at a time).
template <bool kPair, int kOwn>
__device__ __forceinline__ void SolveInTridiagonalBasis(const TeamVectors& m, int N, int lane, const double* table,
                                                        const double (&u)[kOwn], double (&z)[kOwn],
                                                        double (&acc)[kOwn]) {
  const int rb = lane + 32;
  const bool has_b = kPair && rb < N;
  const double n1 = N - 1;
  double bound = 0;  // Gershgorin's bound on T's largest eigenvalue
  if (lane < N) bound = GershgorinRow(m.diag, m.off, N, lane);
  if (has_b) bound = fmax(bound, GershgorinRow(m.diag, m.off, N, rb));
  const inverse_sqrt::Rung rung = inverse_sqrt::SelectRung(table, WarpMax(bound) / n1);
  const int terms = rung.count + 1;      // the last one: T^-1 z
  double* lv = m.stage;                    // L's subdiagonal, [i][lane]
  double* xv = m.stage + N * kSolveLanes;  // D^-1 L^-1 rhs, then the solution
#pragma unroll
  for (int k = 0; k < kOwn; ++k) acc[k] = 0;
  for (int first = 0; first < terms; first += kSolveLanes) {
    const int term = first + lane;
    if (lane < kSolveLanes && term < terms) {
      const bool inverse = term == rung.count;
      const double shift = inverse ? 0.0 : n1 * rung.poles[term];
      const double* rhs = inverse ? m.zvec : m.uvec;
      SolveShiftedTridiagonal(m.diag, m.off, N, shift, rhs, lv + lane, xv + lane, kSolveLanes);
    }
    __syncwarp();
    const int live = min(kSolveLanes, terms - first);
#pragma unroll
    for (int own = 0; own < kOwn; ++own) {
      const int member = own == 0 ? lane : rb;
      if (member < N) {
        for (int k = 0; k < live; ++k) {
          const double x = xv[member * kSolveLanes + k];
          if (first + k == rung.count) {
            z[own] = x;
          } else {
            acc[own] += n1 * rung.weights[first + k] * x;
          }
        }
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int k = 0; k < kOwn; ++k) acc[k] += rung.d0 * u[k];
}

// Step 5 of the Householder path, back from T's basis: W a = Q acc = H_0 H_1 ... H_{N-3} acc,
// two reflectors a reduction: H_j, then H_{j-1}, whose dot follows from the first with
// v_{j-1} . v_j (the compact WY form of the pair). a . wbar = u . z rides along with the first
// and is added to acc.
template <bool kPair, int kOwn>
__device__ __forceinline__ void BackFromTridiagonalBasis(const double* row_b, const TeamVectors& m, TeamSums& team,
                                                         int N, int lane, const double (&u)[kOwn],
                                                         const double (&z)[kOwn], double (&acc)[kOwn]) {
  const int rb = lane + 32;
  const bool has_b = kPair && rb < N;
  double dot = 0;
  for (int j = N - 3; j >= 0; j -= 2) {
    const double t1 = m.tau[j], t0 = j > 0 ? m.tau[j - 1] : 0.0;
    // v_j: zero at and above j, 1 at j + 1, stored below (rows below 32: only for j < 30).
    auto component = [&](int member, int of) {
      if (member == of + 1) return 1.0;
      if (member <= of + 1 || member >= N) return 0.0;
      return member < 32 ? m.refl_a[ReflectorOffset(of) + member - (of + 2)] : row_b[of];
    };
    double v1[kOwn], v0[kOwn];
    v1[0] = component(lane, j);
    v0[0] = j > 0 ? component(lane, j - 1) : 0.0;
    if constexpr (kPair) {
      v1[1] = component(rb, j);
      v0[1] = j > 0 ? component(rb, j - 1) : 0.0;
    }
    double dots[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < kOwn; ++k) {
      dots[0] += v1[k] * acc[k];
      dots[1] += v0[k] * acc[k];
      dots[2] += v0[k] * v1[k];
      if (j == N - 3) dots[3] += u[k] * z[k];
    }
    team.Sum(dots);
    if (j == N - 3) dot = dots[3];
    const double a1 = t1 * dots[0], a0 = t0 * (dots[1] - a1 * dots[2]);
#pragma unroll
    for (int k = 0; k < kOwn; ++k) {
      acc[k] -= a1 * v1[k];
      acc[k] -= a0 * v0[k];
    }
  }
  if (N == 2) dot = team.Sum(u[0] * z[0]);  // no reflector
  if (lane < N) acc[0] += dot;
  if constexpr (kPair) {
    if (has_b) acc[1] += dot;
  }
}

// Steps 3 to 5 of the Householder path: W a + a . wbar for the lane's members into acc, from G
// (row l in g, row rb in row_b) through its tridiagonal form (any conditioning).
template <int kCols, bool kPair, int kOwn>
__device__ __forceinline__ void HouseholderAnalysis(double (&g)[kCols], double* row_b, const TeamVectors& m,
                                                    TeamSums& team, int N, int lane, const double* table,
                                                    const double (&fore)[kOwn], const double (&b)[kOwn],
                                                    double (&acc)[kOwn]) {
  double u[kOwn], z[kOwn];
#pragma unroll
  for (int k = 0; k < kOwn; ++k) {
    u[k] = fore[k];
    z[k] = b[k];
  }
  Tridiagonalize<kCols, kPair>(g, row_b, m, team, N, lane, u, z);
  SolveInTridiagonalBasis<kPair>(m, N, lane, table, u, z, acc);
  BackFromTridiagonalBasis<kPair>(row_b, m, team, N, lane, u, z, acc);
}

template <int kCols, bool kPair, typename T, bool kListed>
__global__ void __launch_bounds__(32) LetkfTeamKernel(
    const LetkfGeometry* __restrict__ geometry, int64_t first, int64_t chunk, int N, int W,
    const T* __restrict__ anomalies,
    const double* __restrict__ xbar, const T* __restrict__ obs, const double* __restrict__ state_coords,
    const double* __restrict__ sorted_coords, const double* __restrict__ domain, const int* __restrict__ sorted,
    const int* __restrict__ cell_start, const ProblemParams* __restrict__ params,
    const unsigned long long* __restrict__ candidate_pairs, const double* __restrict__ table,
    const double* __restrict__ chebyshev_table, const LetkfLists lists, T* __restrict__ xa,
    double* __restrict__ partials) {
  constexpr bool kAsyncStage = kStagedAsync<T>;
  using Staged = StagedType<T>;
  using Layout = TeamLayout<kPair, Staged>;
  constexpr int kT = kCols / 8, kTiles = kT * (kT + 1) / 2, kLds = Layout::kLds, kOwn = kPair ? 2 : 1;
  constexpr auto kPrecision = std::is_same_v<T, float> ? chebyshev::Precision::kSingle : chebyshev::Precision::kDouble;
  static_assert(kCols % 8 == 0 && kCols <= Layout::kRows && (kPair || kCols == 32),
                "G's rows: whole chunks of eight columns, lane l's row l in registers");
  extern __shared__ __align__(16) double smem[];  // 16 bytes: the double2 loads
  const Layout l(N, kCols);
  const int lane = threadIdx.x, rb = lane + 32;  // the lane's members: lane, and rb if has_b
  const bool has_b = kPair && rb < N;
  TeamSums team{lane, smem + l.slots};
  Staged* stage = reinterpret_cast<Staged*>(smem + l.stage);
  double* row_b = smem + l.second + (has_b ? lane * l.ldb : 0);  // G's row rb (when has_b)
  double* list_coeff = smem + l.list_coeff;
  int* list_index = reinterpret_cast<int*>(smem + l.list_index);
  const TeamVectors vectors{smem + l.stage, smem + l.reflectors, smem + l.column, smem + l.v, smem + l.p,
                            smem + l.diag,  smem + l.off,        smem + l.tau,    smem + l.u, smem + l.z};
  double* coeff = smem + l.coeff;
  double* dc = smem + l.dc;
  int* run_begin = reinterpret_cast<int*>(smem + l.runs);
  int* run_size = run_begin + kMaxRuns;
  const LetkfGeometry& geo = *geometry;
  const ProblemParams& pp = *params;
  const double search = localization::SearchRadius(static_cast<localization::Taper>(geo.taper), geo.radius);
  const double n1 = N - 1;
  double variance_sum = 0;
  const int64_t rows = *candidate_pairs > pp.max_candidates ? 0 : chunk;  // refused: none
  for (int64_t k = blockIdx.x; k < rows; k += gridDim.x) {
    // Listed: the chunk's variables with up to kLetkfListCap local observations; else the rest.
    const int count = lists.count[k];
    if ((count <= kLetkfListCap) != kListed) continue;
    const int64_t i = first + k;
    const double* point = state_coords + i * geo.dims;
    double fore[kOwn];  // the forecast anomalies of the lane's members
    fore[0] = lane < N ? static_cast<double>(anomalies[i * N + lane]) : 0.0;
    if constexpr (kPair) fore[1] = has_b ? static_cast<double>(anomalies[i * N + rb]) : 0.0;
    // 1. The local observations, into G's tiles and b.
    __syncwarp();  // the last variable's readers of shared memory are done
    double d0[kTiles], d1[kTiles];
#pragma unroll
    for (int s = 0; s < kTiles; ++s) d0[s] = d1[s] = 0;
    double b[kOwn] = {};
    // b as the tiles' row N, the innovations staged as column N (lane N - 32 loads them): for the
    // paired teams with a spare tile row (the 32-wide team spills with it and is 7-15% slower).
    const bool row_n_b = kPair && N < kCols;
    // The staged rows b0 ... b0 + staged - 1 (all 16 written, zero past the listed) into G's tiles,
    // and b apart unless row_n_b.
    auto add_staged = [&](const Staged* rows_at, int b0, int staged) {
      if (lane < kStage) {
        const double c = lane < staged ? list_coeff[b0 + lane] : 0.0;
        coeff[lane] = c;
        if (!row_n_b) {
          dc[lane] = lane < staged ? c * static_cast<double>(obs[static_cast<int64_t>(list_index[b0 + lane]) * W + N])
                                   : 0.0;
        }
      }
      __syncwarp();
      if (!row_n_b) {
        for (int k = 0; k < staged; ++k) {
          b[0] += dc[k] * static_cast<double>(rows_at[k * kLds + lane]);
          if constexpr (kPair) b[1] += dc[k] * static_cast<double>(rows_at[k * kLds + rb]);
        }
      }
      AddTiles<kCols, kLds, kPairedTiles<T>>(d0, d1, rows_at, coeff, (staged + 3) / 4 * 4, row_n_b ? N : N - 1, lane);
      __syncwarp();
    };
    // Adds the `count` listed observations, 16 at a time, the next 16 rows loaded (lane l: their
    // columns l and l + 32, column N the innovation) while the tensor cores take the staged ones.
    auto add_listed = [&](int count) {
      __syncwarp();
      if constexpr (kAsyncStage) {
        // Rows b0 ... b0 + 15 into `to` by cp.async (lane l: columns l and l + 32, column N the
        // innovation), zeros past the listed and past column N.
        auto issue = [&](int b0, Staged* to) {
          const int staged = min(kStage, count - b0);
#pragma unroll
          for (int k = 0; k < kStage; ++k) {
            const T* row = obs + static_cast<int64_t>(k < staged ? list_index[b0 + k] : 0) * W;
            CpAsyncOrZero<sizeof(T)>(to + k * kLds + lane, row + lane, k < staged && lane < N);
            if constexpr (kPair) CpAsyncOrZero<sizeof(T)>(to + k * kLds + rb, row + rb, k < staged && rb <= N);  // N: dw
          }
          CpAsyncCommit();
        };
        Staged* now_rows = stage;
        Staged* next_rows = reinterpret_cast<Staged*>(smem + l.stage_next);
        issue(0, now_rows);
        for (int b0 = 0; b0 < count; b0 += kStage) {
          const int staged = min(kStage, count - b0);
          if (b0 + kStage < count) {
            issue(b0 + kStage, next_rows);
            CpAsyncWait<1>();
          } else {
            CpAsyncWait<0>();
          }
          add_staged(now_rows, b0, staged);
          Staged* const done = now_rows;
          now_rows = next_rows;
          next_rows = done;
        }
      } else {
        // The next 16 rows into registers while the tensor cores take the staged ones.
        double next_rows[kOwn][kStage];
        auto fetch = [&](int b0) {
          const int staged = min(kStage, count - b0);
#pragma unroll
          for (int k = 0; k < kStage; ++k) {
            const T* row = obs + static_cast<int64_t>(k < staged ? list_index[b0 + k] : 0) * W;
            next_rows[0][k] = k < staged && lane < N ? static_cast<double>(row[lane]) : 0.0;
            if constexpr (kPair) next_rows[1][k] = k < staged && rb <= N ? static_cast<double>(row[rb]) : 0.0;  // N: dw
          }
        };
        fetch(0);
        for (int b0 = 0; b0 < count; b0 += kStage) {
          const int staged = min(kStage, count - b0);
#pragma unroll
          for (int k = 0; k < kStage; ++k) {
            stage[k * kLds + lane] = next_rows[0][k];
            if constexpr (kPair) stage[k * kLds + rb] = next_rows[1][k];
          }
          if (b0 + kStage < count) fetch(b0 + kStage);
          add_staged(stage, b0, staged);
        }
      }
    };
    int total = 0;  // the local observations
    if constexpr (kListed) {
      total = count;
      const int64_t at = k * kLetkfListCap;
      for (int b0 = 0; b0 < total; b0 += Layout::kListCap) {
        const int now = min(Layout::kListCap, total - b0);
        __syncwarp();  // the last block's readers of the list are done
        for (int e = lane; e < now; e += 32) {
          list_index[e] = lists.index[at + b0 + e];
          list_coeff[e] = lists.coeff[at + b0 + e];
        }
        add_listed(now);
      }
    } else {
      // The candidates counted by one warp reduction in the float32 kernels, by a loop in the
      // float64 ones (measured with the builds alternated: the reduction made the float32 kernel
      // 5% faster and the float64 one 3% slower, a matter of instruction scheduling at the
      // register ceiling, not of the count's own cost).
      int listed = 0;
      ScanCandidates<kPrecision == chebyshev::Precision::kSingle>(
          geo, point, search, cell_start, sorted, sorted_coords, domain, run_begin, run_size, lane,
          [&](int j, double c, unsigned mask) {
            const int round = __popc(mask);
            if (listed + round > Layout::kListCap) {
              add_listed(listed);
              listed = 0;
            }
            if ((mask >> lane) & 1) {
              const int at = listed + __popc(mask & ((1u << lane) - 1));
              list_index[at] = j;
              list_coeff[at] = c;
            }
            listed += round;
            total += round;
          });
      if (listed > 0) add_listed(listed);
    }
    double acc[kOwn];  // the analysis anomalies of the lane's members
#pragma unroll
    for (int k = 0; k < kOwn; ++k) acc[k] = fore[k];
    if (total > 0) {
      // 2. The tiles handed over: row l into registers, row rb completed in place (its entries
      // right of the diagonal from the rows below it).
      double* handover = smem + l.stage;
      StoreTiles<kCols, kPair>(d0, d1, handover, smem + l.second, vectors.pvec, l.ldb, N, lane);
      __syncwarp();
      if (row_n_b) {
        b[0] = lane < N ? vectors.pvec[lane] : 0.0;
        if constexpr (kPair) b[1] = has_b ? vectors.pvec[rb] : 0.0;
      }
      double g[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {  // G[lane][c] from the stored lower triangle: one load a column
        const double* at = c >= 32 ? smem + l.second + (c - 32) * l.ldb + lane
                                   : (c <= lane ? handover + lane * kHandoverLd + c : handover + c * kHandoverLd + lane);
        const double x = lane < N && c < N ? *at : 0.0;
        g[c] = c == lane && lane < N ? x + n1 : x;
      }
      if (has_b) {
        for (int c = rb + 1; c < N; ++c) row_b[c] = smem[l.second + (c - 32) * l.ldb + rb];
        row_b[rb] += n1;
        for (int c = N; c < kCols; ++c) row_b[c] = 0;  // read by the last chunk's products
      }
      const chebyshev::Rung series = SeriesFor(g, row_b, has_b, N, chebyshev_table, kPrecision);
      if (series.degree > 0) {
        ChebyshevAnalysis<kCols, kPair>(g, row_b, vectors, team, N, lane, series, fore, b, acc);
      } else {
        HouseholderAnalysis<kCols, kPair>(g, row_b, vectors, team, N, lane, table, fore, b, acc);
      }
    }
    // Relaxation, the row's variance, the mean back (FinishAnalysisRow).
    const int owned = lane >= N ? 0 : (has_b ? 2 : 1);
    variance_sum += FinishAnalysisMembers(acc, fore, owned, N, pp, [&](double x) { return team.Sum(x); });
    if (lane < N) xa[i * N + lane] = static_cast<T>(acc[0] + xbar[i]);
    if constexpr (kPair) {
      if (has_b) xa[i * N + rb] = static_cast<T>(acc[1] + xbar[i]);
    }
  }
  if (lane == 0) partials[blockIdx.x] += variance_sum;
}

template <int kCols, bool kPair, typename T>
cudaError_t LaunchTeam(const LetkfGeometry* g, int64_t first, int64_t chunk, int N, int W, const T* a,
                       const double* xbar, const T* obs, const double* state_coords, const double* sorted_coords,
                       const double* domain, const int* sorted, const int* cell_start, const ProblemParams* params,
                       const unsigned long long* candidates, const double* table, const double* chebyshev_table,
                       const LetkfLists& lists, bool listed, T* xa, double* partials, int blocks,
                       cudaStream_t stream) {
  const size_t smem = TeamLayout<kPair, StagedType<T>>(N, kCols).total * sizeof(double);
  auto launch = [&](auto kernel) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<blocks, 32, smem, stream>>>(g, first, chunk, N, W, a, xbar, obs, state_coords, sorted_coords, domain,
                                         sorted, cell_start, params, candidates, table, chebyshev_table, lists, xa,
                                         partials);
    return cudaGetLastError();
  };
  return listed ? launch(LetkfTeamKernel<kCols, kPair, T, true>) : launch(LetkfTeamKernel<kCols, kPair, T, false>);
}

}  // namespace

template <typename T>
cudaError_t LaunchLetkfTeam(const LetkfGeometry* g, int64_t first, int64_t chunk, int N, int W, const T* a,
                            const double* xbar, const T* obs, const double* state_coords,
                            const double* sorted_coords, const double* domain, const int* sorted,
                            const int* cell_start, const ProblemParams* params, const unsigned long long* candidates,
                            const double* table, const double* chebyshev_table, const LetkfLists& lists,
                            bool listed, T* xa, double* partials, int blocks, cudaStream_t stream) {
  if (N < 2 || N > kLetkfTeamMaxMembers) return cudaErrorInvalidValue;
  // Row l in 32 registers for N <= 32; in 56, not 64, for N <= 56: room for the steps' loads in flight.
  auto launch = [&](auto kernel_shape) {
    constexpr int kCols = decltype(kernel_shape)::value;
    return LaunchTeam<kCols, (kCols > 32), T>(g, first, chunk, N, W, a, xbar, obs, state_coords, sorted_coords,
                                              domain, sorted, cell_start, params, candidates, table,
                                              chebyshev_table, lists, listed, xa, partials, blocks, stream);
  };
  if (N <= 32) return launch(std::integral_constant<int, 32>{});
  if (N <= 56) return launch(std::integral_constant<int, 56>{});
  return launch(std::integral_constant<int, 64>{});
}

#define GPUCOMPUTE_INSTANTIATE(T)                                                                            \
  template cudaError_t LaunchLetkfTeam<T>(const LetkfGeometry*, int64_t, int64_t, int, int, const T*,          \
                                          const double*, const T*, const double*, const double*, const double*, \
                                          const int*, const int*, const ProblemParams*,                         \
                                          const unsigned long long*, const double*, const double*,              \
                                          const LetkfLists&, bool, T*, double*, int, cudaStream_t);
GPUCOMPUTE_INSTANTIATE(float)
GPUCOMPUTE_INSTANTIATE(double)
#undef GPUCOMPUTE_INSTANTIATE

#undef GPUCOMPUTE_EIGHT_COLUMNS
#undef GPUCOMPUTE_EIGHT_CHUNKS

}  // namespace gpucompute::assimilate::kernels
