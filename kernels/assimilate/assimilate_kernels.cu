// Assimilate device kernels (see assimilate_kernels.cuh). Rows are handled one warp each (the
// members of a row are contiguous), with double accumulators for means and variances, in the
// same order of operations as the CPU reference where it matters for rounding.
#include "kernels/assimilate/assimilate_kernels.cuh"

#include <algorithm>
#include <type_traits>

#include "kernels/assimilate/warp_ops.cuh"
#include "math/philox.h"

namespace gpucompute::assimilate::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kRowThreads = 256;  // 8 rows (warps) per block
constexpr int kRowsPerBlock = kRowThreads / kWarp;
constexpr int kMaxFinishBlocks = 2048;

int Blocks(int64_t threads, int per_block) {
  return static_cast<int>((threads + per_block - 1) / per_block);
}

// Members a lane's seeded draws cover in registers in PrepareObsKernel: N <= 32 x this.
constexpr int kSeededPerLane = 4;

template <typename T>
__global__ void __launch_bounds__(kRowThreads) PrepareObsKernel(
    int P, int64_t m, int N, int W, T* __restrict__ obs, const double* __restrict__ y,
    const T* __restrict__ inv_sqrt_r, const ProblemParams* __restrict__ params, bool stochastic,
    bool seeded, bool form_d, double* __restrict__ innovation) {
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= static_cast<int64_t>(P) * m) return;
  const int p = static_cast<int>(r / m);
  const int64_t i = r - static_cast<int64_t>(p) * m;
  const ProblemParams pp = params[p];
  T* row = obs + r * W;
  double s = 0;
  for (int j = lane; j < N; j += kWarp) s += static_cast<double>(row[j]);
  const double mean = WarpSum(s) / N;
  const T scale = inv_sqrt_r ? inv_sqrt_r[r] : T(1);
  const T lambda = static_cast<T>(pp.inflation);
  const double d = y[r] - mean;
  const T dw = static_cast<T>(d) * scale;
  if (lane == 0) {
    innovation[r] = d;
    row[N] = dw;
  }
  T* e = row + N + 1;
  auto finish = [&](int j, double z, double zmean) {
    const T yw = lambda * static_cast<T>(static_cast<double>(row[j]) - mean) * scale;
    row[j] = yw;
    if (!stochastic) return;
    const T ew = seeded ? static_cast<T>(z - zmean) : e[j] * scale;
    e[j] = form_d ? ew + (dw - yw) : ew;
  };
  const uint64_t e0 = static_cast<uint64_t>(i) * N;  // this row's first element number
  if (stochastic && seeded && N <= kWarp * kSeededPerLane) {
    // Each Philox block (two normals, elements 2b and 2b + 1) is drawn once, by one lane, and
    // the lanes holding its elements take them by shuffle; the draws stay in registers for the
    // centring and the update (Normal() per element would draw every block four times).
    double z[kSeededPerLane];
    const uint64_t b0 = e0 >> 1;
    const uint64_t blocks = ((e0 + N - 1) >> 1) - b0 + 1;
    for (uint64_t c = 0; c < blocks; c += kWarp) {
      double z0 = 0, z1 = 0;
      if (c + lane < blocks) philox::NormalPair(pp.seed, pp.index, b0 + c + lane, &z0, &z1);
#pragma unroll
      for (int q = 0; q < kSeededPerLane; ++q) {
        const uint64_t el = e0 + lane + q * kWarp;
        const uint64_t rel = (el >> 1) - b0;  // the element's block, relative to this row's first
        const int src = static_cast<int>((rel - c) & (kWarp - 1));
        const double a = __shfl_sync(0xffffffffu, z0, src);
        const double b = __shfl_sync(0xffffffffu, z1, src);
        if (lane + q * kWarp < N && rel >= c && rel < c + kWarp) z[q] = (el & 1) ? b : a;
      }
    }
    double zs = 0;
#pragma unroll
    for (int q = 0; q < kSeededPerLane; ++q)
      if (lane + q * kWarp < N) zs += z[q];
    const double zmean = WarpSum(zs) / N;
#pragma unroll
    for (int q = 0; q < kSeededPerLane; ++q)
      if (lane + q * kWarp < N) finish(lane + q * kWarp, z[q], zmean);
    return;
  }
  double zmean = 0;
  if (stochastic && seeded) {
    double zs = 0;
    for (int j = lane; j < N; j += kWarp) zs += philox::Normal(pp.seed, pp.index, e0 + j);
    zmean = WarpSum(zs) / N;
  }
  for (int j = lane; j < N; j += kWarp) {
    finish(j, stochastic && seeded ? philox::Normal(pp.seed, pp.index, e0 + j) : 0.0, zmean);
  }
}

template <typename T>
__global__ void FormDKernel(int P, int64_t m, int N, int W, T* __restrict__ obs) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(P) * m * N) return;
  const int64_t r = idx / N;
  const int j = static_cast<int>(idx - r * N);
  T* row = obs + r * W;
  row[N + 1 + j] = row[N + 1 + j] + (row[N] - row[j]);
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads) CentreStateKernel(
    int P, int64_t n, int N, T* __restrict__ x, double* __restrict__ xbar,
    const ProblemParams* __restrict__ params) {
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= static_cast<int64_t>(P) * n) return;
  const int p = static_cast<int>(r / n);
  T* row = x + r * N;
  double s = 0;
  for (int j = lane; j < N; j += kWarp) s += static_cast<double>(row[j]);
  const double mean = WarpSum(s) / N;
  const T lambda = static_cast<T>(params[p].inflation);
  for (int j = lane; j < N; j += kWarp) row[j] = lambda * static_cast<T>(static_cast<double>(row[j]) - mean);
  if (lane == 0) xbar[r] = mean;
}

template <typename T>
__global__ void AddDiagonalKernel(int P, int n, T* a, int64_t lda, int64_t stride, T value) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(P) * n) return;
  const int64_t p = idx / n;
  const int64_t i = idx - p * n;
  a[p * stride + i * lda + i] += value;
}

template <typename T>
__global__ void IdentityMinusSymKernel(int P, int N, const T* __restrict__ c, int64_t c_stride,
                                       T* __restrict__ m) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nn = static_cast<int64_t>(N) * N;
  if (idx >= P * nn) return;
  const int64_t p = idx / nn;
  const int64_t e = idx - p * nn;
  const int64_t k = e / N, j = e - k * N;  // column-major (j, k)
  const T* cp = c + p * c_stride;
  if (j == k) {
    m[idx] = T(1) - cp[j + k * N];
  } else {
    m[idx] = (-cp[j + k * N] - cp[k + j * N]) / T(2);
  }
}

template <typename T>
__global__ void EigenFunctionKernel(int P, int N, const T* __restrict__ v, const T* __restrict__ ev,
                                    T* __restrict__ vf, T* __restrict__ u, bool ensemble,
                                    int* __restrict__ info) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nn = static_cast<int64_t>(N) * N;
  if (idx >= P * nn) return;
  const int64_t p = idx / nn;
  const int64_t e = idx - p * nn;
  const int64_t k = e / N, j = e - k * N;
  const T lam = ev[p * N + k];
  const T f = ensemble ? sqrt(static_cast<T>(N - 1) / lam) : sqrt(lam > T(0) ? lam : T(0));
  vf[idx] = v[idx] * f;
  if (ensemble && j == 0) {
    u[p * N + k] /= lam;
    if (!(lam > T(0))) info[p] = 1;
  }
}

template <typename T>
__global__ void AddColumnVectorKernel(int P, int N, T* __restrict__ t, const T* __restrict__ w,
                                      int64_t w_stride) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nn = static_cast<int64_t>(N) * N;
  if (idx >= P * nn) return;
  const int64_t p = idx / nn;
  const int64_t e = idx - p * nn;
  const int64_t k = e / N, j = e - k * N;
  (void)k;
  t[idx] += w[p * w_stride + j];
}

