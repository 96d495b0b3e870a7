// The dense batch's plan: see batch_plan.h.
#include "server/ops/dense/batch_plan.h"

#include <algorithm>

#include "absl/status/status.h"
#include "common/align.h"
#include "server/ops/dense/tuning.h"

namespace gpucompute::dense {
namespace {


bool SixteenBit(ElementType t) {
  return t == ElementType::kBFloat16 || t == ElementType::kFloat16;
}

// Sections in the order the batch uses them; absent ones take no bytes.
DenseWorkspace LayOut(const DenseBatchPlan& plan) {
  DenseWorkspace w;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t offset = bytes > 0 ? at : 0;
    at += AlignUp(bytes);
    return offset;
  };
  w.in = take(plan.in_bytes);
  w.act0 = take(plan.act_bytes);
  w.act1 = take(plan.steps.size() > 1 ? plan.act_bytes : 0);
  w.xhat = take(plan.xhat_bytes);
  w.row_stats = take(plan.row_stats_bytes);
  w.bytes = at;
  return w;
}

}  // namespace

LayerStep ChooseLayerStep(const LayerInfo& layer, ElementType dtype, ElementType in_type,
                          int64_t rows, DensePath forced, const LayerKernels& kernels) {
  const bool direct = kernels.few_rows_raw;
  const bool fits = direct || kernels.few_rows_converted;
  const bool few =
      forced == DensePath::kFewRows
          ? fits
          : forced == DensePath::kAuto && fits &&
                FewRowsPays(rows, layer.in * layer.out * ElementSize(dtype));
  // kAuto takes the tensor-core kernel where it folds this layer's LayerNorm into one nearly
  // full wave of tiles (e.g. 1024 x 1024 -> 4096 bf16), the only place it measured faster than
  // normalise + cuBLASLt (docs/design/dense.md).
  const bool try_tc = forced == DensePath::kTensorCore && !few;
  const bool auto_tc = forced == DensePath::kAuto && !few && layer.layernorm && in_type == dtype &&
                       SixteenBit(dtype) && kernels.tensor_core_pays;
  const bool tc_direct = auto_tc || (try_tc && in_type == dtype && kernels.tensor_core_raw);
  const bool tensor = tc_direct || (try_tc && kernels.tensor_core_converted);
  LayerStep step;
  step.kernel = few ? LayerKernel::kFewRows : tensor ? LayerKernel::kTensorCore : LayerKernel::kGemm;
  step.convert = few ? !direct : tensor ? !tc_direct : (layer.layernorm || in_type != dtype);
  return step;
}

absl::StatusOr<DenseBatchPlan> PlanDenseBatch(const ModelInfo& model, ElementType input_dtype,
                                              int64_t rows, DensePath forced,
                                              const std::vector<LayerKernels>& kernels) {
  if (kernels.size() != model.layers.size() || model.layers.empty() || rows < 0) {
    return absl::InternalError("dense batch plan: one LayerKernels per layer and rows >= 0");
  }
  const ElementType dtype = model.dtype;
  const size_t elem = static_cast<size_t>(ElementSize(dtype));
  const size_t r = static_cast<size_t>(rows);
  DenseBatchPlan plan;
  plan.rows = rows;
  plan.in_bytes = r * static_cast<size_t>(model.in_features() * ElementSize(input_dtype));
  plan.out_bytes = r * static_cast<size_t>(model.out_features()) * elem;
  ElementType in_type = input_dtype;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const LayerInfo& layer = model.layers[l];
    const LayerStep step = ChooseLayerStep(layer, dtype, in_type, rows, forced, kernels[l]);
    if (forced == DensePath::kFewRows && step.kernel != LayerKernel::kFewRows) {
      return absl::InvalidArgumentError("dense batch: the few-rows path cannot take this batch");
    }
    if (forced == DensePath::kTensorCore && step.kernel != LayerKernel::kTensorCore) {
      return absl::InvalidArgumentError("dense batch: the tensor-core path cannot take this batch");
    }
    plan.act_bytes = std::max(plan.act_bytes, r * static_cast<size_t>(PaddedCols(layer.out)) * elem);
    if (step.convert) {
      plan.xhat_bytes = std::max(plan.xhat_bytes, r * static_cast<size_t>(PaddedCols(layer.in)) * elem);
    }
    if (step.kernel == LayerKernel::kTensorCore && !step.convert && layer.layernorm) {
      plan.row_stats_bytes = r * 2 * sizeof(float);
    }
    plan.steps.push_back(step);
    in_type = dtype;
  }
  plan.workspace = LayOut(plan);
  return plan;
}

}  // namespace gpucompute::dense
