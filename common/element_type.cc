// Element conversions (see element_type.h).
#include "common/element_type.h"

#include <cmath>
#include <cstring>

namespace gpucompute {

const char* ElementName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
    case ElementType::kFloat16: return "float16";
    case ElementType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

uint16_t FloatToBFloat16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float BFloat16ToFloat(uint16_t v) {
  const uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 through the compiler's _Float16 (GCC >= 12 on x86-64 and AArch64): its
// conversions round to nearest even and handle subnormals, infinities and NaN. Clang before 15
// (Debian 12's, the fuzz build) has no _Float16 on x86-64; its __fp16 converts the same way
// (compiler-rt's builtins, which that build links).
#if defined(__clang__) && __clang_major__ < 15
using Half = __fp16;
#else
using Half = _Float16;
#endif

uint16_t FloatToHalf(float v) {
  const Half h = static_cast<Half>(v);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

float HalfToFloat(uint16_t v) {
  Half h;
  std::memcpy(&h, &v, 2);
  return static_cast<float>(h);
}

namespace {

template <typename Out>
void Widen(ElementType type, const void* src, int64_t n, Out* dst) {
  const auto* p = static_cast<const unsigned char*>(src);
  switch (type) {
    case ElementType::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        dst[i] = static_cast<Out>(v);
      }
      return;
    case ElementType::kFloat64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        dst[i] = static_cast<Out>(v);
      }
      return;
    case ElementType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        dst[i] = static_cast<Out>(HalfToFloat(v));
      }
      return;
    case ElementType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        dst[i] = static_cast<Out>(BFloat16ToFloat(v));
      }
      return;
  }
}

template <typename In>
void Narrow(const In* src, int64_t n, ElementType type, void* dst) {
  auto* p = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case ElementType::kFloat32: {
        const float v = static_cast<float>(src[i]);
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case ElementType::kFloat64: {
        const double v = static_cast<double>(src[i]);
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      case ElementType::kFloat16: {
        const uint16_t v = FloatToHalf(static_cast<float>(src[i]));
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case ElementType::kBFloat16: {
        const uint16_t v = FloatToBFloat16(static_cast<float>(src[i]));
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
    }
  }
}

}  // namespace

void ToFloat(ElementType type, const void* src, int64_t n, float* dst) { Widen(type, src, n, dst); }
void ToDouble(ElementType type, const void* src, int64_t n, double* dst) { Widen(type, src, n, dst); }
void FromFloat(const float* src, int64_t n, ElementType type, void* dst) { Narrow(src, n, type, dst); }
void FromDouble(const double* src, int64_t n, ElementType type, void* dst) { Narrow(src, n, type, dst); }

double RoundTo(ElementType type, double v) {
  switch (type) {
    case ElementType::kFloat32: return static_cast<float>(v);
    case ElementType::kFloat64: return v;
    case ElementType::kFloat16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case ElementType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
  }
  return v;
}

}  // namespace gpucompute