// Finishes one analysis row (N anomalies of a state variable) with a warp: RTPP or RTPS
// relaxation toward the forecast anomalies f, then the mean `base` added back, written to `out`
// (which may be `row`). Returns the row's variance over the members (N - 1 normalisation), the
// state's share of the analysis spread.
template <typename T>
__device__ double FinishRowWarp(T* row, const T* f, T* out, int N, int lane,
                                const ProblemParams& pp, T base) {
  const double alpha = pp.relaxation_factor;
  double s = 0;
  for (int j = lane; j < N; j += kWarp) s += static_cast<double>(row[j]);
  const double amean = WarpSum(s) / N;
  double m2 = amean;
  if (pp.relaxation == 1) {  // RTPP
    double s2 = 0;
    for (int j = lane; j < N; j += kWarp) {
      const T v = static_cast<T>(amean + (1 - alpha) * (static_cast<double>(row[j]) - amean) +
                                 alpha * static_cast<double>(f[j]));
      row[j] = v;
      s2 += static_cast<double>(v);
    }
    m2 = WarpSum(s2) / N;
  } else if (pp.relaxation == 2) {  // RTPS
    double va = 0, vf = 0;
    for (int j = lane; j < N; j += kWarp) {
      const double a = static_cast<double>(row[j]) - amean;
      va += a * a;
      vf += static_cast<double>(f[j]) * static_cast<double>(f[j]);
    }
    va = WarpSum(va);
    vf = WarpSum(vf);
    if (va > 0) {
      const double factor = 1 - alpha + alpha * sqrt(vf / va);
      double s2 = 0;
      for (int j = lane; j < N; j += kWarp) {
        const T v = static_cast<T>(amean + factor * (static_cast<double>(row[j]) - amean));
        row[j] = v;
        s2 += static_cast<double>(v);
      }
      m2 = WarpSum(s2) / N;
    }
  }
  double var = 0;
  for (int j = lane; j < N; j += kWarp) {
    const T v = row[j];
    const double dv = static_cast<double>(v) - m2;
    var += dv * dv;
    out[j] = v + base;
  }
  return WarpSum(var) / static_cast<double>(N - 1);
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads) FinishRowsKernel(
    int64_t n, int N, T* __restrict__ xa, const T* __restrict__ af, const double* __restrict__ xbar,
    const ProblemParams* __restrict__ params, double* __restrict__ partials) {
  __shared__ double warp_sums[kRowsPerBlock];
  const int p = blockIdx.y;
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const ProblemParams pp = params[p];
  double total = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; i < n;
       i += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t r = static_cast<int64_t>(p) * n + i;
    T* row = xa + r * N;
    const T* f = af + r * N;
    total += FinishRowWarp(row, f, row, N, lane, pp, static_cast<T>(xbar[r]));
  }
  if (lane == 0) warp_sums[warp] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int w = 0; w < kRowsPerBlock; ++w) t += warp_sums[w];
    partials[static_cast<int64_t>(p) * gridDim.x + blockIdx.x] = t;
  }
}

__global__ void ReduceSpreadKernel(int bpp, int64_t n, const double* __restrict__ partials,
                                   double* __restrict__ spread) {
  __shared__ double sums[256];
  const int p = blockIdx.x;
  double s = 0;
  for (int b = threadIdx.x; b < bpp; b += blockDim.x) s += partials[static_cast<int64_t>(p) * bpp + b];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o /= 2) {
    if (threadIdx.x < o) sums[threadIdx.x] += sums[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) spread[p] = sqrt(sums[0] / static_cast<double>(n));
}


// ---- fused state pass (N <= kMaxFusedRowsMembers) -------------------------------------------
// Each warp owns tiles of kRows rows and works without block barriers: lane l holds columns l
// and l + 32 of its rows (loads, means, the product's accumulators, relaxation, writes); the
// anomalies go to the warp's shared rows for the product's broadcast reads (and the
// relaxation); T (zero-padded to 64 columns and an even number of rows) is shared by the block.
// Raw rows are prefetched with cp.async into a per-warp ring (Prefetch<kRows> tiles ahead). The
// row reductions of a tile are independent, so their shuffles overlap (in chunks of 4 rows).

constexpr int kFusedThreads = 256;
constexpr int kFusedWarps = kFusedThreads / kWarp;
constexpr int kFinishChunk = 4;

__host__ __device__ inline int Even(int v) { return (v + 1) / 2 * 2; }
__host__ __device__ constexpr int Prefetch(int rows) { return rows <= 4 ? 2 : 1; }

template <typename T>
struct Pair;
template <>
struct Pair<double> {
  using type = double2;
};
template <>
struct Pair<float> {
  using type = float2;
};

size_t TransformRowsSmem(int N, int es, int rows) {
  const int Ne = Even(N);
  return static_cast<size_t>(kFusedWarps) * rows * sizeof(double) +
         static_cast<size_t>(Ne * 2 * kWarp + kFusedWarps * rows * Ne +
                             kFusedWarps * (Prefetch(rows) + 1) * rows * N) * es;
}

// Issues the raw rows of tile `grp` (kRows rows of N, from the problem's rows xp) into dst by
// cp.async; always commits a group, maybe empty (past the last tile).
template <typename T, int kRows>
__device__ __forceinline__ void IssueRawTile(const T* xp, int64_t n, int N, int64_t grp, int64_t groups,
                                             T* dst, int lane) {
  if (grp < groups) {
    const int64_t row0 = grp * kRows;
    const int count = static_cast<int>((n - row0 < kRows ? n - row0 : kRows) * N);
    const T* src = xp + row0 * N;
    for (int e = lane; e < count; e += kWarp) CpAsync<sizeof(T)>(dst + e, src + e);
  }
  CpAsyncCommit();
}

// The fused passes' prologue: T (column-major N x N at tp) into shared memory as
// s_t[k ld + j] = T(k, j) over rows x ld, zero outside N x N. Every thread of the block calls it.
template <typename T>
__device__ void StageTransform(const T* __restrict__ tp, int N, int rows, int ld, T* __restrict__ s_t) {
  for (int e = threadIdx.x; e < rows * ld; e += blockDim.x) {
    const int k = e / ld, j = e - k * ld;
    s_t[e] = k < N && j < N ? tp[k + static_cast<int64_t>(j) * N] : T(0);
  }
}

// The fused passes' epilogue: the block's share of the spread (its lanes' sums of squared
// deviations over N - 1) into partials[p][blockIdx.x]. Every thread of the block calls it.
__device__ void WriteSpreadPartial(double var_sum, int N, int p, double* __restrict__ partials) {
  __shared__ double warp_sums[kFusedWarps];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const double total = WarpSum(var_sum) / static_cast<double>(N - 1);
  if (lane == 0) warp_sums[warp] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0;
    for (int w = 0; w < kFusedWarps; ++w) s += warp_sums[w];
    partials[static_cast<int64_t>(p) * gridDim.x + blockIdx.x] = s;
  }
}

template <typename T, int kRows>
__global__ void __launch_bounds__(kFusedThreads, 2) TransformRowsKernel(
    int64_t n, int N, const T* __restrict__ x, const T* __restrict__ t, int64_t t_stride,
    const ProblemParams* __restrict__ params, T* __restrict__ xa, double* __restrict__ partials) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kCols = 2 * kWarp;
  constexpr int kPf = Prefetch(kRows);
  const int Ne = Even(N);
  const int p = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  double* s_mean = reinterpret_cast<double*>(smem_raw) + warp * kRows;       // this warp's row means
  T* s_t = reinterpret_cast<T*>(reinterpret_cast<double*>(smem_raw) + kFusedWarps * kRows);  // [Ne][64]
  T* s_a = s_t + Ne * kCols + warp * kRows * Ne;  // this warp's [kRows][Ne] anomalies
  const int ring = kRows * N;                      // one raw tile
  T* s_raw = s_t + Ne * kCols + kFusedWarps * kRows * Ne + warp * (kPf + 1) * ring;
  const ProblemParams pp = params[p];
  const T lambda = static_cast<T>(pp.inflation);
  const double alpha = pp.relaxation_factor;
  const T* tp = t + static_cast<int64_t>(p) * t_stride;
  StageTransform(tp, N, Ne, kCols, s_t);
  if (lane < kRows) s_a[lane * Ne + Ne - 1] = T(0);  // the pad column when N is odd
  __syncthreads();
  const bool has[2] = {lane < N, lane + kWarp < N};
  const T* xp = x + static_cast<int64_t>(p) * n * N;
  T* xap = xa + static_cast<int64_t>(p) * n * N;
  double var_sum = 0;
  const int64_t groups = (n + kRows - 1) / kRows;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFusedWarps + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kFusedWarps;
  auto issue = [&](int64_t grp, int slot) {
    IssueRawTile<T, kRows>(xp, n, N, grp, groups, s_raw + slot * ring, lane);
  };
