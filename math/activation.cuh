// The activations of a dense layer: the one enum every layer uses (the service maps the
// proto's Activation onto it, code for code) and their formulas, written once for the host (the
// CPU references, in double) and the device (kernels, in float).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DENSE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#include <cmath>
#define DENSE_HOST_DEVICE inline
#endif

namespace gpucompute::dense {

enum class Activation : int {
  kNone = 0,
  kGeluTanh = 1,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kGeluErf = 2,   // 0.5 x (1 + erf(x / sqrt(2)))
  kRelu = 3,
  kSilu = 4,      // x / (1 + exp(-x))
};

template <typename T>
DENSE_HOST_DEVICE T Activate(Activation act, T x) {
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
  using std::erf;
  using std::exp;
  using std::tanh;
#endif
  switch (act) {
    case Activation::kGeluTanh: {
      const T k0 = T(0.7978845608028654);  // sqrt(2 / pi)
      const T k1 = T(0.044715);
      return T(0.5) * x * (T(1) + tanh(k0 * (x + k1 * x * x * x)));
    }
    case Activation::kGeluErf:
      return T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)));
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    case Activation::kSilu:
      return x / (T(1) + exp(-x));
    default:
      return x;
  }
}

}  // namespace gpucompute::dense
