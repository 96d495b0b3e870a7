// Row normalisation (LayerNorm without gamma/beta, which the model folded into W and b) and
// conversion of rows to the model's type, ahead of a cuBLASLt product; and the elementwise
// activations that cuBLASLt's epilogues lack (gelu_erf, silu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "math/activation.cuh"
#include "kernels/dense/dense_kernels.cuh"
#include "kernels/dense/element.cuh"

namespace gpucompute::kernels {
namespace {

using dense_internal::FromFloat;
using dense_internal::ToFloat;
using dense_internal::ToFloatOrDouble;

// Accumulation type: float, double for float64 input (keeps small deviations around a large
// mean when the input carries them).
template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };

template <typename A>
__device__ __forceinline__ A WarpSum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, returned to every thread. `scratch` holds 32 values; callers separate
// consecutive calls with the barrier at the end.
template <typename A>
__device__ __forceinline__ A BlockSum(A v, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A t = lane < warps ? scratch[lane] : A(0);
  t = WarpSum(t);
  __syncthreads();
  return t;
}

// A row in registers, vector paths: the thread holds chunks first, first + stride, ... (N of
// them) of 8 consecutive elements each; chunks past the row's end hold zeros.
template <int N, typename Tin, typename A>
__device__ __forceinline__ void LoadRowChunks(const Tin* __restrict__ xr, int first, int stride,
                                              int chunks, A (&v)[N][8]) {
#pragma unroll
  for (int c = 0; c < N; ++c) {
    const int chunk = first + c * stride;
    if (chunk < chunks) {
      const uint4* p = reinterpret_cast<const uint4*>(xr + chunk * 8);
      constexpr int kLoads = 8 * sizeof(Tin) / 16;
      uint4 raw[kLoads];
#pragma unroll
      for (int l = 0; l < kLoads; ++l) raw[l] = __ldg(p + l);
      const Tin* e = reinterpret_cast<const Tin*>(raw);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[c][i] = static_cast<A>(ToFloatOrDouble(e[i]));
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[c][i] = A(0);
    }
  }
}

// Mean and 1/sqrt(var + eps) of a row of k elements held as LoadRowChunks left it; `sum`
// adds a value over the threads that share the row (a warp or the block).
template <int N, typename A, typename Sum>
__device__ __forceinline__ void RowMoments(const A (&v)[N][8], int first, int stride, int chunks,
                                           int k, float eps, Sum sum, A* mean, A* rstd) {
  A s = 0;
#pragma unroll
  for (int c = 0; c < N; ++c)
#pragma unroll
    for (int i = 0; i < 8; ++i) s += v[c][i];
  const A m = sum(s) / A(k);
  A q = 0;
#pragma unroll
  for (int c = 0; c < N; ++c) {
    const bool live = first + c * stride < chunks;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const A d = v[c][i] - m;
      q += live ? d * d : A(0);
    }
  }
  *mean = m;
  *rstd = A(1) / sqrt(sum(q) / A(k) + A(eps));
}

// Writes (v - mean) * rstd of the chunks LoadRowChunks read, as Tout.
template <int N, typename Tout, typename A>
__device__ __forceinline__ void StoreRowChunks(Tout* __restrict__ yr, int first, int stride,
                                               int chunks, const A (&v)[N][8], A mean, A rstd) {
#pragma unroll
  for (int c = 0; c < N; ++c) {
    const int chunk = first + c * stride;
    if (chunk >= chunks) continue;
    alignas(16) Tout o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = FromFloat<Tout>(static_cast<float>((v[c][i] - mean) * rstd));
    uint4* q = reinterpret_cast<uint4*>(yr + chunk * 8);
    constexpr int kStores = 8 * sizeof(Tout) / 16;
#pragma unroll
    for (int l = 0; l < kStores; ++l) q[l] = reinterpret_cast<const uint4*>(o)[l];
  }
}

template <typename A>
struct WarpSummer {
  __device__ __forceinline__ A operator()(A v) const { return WarpSum(v); }
};
template <typename A>
struct BlockSummer {
  A* scratch;
  __device__ __forceinline__ A operator()(A v) const { return BlockSum(v, scratch); }
};

// Elements a thread caches in the vector path: kChunks chunks of 8.
constexpr int kChunks = 4;