#pragma unroll
  for (int d = 0; d < kPf; ++d) issue(first + d * step, d);
  int slot = 0;
  for (int64_t grp = first; grp < groups; grp += step) {
    issue(grp + kPf * step, (slot + kPf) % (kPf + 1));
    CpAsyncWait<kPf>();
    __syncwarp();
    const int64_t row0 = grp * kRows;
    const int rows = static_cast<int>(n - row0 < kRows ? n - row0 : kRows);
    {
      const T* src = s_raw + slot * ring;
      T v[kRows][2];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int c = 0; c < 2; ++c) v[r][c] = r < rows && has[c] ? src[r * N + lane + c * kWarp] : T(0);
      }
      double mean[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) mean[r] = static_cast<double>(v[r][0]) + static_cast<double>(v[r][1]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) mean[r] = WarpSum(mean[r]) / N;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (has[c]) s_a[r * Ne + lane + c * kWarp] = lambda * static_cast<T>(static_cast<double>(v[r][c]) - mean[r]);
        }
        if (lane == 0) s_mean[r] = mean[r];
      }
    }
    slot = (slot + 1) % (kPf + 1);
    __syncwarp();
    T acc[kRows][2] = {};
    for (int k = 0; k < Ne; k += 2) {
      const T t00 = s_t[k * kCols + lane], t01 = s_t[k * kCols + lane + kWarp];
      const T t10 = s_t[(k + 1) * kCols + lane], t11 = s_t[(k + 1) * kCols + lane + kWarp];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const typename Pair<T>::type a = *reinterpret_cast<const typename Pair<T>::type*>(s_a + r * Ne + k);
        acc[r][0] = fma(a.x, t00, acc[r][0]);
        acc[r][1] = fma(a.x, t01, acc[r][1]);
        acc[r][0] = fma(a.y, t10, acc[r][0]);
        acc[r][1] = fma(a.y, t11, acc[r][1]);
      }
    }
    // Finish (as FinishRowsKernel): relaxation against the anomalies, the mean back, spread.
#pragma unroll
    for (int r0 = 0; r0 < kRows; r0 += kFinishChunk) {
      double amean[kFinishChunk], m2[kFinishChunk];
#pragma unroll
      for (int q = 0; q < kFinishChunk; ++q) {
        amean[q] = WarpSum(static_cast<double>(acc[r0 + q][0]) + static_cast<double>(acc[r0 + q][1])) / N;
        m2[q] = amean[q];
      }
      if (pp.relaxation == 1) {  // RTPP
        double s2[kFinishChunk];
#pragma unroll
        for (int q = 0; q < kFinishChunk; ++q) {
          s2[q] = 0;
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            if (!has[c]) continue;
            const double f = static_cast<double>(s_a[(r0 + q) * Ne + lane + c * kWarp]);
            acc[r0 + q][c] = static_cast<T>(amean[q] + (1 - alpha) * (static_cast<double>(acc[r0 + q][c]) - amean[q]) +
                                            alpha * f);
            s2[q] += static_cast<double>(acc[r0 + q][c]);
          }
        }
#pragma unroll
        for (int q = 0; q < kFinishChunk; ++q) m2[q] = WarpSum(s2[q]) / N;
      } else if (pp.relaxation == 2) {  // RTPS
        double va[kFinishChunk], vf[kFinishChunk];
#pragma unroll
        for (int q = 0; q < kFinishChunk; ++q) {
          va[q] = vf[q] = 0;
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            if (!has[c]) continue;
            const double a = static_cast<double>(acc[r0 + q][c]) - amean[q];
            const double f = static_cast<double>(s_a[(r0 + q) * Ne + lane + c * kWarp]);
            va[q] += a * a;
            vf[q] += f * f;
          }
        }
#pragma unroll
        for (int q = 0; q < kFinishChunk; ++q) {
          va[q] = WarpSum(va[q]);
          vf[q] = WarpSum(vf[q]);
        }
        double s2[kFinishChunk];
#pragma unroll
        for (int q = 0; q < kFinishChunk; ++q) {
          s2[q] = 0;
          if (!(va[q] > 0)) continue;  // warp-uniform (va is a warp sum)
          const double factor = 1 - alpha + alpha * sqrt(vf[q] / va[q]);
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            if (!has[c]) continue;
            acc[r0 + q][c] = static_cast<T>(amean[q] + factor * (static_cast<double>(acc[r0 + q][c]) - amean[q]));
            s2[q] += static_cast<double>(acc[r0 + q][c]);
          }
        }
#pragma unroll
        for (int q = 0; q < kFinishChunk; ++q) {
          const double sum = WarpSum(s2[q]);
          if (va[q] > 0) m2[q] = sum / N;
        }
      }
#pragma unroll
      for (int q = 0; q < kFinishChunk; ++q) {
        const int r = r0 + q;
        if (r >= rows) continue;
        const T base = static_cast<T>(s_mean[r]);
        T* dst = xap + (row0 + r) * N;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (!has[c]) continue;
          const double dv = static_cast<double>(acc[r][c]) - m2[q];
          var_sum += dv * dv;
          dst[lane + c * kWarp] = acc[r][c] + base;
        }
      }
    }
    __syncwarp();  // s_a, s_mean and this ring slot are free for the next tile
  }
  WriteSpreadPartial(var_sum, N, p, partials);
}

// ---- fused state pass on the float64 tensor cores (double, N <= kMaxFusedRowsMembers) --------
// As TransformRowsKernel (raw rows in, finished rows out, a warp per tile of 8 rows, the raw
// tiles prefetched by cp.async into a per-warp ring), but A T runs as mma.m8n8k4 in float64: a
// tile of 8 rows is one MMA row block, so the warp's 8 x Np product takes 2 kNT x kNT MMAs
// (Np = 8 kNT >= N, both A's columns and T's padded with zeros) where the scalar kernel issues
// 8 Np N / 32 fused multiply-adds per lane. Lane (g, q) = (lane / 4, lane % 4) owns row g of the
// tile: the columns q, q + 4, ... for the means and anomalies, and the accumulator columns
// 8 c + 2 q + {0, 1} (c < kNT) after the product, so every row reduction is over the 4 lanes
// of a group (two shuffles). Finished rows are staged in the tile's ring slot and written out
// contiguously. A's rows (lda = Np + 4) and T (ldt = Np or Np + 8, = 8 mod 16 doubles) are
// padded so that the fragment loads hit distinct banks.

constexpr int kMmaRows = 8;

__host__ __device__ constexpr int MmaLda(int np) { return np + 4; }
__host__ __device__ constexpr int MmaLdt(int np) { return np % 16 == 0 ? np + 8 : np; }

size_t TransformRowsMmaSmem(int N) {
  const int np = (N + 7) / 8 * 8;
  return (static_cast<size_t>(np) * MmaLdt(np) +
          static_cast<size_t>(kFusedWarps) * (kMmaRows * MmaLda(np) + 2 * kMmaRows * N)) *
         sizeof(double);
}

// Sum over the 4 lanes of a row group.
__device__ __forceinline__ double GroupSum(double v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

template <int kNT>
__global__ void __launch_bounds__(kFusedThreads, 2) TransformRowsMmaKernel(
    int64_t n, int N, const double* __restrict__ x, const double* __restrict__ t, int64_t t_stride,
    const ProblemParams* __restrict__ params, double* __restrict__ xa, double* __restrict__ partials) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kNp = 8 * kNT, lda = MmaLda(kNp), ldt = MmaLdt(kNp);
  const int p = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int g = lane >> 2, q = lane & 3;
  double* s_t = reinterpret_cast<double*>(smem_raw);       // [kNp][ldt]: T(k, j) at k ldt + j
  double* s_a = s_t + kNp * ldt + warp * kMmaRows * lda;     // this warp's [8][lda] anomalies
  const int ring = kMmaRows * N;                             // one raw tile
  double* s_raw = s_t + kNp * ldt + kFusedWarps * kMmaRows * lda + warp * 2 * ring;
  const ProblemParams pp = params[p];
  const double lambda = pp.inflation, alpha = pp.relaxation_factor;
  const double* tp = t + static_cast<int64_t>(p) * t_stride;
  StageTransform(tp, N, kNp, ldt, s_t);
  for (int k = N + q; k < kNp; k += 4) s_a[g * lda + k] = 0.0;  // A's zero columns, once
  __syncthreads();
  const double* xp = x + static_cast<int64_t>(p) * n * N;
  double* xap = xa + static_cast<int64_t>(p) * n * N;
  double var_sum = 0;
  const int64_t groups = (n + kMmaRows - 1) / kMmaRows;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFusedWarps + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kFusedWarps;
  auto issue = [&](int64_t grp, int slot) {
    IssueRawTile<double, kMmaRows>(xp, n, N, grp, groups, s_raw + slot * ring, lane);
  };
  issue(first, 0);
  int slot = 0;
  for (int64_t grp = first; grp < groups; grp += step) {
    issue(grp + step, slot ^ 1);
    CpAsyncWait<1>();
    __syncwarp();
    const int64_t row0 = grp * kMmaRows;
    const int rows = static_cast<int>(n - row0 < kMmaRows ? n - row0 : kMmaRows);
    double* raw = s_raw + slot * ring;
    // Row g's mean over its columns q, q + 4, ...; anomalies lambda (x - mean) into s_a.
    const bool live = g < rows;
    double mean = 0;
    if (live) {
      for (int k = q; k < N; k += 4) mean += raw[g * N + k];
    }
    mean = GroupSum(mean) / N;
    for (int k = q; k < N; k += 4) s_a[g * lda + k] = live ? lambda * (raw[g * N + k] - mean) : 0.0;
    __syncwarp();
    double acc[kNT][2];
#pragma unroll
    for (int c = 0; c < kNT; ++c) acc[c][0] = acc[c][1] = 0;
#pragma unroll
    for (int k0 = 0; k0 < kNp; k0 += 4) {
      const double a = s_a[g * lda + k0 + q];
#pragma unroll
      for (int c = 0; c < kNT; ++c) MmaF64(acc[c][0], acc[c][1], a, s_t[(k0 + q) * ldt + 8 * c + g]);
    }
    // Finish (as FinishRowWarp): relaxation against the anomalies, the mean back, spread.
    bool valid[kNT][2];
    double s1 = 0;
#pragma unroll
    for (int c = 0; c < kNT; ++c) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        valid[c][h] = 8 * c + 2 * q + h < N;
        s1 += acc[c][h];  // zero beyond N (T's zero columns)
      }
    }
    const double amean = GroupSum(s1) / N;
    double m2 = amean;
    if (pp.relaxation == 1) {  // RTPP
      double s2 = 0;
#pragma unroll
      for (int c = 0; c < kNT; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!valid[c][h]) continue;
          const double f = s_a[g * lda + 8 * c + 2 * q + h];
          acc[c][h] = amean + (1 - alpha) * (acc[c][h] - amean) + alpha * f;
          s2 += acc[c][h];
        }
      }
      m2 = GroupSum(s2) / N;
    } else if (pp.relaxation == 2) {  // RTPS
      double va = 0, vf = 0;
#pragma unroll
      for (int c = 0; c < kNT; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!valid[c][h]) continue;
          const double a = acc[c][h] - amean;
          const double f = s_a[g * lda + 8 * c + 2 * q + h];
          va += a * a;
          vf += f * f;
        }
      }
      va = GroupSum(va);
      vf = GroupSum(vf);
      // va is uniform over the group, not the warp (a row past the end has none): the
      // shuffles stay outside the condition.
      const bool scale = va > 0;
      const double factor = scale ? 1 - alpha + alpha * sqrt(vf / va) : 1.0;
      double s2 = 0;
