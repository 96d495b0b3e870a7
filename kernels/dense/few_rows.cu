// One dense layer for a few rows (1..kFewRowsMax): bound by reading W once. Weights are stored
// transposed (W^T, out x ldw, "K-major"), so each output's weights are one contiguous row.
//
// Shape: a warp owns O outputs (O = 2 for one row, else 1); S warps (S in {1, 2, 4, 8}, each
// over a contiguous 1/S of k) share a group of O outputs when k is long or the outputs are few;
// a block of 8 warps holds 8 / S groups. A lane owns XC <= 8 16-byte chunks of each of its
// weight rows (chunks lane, lane + 32, ...) and issues all of them as the kernel starts, then
// loads the matching chunks of the (few) input rows, raw, into registers (every warp reads the
// same rows: one row straight from L1/L2, more rows through a copy in shared memory made once
// per block), and the bias of the output it will write. LayerNorm works on x minus the row's
// first element; with 16-bit weights its centring folds into the end (nothing waits for the
// mean), with float32 weights the mean is reduced first. Sums go over the warp by shuffles and
// over the S warps through shared memory; bias, activation and rounding are fused into the
// store.
// (The variants that measured slower on the H200 are listed in docs/design/dense.md.) Beyond
// 16 MiB of weights (rows x bytes) LayerNorm + cuBLASLt streams them faster and is taken
// instead (FewRowsPays, server/ops/dense/cuda_dense.cc).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "math/activation.cuh"
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
// Fewer warps leave HBM idle; more (e.g. one output per warp) measured slower on the H200:
// 1024 -> 4096 bf16 one row 8.00 us at 2048 warps vs 8.18 at 4096; 4096 -> 1024 9.5 at 512 vs
// 10.0 at 2048.
constexpr int64_t kMinWarps = 512;

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
  int s = 0;   // warps per output group; 0: k too long for this kernel
  int xc = 0;  // chunks per lane
  int o = 1;   // outputs per warp (2 only for one row)
};

Split ChooseSplit(int rows, int64_t k, int64_t n, int e, int x_bytes) {
  const int64_t chunks = (k + e - 1) / e;
  const int xc_max = MaxChunksPerLane(rows, e, x_bytes);
  const int64_t s_reg = (chunks + 32 * xc_max - 1) / (32 * xc_max);
  if (s_reg > kMaxSplit) return {};
  // One row: two outputs per warp share the input registers (fewer warps, one wave), while at
  // least kMinWarps warps remain.
  const int o = rows == 1 && n >= 2 * kMinWarps ? 2 : 1;
  int s = PowerOfTwoAtLeast(s_reg);
  // More warps per output while the GPU is not covered and every lane keeps a chunk.
  while (s < kMaxSplit && n * s / o < kMinWarps && chunks >= int64_t{32} * s * 2) s *= 2;
  const int xc = PowerOfTwoAtLeast((chunks + 32 * s - 1) / (32 * s));
  return {s, xc, o};
}

// Whether a block copies its R input rows into shared memory once (see FewRowsKernel).
template <int R>
inline constexpr bool kStageInputs = R > 1;

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

template <typename Tx, typename Tw, int R, int XC, int O>
__global__ void __launch_bounds__(kThreads) FewRowsKernel(FewRowsArgs a, int split, bool x_vec) {
  constexpr int E = kVec<Tw>;
  // Per-warp partial sums, in this order: dot products per (output, row); sums of squares per
  // row; and for the folded LayerNorm (16-bit weights) the row sums and the weights' sums.
  constexpr int kDots = O * R;
  constexpr int kSums = kDots + 2 * R + O;
  constexpr bool kFold = sizeof(Tw) == 2;
  __shared__ float exchange[kWarps][kSums];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / split) + warp / split) * O;
  const int part = warp % split;
  const int k = a.k;
  const int chunks = (k + E - 1) / E;
  const int first = part * 32 * XC + lane;  // this lane's chunks: first + 32 u

  // Weights first: every chunk of this lane's O outputs in flight before anything waits.
  uint4 wv[O][XC];