// Vector path: k % 8 == 0, rows 16-byte aligned (ldx % 8 == 0, ldy % 8 == 0). Each thread
// holds up to kChunks chunks of 8 elements of its row in registers, so x is read once.
template <typename Tin, typename Tout>
__global__ void NormalizeRowsVec(const Tin* __restrict__ x, int64_t ldx, Tout* __restrict__ y,
                                 int64_t ldy, int k, int layernorm, float eps) {
  using A = typename AccOf<Tin>::type;
  __shared__ A scratch[32];
  const int64_t row = blockIdx.x;
  const int chunks = k / 8;
  A v[kChunks][8];
  LoadRowChunks(x + row * ldx, threadIdx.x, blockDim.x, chunks, v);
  A mean = 0, rstd = 1;
  if (layernorm) RowMoments(v, threadIdx.x, blockDim.x, chunks, k, eps, BlockSummer<A>{scratch}, &mean, &rstd);
  StoreRowChunks(y + row * ldy, threadIdx.x, blockDim.x, chunks, v, mean, rstd);
}

// Vector path for k <= 32 x 8 x CPL: one warp per row (8 rows per block), the row in the
// lanes' registers, shuffles only: one round trip to memory and no block barrier.
template <typename Tin, typename Tout, int CPL>
__global__ void __launch_bounds__(256) NormalizeRowsWarp(const Tin* __restrict__ x, int64_t ldx,
                                                         Tout* __restrict__ y, int64_t ldy,
                                                         int64_t rows, int k, int layernorm,
                                                         float eps) {
  using A = typename AccOf<Tin>::type;
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int chunks = k / 8;
  A v[CPL][8];
  LoadRowChunks(x + row * ldx, lane, 32, chunks, v);
  A mean = 0, rstd = 1;
  if (layernorm) RowMoments(v, lane, 32, chunks, k, eps, WarpSummer<A>{}, &mean, &rstd);
  StoreRowChunks(y + row * ldy, lane, 32, chunks, v, mean, rstd);
}

// Any k and alignment: three passes over the row (the later ones hit L1/L2).
template <typename Tin, typename Tout>
__global__ void NormalizeRowsScalar(const Tin* __restrict__ x, int64_t ldx, Tout* __restrict__ y,
                                    int64_t ldy, int k, int layernorm, float eps) {
  using A = typename AccOf<Tin>::type;
  __shared__ A scratch[32];
  const int64_t row = blockIdx.x;
  const Tin* xr = x + row * ldx;
  Tout* yr = y + row * ldy;
  A mean = 0, rstd = 1;
  if (layernorm) {
    A s = 0;
    for (int i = threadIdx.x; i < k; i += blockDim.x) s += static_cast<A>(ToFloatOrDouble(xr[i]));
    mean = BlockSum(s, scratch) / A(k);
    A q = 0;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      const A d = static_cast<A>(ToFloatOrDouble(xr[i])) - mean;
      q += d * d;
    }
    rstd = A(1) / sqrt(BlockSum(q, scratch) / A(k) + A(eps));
  }
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    yr[i] = FromFloat<Tout>(static_cast<float>((static_cast<A>(ToFloatOrDouble(xr[i])) - mean) * rstd));
  }
}

template <typename Tin, typename Tout>
cudaError_t Normalize(const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t k,
                      bool layernorm, float eps, cudaStream_t stream) {
  const auto* xt = static_cast<const Tin*>(x);
  auto* yt = static_cast<Tout*>(y);
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const int64_t chunks = k / 8;
  const bool vec = aligned && k % 8 == 0 && ldx % 8 == 0 && ldy % 8 == 0;
  if (vec && chunks <= 32 * 8) {
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    const int flag = layernorm ? 1 : 0;
    if (chunks <= 32) {
      NormalizeRowsWarp<Tin, Tout, 1><<<blocks, 256, 0, stream>>>(xt, ldx, yt, ldy, rows, static_cast<int>(k), flag, eps);
    } else if (chunks <= 64) {
      NormalizeRowsWarp<Tin, Tout, 2><<<blocks, 256, 0, stream>>>(xt, ldx, yt, ldy, rows, static_cast<int>(k), flag, eps);
    } else if (chunks <= 128) {
      NormalizeRowsWarp<Tin, Tout, 4><<<blocks, 256, 0, stream>>>(xt, ldx, yt, ldy, rows, static_cast<int>(k), flag, eps);
    } else {
      NormalizeRowsWarp<Tin, Tout, 8><<<blocks, 256, 0, stream>>>(xt, ldx, yt, ldy, rows, static_cast<int>(k), flag, eps);
    }
  } else if (vec && chunks <= 1024 * kChunks) {
    // About two chunks per thread: enough independent loads per thread, enough threads.
    int threads = static_cast<int>((chunks + 1) / 2);
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : threads;
    while (threads * kChunks < chunks) threads += 32;
    threads = threads > 1024 ? 1024 : threads;
    NormalizeRowsVec<Tin, Tout><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
        xt, ldx, yt, ldy, static_cast<int>(k), layernorm ? 1 : 0, eps);
  } else {
    const int threads = k >= 1024 ? 256 : (k >= 256 ? 128 : 32);
    NormalizeRowsScalar<Tin, Tout><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
        xt, ldx, yt, ldy, static_cast<int>(k), layernorm ? 1 : 0, eps);
  }
  return cudaPeekAtLastError();
}