#pragma unroll
      for (int c = 0; c < kNT; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!valid[c][h] || !scale) continue;
          acc[c][h] = amean + factor * (acc[c][h] - amean);
          s2 += acc[c][h];
        }
      }
      s2 = GroupSum(s2) / N;
      if (scale) m2 = s2;
    }
    // Stage the finished row in the raw slot (consumed), then write the tile contiguously.
    __syncwarp();
    if (live) {
#pragma unroll
      for (int c = 0; c < kNT; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!valid[c][h]) continue;
          const double dv = acc[c][h] - m2;
          var_sum += dv * dv;
          raw[g * N + 8 * c + 2 * q + h] = acc[c][h] + mean;
        }
      }
    }
    __syncwarp();
    double* dst = xap + row0 * N;
    for (int e = lane; e < rows * N; e += kWarp) dst[e] = raw[e];
    __syncwarp();  // s_a and this ring slot are free for the next tile
    slot ^= 1;
  }
  WriteSpreadPartial(var_sum, N, p, partials);
}

// ---- one block per small stochastic problem -------------------------------------------------

constexpr int kSmallThreads = 128;
constexpr size_t kSmallSmemLimit = 48 * 1024;

size_t SmallEnkfSmem(int64_t n, int64_t m, int N, int es) {
  const int64_t region = std::max<int64_t>(2 * m * N, n * N);
  return static_cast<size_t>(2 * m + n) * sizeof(double) +
         static_cast<size_t>(region + 2 * N * N + n * N) * es + 16;
}

template <typename T>
__global__ void __launch_bounds__(kSmallThreads) SmallEnkfKernel(
    int64_t n, int64_t m, int N, int W, const T* __restrict__ x_all, const T* __restrict__ obs_all,
    const double* __restrict__ y_all, const T* __restrict__ isr_all,
    const ProblemParams* __restrict__ params, bool seeded, T* __restrict__ xa_all,
    double* __restrict__ innovation_all, double* __restrict__ spread, int* __restrict__ info) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kWarps = kSmallThreads / kWarp;
  __shared__ double warp_sums[kWarps];
  __shared__ int fail;
  const int p = blockIdx.x;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const ProblemParams pp = params[p];
  const T lambda = static_cast<T>(pp.inflation);
  const int64_t mN = m * N, nN = n * N;
  const int NN = N * N;
  double* s_hmean = reinterpret_cast<double*>(smem_raw);  // m
  double* s_zmean = s_hmean + m;                          // m
  double* s_xmean = s_zmean + m;                          // n
  T* s_y = reinterpret_cast<T*>(s_xmean + n);             // m x N: HX, then Yw
  T* s_d = s_y + mN;                                      // m x N: E (or z), then Dw
  T* s_o = s_y;                                           // n x N: A T (after the solve)
  T* s_g = s_y + (2 * mN > nN ? 2 * mN : nN);           // N x N
  T* s_b = s_g + NN;                                      // N x N: B, then T
  T* s_x = s_b + NN;                                      // n x N
  const T* obs = obs_all + static_cast<int64_t>(p) * m * W;
  const T* xp = x_all + static_cast<int64_t>(p) * nN;
  const double* y = y_all + static_cast<int64_t>(p) * m;
  const T* isr = isr_all + static_cast<int64_t>(p) * m;
  if (tid == 0) fail = 0;
  // Element (row i, column j) of an N-column array is handled by lane j of warps i mod kWarps
  // (N <= 32): no index division.
  const bool col = lane < N;
  const int j = lane;
  // 1. Loads and the draws.
#pragma unroll 4
  for (int64_t i = warp; i < m; i += kWarps) {
    if (!col) continue;
    s_y[i * N + j] = obs[i * W + j];
    s_d[i * N + j] = seeded ? static_cast<T>(philox::Normal(pp.seed, pp.index, static_cast<uint64_t>(i * N + j)))
                            : obs[i * W + N + 1 + j];
  }
