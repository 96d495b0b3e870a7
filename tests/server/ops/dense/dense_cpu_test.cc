// The CPU reference against a direct evaluation of the definition, with LayerNorm's gamma and
// beta folded into the weights at load (the fold must not change the result).
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "server/ops/dense/cpu_dense.h"

namespace gpucompute::dense {
namespace {

TEST(DenseCpu, FoldedLayerNormMatchesTheDefinition) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g(0, 1);
  const int64_t in = 7, out = 5, rows = 3;
  std::vector<double> w(in * out), b(out), gamma(in), beta(in), x(rows * in);
  for (auto* v : {&w, &b, &gamma, &beta, &x}) {
    for (double& e : *v) e = g(rng);
  }
  ModelSpec spec;
  spec.name = "t";
  spec.dtype = ElementType::kFloat32;
  LayerSpec l;
  l.in = in;
  l.out = out;
  l.layernorm = true;
  l.eps = 1e-3;
  l.activation = Activation::kGeluErf;
  for (double v : w) l.weight.push_back(static_cast<float>(v));
  l.bias = b;
  FoldLayerNorm(gamma, beta, &l);
  spec.layers.push_back(l);
  auto model = CpuModel::Make(spec);
  std::vector<double> y(rows * out);
  CpuForward(*model, x.data(), rows, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < in; ++k) mean += x[r * in + k] / in;
    for (int64_t k = 0; k < in; ++k) var += (x[r * in + k] - mean) * (x[r * in + k] - mean) / in;
    for (int64_t j = 0; j < out; ++j) {
      double s = b[j];
      for (int64_t k = 0; k < in; ++k) {
        const double ln = (x[r * in + k] - mean) / std::sqrt(var + 1e-3) * gamma[k] + beta[k];
        s += ln * static_cast<float>(w[k * out + j]);
      }
      const double want = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
      EXPECT_NEAR(y[r * out + j], want, 1e-6 * (1 + std::abs(want))) << r << "," << j;
    }
  }
  EXPECT_EQ(model->info().layers[0].activation, Activation::kGeluErf);
}

TEST(DenseCpu, WeightsAreRoundedToTheStorageType) {
  ModelSpec spec;
  spec.name = "bf";
  spec.dtype = ElementType::kBFloat16;
  LayerSpec l;
  l.in = 1;
  l.out = 1;
  l.weight = {1.0f + 0x1p-10f};  // not representable in bfloat16: rounds to 1
  l.bias = {0.0};
  spec.layers.push_back(l);
  auto model = CpuModel::Make(spec);
  const double x = 3.0;
  double y = 0;
  CpuForward(*model, &x, 1, &y);
  EXPECT_EQ(y, 3.0);
}

}  // namespace
}  // namespace gpucompute::dense