template <typename Tin>
cudaError_t NormalizeTo(ElementType y_type, const void* x, int64_t ldx, void* y, int64_t ldy,
                        int64_t rows, int64_t k, bool layernorm, float eps, cudaStream_t stream) {
  switch (y_type) {
    case ElementType::kFloat32: return Normalize<Tin, float>(x, ldx, y, ldy, rows, k, layernorm, eps, stream);
    case ElementType::kFloat16: return Normalize<Tin, __half>(x, ldx, y, ldy, rows, k, layernorm, eps, stream);
    case ElementType::kBFloat16:
      return Normalize<Tin, __nv_bfloat16>(x, ldx, y, ldy, rows, k, layernorm, eps, stream);
    default: return cudaErrorInvalidValue;
  }
}

// rows x n in place; blockIdx.y walks rows (grid-stride), x covers columns.
template <typename T>
__global__ void ActivationKernel(T* __restrict__ y, int64_t ldy, int64_t rows, int n,
                                 dense::Activation act) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    T* yr = y + r * ldy;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
      yr[j] = FromFloat<T>(dense::Activate<float>(act, ToFloat(yr[j])));
    }
  }
}

template <typename T>
cudaError_t Activation(void* y, int64_t ldy, int64_t rows, int64_t n, dense::Activation act,
                       cudaStream_t stream) {
  const int threads = 256;
  const unsigned gx = static_cast<unsigned>((n + threads - 1) / threads);
  const unsigned gy = static_cast<unsigned>(rows < 65535 ? rows : 65535);
  ActivationKernel<T><<<dim3(gx, gy), threads, 0, stream>>>(static_cast<T*>(y), ldy, rows,
                                                           static_cast<int>(n), act);
  return cudaPeekAtLastError();
}

}  // namespace

cudaError_t LaunchNormalizeRows(const void* x, ElementType x_type, int64_t ldx, void* y,
                                ElementType y_type, int64_t ldy, int64_t rows, int64_t k,
                                bool layernorm, float eps, cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return cudaSuccess;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  switch (x_type) {
    case ElementType::kFloat32: return NormalizeTo<float>(y_type, x, ldx, y, ldy, rows, k, layernorm, eps, stream);
    case ElementType::kFloat64: return NormalizeTo<double>(y_type, x, ldx, y, ldy, rows, k, layernorm, eps, stream);
    case ElementType::kFloat16: return NormalizeTo<__half>(y_type, x, ldx, y, ldy, rows, k, layernorm, eps, stream);
    case ElementType::kBFloat16:
      return NormalizeTo<__nv_bfloat16>(y_type, x, ldx, y, ldy, rows, k, layernorm, eps, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchActivation(void* y, ElementType y_type, int64_t ldy, int64_t rows, int64_t n,
                             dense::Activation act, cudaStream_t stream) {
  if (rows <= 0 || n <= 0 || act == dense::Activation::kNone) return cudaSuccess;
  switch (y_type) {
    case ElementType::kFloat32: return Activation<float>(y, ldy, rows, n, act, stream);
    case ElementType::kFloat16: return Activation<__half>(y, ldy, rows, n, act, stream);
    case ElementType::kBFloat16: return Activation<__nv_bfloat16>(y, ldy, rows, n, act, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpucompute::kernels
