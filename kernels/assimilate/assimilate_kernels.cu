// Assimilate device kernels (see assimilate_kernels.cuh). Rows are handled one warp each (the
// members of a row are contiguous), with double accumulators for means and variances, in the
// same order of operations as the CPU reference where it matters for rounding.
#include "kernels/assimilate/assimilate_kernels.cuh"

#include <algorithm>

#include "server/ops/assimilate/philox.h"

namespace gpucompute::assimilate::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kRowThreads = 256;  // 8 rows (warps) per block
constexpr int kRowsPerBlock = kRowThreads / kWarp;
constexpr int kMaxFinishBlocks = 2048;

__device__ __forceinline__ double WarpSum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

int Blocks(int64_t threads, int per_block) {
  return static_cast<int>((threads + per_block - 1) / per_block);
}

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
  double zmean = 0;
  if (stochastic && seeded) {
    double zs = 0;
    for (int j = lane; j < N; j += kWarp) {
      zs += philox::Normal(pp.seed, pp.index, static_cast<uint64_t>(i * N + j));
    }
    zmean = WarpSum(zs) / N;
  }
  for (int j = lane; j < N; j += kWarp) {
    const T yw = lambda * static_cast<T>(static_cast<double>(row[j]) - mean) * scale;
    row[j] = yw;
    if (!stochastic) continue;
    T ew;
    if (seeded) {
      ew = static_cast<T>(philox::Normal(pp.seed, pp.index, static_cast<uint64_t>(i * N + j)) - zmean);
    } else {
      ew = e[j] * scale;
    }
    e[j] = form_d ? ew + (dw - yw) : ew;
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

template <typename T>
__global__ void __launch_bounds__(kRowThreads) FinishRowsKernel(
    int64_t n, int N, T* __restrict__ xa, const T* __restrict__ af, const double* __restrict__ xbar,
    const ProblemParams* __restrict__ params, double* __restrict__ partials) {
  __shared__ double warp_sums[kRowsPerBlock];
  const int p = blockIdx.y;
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const ProblemParams pp = params[p];
  const double alpha = pp.relaxation_factor;
  const double n1 = static_cast<double>(N - 1);
  double total = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; i < n;
       i += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t r = static_cast<int64_t>(p) * n + i;
    T* row = xa + r * N;
    const T* f = af + r * N;
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
    const T base = static_cast<T>(xbar[r]);
    double var = 0;
    for (int j = lane; j < N; j += kWarp) {
      const T v = row[j];
      const double dv = static_cast<double>(v) - m2;
      var += dv * dv;
      row[j] = v + base;
    }
    total += WarpSum(var) / n1;
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

constexpr int kTileRows = 64;      // rows per tile; each active thread owns a 4 x 4 output block
constexpr int kFusedThreads = 256;

__host__ __device__ inline int Pad4(int v) { return (v + 3) / 4 * 4; }

template <typename T>
__device__ __forceinline__ void Load4(const T* p, T (&v)[4]);
template <>
__device__ __forceinline__ void Load4<double>(const double* p, double (&v)[4]) {
  const double2 a = *reinterpret_cast<const double2*>(p), b = *reinterpret_cast<const double2*>(p + 2);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
template <>
__device__ __forceinline__ void Load4<float>(const float* p, float (&v)[4]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
}

size_t TransformRowsSmem(int N, int es) {
  const int Np = Pad4(N);
  // T (N x Np), A (rows x N), out (rows x N), row means (double)
  return static_cast<size_t>(N * Np + 2 * kTileRows * N) * es + kTileRows * sizeof(double) + 64;
}

template <typename T>
__global__ void __launch_bounds__(kFusedThreads) TransformRowsKernel(
    int64_t n, int N, const T* __restrict__ x, const T* __restrict__ t, int64_t t_stride,
    const ProblemParams* __restrict__ params, T* __restrict__ xa, double* __restrict__ partials) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int Np = Pad4(N);
  double* s_mean = reinterpret_cast<double*>(smem_raw);
  T* s_t = reinterpret_cast<T*>(s_mean + kTileRows);  // 512 bytes in: 16-byte aligned
  T* s_a = s_t + N * Np;
  T* s_o = s_a + kTileRows * N;
  const int p = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  constexpr int kWarps = kFusedThreads / kWarp;
  const ProblemParams pp = params[p];
  const T lambda = static_cast<T>(pp.inflation);
  const double alpha = pp.relaxation_factor;
  const double n1 = static_cast<double>(N - 1);
  const T* tp = t + static_cast<int64_t>(p) * t_stride;
  for (int e = tid; e < N * Np; e += kFusedThreads) {
    const int k = e / Np, j = e - k * Np;
    s_t[e] = j < N ? tp[k + static_cast<int64_t>(j) * N] : T(0);
  }
  const int col_groups = Np / 4;
  const int tr = tid / col_groups, tc = tid - tr * col_groups;
  const bool active = tr < kTileRows / 4;
  const int r0 = tr * 4, j0 = tc * 4;
  const T* xp = x + static_cast<int64_t>(p) * n * N;
  T* xap = xa + static_cast<int64_t>(p) * n * N;
  double total = 0;
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row0 = tile * kTileRows;
    const int rows = static_cast<int>(n - row0 < kTileRows ? n - row0 : kTileRows);
    __syncthreads();  // the previous tile is done with s_a / s_o (and s_t is written)
    const T* src = xp + row0 * N;
    {
      // Every load of the tile in flight at once (kTileRows x 64 / kFusedThreads = 16 each).
      constexpr int kU = kTileRows * kMaxFusedRowsMembers / kFusedThreads;
      const int count = rows * N;
      T v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int e = tid + u * kFusedThreads;
        v[u] = e < count ? src[e] : T(0);
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int e = tid + u * kFusedThreads;
        if (e < kTileRows * N) s_a[e] = v[u];
      }
    }
    __syncthreads();
    for (int r = warp; r < rows; r += kWarps) {
      T* row = s_a + r * N;
      double s = 0;
      for (int j = lane; j < N; j += kWarp) s += static_cast<double>(row[j]);
      const double mean = WarpSum(s) / N;
      for (int j = lane; j < N; j += kWarp) row[j] = lambda * static_cast<T>(static_cast<double>(row[j]) - mean);
      if (lane == 0) s_mean[r] = mean;
    }
    __syncthreads();
    if (active) {
      T acc[4][4] = {};
      for (int k = 0; k < N; ++k) {
        T b[4];
        Load4(s_t + k * Np + j0, b);
        T a[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = s_a[(r0 + i) * N + k];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) acc[i][jj] = fma(a[i], b[jj], acc[i][jj]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          if (j0 + jj < N) s_o[(r0 + i) * N + j0 + jj] = acc[i][jj];
        }
      }
    }
    __syncthreads();
    for (int r = warp; r < rows; r += kWarps) {
      T* row = s_o + r * N;
      const T* f = s_a + r * N;
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
      const T base = static_cast<T>(s_mean[r]);
      double var = 0;
      T* dst = xap + (row0 + r) * N;
      for (int j = lane; j < N; j += kWarp) {
        const T v = row[j];
        const double dv = static_cast<double>(v) - m2;
        var += dv * dv;
        dst[j] = v + base;
      }
      total += WarpSum(var) / n1;
    }
  }
  __shared__ double warp_sums[kWarps];
  if (lane == 0) warp_sums[warp] = total;
  __syncthreads();
  if (tid == 0) {
    double s = 0;
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w];
    partials[static_cast<int64_t>(p) * gridDim.x + blockIdx.x] = s;
  }
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
  // 1. Loads (kU per array and thread in flight) and the draws.
  constexpr int kU = 8;
  for (int64_t b0 = 0; b0 < mN; b0 += kU * kSmallThreads) {
    T vy[kU], vd[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t e = b0 + tid + u * kSmallThreads;
      if (e < mN) {
        const int64_t i = e / N;
        const int j = static_cast<int>(e - i * N);
        vy[u] = obs[i * W + j];
        if (!seeded) vd[u] = obs[i * W + N + 1 + j];
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t e = b0 + tid + u * kSmallThreads;
      if (e < mN) {
        s_y[e] = vy[u];
        s_d[e] = seeded ? static_cast<T>(philox::Normal(pp.seed, pp.index, static_cast<uint64_t>(e))) : vd[u];
      }
    }
  }
  for (int64_t b0 = 0; b0 < nN; b0 += kU * kSmallThreads) {
    T v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t e = b0 + tid + u * kSmallThreads;
      if (e < nN) v[u] = xp[e];
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t e = b0 + tid + u * kSmallThreads;
      if (e < nN) s_x[e] = v[u];
    }
  }
  __syncthreads();
  // 2. Row means.
  for (int64_t i = tid; i < m; i += kSmallThreads) {
    double s = 0, z = 0;
    for (int j = 0; j < N; ++j) s += static_cast<double>(s_y[i * N + j]);
    if (seeded) {  // the draws (exact in float64)
      for (int j = 0; j < N; ++j) z += static_cast<double>(s_d[i * N + j]);
    }
    const double mean = s / N;
    s_hmean[i] = mean;
    s_zmean[i] = z / N;
    innovation_all[static_cast<int64_t>(p) * m + i] = y[i] - mean;
  }
  for (int64_t r = tid; r < n; r += kSmallThreads) {
    double s = 0;
    for (int j = 0; j < N; ++j) s += static_cast<double>(s_x[r * N + j]);
    s_xmean[r] = s / N;
  }
  __syncthreads();
  // 3. Yw, Dw; A.
  for (int64_t e = tid; e < mN; e += kSmallThreads) {
    const int64_t i = e / N;
    const double mean = s_hmean[i];
    const T scale = isr[i];
    const T dw = static_cast<T>(y[i] - mean) * scale;
    const T yw = lambda * static_cast<T>(static_cast<double>(s_y[e]) - mean) * scale;
    const T ew = seeded ? static_cast<T>(static_cast<double>(s_d[e]) - s_zmean[i]) : s_d[e] * scale;
    s_y[e] = yw;
    s_d[e] = ew + (dw - yw);
  }
  for (int64_t e = tid; e < nN; e += kSmallThreads) {
    const int64_t r = e / N;
    s_x[e] = lambda * static_cast<T>(static_cast<double>(s_x[e]) - s_xmean[r]);
  }
  __syncthreads();
  // 4. G = Yw^T Yw + (N-1) I and B = Yw^T Dw (row-major N x N).
  for (int o = tid; o < 2 * NN; o += kSmallThreads) {
    const bool is_b = o >= NN;
    const int q = is_b ? o - NN : o;
    const int a = q / N, b = q - a * N;
    const T* rhs = is_b ? s_d : s_y;
    T acc = 0;
    for (int64_t i = 0; i < m; ++i) acc = fma(s_y[i * N + a], rhs[i * N + b], acc);
    if (is_b) {
      s_b[q] = acc;
    } else {
      s_g[q] = a == b ? acc + static_cast<T>(N - 1) : acc;
    }
  }
  __syncthreads();
  // 5. G = U D U^T in place (column k below the diagonal keeps d_k U_ik; diagonal d_k).
  __shared__ T s_rd[kWarp];  // 1 / d_k
  for (int k = 0; k < N - 1; ++k) {
    const T rk = T(1) / s_g[k * N + k];
    const int rest = N - 1 - k;
    for (int e = tid; e < rest * rest; e += kSmallThreads) {
      const int i = k + 1 + e / rest, j = k + 1 + e % rest;
      if (j <= i) s_g[i * N + j] -= s_g[i * N + k] * s_g[j * N + k] * rk;
    }
    __syncthreads();
  }
  if (tid < N) {
    const T d = s_g[tid * N + tid];
    if (!(d > T(0))) fail = 1;
    s_rd[tid] = T(1) / d;
  }
  __syncthreads();
  for (int e = tid; e < NN; e += kSmallThreads) {  // U below the diagonal
    const int i = e / N, k = e - i * N;
    if (k < i) s_g[e] *= s_rd[k];
  }
  __syncthreads();
  // 6. Solve G Z = B: forward with U, scale by D, backward with U^T (every column at once).
  for (int k = 0; k < N - 1; ++k) {
    const int rest = N - 1 - k;
    for (int e = tid; e < rest * N; e += kSmallThreads) {
      const int i = k + 1 + e / N, c = e % N;
      s_b[i * N + c] -= s_g[i * N + k] * s_b[k * N + c];
    }
    __syncthreads();
  }
  for (int e = tid; e < NN; e += kSmallThreads) s_b[e] *= s_rd[e / N];
  __syncthreads();
  for (int k = N - 1; k > 0; --k) {
    for (int e = tid; e < k * N; e += kSmallThreads) {
      const int i = e / N, c = e % N;
      s_b[i * N + c] -= s_g[k * N + i] * s_b[k * N + c];
    }
    __syncthreads();
  }
  // T = I + Z.
  if (tid < N) s_b[tid * N + tid] += T(1);
  __syncthreads();
  if (tid == 0 && fail) info[p] = 1;
  // 7. A T into s_o (over the dead observation rows).
  for (int64_t e = tid; e < nN; e += kSmallThreads) {
    const int64_t r = e / N;
    const int j = static_cast<int>(e - r * N);
    T acc = 0;
    for (int k = 0; k < N; ++k) acc = fma(s_x[r * N + k], s_b[k * N + j], acc);
    s_o[e] = acc;
  }
  __syncthreads();
  // 8. Finish each row (as FinishRowsKernel) and write it.
  const double alpha = pp.relaxation_factor;
  const double n1 = static_cast<double>(N - 1);
  T* xap = xa_all + static_cast<int64_t>(p) * nN;
  double total = 0;
  for (int64_t r = warp; r < n; r += kWarps) {
    T* row = s_o + r * N;
    const T* f = s_x + r * N;
    double s = 0;
    for (int j = lane; j < N; j += kWarp) s += static_cast<double>(row[j]);
    const double amean = WarpSum(s) / N;
    double m2 = amean;
    if (pp.relaxation == 1) {
      double s2 = 0;
      for (int j = lane; j < N; j += kWarp) {
        const T v = static_cast<T>(amean + (1 - alpha) * (static_cast<double>(row[j]) - amean) +
                                   alpha * static_cast<double>(f[j]));
        row[j] = v;
        s2 += static_cast<double>(v);
      }
      m2 = WarpSum(s2) / N;
    } else if (pp.relaxation == 2) {
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
    const T base = static_cast<T>(s_xmean[r]);
    double var = 0;
    for (int j = lane; j < N; j += kWarp) {
      const T v = row[j];
      const double dv = static_cast<double>(v) - m2;
      var += dv * dv;
      xap[r * N + j] = v + base;
    }
    total += WarpSum(var) / n1;
  }
  if (lane == 0) warp_sums[warp] = total;
  __syncthreads();
  if (tid == 0) {
    double s = 0;
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w];
    spread[p] = sqrt(s / static_cast<double>(n));
  }
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
                                int* blocks_per_problem, cudaStream_t stream) {
  if (N > kMaxFusedRowsMembers) return cudaErrorInvalidValue;
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  const int bpp = static_cast<int>(std::min<int64_t>(tiles, FinishRowsBlocks(n)));
  *blocks_per_problem = bpp;
  const size_t smem = TransformRowsSmem(N, sizeof(T));
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(TransformRowsKernel<T>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  TransformRowsKernel<T><<<dim3(bpp, P), kFusedThreads, smem, stream>>>(n, N, x, t, t_stride, params,
                                                                        xa, partials);
  return cudaGetLastError();
}

bool SmallEnkfFits(int64_t n, int64_t m, int N, int element_size) {
  return N <= kWarp && SmallEnkfSmem(n, m, N, element_size) <= kSmallSmemLimit;
}

template <typename T>
cudaError_t LaunchSmallEnkf(int P, int64_t n, int64_t m, int N, int W, const T* x, const T* obs,
                            const double* y, const T* inv_sqrt_r, const ProblemParams* params,
                            bool seeded, T* xa, double* innovation, double* spread, int* info,
                            cudaStream_t stream) {
  if (!SmallEnkfFits(n, m, N, sizeof(T))) return cudaErrorInvalidValue;
  SmallEnkfKernel<T><<<P, kSmallThreads, SmallEnkfSmem(n, m, N, sizeof(T)), stream>>>(
      n, m, N, W, x, obs, y, inv_sqrt_r, params, seeded, xa, innovation, spread, info);
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
                                              cudaStream_t);                                    \
  template cudaError_t LaunchSmallEnkf<T>(int, int64_t, int64_t, int, int, const T*, const T*,   \
                                          const double*, const T*, const ProblemParams*, bool,  \
                                          T*, double*, double*, int*, cudaStream_t);

GPUCOMPUTE_INSTANTIATE(float)
GPUCOMPUTE_INSTANTIATE(double)

}  // namespace gpucompute::assimilate::kernels