#pragma unroll 4
  for (int64_t r = warp; r < n; r += kWarps) {
    if (col) s_x[r * N + j] = xp[r * N + j];
  }
  __syncthreads();
  // 2. Row means (a thread per row).
  for (int64_t i = tid; i < m; i += kSmallThreads) {
    double s = 0, z = 0;
    for (int c = 0; c < N; ++c) s += static_cast<double>(s_y[i * N + c]);
    if (seeded) {  // the draws (exact in float64)
      for (int c = 0; c < N; ++c) z += static_cast<double>(s_d[i * N + c]);
    }
    const double mean = s / N;
    s_hmean[i] = mean;
    s_zmean[i] = z / N;
    innovation_all[static_cast<int64_t>(p) * m + i] = y[i] - mean;
  }
  for (int64_t r = tid; r < n; r += kSmallThreads) {
    double s = 0;
    for (int c = 0; c < N; ++c) s += static_cast<double>(s_x[r * N + c]);
    s_xmean[r] = s / N;
  }
  __syncthreads();
  // 3. Yw, Dw; A.
  for (int64_t i = warp; i < m; i += kWarps) {
    if (!col) continue;
    const int64_t e = i * N + j;
    const double mean = s_hmean[i];
    const T scale = isr[i];
    const T dw = static_cast<T>(y[i] - mean) * scale;
    const T yw = lambda * static_cast<T>(static_cast<double>(s_y[e]) - mean) * scale;
    const T ew = seeded ? static_cast<T>(static_cast<double>(s_d[e]) - s_zmean[i]) : s_d[e] * scale;
    s_y[e] = yw;
    s_d[e] = ew + (dw - yw);
  }
  for (int64_t r = warp; r < n; r += kWarps) {
    if (col) s_x[r * N + j] = lambda * static_cast<T>(static_cast<double>(s_x[r * N + j]) - s_xmean[r]);
  }
  __syncthreads();
  // 4. G = Yw^T Yw + (N-1) I (rows 0..N-1) and B = Yw^T Dw (rows N..2N-1), row-major N x N.
  for (int q = warp; q < 2 * N; q += kWarps) {
    if (!col) continue;
    const bool is_b = q >= N;
    const int a = is_b ? q - N : q;
    const T* rhs = is_b ? s_d : s_y;
    T acc = 0;
    for (int64_t i = 0; i < m; ++i) acc = fma(s_y[i * N + a], rhs[i * N + j], acc);
    if (is_b) {
      s_b[a * N + j] = acc;
    } else {
      s_g[a * N + j] = a == j ? acc + static_cast<T>(N - 1) : acc;
    }
  }
  __syncthreads();
  // 5. G = U D U^T in place (column k below the diagonal keeps d_k U_ik; diagonal d_k).
  __shared__ T s_rd[kWarp];  // 1 / d_k
  for (int k = 0; k < N - 1; ++k) {
    const T rk = T(1) / s_g[k * N + k];
    for (int i = k + 1 + warp; i < N; i += kWarps) {
      if (j > k && j <= i) s_g[i * N + j] -= s_g[i * N + k] * s_g[j * N + k] * rk;
    }
    __syncthreads();
  }
  if (tid < N) {
    const T d = s_g[tid * N + tid];
    if (!(d > T(0))) fail = 1;
    s_rd[tid] = T(1) / d;
  }
  __syncthreads();
  for (int i = warp; i < N; i += kWarps) {  // U below the diagonal
    if (j < i) s_g[i * N + j] *= s_rd[j];
  }
  __syncthreads();
  // 6. Solve G Z = B: forward with U, scale by D^-1, backward with U^T (every column at once).
  for (int k = 0; k < N - 1; ++k) {
    for (int i = k + 1 + warp; i < N; i += kWarps) {
      if (col) s_b[i * N + j] -= s_g[i * N + k] * s_b[k * N + j];
    }
    __syncthreads();
  }
  for (int i = warp; i < N; i += kWarps) {
    if (col) s_b[i * N + j] *= s_rd[i];
  }
  __syncthreads();
  for (int k = N - 1; k > 0; --k) {
    for (int i = warp; i < k; i += kWarps) {
      if (col) s_b[i * N + j] -= s_g[k * N + i] * s_b[k * N + j];
    }
    __syncthreads();
  }
  // T = I + Z.
  if (tid < N) s_b[tid * N + tid] += T(1);
  __syncthreads();
  if (tid == 0 && fail) info[p] = 1;
  // 7. A T into s_o (over the dead observation rows).
  for (int64_t r = warp; r < n; r += kWarps) {
    if (!col) continue;
    T acc = 0;
    for (int k = 0; k < N; ++k) acc = fma(s_x[r * N + k], s_b[k * N + j], acc);
    s_o[r * N + j] = acc;
  }
  __syncthreads();
  // 8. Finish each row (as FinishRowsKernel) and write it.
  T* xap = xa_all + static_cast<int64_t>(p) * nN;
  double total = 0;
  for (int64_t r = warp; r < n; r += kWarps) {
    T* row = s_o + r * N;
    const T* f = s_x + r * N;
    total += FinishRowWarp(row, f, xap + r * N, N, lane, pp, static_cast<T>(s_xmean[r]));
  }
  if (lane == 0) warp_sums[warp] = total;
  __syncthreads();
  if (tid == 0) {
    double s = 0;
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w];
    spread[p] = sqrt(s / static_cast<double>(n));
  }
}

// ---- one warp per small stochastic problem (no block barriers) --------------------------------
// The observation rows and the state rows are copied to shared memory (cp.async); a lane per row
// forms the row means, Yw = lambda (HX - hbar) / sqrt(r) and E' = Ew + d 1^T in place. With
// Dw = d 1^T + Ew - Yw, T = I + G^-1 Yw^T Dw = G^-1 (Yw^T E' + (N-1) I) (as Yw^T Yw = G - (N-1) I),
// so one product [G | RHS] = Yw^T [Yw | E'] + (N-1) [I | I] (N x 2N, lanes 4 x 8, a K x K tile
// each, Np = 4K >= N, padded rows and columns set to (N-1) I) and Gauss-Jordan elimination of
// that augmented matrix in registers (shuffles; pivots are those of G = U D U^T, all positive for
// a positive definite G) give T. Then A T (lanes 8 x 4, K x K tiles of 8K rows at a time) with the
// finishing of each row in the tile (row sums over 4 lanes), written out through shared memory.

size_t SmallEnkfWarpSmem(int64_t n, int64_t m, int N, int es, int64_t* region_out = nullptr) {
  const int64_t Np = 4 * ((N + 3) / 4);
  const int64_t W = 2 * static_cast<int64_t>(N) + 1;
  const int64_t region = std::max<int64_t>(m * W + 4, n * N + Np * Np);
  if (region_out != nullptr) *region_out = region;
  return static_cast<size_t>(n) * sizeof(double) + static_cast<size_t>(region + n * N) * es;
}

