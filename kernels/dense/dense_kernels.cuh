// Launchers of the dense-layer kernels (nvcc-built; host code includes this header only).
// Matrices are row-major with explicit leading dimensions in elements. Every launcher only
// enqueues on `stream` and returns the launch error (no synchronisation).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gpucompute::kernels {

// Element types as the kernels see them; the values equal gpucompute::ElementType's.
enum class DenseType : int { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3 };

// y[r, 0:k) = LN(x[r, 0:k)) (plain normalisation: (x - mean) * rsqrt(var + eps), biased
// variance, two passes) or, with layernorm = false, x converted. x may be any type, y is
// f32, f16 or bf16. Float accumulation (double for f64 input).
cudaError_t LaunchNormalizeRows(const void* x, DenseType x_type, int64_t ldx, void* y,
                                DenseType y_type, int64_t ldy, int64_t rows, int64_t k,
                                bool layernorm, float eps, cudaStream_t stream);

// y = act(y) in place on rows x n (leading dimension ldy), y of type f32/f16/bf16.
cudaError_t LaunchActivation(void* y, DenseType y_type, int64_t ldy, int64_t rows, int64_t n,
                             int act, cudaStream_t stream);

// One whole layer for a few rows (1..kFewRowsMax): y = act(LN?(x) . W + bias), streaming W
// once. x: rows x k of x_type (ldx), which is float32 or w_type; W stored transposed: n rows of
// k weights (w_type f32/f16/bf16) with leading dimension ldw, a multiple of 8, 16-byte aligned,
// columns k..ldw zero; bias: n floats; y: rows x n of w_type (ldy).
inline constexpr int kFewRowsMax = 4;
struct FewRowsArgs {
  const void* x = nullptr;
  DenseType x_type = DenseType::kF32;
  int64_t ldx = 0;
  const void* w = nullptr;
  DenseType w_type = DenseType::kF32;
  int64_t ldw = 0;
  const float* bias = nullptr;
  void* y = nullptr;
  int64_t ldy = 0;
  int rows = 1;
  int k = 0;
  int n = 0;
  bool layernorm = false;
  float eps = 1e-5f;
  int act = 0;
};
// Whether the kernel takes this shape and these types (k up to 8 x 32 x 8 chunks of 16 bytes
// per output at one row, less with more rows; inputs of another type are converted first).
bool FewRowsFits(int rows, int64_t k, int64_t n, DenseType x_type, DenseType w_type);
cudaError_t LaunchFewRows(const FewRowsArgs& args, cudaStream_t stream);

}  // namespace gpucompute::kernels
