// One dense layer for a few rows (1..kFewRowsMax): bound by reading W once. Weights are stored
// transposed (W^T, out x ldw, "K-major"), so each output's weights are one contiguous row.
//
// Shape: one warp (or S warps, S in {1, 2, 4, 8}, each over a contiguous 1/S of k) per output
// column; a block of 8 warps holds 8 / S outputs. A lane owns XC <= 8 16-byte chunks of the
// weight row (chunks lane, lane + 32, ...) and issues all of them as the kernel starts, then
// loads the matching chunks of the (few) input rows, raw, into registers (L1/L2 hits: every
// warp reads the same rows). LayerNorm needs only the row mean before the FMAs (a shifted sum,
// one warp reduction, plus one block exchange when S > 1); the variance is reduced with the
// dot products at the end. Bias, activation and rounding are fused into the store. S grows
// until the warps cover the GPU (~4096 warps) and a lane's inputs fit its register budget.
// (Measured slower: re-reading the inputs from L1 instead of holding them, for more blocks per
// SM; W in its natural in x out layout with rows staged in shared memory; k split over
// clusters. See kernels/NOTES.md.)
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

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxSplit = kWarps;         // S <= 8: all parts of an output share a block
constexpr int kRegisterWords = 32;        // 4-byte registers of raw input a lane holds
constexpr int64_t kTargetWarps = 4096;    // ~31 warps per SM on an H200 (132 SMs)

// Whether R rows of XC chunks of E inputs of `x_bytes` each fit a lane's register budget.
constexpr bool InputFits(int rows, int xc, int e, int x_bytes) {
  return rows * xc * e * x_bytes <= kRegisterWords * 4;
}

// Largest chunks-per-lane (a power of two <= 8) whose inputs fit.
int MaxChunksPerLane(int rows, int e, int x_bytes) {
  int xc = 8;
  while (xc > 1 && !InputFits(rows, xc, e, x_bytes)) xc /= 2;
  return xc;
}

