// Device-side element access for the dense kernels: loads that widen f32/f64/f16/bf16 to
// float, stores that round float to f32/f16/bf16 (round to nearest even, as the host's
// FromFloat), and unpacking of 16-byte vectors.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/dense/dense_kernels.cuh"

namespace gpucompute::kernels::dense_internal {

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(double v) { return static_cast<float>(v); }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// Widened for accumulation: double stays double, the rest become float.
__device__ __forceinline__ float ToFloatOrDouble(float v) { return v; }
__device__ __forceinline__ double ToFloatOrDouble(double v) { return v; }
__device__ __forceinline__ float ToFloatOrDouble(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToFloatOrDouble(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Element i of an array of runtime type t, widened to float.
__device__ __forceinline__ float LoadAsFloat(const void* p, ElementType t, int64_t i) {
  switch (t) {
    case ElementType::kFloat64: return static_cast<float>(static_cast<const double*>(p)[i]);
    case ElementType::kFloat16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElementType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// Elements of T in 16 bytes.
template <typename T>
constexpr int kVec = 16 / sizeof(T);

// The kVec<T> elements of a 16-byte vector, widened.
template <typename T>
__device__ __forceinline__ void Unpack(const uint4& v, float* out);
template <>
__device__ __forceinline__ void Unpack<float>(const uint4& v, float* out) {
  out[0] = __uint_as_float(v.x);
  out[1] = __uint_as_float(v.y);
  out[2] = __uint_as_float(v.z);
  out[3] = __uint_as_float(v.w);
}
template <>
__device__ __forceinline__ void Unpack<__nv_bfloat16>(const uint4& v, float* out) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void Unpack<__half>(const uint4& v, float* out) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h = *reinterpret_cast<const __half2*>(&w[i]);
    const float2 f = __half22float2(h);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// A 16-byte load that bypasses L1 (weights are read once per call).
__device__ __forceinline__ uint4 LoadStreaming(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

}  // namespace gpucompute::kernels::dense_internal
