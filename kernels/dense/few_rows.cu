// One dense layer for a few rows (1..8): bound by reading W once, so the kernel streams W with
// 16-byte loads, all of a thread's loads in flight at once, and keeps the (normalised) rows in
// shared memory as floats.
//
// Shape: a block of 256 threads owns TN = 4 x (16 / sizeof(W)) consecutive columns (64 bytes
// of each W row) and all of k; thread (g = tid % 4, s = tid / 4) reads columns [g V, g V + V)
// of W rows s, s + 64, s + 128, ... The first loads are issued before the rows are staged, so
// the rows' LayerNorm (recomputed by every block; a few KiB from L2) hides under the weights'
// latency. Partial sums are reduced over the 8 slices of a warp by shuffles and over the
// warps in shared memory; bias, activation and rounding to W's type are fused into the store.
// (Splitting k over thread-block clusters, for layers with few column tiles, measured slower:
// see kernels/NOTES.md.)
#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dense/activation.cuh"
#include "kernels/dense/dense_kernels.cuh"
#include "kernels/dense/element.cuh"

namespace gpucompute::kernels {
namespace {

using dense_internal::FromFloat;
using dense_internal::kVec;
using dense_internal::LoadStreaming;
using dense_internal::ToFloat;
using dense_internal::Unpack;

constexpr size_t kMaxShared = size_t{160} << 10;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kGroups = 4;                   // threads across one W row segment (64 bytes)
constexpr int kSlices = kThreads / kGroups;  // W rows read per block step

template <typename Tw>
constexpr int kTileN = kGroups * kVec<Tw>;  // columns per block

__host__ __device__ inline int64_t PaddedK(int64_t k) { return (k + kThreads - 1) / kThreads * kThreads; }

int TileColumns(DenseType w_type) { return w_type == DenseType::kF32 ? kTileN<float> : kTileN<__half>; }

size_t SharedBytes(int rows, int64_t k, int tn) {
  // xs (rows x padded k), per-warp partials (kWarps x rows x tn).
  return static_cast<size_t>(rows * PaddedK(k) + kWarps * rows * tn) * sizeof(float);
}

// Stages rows x k of x (type Tin) into xs (rows x kp floats, zero tail), all of the block's
// loads in flight at once, and with layernorm normalises every row in place (two passes,
// block reductions; a thread touches the elements tid + j x kThreads of each row).
template <int R, typename Tin>
__device__ __forceinline__ void StageRows(const Tin* __restrict__ x, int64_t ldx, int k, int kp,
                                          bool layernorm, float eps, float* xs, float* scratch) {
  const int tid = threadIdx.x;
  const int total = R * kp;
  constexpr int kBatch = 8;
  for (int base = tid; base < total; base += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int idx = base + j * kThreads;
      const int r = idx / kp, i = idx - r * kp;
      v[j] = (idx < total && i < k) ? ToFloat(x[r * ldx + i]) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int idx = base + j * kThreads;
      if (idx < total) xs[idx] = v[j];
    }
  }
  if (!layernorm) return;
  const int lane = tid & 31, warp = tid >> 5;
  auto block_sums = [&](float* v) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
      if (lane == 0) scratch[warp * R + r] = v[r];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) t += scratch[w * R + r];
      v[r] = t;
    }
    __syncthreads();
  };
  float part[R], mean[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    part[r] = 0.f;
    for (int i = tid; i < k; i += kThreads) part[r] += xs[r * kp + i];
  }
  block_sums(part);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    mean[r] = part[r] / static_cast<float>(k);
    part[r] = 0.f;
    for (int i = tid; i < k; i += kThreads) {
      const float d = xs[r * kp + i] - mean[r];
      part[r] += d * d;
    }
  }
  block_sums(part);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float rstd = 1.f / sqrtf(part[r] / static_cast<float>(k) + eps);
    for (int i = tid; i < k; i += kThreads) xs[r * kp + i] = (xs[r * kp + i] - mean[r]) * rstd;
  }
}