int PowerOfTwoAtLeast(int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

struct Split {
  int s = 0;   // warps per output; 0: k too long for this kernel
  int xc = 0;  // chunks per lane
};

Split ChooseSplit(int rows, int64_t k, int64_t n, int e, int x_bytes) {
  const int64_t chunks = (k + e - 1) / e;
  const int xc_max = MaxChunksPerLane(rows, e, x_bytes);
  const int64_t s_reg = (chunks + 32 * xc_max - 1) / (32 * xc_max);
  if (s_reg > kMaxSplit) return {};
  int s = PowerOfTwoAtLeast(s_reg);
  // More warps per output while the GPU is not covered and every lane keeps a chunk.
  while (s < kMaxSplit && n * s < kTargetWarps && chunks >= int64_t{32} * s * 2) s *= 2;
  const int xc = PowerOfTwoAtLeast((chunks + 32 * s - 1) / (32 * s));
  return {s, xc};
}

// E consecutive inputs, kept raw (16-bit inputs take half the registers of floats).
template <typename Tx, int E>
struct alignas(16) XChunk {
  Tx v[E];
};

// The chunk of a row from element `first`; zeros at and beyond k.
template <typename Tx, int E>
__device__ __forceinline__ XChunk<Tx, E> LoadChunk(const Tx* __restrict__ row, int first, int k,
                                                   bool vec) {
  XChunk<Tx, E> c;
  if (vec && first + E <= k) {
    constexpr int kBytes = E * static_cast<int>(sizeof(Tx));
    static_assert(kBytes % 16 == 0, "chunks are whole 16-byte vectors");
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q) {
      reinterpret_cast<uint4*>(c.v)[q] = reinterpret_cast<const uint4*>(row + first)[q];
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) c.v[e] = first + e < k ? row[first + e] : FromFloat<Tx>(0.f);
  }
  return c;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename Tx, typename Tw, int R, int XC>
__global__ void __launch_bounds__(kThreads) FewRowsKernel(FewRowsArgs a, int split, bool x_vec) {
  constexpr int E = kVec<Tw>;
  __shared__ float exchange[kWarps][2 * R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * (kWarps / split) + warp / split;
  const int part = warp % split;
  const bool active = j < a.n;
  const int k = a.k;
  const int chunks = (k + E - 1) / E;
  const int first = part * 32 * XC + lane;  // this lane's chunks: first + 32 u

  // The weights first: every chunk of this lane in flight before anything waits.
  uint4 wv[XC];
  const char* wrow = reinterpret_cast<const char*>(static_cast<const Tw*>(a.w) +
                                                   (active ? j : 0) * a.ldw);
#pragma unroll
  for (int u = 0; u < XC; ++u) {
    const int c = first + 32 * u;
    wv[u] = active && c < chunks ? LoadStreaming(wrow + 16 * static_cast<int64_t>(c))
                                 : make_uint4(0, 0, 0, 0);
  }
  // The inputs next, all of this lane's chunks, held raw in registers (L1/L2 hits after the
  // first warps: every warp reads the same rows).
  const Tx* x = static_cast<const Tx*>(a.x);
  XChunk<Tx, E> xv[R][XC];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int u = 0; u < XC; ++u) xv[r][u] = LoadChunk<Tx, E>(x + r * a.ldx, (first + 32 * u) * E, k, x_vec);

  // Sums over the S warps of this output (their partials meet in shared memory).
  auto output_sum = [&](float (&v)[2 * R], int count) {
#pragma unroll
    for (int i = 0; i < 2 * R; ++i)
      if (i < count) v[i] = WarpSum(v[i]);
    if (split > 1) {
      if (lane == 0) {
#pragma unroll
        for (int i = 0; i < 2 * R; ++i)
          if (i < count) exchange[warp][i] = v[i];
      }
      __syncthreads();
      const int base = warp - part;
#pragma unroll
      for (int i = 0; i < 2 * R; ++i) {
        if (i < count) {
          float t = 0.f;
          for (int p = 0; p < split; ++p) t += exchange[base + p][i];
          v[i] = t;
        }
      }
      __syncthreads();
    }
  };

  // LayerNorm centres each value as (x - shift) - sum(x - shift) / k with the row's first
  // element as the shift: neither the sum nor the centred values lose digits to a large common
  // offset (the mean itself is never formed). Without LayerNorm shift = d = 0.
  float shift[R], d[R];
#pragma unroll
  for (int r = 0; r < R; ++r) shift[r] = d[r] = 0.f;
  if (a.layernorm) {
    float sums[2 * R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      shift[r] = ToFloat(x[r * a.ldx]);
      float t = 0.f;
#pragma unroll
      for (int u = 0; u < XC; ++u)
#pragma unroll
        for (int e = 0; e < E; ++e)
          if ((first + 32 * u) * E + e < k) t += ToFloat(xv[r][u].v[e]) - shift[r];
      sums[r] = t;
    }
    output_sum(sums, R);
#pragma unroll
    for (int r = 0; r < R; ++r) d[r] = sums[r] / static_cast<float>(k);
  }

  // Dot products (and, for LayerNorm, the centred sums of squares).
  float acc[2 * R];
#pragma unroll
  for (int i = 0; i < 2 * R; ++i) acc[i] = 0.f;
#pragma unroll
  for (int u = 0; u < XC; ++u) {
    float wf[E];
    Unpack<Tw>(wv[u], wf);
    const bool whole = (first + 32 * u + 1) * E <= k;
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const bool valid = whole || (first + 32 * u) * E + e < k;
        const float xc = valid ? (ToFloat(xv[r][u].v[e]) - shift[r]) - d[r] : 0.f;
        acc[r] = fmaf(xc, wf[e], acc[r]);
        acc[R + r] = fmaf(xc, xc, acc[R + r]);
      }
    }
  }
  output_sum(acc, a.layernorm ? 2 * R : R);

  if (!active || part != 0 || lane >= R) return;
  // Lane r writes row r.
  float dot = 0.f, ss = 0.f;  // ss is only used with LayerNorm
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (lane == r) {
      dot = acc[r];
      ss = acc[R + r];
    }
  }
  const float rstd = a.layernorm ? 1.f / sqrtf(ss / static_cast<float>(k) + a.eps) : 1.f;
  Tw* y = static_cast<Tw*>(a.y);
  y[lane * a.ldy + j] = FromFloat<Tw>(dense::Activate<float>(a.act, dot * rstd + a.bias[j]));
}

