// Dense-layer inference: the semantics shared by every backend.
//
// A model is a stack of layers; layer l maps rows of in_l features to out_l features:
//   y = act(LN(x) . W + b),   LN(x)_k = gamma_k (x_k - mean(x)) / sqrt(var(x) + eps) + beta_k
// with the biased variance (as torch.nn.functional.layer_norm and NumPy's var). LayerNorm is
// optional per layer; gamma and beta default to 1 and 0.
//
// Precomputed at load time (dense::FoldLayerNorm): gamma folds into W (W'_kj = gamma_k W_kj)
// and beta into the bias (b' = b + beta . W), so every backend applies a plain normalisation.
// The fold is exact algebra; it moves one rounding of gamma*W to load time.
//
// Storage and compute dtype: float32 (optionally TF32 matrix products), float16 or bfloat16.
// Weights are stored rounded to that dtype; the bias stays float32 on the GPU. Outputs are
// returned in the model's dtype.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "math/activation.cuh"
#include "common/element_type.h"

namespace gpucompute::dense {

// Activation (math/activation.cuh) by name.
const char* ActivationName(Activation act);  // "none", "gelu_tanh", ...

inline constexpr double kDefaultLayerNormEps = 1e-5;

// One layer as loaded: LayerNorm's gamma and beta already folded into weight and bias.
struct LayerSpec {
  int64_t in = 0;
  int64_t out = 0;
  bool layernorm = false;
  double eps = kDefaultLayerNormEps;
  Activation activation = Activation::kNone;
  std::vector<float> weight;  // in x out, row-major (x . W); exact float32 of the wire values
  std::vector<double> bias;   // out (zeros when the layer has none)
};

// A model ready to be made resident by a backend.
struct ModelSpec {
  std::string name;
  ElementType dtype = ElementType::kFloat32;  // float32, float16 or bfloat16
  bool allow_tf32 = false;
  std::vector<LayerSpec> layers;

  int64_t in_features() const { return layers.front().in; }
  int64_t out_features() const { return layers.back().out; }
};

// Bytes a model occupies once stored in `dtype` (weights) plus float32 biases: the figure
// checked against limits and free memory before any byte is uploaded.
int64_t StoredBytes(ElementType dtype, const std::vector<std::pair<int64_t, int64_t>>& shapes);
// The same for a whole model.
int64_t StoredBytes(const ModelSpec& spec);

// Folds gamma into the weight rows and beta into the bias (see the file comment). `gamma`
// and `beta` may be empty (1 and 0).
void FoldLayerNorm(const std::vector<double>& gamma, const std::vector<double>& beta,
                   LayerSpec* layer);

// What ListModels reports.
struct LayerInfo {
  int64_t in = 0;
  int64_t out = 0;
  bool layernorm = false;
  double eps = 0;
  Activation activation = Activation::kNone;
};
struct ModelInfo {
  std::string name;
  ElementType dtype = ElementType::kFloat32;
  bool allow_tf32 = false;
  std::vector<LayerInfo> layers;
  int64_t device_bytes = 0;
  double load_ms = 0;
  std::vector<int> devices;  // GPUs holding it (CUDA backend); empty on the CPU

  int64_t in_features() const { return layers.front().in; }
  int64_t out_features() const { return layers.back().out; }
};
ModelInfo DescribeModel(const ModelSpec& spec);

// A model made resident by a backend (weights on every device, or host copies on the CPU).
// Requests hold it by shared_ptr, so unloading frees it once the last batch using it ends.
class LoadedModel {
 public:
  explicit LoadedModel(ModelInfo info) : info_(std::move(info)) {}
  virtual ~LoadedModel() = default;
  const ModelInfo& info() const { return info_; }
  // Set once by the service, before the model is published to the registry.
  void set_load_ms(double ms) const { info_.load_ms = ms; }

 private:
  mutable ModelInfo info_;
};

// One decoded Dense call. `input` views the request message's bytes (rows x in_features of
// `input_dtype`, row-major), which live until the call finishes.
struct Request {
  std::shared_ptr<const LoadedModel> model;
  ElementType input_dtype = ElementType::kFloat32;
  int64_t rows = 0;
  absl::string_view input;
};

// Requests on the same model with the same input dtype, concatenated by rows.
struct Batch {
  std::shared_ptr<const LoadedModel> model;
  ElementType input_dtype = ElementType::kFloat32;
  std::vector<std::shared_ptr<const Request>> requests;
  // Optional: true once no caller waits any more (see periodogram::Batch::abandoned).
  std::function<bool()> abandoned;

  int64_t rows() const;
};

// A request's output: rows x out_features of the model's dtype, raw bytes (moved into the
// response Tensor without a copy).
using Output = std::string;

}  // namespace gpucompute::dense
