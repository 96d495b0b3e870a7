// The activations of a dense layer, written once for the host (the CPU reference, in double)
// and the device (kernels, in float). Codes match dense::Activation and the proto's enum.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DENSE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#include <cmath>
#define DENSE_HOST_DEVICE inline
#endif

namespace gpucompute::dense {

enum ActivationCode : int {
  kActNone = 0,
  kActGeluTanh = 1,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kActGeluErf = 2,   // 0.5 x (1 + erf(x / sqrt(2)))
  kActRelu = 3,
  kActSilu = 4,      // x / (1 + exp(-x))
};

template <typename T>
DENSE_HOST_DEVICE T Activate(int act, T x) {
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
  using std::erf;
  using std::exp;
  using std::tanh;
#endif
  switch (act) {
    case kActGeluTanh: {
      const T k0 = T(0.7978845608028654);  // sqrt(2 / pi)
      const T k1 = T(0.044715);
      return T(0.5) * x * (T(1) + tanh(k0 * (x + k1 * x * x * x)));
    }
    case kActGeluErf:
      return T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)));
    case kActRelu:
      return x > T(0) ? x : T(0);
    case kActSilu:
      return x / (T(1) + exp(-x));
    default:
      return x;
  }
}

}  // namespace gpucompute::dense
