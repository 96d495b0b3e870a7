// The plan of a dense batch on the GPU (PlanDenseBatch): which kernel computes each layer,
// whether its input is normalised and converted first, and the bytes of every scratch buffer,
// laid out in one workspace the caller allocates. Host arithmetic only, no CUDA call: what the
// kernel library says about a layer (LayerKernels) comes in as values, asked by EnqueueDense
// (cuda_dense.cc) on the batch's device, so tests check the plan without a GPU. The thresholds
// it applies are in tuning.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/dense/dense.h"

namespace gpucompute::dense {

// Row padding of resident weights and of intermediate activations (elements): keeps every
// row 16-byte aligned for vector loads and cuBLASLt.
inline int64_t PaddedCols(int64_t n) { return (n + 7) / 8 * 8; }

// How a batch's layers are computed. kAuto: per layer, the few-rows kernel where it measured
// faster (FewRowsPays in tuning.h), the tensor-core kernel where it folds a LayerNorm into
// one nearly full wave of tiles (kernels::TensorCorePays), normalise + cuBLASLt otherwise
// (docs/design/dense.md). kFewRows takes up to kernels::kFewRowsMax rows; kTensorCore (the
// hand-written Hopper kernel with LayerNorm folded into its epilogue) only 16-bit models on
// compute capability 9.0.
enum class DensePath { kAuto, kFewRows, kGemm, kTensorCore };

// What the kernel library says about one layer of a batch (its rows, its input's type and row
// stride as the plan will give them: the batch's input for the first layer, the previous
// layer's padded output after). Only the answers a path may use are asked: the tensor-core
// ones for kAuto (pays) and kTensorCore (fits).
struct LayerKernels {
  bool few_rows_raw = false;        // the few-rows kernel reads the input as it is
  bool few_rows_converted = false;  // ... once converted to the model's dtype
  bool tensor_core_pays = false;    // the tensor-core kernel, LayerNorm folded, beats cuBLASLt
  bool tensor_core_raw = false;     // the tensor-core kernel takes the input as it is
  bool tensor_core_converted = false;  // ... once normalised and converted (padded rows)
};

// How one layer is computed, and whether its input is first normalised and converted to the
// model's dtype (into the workspace's `xhat`) instead of read raw.
enum class LayerKernel { kFewRows, kTensorCore, kGemm };
struct LayerStep {
  LayerKernel kernel = LayerKernel::kGemm;
  bool convert = false;
};

// Byte offsets of a batch's buffers in its workspace (each 256-byte aligned; absent ones 0 with
// 0 bytes): the packed input rows, one or two activation buffers (two alternate when a layer
// follows another), a converting layer's normalised input, the tensor-core layers' LayerNorm
// statistics (mean, rstd per row).
struct DenseWorkspace {
  size_t in = 0, act0 = 0, act1 = 0, xhat = 0, row_stats = 0;
  size_t bytes = 0;  // the whole workspace
};

struct DenseBatchPlan {
  int64_t rows = 0;
  std::vector<LayerStep> steps;  // one per layer
  size_t in_bytes = 0;           // the packed input rows
  size_t out_bytes = 0;          // the last layer's rows, unpadded (copied back)
  size_t act_bytes = 0;          // one activation buffer
  size_t xhat_bytes = 0;         // 0: no layer converts
  size_t row_stats_bytes = 0;    // 0: no tensor-core layer folds a LayerNorm
  DenseWorkspace workspace;
};

// One layer's step (a pure function of the kernel library's answers and tuning.h): a few-rows
// layer whose input the kernel does not read (float64, or a 16-bit type other than the model's)
// is normalised and converted first, like a GEMM layer's; a tensor-core layer reads its input
// raw (LayerNorm folded in) when it can, else normalised and converted.
LayerStep ChooseLayerStep(const LayerInfo& layer, ElementType dtype, ElementType in_type,
                          int64_t rows, DensePath forced, const LayerKernels& kernels);

// The plan of `rows` rows of `input_dtype` through `model`, with `kernels[l]` the kernel
// library's answers for layer l. INVALID_ARGUMENT when a forced path cannot take every layer.
absl::StatusOr<DenseBatchPlan> PlanDenseBatch(const ModelInfo& model, ElementType input_dtype,
                                              int64_t rows, DensePath forced,
                                              const std::vector<LayerKernels>& kernels);

}  // namespace gpucompute::dense
