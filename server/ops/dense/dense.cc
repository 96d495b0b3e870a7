// Dense-layer semantics (see dense.h).
#include "server/ops/dense/dense.h"

namespace gpucompute::dense {

const char* ActivationName(Activation act) {
  switch (act) {
    case Activation::kNone: return "none";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kGeluErf: return "gelu_erf";
    case Activation::kRelu: return "relu";
    case Activation::kSilu: return "silu";
  }
  return "unknown";
}

int64_t StoredBytes(ElementType dtype, const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  int64_t bytes = 0;
  for (const auto& [in, out] : shapes) bytes += in * out * ElementSize(dtype) + out * 4;
  return bytes;
}

int64_t StoredBytes(const ModelSpec& spec) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const LayerSpec& l : spec.layers) shapes.emplace_back(l.in, l.out);
  return StoredBytes(spec.dtype, shapes);
}

void FoldLayerNorm(const std::vector<double>& gamma, const std::vector<double>& beta,
                   LayerSpec* layer) {
  const int64_t in = layer->in;
  const int64_t out = layer->out;
  if (!beta.empty()) {
    // b'_j = b_j + sum_k beta_k W_kj, from the unscaled W, in double.
    for (int64_t k = 0; k < in; ++k) {
      if (beta[k] == 0) continue;
      const float* row = layer->weight.data() + k * out;
      for (int64_t j = 0; j < out; ++j) layer->bias[j] += beta[k] * row[j];
    }
  }
  if (!gamma.empty()) {
    for (int64_t k = 0; k < in; ++k) {
      float* row = layer->weight.data() + k * out;
      for (int64_t j = 0; j < out; ++j) row[j] = static_cast<float>(gamma[k] * row[j]);
    }
  }
}

ModelInfo DescribeModel(const ModelSpec& spec) {
  ModelInfo info;
  info.name = spec.name;
  info.dtype = spec.dtype;
  info.allow_tf32 = spec.allow_tf32;
  for (const LayerSpec& l : spec.layers) {
    info.layers.push_back(LayerInfo{l.in, l.out, l.layernorm, l.eps, l.activation});
  }
  info.device_bytes = StoredBytes(spec);
  return info;
}

int64_t Batch::rows() const {
  int64_t rows = 0;
  for (const auto& r : requests) rows += r->rows;
  return rows;
}

}  // namespace gpucompute::dense