template <typename T, int K>
__global__ void __launch_bounds__(kWarp) SmallEnkfWarpKernel(
    int n, int m, int N, int W, int region, const T* __restrict__ x_all, const T* __restrict__ obs_all,
    const double* __restrict__ y_all, const T* __restrict__ isr_all,
    const ProblemParams* __restrict__ params, bool seeded, T* __restrict__ xa_all,
    double* __restrict__ innovation_all, double* __restrict__ spread, int* __restrict__ info) {
  constexpr int Np = 4 * K;
  constexpr unsigned kFull = 0xffffffffu;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int p = blockIdx.x, lane = threadIdx.x;
  const ProblemParams pp = params[p];
  const T lambda = static_cast<T>(pp.inflation);
  const int nN = n * N;
  double* s_xmean = reinterpret_cast<double*>(smem_raw);  // n
  T* s_o = reinterpret_cast<T*>(s_xmean + n);  // m rows of W (obs); later out (n x N) and T
  T* s_x = s_o + region;                       // n x N: X, then A
  T* s_t = s_o + nN;                           // Np x Np (row-major), after the product
  const T* obs = obs_all + static_cast<int64_t>(p) * m * W;
  const T* xp = x_all + static_cast<int64_t>(p) * nN;
  const double* y = y_all + static_cast<int64_t>(p) * m;
  const T* isr = isr_all + static_cast<int64_t>(p) * m;

  // 1. Loads (asynchronous) and the draws.
  if (seeded) {
    if (lane < N) {
      for (int i = 0; i < m; ++i) CpAsync<sizeof(T)>(s_o + i * W + lane, obs + i * W + lane);
    }
  } else {
    const int mW = m * W;
    for (int e = lane; e < mW; e += kWarp) CpAsync<sizeof(T)>(s_o + e, obs + e);
  }
  for (int e = lane; e < nN; e += kWarp) CpAsync<sizeof(T)>(s_x + e, xp + e);
  CpAsyncCommit();
  if (seeded) {  // element e = i N + c into row i, column N + 1 + c (pairs share one Philox block)
    const int mN = m * N;
    for (int b = lane; 2 * b < mN; b += kWarp) {
      double z0, z1;
      philox::NormalPair(pp.seed, pp.index, static_cast<uint64_t>(b), &z0, &z1);
      const int e0 = 2 * b, i0 = e0 / N, c0 = e0 - i0 * N;
      s_o[i0 * W + N + 1 + c0] = static_cast<T>(z0);
      if (e0 + 1 < mN) {
        const int i1 = c0 + 1 == N ? i0 + 1 : i0, c1 = c0 + 1 == N ? 0 : c0 + 1;
        s_o[i1 * W + N + 1 + c1] = static_cast<T>(z1);
      }
    }
  }
  CpAsyncWait<0>();
  __syncwarp();

  // 2. A lane per row: means, Yw and E' in place; innovation; state anomalies.
  for (int i = lane; i < m; i += kWarp) {
    T* row = s_o + i * W;
    T* er = row + N + 1;
    double s = 0;
    for (int c = 0; c < N; ++c) s += static_cast<double>(row[c]);
    const double mean = s / N;
    const double yi = y[i];
    innovation_all[static_cast<int64_t>(p) * m + i] = yi - mean;
    const T scale = isr[i];
    const T dw = static_cast<T>(yi - mean) * scale;
    if (seeded) {  // the draws (already whitened), centred
      double z = 0;
      for (int c = 0; c < N; ++c) z += static_cast<double>(er[c]);
      const double zm = z / N;
      for (int c = 0; c < N; ++c) er[c] = static_cast<T>(static_cast<double>(er[c]) - zm) + dw;
    } else {
      for (int c = 0; c < N; ++c) er[c] = er[c] * scale + dw;
    }
    for (int c = 0; c < N; ++c) row[c] = lambda * static_cast<T>(static_cast<double>(row[c]) - mean) * scale;
  }
  for (int r = lane; r < n; r += kWarp) {
    T* row = s_x + r * N;
    double s = 0;
    for (int c = 0; c < N; ++c) s += static_cast<double>(row[c]);
    const double mean = s / N;
    s_xmean[r] = mean;
    for (int c = 0; c < N; ++c) row[c] = lambda * static_cast<T>(static_cast<double>(row[c]) - mean);
  }
  __syncwarp();

  // 3. [G | RHS] = Yw^T [Yw | E'] + (N-1) [I | I]: lane (rg, cg) holds rows rg K.., columns cg K..
  const int rg = lane >> 3, cg = lane & 7;
  const int a0 = rg * K;
  const int b0 = cg < 4 ? cg * K : N + 1 + (cg - 4) * K;
  T acc[K][K];
#pragma unroll
  for (int r = 0; r < K; ++r)
#pragma unroll
    for (int c = 0; c < K; ++c) acc[r][c] = T(0);
  {
    const T* rowp = s_o;
#pragma unroll 2
    for (int i = 0; i < m; ++i, rowp += W) {
      T a[K], b[K];
#pragma unroll
      for (int r = 0; r < K; ++r) a[r] = rowp[a0 + r];
#pragma unroll
      for (int c = 0; c < K; ++c) b[c] = rowp[b0 + c];
#pragma unroll
      for (int r = 0; r < K; ++r)
#pragma unroll
        for (int c = 0; c < K; ++c) acc[r][c] = fma(a[r], b[c], acc[r][c]);
    }
  }
  {
    const int j0 = (cg & 3) * K;
    const T nm1 = static_cast<T>(N - 1);
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
      for (int c = 0; c < K; ++c) {
        const int gi = a0 + r, gj = j0 + c;
        const T d = gi == gj ? nm1 : T(0);
        acc[r][c] = (gi < N && gj < N) ? acc[r][c] + d : d;
      }
  }

  // 4. Gauss-Jordan on [G | RHS] (no pivoting: G is positive definite): RHS becomes T.
  bool fail = false;
#pragma unroll
  for (int k = 0; k < Np; ++k) {
    const int kb = k / K, kr = k % K;
    T colk[K], rowk[K];
#pragma unroll
    for (int r = 0; r < K; ++r) colk[r] = __shfl_sync(kFull, acc[r][kr], rg * 8 + kb);
#pragma unroll
    for (int c = 0; c < K; ++c) rowk[c] = __shfl_sync(kFull, acc[kr][c], kb * 8 + cg);
    const T piv = __shfl_sync(kFull, acc[kr][kr], kb * 8 + kb);
    if (!(piv > T(0))) fail = true;
    const T rp = T(1) / piv;
#pragma unroll
    for (int c = 0; c < K; ++c) rowk[c] *= rp;
    const bool own = rg == kb;
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
      for (int c = 0; c < K; ++c) {
        const T u = fma(-colk[r], rowk[c], acc[r][c]);
        acc[r][c] = (r == kr && own) ? rowk[c] : u;
      }
  }
  __syncwarp();
  if (cg >= 4) {
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
      for (int c = 0; c < K; ++c) s_t[(a0 + r) * Np + (cg - 4) * K + c] = acc[r][c];
  }
  __syncwarp();

  // 5. A T, 8K rows at a time (lane (rq, cq): rows rq K.., columns cq K..), finished per row.
  const int rq = lane >> 2, cq = lane & 3;
  const int c0 = cq * K;
  const double alpha = pp.relaxation_factor;
  const double n1 = static_cast<double>(N - 1);
  double total = 0;
  for (int r0 = 0; r0 < n; r0 += 8 * K) {
    int rows[K];
#pragma unroll
    for (int rr = 0; rr < K; ++rr) rows[rr] = min(r0 + rq * K + rr, n - 1);
    T o[K][K];
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
      for (int c = 0; c < K; ++c) o[r][c] = T(0);
#pragma unroll 2
    for (int k = 0; k < N; ++k) {
      T a[K], b[K];
#pragma unroll
      for (int rr = 0; rr < K; ++rr) a[rr] = s_x[rows[rr] * N + k];
#pragma unroll
      for (int c = 0; c < K; ++c) b[c] = s_t[k * Np + c0 + c];
#pragma unroll
      for (int rr = 0; rr < K; ++rr)
#pragma unroll
        for (int c = 0; c < K; ++c) o[rr][c] = fma(a[rr], b[c], o[rr][c]);
    }
#pragma unroll
    for (int rr = 0; rr < K; ++rr) {
      const int r = r0 + rq * K + rr;
      const T* f = s_x + rows[rr] * N + c0;
      T* v = o[rr];
      double s = 0;
#pragma unroll
      for (int c = 0; c < K; ++c)
        if (c0 + c < N) s += static_cast<double>(v[c]);
      s += __shfl_xor_sync(kFull, s, 1);
      s += __shfl_xor_sync(kFull, s, 2);
      const double amean = s / N;
      double m2 = amean;
      if (pp.relaxation == 1) {
        double s2 = 0;
#pragma unroll
        for (int c = 0; c < K; ++c)
          if (c0 + c < N) {
            v[c] = static_cast<T>(amean + (1 - alpha) * (static_cast<double>(v[c]) - amean) +
                                  alpha * static_cast<double>(f[c]));
            s2 += static_cast<double>(v[c]);
          }
        s2 += __shfl_xor_sync(kFull, s2, 1);
        s2 += __shfl_xor_sync(kFull, s2, 2);
        m2 = s2 / N;
      } else if (pp.relaxation == 2) {
        double va = 0, vf = 0;
#pragma unroll
        for (int c = 0; c < K; ++c)
          if (c0 + c < N) {
            const double a = static_cast<double>(v[c]) - amean;
            va += a * a;
            vf += static_cast<double>(f[c]) * static_cast<double>(f[c]);
          }
        va += __shfl_xor_sync(kFull, va, 1);
        va += __shfl_xor_sync(kFull, va, 2);
        vf += __shfl_xor_sync(kFull, vf, 1);
        vf += __shfl_xor_sync(kFull, vf, 2);
        const bool relax = va > 0;
        const double factor = relax ? 1 - alpha + alpha * sqrt(vf / va) : 1.0;
        double s2 = 0;
#pragma unroll
        for (int c = 0; c < K; ++c)
          if (c0 + c < N) {
            if (relax) v[c] = static_cast<T>(amean + factor * (static_cast<double>(v[c]) - amean));
            s2 += static_cast<double>(v[c]);
          }
        s2 += __shfl_xor_sync(kFull, s2, 1);
        s2 += __shfl_xor_sync(kFull, s2, 2);
        if (relax) m2 = s2 / N;
      }
      const T base = static_cast<T>(s_xmean[rows[rr]]);
      double var = 0;
#pragma unroll
      for (int c = 0; c < K; ++c)
        if (c0 + c < N) {
          const double dv = static_cast<double>(v[c]) - m2;
          var += dv * dv;
        }
      var += __shfl_xor_sync(kFull, var, 1);
      var += __shfl_xor_sync(kFull, var, 2);
      if (r < n) {
#pragma unroll
        for (int c = 0; c < K; ++c)
          if (c0 + c < N) s_o[r * N + c0 + c] = v[c] + base;
        if (cq == 0) total += var / n1;
      }
    }
  }
  __syncwarp();
  T* xap = xa_all + static_cast<int64_t>(p) * nN;
  for (int e = lane; e < nN; e += kWarp) xap[e] = s_o[e];
  total = WarpSum(total);
  if (lane == 0) {
    spread[p] = sqrt(total / static_cast<double>(n));
    if (fail) info[p] = 1;
  }
}

// ---- symmetric eigendecomposition by parallel cyclic Jacobi (N <= kMaxJacobiOrder) ----------
// One block per matrix in shared memory. Each sweep runs Ne - 1 rounds (Ne = N rounded up to
// even) of Ne / 2 disjoint rotations (the circle schedule); a round computes its rotations, then
// applies them to the rows, then to the columns and to V. Sweeps stop when a whole sweep rotates
// nothing (|a_pr| <= tol sqrt(|a_pp a_rr|)) or after kMaxSweeps.

constexpr int kMaxSweeps = 30;

size_t JacobiSmem(int N, int es) {
  const int Ne = Even(N);
  return static_cast<size_t>(2 * N * N + 2 * Ne) * es + static_cast<size_t>(Ne) * sizeof(int);
}

