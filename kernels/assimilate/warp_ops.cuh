// Warp-level building blocks shared by the assimilate kernels (nvcc only): sums and maxima
// across a full warp, and the float64 tensor-core MMA.
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

}  // namespace gpucompute::assimilate::kernels