template <typename Tx, typename Tw, int R, int XC>
cudaError_t LaunchChunks(const FewRowsArgs& a, Split s, bool x_vec, cudaStream_t stream) {
  // Only the chunk counts ChooseSplit can pick are instantiated.
  if constexpr (InputFits(R, XC, kVec<Tw>, sizeof(Tx))) {
    const unsigned blocks = static_cast<unsigned>((a.n + kWarps / s.s - 1) / (kWarps / s.s));
    FewRowsKernel<Tx, Tw, R, XC><<<blocks, kThreads, 0, stream>>>(a, s.s, x_vec);
    return cudaPeekAtLastError();
  } else {
    return cudaErrorInvalidValue;
  }
}

template <typename Tx, typename Tw, int R>
cudaError_t LaunchRows(const FewRowsArgs& a, Split s, bool x_vec, cudaStream_t stream) {
  switch (s.xc) {
    case 1: return LaunchChunks<Tx, Tw, R, 1>(a, s, x_vec, stream);
    case 2: return LaunchChunks<Tx, Tw, R, 2>(a, s, x_vec, stream);
    case 4: return LaunchChunks<Tx, Tw, R, 4>(a, s, x_vec, stream);
    case 8: return LaunchChunks<Tx, Tw, R, 8>(a, s, x_vec, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename Tx, typename Tw>
cudaError_t LaunchTyped(const FewRowsArgs& a, cudaStream_t stream) {
  const Split s = ChooseSplit(a.rows, a.k, a.n, kVec<Tw>, sizeof(Tx));
  if (s.s == 0) return cudaErrorInvalidValue;
  const bool x_vec = (a.ldx * static_cast<int64_t>(sizeof(Tx))) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  switch (a.rows) {
    case 1: return LaunchRows<Tx, Tw, 1>(a, s, x_vec, stream);
    case 2: return LaunchRows<Tx, Tw, 2>(a, s, x_vec, stream);
    case 3: return LaunchRows<Tx, Tw, 3>(a, s, x_vec, stream);
    case 4: return LaunchRows<Tx, Tw, 4>(a, s, x_vec, stream);
    default: return cudaErrorInvalidValue;
  }
}

bool InputTakes(DenseType x_type, DenseType w_type) {
  return x_type == w_type || x_type == DenseType::kF32;
}

}  // namespace

bool FewRowsFits(int rows, int64_t k, int64_t n, DenseType x_type, DenseType w_type) {
  if (rows < 1 || rows > kFewRowsMax || k < 1 || n < 1 || k >= (int64_t{1} << 30) ||
      w_type == DenseType::kF64 || !InputTakes(x_type, w_type)) {
    return false;
  }
  const int e = w_type == DenseType::kF32 ? kVec<float> : kVec<__half>;
  const int x_bytes = x_type == DenseType::kF32 ? 4 : 2;
  return ChooseSplit(rows, k, n, e, x_bytes).s != 0;
}

cudaError_t LaunchFewRows(const FewRowsArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return cudaSuccess;
  if (!FewRowsFits(a.rows, a.k, a.n, a.x_type, a.w_type) || a.ldw % 8 != 0 ||
      reinterpret_cast<uintptr_t>(a.w) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  switch (a.w_type) {
    case DenseType::kF32: return LaunchTyped<float, float>(a, stream);
    case DenseType::kF16:
      return a.x_type == DenseType::kF32 ? LaunchTyped<float, __half>(a, stream)
                                         : LaunchTyped<__half, __half>(a, stream);
    case DenseType::kBF16:
      return a.x_type == DenseType::kF32 ? LaunchTyped<float, __nv_bfloat16>(a, stream)
                                         : LaunchTyped<__nv_bfloat16, __nv_bfloat16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpucompute::kernels