template <typename T>
__global__ void JacobiEigKernel(int N, T* __restrict__ a_all, T* __restrict__ ev_all, T tol,
                                const int* __restrict__ only) {
  if (only != nullptr && only[blockIdx.x] == 0) return;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int Ne = Even(N), half = Ne / 2;
  T* s_a = reinterpret_cast<T*>(smem_raw);  // N x N
  T* s_v = s_a + N * N;                     // N x N: V(i, k) at i * N + k
  T* s_cs = s_v + N * N;  // per pair: cosine, sine, new a_pp, new a_rr (half each)
  int* s_pr = reinterpret_cast<int*>(s_cs + 2 * Ne);  // half p, half r
  __shared__ int rotated;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, warps = blockDim.x / kWarp;
  const int64_t nn = static_cast<int64_t>(N) * N;
  T* a = a_all + blockIdx.x * nn;
  for (int e = tid; e < N * N; e += blockDim.x) {
    s_a[e] = a[e];  // symmetric: either layout
  }
  for (int i = warp; i < N; i += warps) {
    for (int k = lane; k < N; k += kWarp) s_v[i * N + k] = i == k ? T(1) : T(0);
  }
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    if (tid == 0) rotated = 0;
    __syncthreads();
    for (int round = 0; round < Ne - 1; ++round) {
      if (tid < half) {
        const int q = tid;
        int p0, r0;
        if (q == 0) {
          p0 = Ne - 1;
          r0 = round;
        } else {
          p0 = (round + q) % (Ne - 1);
          r0 = (round - q + (Ne - 1)) % (Ne - 1);
        }
        const int p = p0 < r0 ? p0 : r0, r = p0 < r0 ? r0 : p0;
        T c = 1, sn = 0, dp = 0, dr = 0;
        if (r < N) {
          const T apr = s_a[p * N + r], app = s_a[p * N + p], arr = s_a[r * N + r];
          if (fabs(apr) > tol * sqrt(fabs(app * arr)) && apr != T(0)) {
            const T theta = (arr - app) / (2 * apr);
            const T t = (theta >= 0 ? T(1) : T(-1)) / (fabs(theta) + sqrt(theta * theta + 1));
            c = 1 / sqrt(t * t + 1);
            sn = t * c;
            dp = app - t * apr;  // Rutishauser: the pair's block becomes exactly diagonal
            dr = arr + t * apr;
            rotated = 1;
          }
        }
        s_cs[q] = c;
        s_cs[half + q] = sn;
        s_cs[2 * half + q] = dp;
        s_cs[3 * half + q] = dr;
        s_pr[q] = r < N ? p : -1;
        s_pr[half + q] = r;
      }
      __syncthreads();
      // Rows: A <- J^T A.
      for (int q = warp; q < half; q += warps) {
        const int p = s_pr[q], r = s_pr[half + q];
        const T c = s_cs[q], sn = s_cs[half + q];
        if (p < 0 || sn == T(0)) continue;
        for (int k = lane; k < N; k += kWarp) {
          const T x = s_a[p * N + k], y = s_a[r * N + k];
          s_a[p * N + k] = c * x - sn * y;
          s_a[r * N + k] = sn * x + c * y;
        }
      }
      __syncthreads();
      // Columns: A <- A J; V <- V J.
      for (int q = warp; q < half; q += warps) {
        const int p = s_pr[q], r = s_pr[half + q];
        const T c = s_cs[q], sn = s_cs[half + q];
        if (p < 0 || sn == T(0)) continue;
        for (int k = lane; k < N; k += kWarp) {
          const T x = s_a[k * N + p], y = s_a[k * N + r];
          if (k == p) {
            s_a[k * N + p] = s_cs[2 * half + q];
            s_a[k * N + r] = 0;
          } else if (k == r) {
            s_a[k * N + p] = 0;
            s_a[k * N + r] = s_cs[3 * half + q];
          } else {
            s_a[k * N + p] = c * x - sn * y;
            s_a[k * N + r] = sn * x + c * y;
          }
          const T vx = s_v[k * N + p], vy = s_v[k * N + r];
          s_v[k * N + p] = c * vx - sn * vy;
          s_v[k * N + r] = sn * vx + c * vy;
        }
      }
      __syncthreads();
    }
    if (!rotated) break;
    __syncthreads();  // everyone has read `rotated` before it is reset
  }
  // Out: eigenvectors column-major (V(i, k) at i + k N), eigenvalues.
  for (int e = tid; e < N * N; e += blockDim.x) {
    const int k = e / N, i = e - k * N;
    a[e] = s_v[i * N + k];
  }
  if (tid < N) ev_all[static_cast<int64_t>(blockIdx.x) * N + tid] = s_a[tid * N + tid];
}

// ---- inverses of the diagonal blocks of a lower triangular factor ----------------------------

// Lp (npad x npad, ld npad): the diagonal blocks of order nb of L (n x n, ld n), the padding an
// identity. Only the diagonal blocks are written.
template <typename T>
__global__ void PadDiagonalBlocksKernel(int n, int npad, int nb, const T* __restrict__ l, T* __restrict__ lp) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(npad) * nb) return;
  const int j = static_cast<int>(idx / npad);  // column within the block
  const int i = static_cast<int>(idx - static_cast<int64_t>(j) * npad);  // global row
  const int col = i / nb * nb + j;
  lp[i + static_cast<int64_t>(col) * npad] =
      i < n && col < n ? l[i + static_cast<int64_t>(col) * n] : (i == col ? T(1) : T(0));
}

// Inverse of each diagonal block of order kBase of lp into dp (same positions, ld npad): one
// warp per block, lane j computes column j by forward substitution (X row-major in shared).
constexpr int kBase = 32;
template <typename T>
__global__ void __launch_bounds__(kWarp) InvertBaseBlocksKernel(int npad, const T* __restrict__ lp,
                                                                T* __restrict__ dp) {
  __shared__ T s_l[kBase][kBase + 1];
  __shared__ T s_x[kBase][kBase];
  const int j = threadIdx.x;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kBase * (npad + 1);
  for (int c = 0; c < kBase; ++c) s_l[j][c] = lp[o + j + static_cast<int64_t>(c) * npad];
  __syncwarp();
  for (int i = 0; i < kBase; ++i) {
    T acc = i == j ? T(1) : T(0);
    for (int k = j; k < i; ++k) acc -= s_l[i][k] * s_x[k][j];
    s_x[i][j] = i < j ? T(0) : acc / s_l[i][i];
  }
  __syncwarp();
  for (int c = 0; c < kBase; ++c) dp[o + j + static_cast<int64_t>(c) * npad] = s_x[j][c];
}

}  // namespace

int FinishRowsBlocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kRowsPerBlock - 1) / kRowsPerBlock, kMaxFinishBlocks));
}

