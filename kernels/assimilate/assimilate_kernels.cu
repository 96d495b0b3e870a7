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
                                           const ProblemParams*, double*, int*, cudaStream_t);

GPUCOMPUTE_INSTANTIATE(float)
GPUCOMPUTE_INSTANTIATE(double)

}  // namespace gpucompute::assimilate::kernels