#pragma unroll
  for (int o = 0; o < O; ++o) {
    const bool active = j0 + o < a.n;
    const char* wrow = reinterpret_cast<const char*>(static_cast<const Tw*>(a.w) +
                                                     (active ? j0 + o : 0) * a.ldw);
#pragma unroll
    for (int u = 0; u < XC; ++u) {
      const int c = first + 32 * u;
      wv[o][u] = active && c < chunks ? LoadStreaming(wrow + 16 * static_cast<int64_t>(c))
                                      : make_uint4(0, 0, 0, 0);
    }
  }
  // The bias of the output this lane may write (lane o R + r of the group's first warp), so
  // that the store does not wait on one more cold read after the sums. (Taking the weights'
  // sums from the column sums made at load time instead of adding them up here measured
  // 0.3 us slower for one row: ptxas scheduled the kernel differently.)
  const bool writer = part == 0 && lane < O * R && j0 + lane / R < a.n;
  const float bias = writer ? a.bias[j0 + lane / R] : 0.f;

  // The inputs next, all of this lane's chunks, held raw in registers and shared by the warp's
  // O outputs. Every warp needs the same rows: one row is read straight from global memory (L2
  // hits after the first warps; a copy through shared memory measured 0.25 us slower), more
  // rows are first copied once per block into shared memory (the chunks of all S parts, zeros
  // beyond k), one L2 read per block instead of per warp (2 rows -0.5 us, 4 rows -1.5 us).
  const Tx* x = static_cast<const Tx*>(a.x);
  extern __shared__ uint4 x_shared[];
  auto* xs = reinterpret_cast<XChunk<Tx, E>*>(x_shared);
  const int row_chunks = split * 32 * XC;
  XChunk<Tx, E> xv[R][XC];
  if constexpr (kStageInputs<R>) {
    for (int i = threadIdx.x; i < R * row_chunks; i += kThreads) {
      const int r = i / row_chunks, c = i - r * row_chunks;
      xs[i] = LoadChunk<Tx, E>(x + r * a.ldx, c * E, k, x_vec);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < XC; ++u) xv[r][u] = xs[r * row_chunks + first + 32 * u];
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < XC; ++u) xv[r][u] = LoadChunk<Tx, E>(x + r * a.ldx, (first + 32 * u) * E, k, x_vec);
  }

  // Sums over the S warps of an output group (their partials meet in shared memory).
  auto group_sum = [&](float (&v)[kSums], int count) {
#pragma unroll
    for (int i = 0; i < kSums; ++i)
      if (i < count) v[i] = WarpSum(v[i]);
    if (split > 1) {
      if (lane == 0) {
#pragma unroll
        for (int i = 0; i < kSums; ++i)
          if (i < count) exchange[warp][i] = v[i];
      }
      __syncthreads();
      const int base = warp - part;
#pragma unroll
      for (int i = 0; i < kSums; ++i) {
        if (i < count) {
          float t = 0.f;
          for (int p = 0; p < split; ++p) t += exchange[base + p][i];
          v[i] = t;
        }
      }
      __syncthreads();
    }
  };

  // LayerNorm works on x - shift with the row's first element as the shift, so that no sum
  // loses digits to a large common offset (the mean itself is never formed). With d the mean
  // of x - shift: for float32 weights each value is centred as (x - shift) - d before the
  // products (d first: one reduction on the critical path); for 16-bit weights the centring
  // is folded into the end, dot((x - shift) - d, w) = dot(x - shift, w) - d sum(w) and
  // sum(((x - shift) - d)^2) = sum((x - shift)^2) - k d^2, so nothing waits for d (the
  // cancellation costs ~1e-7 relative per unit of |d| / std, far below 16-bit rounding).
  // Without LayerNorm shift = d = 0.
  float shift[R], d[R];
#pragma unroll
  for (int r = 0; r < R; ++r) shift[r] = d[r] = 0.f;
  if (a.layernorm) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      shift[r] = ToFloat(kStageInputs<R> ? xs[r * row_chunks].v[0] : x[r * a.ldx]);
    }
  }
  if (a.layernorm && !kFold) {
    float sums[kSums];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float t = 0.f;
#pragma unroll
      for (int u = 0; u < XC; ++u)
#pragma unroll
        for (int e = 0; e < E; ++e)
          if ((first + 32 * u) * E + e < k) t += ToFloat(xv[r][u].v[e]) - shift[r];
      sums[r] = t;
    }
    group_sum(sums, R);
#pragma unroll
    for (int r = 0; r < R; ++r) d[r] = sums[r] / static_cast<float>(k);
  }

  // Dot products acc[o R + r], sums of squares acc[kDots + r], and for the fold the row sums
  // acc[kDots + R + r] and the weights' sums acc[kDots + 2 R + o].
  float acc[kSums];
#pragma unroll
  for (int i = 0; i < kSums; ++i) acc[i] = 0.f;
