// Launchers of the dense-layer kernels (nvcc-built; host code includes this header only).
// Matrices are row-major with explicit leading dimensions in elements. Every launcher only
// enqueues on `stream` and returns the launch error (no synchronisation).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "math/activation.cuh"
#include "math/element_type.h"

namespace gpucompute::kernels {

// y[r, 0:k) = LN(x[r, 0:k)) (plain normalisation: (x - mean) * rsqrt(var + eps), biased
// variance, two passes) or, with layernorm = false, x converted. x may be any type, y is
// f32, f16 or bf16. Float accumulation (double for f64 input).
cudaError_t LaunchNormalizeRows(const void* x, ElementType x_type, int64_t ldx, void* y,
                                ElementType y_type, int64_t ldy, int64_t rows, int64_t k,
                                bool layernorm, float eps, cudaStream_t stream);

// y = act(y) in place on rows x n (leading dimension ldy), y of type f32/f16/bf16.
cudaError_t LaunchActivation(void* y, ElementType y_type, int64_t ldy, int64_t rows, int64_t n,
                             dense::Activation act, cudaStream_t stream);

// One whole layer for a few rows (1..kFewRowsMax): y = act(LN?(x) . W + bias), streaming W
// once. x: rows x k of x_type (ldx), which is float32 or w_type; W stored transposed: n rows of
// k weights (w_type f32/f16/bf16) with leading dimension ldw, a multiple of 8, 16-byte aligned,
// columns k..ldw zero; bias: n floats; y: rows x n of w_type (ldy).
inline constexpr int kFewRowsMax = 4;
struct FewRowsArgs {
  const void* x = nullptr;
  ElementType x_type = ElementType::kFloat32;
  int64_t ldx = 0;
  const void* w = nullptr;
  ElementType w_type = ElementType::kFloat32;
  int64_t ldw = 0;
  const float* bias = nullptr;
  void* y = nullptr;
  int64_t ldy = 0;
  int rows = 1;
  int k = 0;
  int n = 0;
  bool layernorm = false;
  float eps = 1e-5f;
  dense::Activation act = dense::Activation::kNone;
};
// Whether the kernel takes this shape and these types (k up to 8 x 32 x 8 chunks of 16 bytes
// per output at one row, less with more rows; inputs of another type are converted first).
bool FewRowsFits(int rows, int64_t k, int64_t n, ElementType x_type, ElementType w_type);
cudaError_t LaunchFewRows(const FewRowsArgs& args, cudaStream_t stream);

// One whole layer on Hopper tensor cores (sm_90a: TMA, wgmma, thread-block clusters), for any
// row count: y = act(LN?(x) . W + bias), x and W both f16 or both bf16, float accumulation.
// LayerNorm is folded into the product's epilogue rather than applied to x first:
//   LN(x)_i . W_:j = rstd_i (x_i . W_:j - mean_i colsum_j),
// with mean_i and rstd_i from a small kernel that runs beside the product (launched first; the
// product waits for it only before its epilogue) and colsum_j = sum_k W_kj of the stored
// (rounded) weights, made at load time. So no normalised copy of x is written.
// x: rows x k (ldx a multiple of 8, 16-byte aligned), W stored transposed (n rows of k, ldw a
// multiple of 8), bias and colsum: n floats, y: rows x n (ldy even).
struct TensorCoreArgs {
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  const float* bias = nullptr;
  const float* colsum = nullptr;  // needed with layernorm
  void* row_stats = nullptr;      // with layernorm: scratch of rows x 8 bytes (mean, rstd)
  void* y = nullptr;
  int64_t ldy = 0;
  ElementType type = ElementType::kBFloat16;  // of x, W and y
  int64_t rows = 0;
  int64_t k = 0;
  int64_t n = 0;
  bool layernorm = false;
  float eps = 1e-5f;
  dense::Activation act = dense::Activation::kNone;
  // CTAs sharing one W tile by TMA multicast: 1, 2, or 0 for the kernel's choice (2 over
  // several waves of tiles, where multicast measured faster; 1 on one wave, where it did not).
  int cluster = 0;
};
// Whether `device` can run it (compute capability 9.0 exactly: the code is sm_90a) and the
// arguments meet its layout rules: x, W and y 16-byte aligned with row strides of whole 16
// bytes (TMA reads x and W and writes y). row_stats is not checked: the launch needs it with
// layernorm and fails with cudaErrorInvalidValue without it.
bool TensorCoreFits(int device, const TensorCoreArgs& args);
cudaError_t LaunchTensorCore(const TensorCoreArgs& args, cudaStream_t stream);
// Whether the kernel is expected to beat normalise + cuBLASLt for these arguments (it fits, and
// see docs/design/dense.md): with LayerNorm folded in, on one nearly full wave of
// tiles (between 3/4 of the SMs and all of them) at least 8 tiles (2048 outputs) wide.
// Without LayerNorm, on fewer tiles, or over several waves (it is not persistent), cuBLASLt
// measured faster.
bool TensorCorePays(int device, const TensorCoreArgs& args);

}  // namespace gpucompute::kernels
