// Warp-level building blocks shared by the assimilate kernels (nvcc only): sums and maxima
// across a full warp, the float64 tensor-core MMA, and asynchronous copies to shared memory.
#pragma once

namespace gpucompute::assimilate::kernels {

constexpr unsigned kFullWarp = 0xffffffffu;

// The sum of v over the 32 lanes, in every lane (a butterfly: the same order in every lane).
__device__ __forceinline__ double WarpSum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFullWarp, v, o);
  return v;
}

// The largest v over the 32 lanes, in every lane.
__device__ __forceinline__ double WarpMax(double v) {
  for (int o = 16; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(kFullWarp, v, o));
  return v;
}

// d += a b for the lane's fragments of an m8n8k4 float64 MMA (A row-major 8 x 4: the lane holds
// A[lane / 4][lane % 4]; B column-major 4 x 8: B[lane % 4][lane / 4]; D 8 x 8: the lane holds
// D[lane / 4][2 (lane % 4) + {0, 1}]). IEEE fused multiply-adds.
__device__ __forceinline__ void MmaF64(double& d0, double& d1, double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(d0), "+d"(d1)
               : "d"(a), "d"(b));
}

// The same for two 8 x 8 tiles that share B: A's rows 0 ... 7 in a0 and rows 8 ... 15 in a1 (the
// lane holds A[lane / 4][lane % 4] and A[8 + lane / 4][lane % 4]), D's in (d0, d1) and (d2, d3).
// On Hopper one m16n8k4 float64 MMA (faster than two m8n8k4); before it, two m8n8k4.
__device__ __forceinline__ void MmaF64Pair(double& d0, double& d1, double& d2, double& d3, double a0, double a1,
                                           double b) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+d"(d0), "+d"(d1), "+d"(d2), "+d"(d3)
               : "d"(a0), "d"(a1), "d"(b));
#else
  MmaF64(d0, d1, a0, b);
  MmaF64(d2, d3, a1, b);
#endif
}

// *smem = *gmem, kBytes (4, 8 or 16) from global to shared memory asynchronously (cp.async,
// L1-cached): complete after CpAsyncWait, visible to the other threads after a __syncwarp or
// __syncthreads. CpAsyncOrZero writes zeros unless `copy`.
template <int kBytes>
__device__ __forceinline__ void CpAsync(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(kBytes));
}
template <int kBytes>
__device__ __forceinline__ void CpAsyncOrZero(void* smem, const void* gmem, bool copy) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(kBytes),
               "r"(copy ? kBytes : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }

}  // namespace gpucompute::assimilate::kernels