#pragma unroll
  for (int u = 0; u < XC; ++u) {
    float wf[O][E];
#pragma unroll
    for (int o = 0; o < O; ++o) {
      Unpack<Tw>(wv[o][u], wf[o]);
      if (kFold) {
#pragma unroll
        for (int e = 0; e < E; ++e) acc[kDots + 2 * R + o] += wf[o][e];  // zero beyond k
      }
    }
    const bool whole = (first + 32 * u + 1) * E <= k;
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const bool valid = whole || (first + 32 * u) * E + e < k;
        const float xc = valid ? (ToFloat(xv[r][u].v[e]) - shift[r]) - d[r] : 0.f;
#pragma unroll
        for (int o = 0; o < O; ++o) acc[o * R + r] = fmaf(xc, wf[o][e], acc[o * R + r]);
        acc[kDots + r] = fmaf(xc, xc, acc[kDots + r]);
        if (kFold) acc[kDots + R + r] += xc;
      }
    }
  }
  group_sum(acc, !a.layernorm ? kDots : (kFold ? kSums : kDots + R));

  if (!writer) return;
  // Lane o R + r writes output j0 + o of row r.
  const int o = lane / R, r = lane % R;
  const int64_t j = j0 + o;
  float dot = 0.f, ss = 0.f, sx = 0.f, sw = 0.f;  // ss, sx, sw: LayerNorm only
#pragma unroll
  for (int i = 0; i < kDots; ++i)
    if (lane == i) dot = acc[i];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    if (r == i) {
      ss = acc[kDots + i];
      sx = acc[kDots + R + i];
    }
  }
#pragma unroll
  for (int i = 0; i < O; ++i)
    if (o == i) sw = acc[kDots + 2 * R + i];
  float var = ss / static_cast<float>(k);
  if (kFold && a.layernorm) {
    const float dm = sx / static_cast<float>(k);
    dot -= dm * sw;
    var = fmaxf(var - dm * dm, 0.f);
  }
  const float rstd = a.layernorm ? 1.f / sqrtf(var + a.eps) : 1.f;
  Tw* y = static_cast<Tw*>(a.y);
  y[r * a.ldy + j] = FromFloat<Tw>(dense::Activate<float>(a.act, dot * rstd + bias));
}

template <typename Tx, typename Tw, int R, int XC>
cudaError_t LaunchChunks(const FewRowsArgs& a, Split s, bool x_vec, cudaStream_t stream) {
  // Only the chunk counts ChooseSplit can pick are instantiated; two outputs per warp only for
  // one row.
  if constexpr (InputFits(R, XC, kVec<Tw>, sizeof(Tx))) {
    const int per_block = (kWarps / s.s) * s.o;
    const unsigned blocks = static_cast<unsigned>((a.n + per_block - 1) / per_block);
    // The block's copy of the input rows: R x S x 32 x XC chunks, <= 32 KiB (InputFits).
    const size_t x_bytes = kStageInputs<R> ? sizeof(XChunk<Tx, kVec<Tw>>) * R * s.s * 32 * XC : 0;
    if constexpr (R == 1) {
      if (s.o == 2) {
        FewRowsKernel<Tx, Tw, R, XC, 2><<<blocks, kThreads, x_bytes, stream>>>(a, s.s, x_vec);
        return cudaPeekAtLastError();
      }
    }
    FewRowsKernel<Tx, Tw, R, XC, 1><<<blocks, kThreads, x_bytes, stream>>>(a, s.s, x_vec);
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

bool InputTakes(ElementType x_type, ElementType w_type) {
  return x_type == w_type || x_type == ElementType::kFloat32;
}

}  // namespace

bool FewRowsFits(int rows, int64_t k, int64_t n, ElementType x_type, ElementType w_type) {
  if (rows < 1 || rows > kFewRowsMax || k < 1 || n < 1 || k >= (int64_t{1} << 30) ||
      w_type == ElementType::kFloat64 || !InputTakes(x_type, w_type)) {
    return false;
  }
  const int e = w_type == ElementType::kFloat32 ? kVec<float> : kVec<__half>;
  const int x_bytes = x_type == ElementType::kFloat32 ? 4 : 2;
  return ChooseSplit(rows, k, n, e, x_bytes).s != 0;
}

cudaError_t LaunchFewRows(const FewRowsArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return cudaSuccess;
  if (!FewRowsFits(a.rows, a.k, a.n, a.x_type, a.w_type) || a.ldw % 8 != 0 ||
      reinterpret_cast<uintptr_t>(a.w) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  switch (a.w_type) {
    case ElementType::kFloat32: return LaunchTyped<float, float>(a, stream);
    case ElementType::kFloat16:
      return a.x_type == ElementType::kFloat32 ? LaunchTyped<float, __half>(a, stream)
                                         : LaunchTyped<__half, __half>(a, stream);
    case ElementType::kBFloat16:
      return a.x_type == ElementType::kFloat32 ? LaunchTyped<float, __nv_bfloat16>(a, stream)
                                         : LaunchTyped<__nv_bfloat16, __nv_bfloat16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpucompute::kernels
