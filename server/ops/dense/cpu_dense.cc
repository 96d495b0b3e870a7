// CPU reference of dense-layer inference (see cpu_dense.h).
#include "server/ops/dense/cpu_dense.h"

#include <cblas.h>

#include <cmath>

namespace gpucompute::dense {

std::shared_ptr<const CpuModel> CpuModel::Make(ModelSpec spec) {
  ModelInfo info = DescribeModel(spec);
  std::vector<Layer> layers;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (LayerSpec& l : spec.layers) {
    Layer out{l.in, l.out, l.layernorm, l.eps, l.activation, {}, {}};
    out.weight.resize(l.weight.size());
    for (size_t i = 0; i < l.weight.size(); ++i) out.weight[i] = RoundTo(spec.dtype, l.weight[i]);
    std::vector<float>().swap(l.weight);
    out.bias.resize(l.bias.size());
    for (size_t j = 0; j < l.bias.size(); ++j) out.bias[j] = static_cast<float>(l.bias[j]);
    shapes.emplace_back(l.in, l.out);
    layers.push_back(std::move(out));
  }
  info.device_bytes = CpuModelBytes(shapes);
  return std::shared_ptr<const CpuModel>(new CpuModel(std::move(info), std::move(layers)));
}

int64_t CpuModelBytes(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  int64_t bytes = 0;
  for (const auto& [in, out] : shapes) bytes += (in * out + out) * 8;
  return bytes;
}

void CpuLayerForward(const CpuModel::Layer& layer, const double* x, int64_t rows, double* y) {
  const int64_t in = layer.in;
  const int64_t out = layer.out;
  std::vector<double> normalised;
  const double* a = x;
  if (layer.layernorm) {
    normalised.resize(static_cast<size_t>(rows * in));
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = x + r * in;
      double mean = 0;
      for (int64_t k = 0; k < in; ++k) mean += row[k];
      mean /= static_cast<double>(in);
      double var = 0;
      for (int64_t k = 0; k < in; ++k) var += (row[k] - mean) * (row[k] - mean);
      var /= static_cast<double>(in);
      const double rstd = 1.0 / std::sqrt(var + layer.eps);
      for (int64_t k = 0; k < in; ++k) normalised[r * in + k] = (row[k] - mean) * rstd;
    }
    a = normalised.data();
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < out; ++j) y[r * out + j] = layer.bias[j];
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(out), static_cast<int>(in), 1.0, a, static_cast<int>(in),
              layer.weight.data(), static_cast<int>(out), 1.0, y, static_cast<int>(out));
  if (layer.activation != Activation::kNone) {
    for (int64_t i = 0; i < rows * out; ++i) y[i] = Activate<double>(layer.activation, y[i]);
  }
}

void CpuForward(const CpuModel& model, const double* x, int64_t rows, double* y) {
  const auto& layers = model.layers();
  std::vector<double> a, b;
  const double* current = x;
  for (size_t l = 0; l < layers.size(); ++l) {
    const bool last = l + 1 == layers.size();
    double* target = y;
    if (!last) {
      std::vector<double>& buffer = (l % 2 == 0) ? a : b;
      buffer.resize(static_cast<size_t>(rows * layers[l].out));
      target = buffer.data();
    }
    CpuLayerForward(layers[l], current, rows, target);
    current = target;
  }
}

}  // namespace gpucompute::dense
