// The CPU reference of dense-layer inference: float64 throughout, from weights rounded to the
// model's storage dtype (so it computes what the stored model means, as exactly as a double
// can). Matrix products through CBLAS (OpenBLAS). Also the oracle of the GPU tests.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "server/ops/dense/dense.h"

namespace gpucompute::dense {

class CpuModel final : public LoadedModel {
 public:
  struct Layer {
    int64_t in = 0;
    int64_t out = 0;
    bool layernorm = false;
    double eps = kDefaultLayerNormEps;
    Activation activation = Activation::kNone;
    std::vector<double> weight;  // in x out, row-major, rounded to the storage dtype
    std::vector<double> bias;    // out, rounded to float32 (as the GPU stores it)
  };

  // Takes the spec's weights (freeing them as it goes).
  static std::shared_ptr<const CpuModel> Make(ModelSpec spec);

  const std::vector<Layer>& layers() const { return layers_; }
  ElementType dtype() const { return info().dtype; }

 private:
  CpuModel(ModelInfo info, std::vector<Layer> layers)
      : LoadedModel(std::move(info)), layers_(std::move(layers)) {}
  std::vector<Layer> layers_;
};

// Host bytes a CpuModel of these layer shapes holds (float64 weights and biases).
int64_t CpuModelBytes(const std::vector<std::pair<int64_t, int64_t>>& shapes);

// y (rows x out_features) = the model applied to x (rows x in_features), both row-major.
void CpuForward(const CpuModel& model, const double* x, int64_t rows, double* y);

// One layer in place of CpuForward's loop, for tests: y = act(LN(x) . W + b).
void CpuLayerForward(const CpuModel::Layer& layer, const double* x, int64_t rows, double* y);

}  // namespace gpucompute::dense