template <typename T>
cudaError_t LaunchPrepareObs(int P, int64_t m, int N, int W, T* obs, const double* y,
                             const T* inv_sqrt_r, const ProblemParams* params, bool stochastic,
                             bool seeded, bool form_d, double* innovation, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(P) * m;
  PrepareObsKernel<T><<<Blocks(rows, kRowsPerBlock), kRowThreads, 0, stream>>>(
      P, m, N, W, obs, y, inv_sqrt_r, params, stochastic, seeded, form_d, innovation);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchFormD(int P, int64_t m, int N, int W, T* obs, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(P) * m * N;
  FormDKernel<T><<<Blocks(total, 256), 256, 0, stream>>>(P, m, N, W, obs);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchCentreState(int P, int64_t n, int N, T* x, double* xbar,
                              const ProblemParams* params, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(P) * n;
  CentreStateKernel<T><<<Blocks(rows, kRowsPerBlock), kRowThreads, 0, stream>>>(P, n, N, x, xbar, params);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchAddDiagonal(int P, int n, T* a, int64_t lda, int64_t stride, T value,
                              cudaStream_t stream) {
  AddDiagonalKernel<T><<<Blocks(static_cast<int64_t>(P) * n, 256), 256, 0, stream>>>(P, n, a, lda,
                                                                                     stride, value);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchIdentityMinusSym(int P, int N, const T* c, int64_t c_stride, T* m,
                                   cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(P) * N * N;
  IdentityMinusSymKernel<T><<<Blocks(total, 256), 256, 0, stream>>>(P, N, c, c_stride, m);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchEigenFunction(int P, int N, const T* v, const T* ev, T* vf, T* u, bool ensemble,
                                int* info, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(P) * N * N;
  EigenFunctionKernel<T><<<Blocks(total, 256), 256, 0, stream>>>(P, N, v, ev, vf, u, ensemble, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchAddColumnVector(int P, int N, T* t, const T* w, int64_t w_stride,
                                  cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(P) * N * N;
  AddColumnVectorKernel<T><<<Blocks(total, 256), 256, 0, stream>>>(P, N, t, w, w_stride);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchFinishRows(int P, int64_t n, int N, T* xa, const T* af, const double* xbar,
                             const ProblemParams* params, double* partials,
                             int* blocks_per_problem, cudaStream_t stream) {
  const int bpp = FinishRowsBlocks(n);
  *blocks_per_problem = bpp;
  FinishRowsKernel<T><<<dim3(bpp, P), kRowThreads, 0, stream>>>(n, N, xa, af, xbar, params, partials);
  return cudaGetLastError();
}

cudaError_t LaunchReduceSpread(int P, int blocks_per_problem, int64_t n, const double* partials,
                               double* spread, cudaStream_t stream) {
  ReduceSpreadKernel<<<P, 256, 0, stream>>>(blocks_per_problem, n, partials, spread);
  return cudaGetLastError();
}


template <typename T>
cudaError_t LaunchTransformRows(int P, int64_t n, int N, const T* x, const T* t, int64_t t_stride,
                                const ProblemParams* params, T* xa, double* partials,
                                int* blocks_per_problem, cudaStream_t stream, int rows_per_warp) {
  if (N > kMaxFusedRowsMembers) return cudaErrorInvalidValue;
  const int rows = rows_per_warp == 4 ? 4 : 8;
  const int64_t groups = (n + rows - 1) / rows;
  const int bpp = static_cast<int>(
      std::min<int64_t>((groups + kFusedWarps - 1) / kFusedWarps, FinishRowsBlocks(n)));
  *blocks_per_problem = bpp;
  if constexpr (std::is_same_v<T, double>) {
    if (rows_per_warp == 0) {  // the tensor-core kernel
      const size_t smem = TransformRowsMmaSmem(N);
      auto launch = [&](auto kernel) {
        const cudaError_t a = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(smem));
        if (a != cudaSuccess) return a;
        kernel<<<dim3(bpp, P), kFusedThreads, smem, stream>>>(n, N, x, t, t_stride, params, xa, partials);
        return cudaGetLastError();
      };
      switch ((N + 7) / 8) {
        case 1: return launch(TransformRowsMmaKernel<1>);
        case 2: return launch(TransformRowsMmaKernel<2>);
        case 3: return launch(TransformRowsMmaKernel<3>);
        case 4: return launch(TransformRowsMmaKernel<4>);
        case 5: return launch(TransformRowsMmaKernel<5>);
        case 6: return launch(TransformRowsMmaKernel<6>);
        case 7: return launch(TransformRowsMmaKernel<7>);
        case 8: return launch(TransformRowsMmaKernel<8>);
        default: return cudaErrorInvalidValue;
      }
    }
  }
  const size_t smem = TransformRowsSmem(N, sizeof(T), rows);
  auto kernel = rows == 8 ? TransformRowsKernel<T, 8> : TransformRowsKernel<T, 4>;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  kernel<<<dim3(bpp, P), kFusedThreads, smem, stream>>>(n, N, x, t, t_stride, params, xa, partials);
  return cudaGetLastError();
}

bool SmallEnkfFits(int64_t n, int64_t m, int N, int element_size, int variant) {
  if (N < 2 || N > kWarp) return false;
  return (variant == 1 ? SmallEnkfSmem(n, m, N, element_size)
                       : SmallEnkfWarpSmem(n, m, N, element_size)) <= kSmallSmemLimit;
}

template <typename T, int K>
cudaError_t LaunchSmallEnkfWarpK(int P, int64_t n, int64_t m, int N, int W, const T* x, const T* obs,
                                 const double* y, const T* inv_sqrt_r, const ProblemParams* params,
                                 bool seeded, T* xa, double* innovation, double* spread, int* info,
                                 cudaStream_t stream) {
  int64_t region = 0;
  const size_t smem = SmallEnkfWarpSmem(n, m, N, sizeof(T), &region);
  SmallEnkfWarpKernel<T, K><<<P, kWarp, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(m), N, W, static_cast<int>(region), x, obs, y, inv_sqrt_r,
      params, seeded, xa, innovation, spread, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchSmallEnkf(int P, int64_t n, int64_t m, int N, int W, const T* x, const T* obs,
                            const double* y, const T* inv_sqrt_r, const ProblemParams* params,
                            bool seeded, T* xa, double* innovation, double* spread, int* info,
                            cudaStream_t stream, int variant) {
  if (!SmallEnkfFits(n, m, N, sizeof(T), variant) || W != 2 * N + 1) return cudaErrorInvalidValue;
  if (variant != 1) {
    switch ((N + 3) / 4) {
#define GPUCOMPUTE_SMALL_WARP(K)                                                                   \
  case K:                                                                                         \
    return LaunchSmallEnkfWarpK<T, K>(P, n, m, N, W, x, obs, y, inv_sqrt_r, params, seeded, xa,   \
                                      innovation, spread, info, stream);
      GPUCOMPUTE_SMALL_WARP(1)
      GPUCOMPUTE_SMALL_WARP(2)
      GPUCOMPUTE_SMALL_WARP(3)
      GPUCOMPUTE_SMALL_WARP(4)
      GPUCOMPUTE_SMALL_WARP(5)
      GPUCOMPUTE_SMALL_WARP(6)
      GPUCOMPUTE_SMALL_WARP(7)
      GPUCOMPUTE_SMALL_WARP(8)
#undef GPUCOMPUTE_SMALL_WARP
      default:
        return cudaErrorInvalidValue;
    }
  }
  const size_t smem = SmallEnkfSmem(n, m, N, sizeof(T));
  const cudaError_t e = cudaFuncSetAttribute(SmallEnkfKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  SmallEnkfKernel<T><<<P, kSmallThreads, smem, stream>>>(
      n, m, N, W, x, obs, y, inv_sqrt_r, params, seeded, xa, innovation, spread, info);
  return cudaGetLastError();
}


template <typename T>
cudaError_t LaunchJacobiEig(int P, int N, T* a, T* ev, cudaStream_t stream, const int* only) {
  if (N > kMaxJacobiOrder) return cudaErrorInvalidValue;
  const size_t smem = JacobiSmem(N, sizeof(T));
  const cudaError_t e = cudaFuncSetAttribute(JacobiEigKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const int threads = N > 32 ? 256 : 128;
  const T tol = std::is_same_v<T, double> ? T(1e-14) : T(1e-6);
  JacobiEigKernel<T><<<P, threads, smem, stream>>>(N, a, ev, tol, only);
  return cudaGetLastError();
}


template <typename T>
cudaError_t LaunchPadDiagonalBlocks(int n, int npad, int nb, const T* l, T* lp, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(npad) * nb;
  PadDiagonalBlocksKernel<T><<<Blocks(total, 256), 256, 0, stream>>>(n, npad, nb, l, lp);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchInvertBaseBlocks(int npad, const T* lp, T* dp, cudaStream_t stream) {
  InvertBaseBlocksKernel<T><<<npad / kBase, kWarp, 0, stream>>>(npad, lp, dp);
  return cudaGetLastError();
}

#define GPUCOMPUTE_INSTANTIATE(T)                                                                \
  template cudaError_t LaunchPrepareObs<T>(int, int64_t, int, int, T*, const double*, const T*,  \
                                           const ProblemParams*, bool, bool, bool, double*,     \
                                           cudaStream_t);                                       \
  template cudaError_t LaunchFormD<T>(int, int64_t, int, int, T*, cudaStream_t);                 \
  template cudaError_t LaunchCentreState<T>(int, int64_t, int, T*, double*, const ProblemParams*, \
                                            cudaStream_t);                                      \
  template cudaError_t LaunchAddDiagonal<T>(int, int, T*, int64_t, int64_t, T, cudaStream_t);    \
  template cudaError_t LaunchIdentityMinusSym<T>(int, int, const T*, int64_t, T*, cudaStream_t); \
  template cudaError_t LaunchEigenFunction<T>(int, int, const T*, const T*, T*, T*, bool, int*,  \
                                              cudaStream_t);                                    \
  template cudaError_t LaunchAddColumnVector<T>(int, int, T*, const T*, int64_t, cudaStream_t);  \
  template cudaError_t LaunchFinishRows<T>(int, int64_t, int, T*, const T*, const double*,       \
                                           const ProblemParams*, double*, int*, cudaStream_t); \
  template cudaError_t LaunchTransformRows<T>(int, int64_t, int, const T*, const T*, int64_t,    \
                                              const ProblemParams*, T*, double*, int*,          \
                                              cudaStream_t, int);                               \
  template cudaError_t LaunchSmallEnkf<T>(int, int64_t, int64_t, int, int, const T*, const T*,   \
                                          const double*, const T*, const ProblemParams*, bool,  \
                                          T*, double*, double*, int*, cudaStream_t, int);        \
  template cudaError_t LaunchJacobiEig<T>(int, int, T*, T*, cudaStream_t, const int*);                \
  template cudaError_t LaunchPadDiagonalBlocks<T>(int, int, int, const T*, T*, cudaStream_t);    \
  template cudaError_t LaunchInvertBaseBlocks<T>(int, const T*, T*, cudaStream_t);

GPUCOMPUTE_INSTANTIATE(float)
GPUCOMPUTE_INSTANTIATE(double)

}  // namespace gpucompute::assimilate::kernels
