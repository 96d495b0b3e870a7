// Host-side sizes, names and conversions of the element types (math/element_type.h).
// Conversions to float16/bfloat16 round to nearest, ties to even, as CUDA's __float2half_rn /
// __float2bfloat16_rn do, so that host and device agree bit for bit.
#pragma once

#include <cstdint>

#include "math/element_type.h"

namespace gpucompute {

const char* ElementName(ElementType type);  // "float32", ...

uint16_t FloatToBFloat16(float v);
float BFloat16ToFloat(uint16_t v);
uint16_t FloatToHalf(float v);
float HalfToFloat(uint16_t v);

// `n` elements of `type` at `src` (any alignment) widened to float / double.
void ToFloat(ElementType type, const void* src, int64_t n, float* dst);
void ToDouble(ElementType type, const void* src, int64_t n, double* dst);
// `n` values narrowed to `type` at `dst` (any alignment). Float64 -> float16/bfloat16 goes
// through float32 (double rounding is within half an ulp of the narrow type).
void FromFloat(const float* src, int64_t n, ElementType type, void* dst);
void FromDouble(const double* src, int64_t n, ElementType type, void* dst);

// The value `v` takes once stored as `type` and read back.
double RoundTo(ElementType type, double v);

}  // namespace gpucompute