template <typename Tw, int R, int U>
__global__ void __launch_bounds__(kThreads) FewRowsKernel(FewRowsArgs a) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  constexpr int V = kVec<Tw>;
  constexpr int TN = kTileN<Tw>;
  const int k = a.k;
  const int kp = static_cast<int>(PaddedK(k));
  const int iters = kp / kSlices;
  float* xs = smem;                     // R x kp
  float* red = xs + R * kp;  // kWarps x R x TN (also the LayerNorm scratch)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = tid % kGroups, s = tid / kGroups;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * TN + g * V;
  const bool active = col < a.ldw;
  const int first = s;  // this thread's first W row; then every kSlices
  const char* wp =
      reinterpret_cast<const char*>(static_cast<const Tw*>(a.w) + first * a.ldw + col);
  const int64_t step = static_cast<int64_t>(kSlices) * a.ldw * sizeof(Tw);

  // The first U weight vectors are in flight while the rows are staged.
  uint4 buf[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    buf[u] = (active && u < iters && first + u * kSlices < k) ? LoadStreaming(wp + u * step)
                                                              : make_uint4(0, 0, 0, 0);
  }

  switch (a.x_type) {
    case DenseType::kF64:
      StageRows<R>(static_cast<const double*>(a.x), a.ldx, k, kp, a.layernorm, a.eps, xs, red);
      break;
    case DenseType::kF16:
      StageRows<R>(static_cast<const __half*>(a.x), a.ldx, k, kp, a.layernorm, a.eps, xs, red);
      break;
    case DenseType::kBF16:
      StageRows<R>(static_cast<const __nv_bfloat16*>(a.x), a.ldx, k, kp, a.layernorm, a.eps, xs, red);
      break;
    default:
      StageRows<R>(static_cast<const float*>(a.x), a.ldx, k, kp, a.layernorm, a.eps, xs, red);
      break;
  }
  __syncthreads();

  float acc[R][V];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[r][v] = 0.f;

  // Rolling prefetch: each consumed vector's slot is refilled with the one U steps ahead.
  for (int i0 = 0; i0 < iters; i0 += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u;
      if (i < iters) {
        const uint4 w = buf[u];
        const int next = i + U;
        buf[u] = (active && next < iters && first + next * kSlices < k)
                     ? LoadStreaming(wp + next * step)
                     : make_uint4(0, 0, 0, 0);
        const int kk = first + i * kSlices;  // < kp: xs is zero beyond k
        float wf[V];
        Unpack<Tw>(w, wf);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float xv = xs[r * kp + kk];
#pragma unroll
          for (int v = 0; v < V; ++v) acc[r][v] = fmaf(xv, wf[v], acc[r][v]);
        }
      }
    }
  }

  // Sum over the 8 k-slices of a warp (lane bits 2..4), then over the warps.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v)
#pragma unroll
      for (int o = kGroups; o < 32; o <<= 1) acc[r][v] += __shfl_xor_sync(0xffffffffu, acc[r][v], o);
  if (lane < kGroups) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) red[(warp * R + r) * TN + lane * V + v] = acc[r][v];
  }
  __syncthreads();
  Tw* y = static_cast<Tw*>(a.y);
  for (int t = tid; t < R * TN; t += kThreads) {
    const int r = t / TN, c = t - r * TN;
    const int64_t j = static_cast<int64_t>(blockIdx.x) * TN + c;
    if (j >= a.n) continue;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += red[(w * R + r) * TN + c];
    y[r * a.ldy + j] = FromFloat<Tw>(dense::Activate<float>(a.act, sum + a.bias[j]));
  }
}

template <typename Tw, int R>
cudaError_t LaunchTyped(const FewRowsArgs& a, cudaStream_t stream) {
  constexpr int U = R <= 2 ? 16 : 8;
  const size_t shared = SharedBytes(R, a.k, kTileN<Tw>);
  if (shared > kMaxShared) return cudaErrorInvalidValue;
  auto kernel = FewRowsKernel<Tw, R, U>;
  if (shared > (size_t{48} << 10)) {
    // Opt in to more than 48 KiB of shared memory, once per device.
    static std::atomic<bool> configured[64];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    if (!configured[device & 63].load(std::memory_order_acquire)) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kMaxShared));
      if (err != cudaSuccess) return err;
      configured[device & 63].store(true, std::memory_order_release);
    }
  }
  const unsigned blocks = static_cast<unsigned>((a.n + kTileN<Tw> - 1) / kTileN<Tw>);
  kernel<<<blocks, kThreads, shared, stream>>>(a);
  return cudaPeekAtLastError();
}

template <typename Tw>
cudaError_t LaunchRows(const FewRowsArgs& a, cudaStream_t stream) {
  switch (a.rows) {
    case 1: return LaunchTyped<Tw, 1>(a, stream);
    case 2: return LaunchTyped<Tw, 2>(a, stream);
    case 3: return LaunchTyped<Tw, 3>(a, stream);
    case 4: return LaunchTyped<Tw, 4>(a, stream);
    case 5: return LaunchTyped<Tw, 5>(a, stream);
    case 6: return LaunchTyped<Tw, 6>(a, stream);
    case 7: return LaunchTyped<Tw, 7>(a, stream);
    case 8: return LaunchTyped<Tw, 8>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

size_t FewRowsSharedBytes(int rows, int64_t k, DenseType w_type) {
  return SharedBytes(rows, k, TileColumns(w_type));
}

bool FewRowsFits(int rows, int64_t k, DenseType w_type) {
  return rows >= 1 && rows <= kFewRowsMax && k >= 1 && k < (int64_t{1} << 30) &&
         w_type != DenseType::kF64 && FewRowsSharedBytes(rows, k, w_type) <= kMaxShared;
}

cudaError_t LaunchFewRows(const FewRowsArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return cudaSuccess;
  if (!FewRowsFits(a.rows, a.k, a.w_type) || a.ldw % 8 != 0 ||
      reinterpret_cast<uintptr_t>(a.w) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  switch (a.w_type) {
    case DenseType::kF32: return LaunchRows<float>(a, stream);
    case DenseType::kF16: return LaunchRows<__half>(a, stream);
    case DenseType::kBF16: return LaunchRows<__nv_bfloat16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpucompute::kernels
