// Tests of the dense-model helpers (client/cpp/model_builder.h): names, ModelBuilder's header
// and tensor bytes, Dense request/response helpers, the float64 reference and the error measure.
#include "client/cpp/model_builder.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

TEST(ModelBuilderTest, ParsesNames) {
  EXPECT_EQ(*ParseActivation("gelu_tanh"), v1::ACTIVATION_GELU_TANH);
  EXPECT_EQ(*ParseActivation("GELU_ERF"), v1::ACTIVATION_GELU_ERF);
  EXPECT_EQ(*ParseActivation("relu"), v1::ACTIVATION_RELU);
  EXPECT_EQ(*ParseActivation("silu"), v1::ACTIVATION_SILU);
  EXPECT_EQ(*ParseActivation("none"), v1::ACTIVATION_NONE);
  EXPECT_THAT(std::string(ParseActivation("gelu").status().message()), HasSubstr("gelu_tanh"));
  for (v1::Activation a : {v1::ACTIVATION_NONE, v1::ACTIVATION_GELU_TANH, v1::ACTIVATION_GELU_ERF,
                           v1::ACTIVATION_RELU, v1::ACTIVATION_SILU}) {
    EXPECT_EQ(*ParseActivation(ActivationName(a)), a);
  }
  EXPECT_EQ(*ParseModelDType("bfloat16"), v1::BFLOAT16);
  EXPECT_EQ(*ParseModelDType("float16"), v1::FLOAT16);
  EXPECT_EQ(*ParseModelDType("float32"), v1::FLOAT32);
  EXPECT_FALSE(ParseModelDType("float64").ok());
}

TEST(ModelBuilderTest, BuildsHeaderAndTensorsInOrder) {
  ModelBuilder builder("mlp");
  builder.SetDType(v1::BFLOAT16)
      .AddLayer({.weight = {1, 2, 3, 4, 5, 6},
                 .in_features = 2,
                 .out_features = 3,
                 .bias = {0.5f, 0.25f, 0.125f},
                 .layernorm = true,
                 .eps = 1e-6,
                 .gamma = {1, 2},
                 .beta = {3, 4},
                 .activation = v1::ACTIVATION_GELU_TANH})
      .AddLayer({.weight = {7, 8, 9}, .in_features = 3, .out_features = 1});
  absl::StatusOr<ModelUpload> upload = builder.Build();
  ASSERT_TRUE(upload.ok()) << upload.status();
  const v1::ModelHeader& h = upload->header;
  EXPECT_EQ(h.name(), "mlp");
  EXPECT_EQ(h.dtype(), v1::BFLOAT16);
  EXPECT_FALSE(h.allow_tf32());
  ASSERT_EQ(h.layers_size(), 2);
  EXPECT_EQ(h.layers(0).weight().dtype(), v1::FLOAT32);
  EXPECT_THAT(h.layers(0).weight().shape(), ElementsAre(2, 3));
  EXPECT_THAT(h.layers(0).bias().shape(), ElementsAre(3));
  EXPECT_TRUE(h.layers(0).has_layernorm());
  EXPECT_TRUE(h.layers(0).layernorm().has_eps());
  EXPECT_EQ(h.layers(0).layernorm().eps(), 1e-6);
  EXPECT_THAT(h.layers(0).layernorm().gamma().shape(), ElementsAre(2));
  EXPECT_THAT(h.layers(0).layernorm().beta().shape(), ElementsAre(2));
  EXPECT_EQ(h.layers(0).activation(), v1::ACTIVATION_GELU_TANH);
  EXPECT_FALSE(h.layers(1).has_bias());
  EXPECT_FALSE(h.layers(1).has_layernorm());
  EXPECT_EQ(h.layers(1).activation(), v1::ACTIVATION_NONE);

  ASSERT_EQ(upload->tensors.size(), 5u);
  const std::pair<int, v1::LayerTensor> order[] = {
      {0, v1::LAYER_TENSOR_WEIGHT}, {0, v1::LAYER_TENSOR_BIAS}, {0, v1::LAYER_TENSOR_GAMMA},
      {0, v1::LAYER_TENSOR_BETA}, {1, v1::LAYER_TENSOR_WEIGHT}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(upload->tensors[i].layer, order[i].first) << i;
    EXPECT_EQ(upload->tensors[i].tensor, order[i].second) << i;
  }
  EXPECT_THAT(Floats(upload->tensors[0].data), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Floats(upload->tensors[3].data), ElementsAre(3, 4));
  EXPECT_EQ(upload->tensor_bytes(), (6 + 3 + 2 + 2 + 3) * 4);
}

TEST(ModelBuilderTest, LayerNormWithoutOptionsSendsAnEmptyMessage) {
  absl::StatusOr<ModelUpload> upload =
      ModelBuilder("m")
          .AddLayer({.weight = {1, 2}, .in_features = 2, .out_features = 1, .layernorm = true})
          .Build();
  ASSERT_TRUE(upload.ok()) << upload.status();
  EXPECT_TRUE(upload->header.layers(0).has_layernorm());
  EXPECT_FALSE(upload->header.layers(0).layernorm().has_eps());
  EXPECT_FALSE(upload->header.layers(0).layernorm().has_gamma());
  EXPECT_EQ(upload->tensors.size(), 1u);
}

TEST(ModelBuilderTest, WireDTypeRoundsOnTheClient) {
  ModelBuilder builder("m");
  builder.SetDType(v1::FLOAT32).SetAllowTf32(true).SetWireDType(v1::BFLOAT16);
  builder.AddLayer({.weight = {1.0f, 0.1f}, .in_features = 1, .out_features = 2});
  absl::StatusOr<ModelUpload> upload = builder.Build();
  ASSERT_TRUE(upload.ok()) << upload.status();
  EXPECT_TRUE(upload->header.allow_tf32());
  EXPECT_EQ(upload->header.layers(0).weight().dtype(), v1::BFLOAT16);
  EXPECT_EQ(upload->tensors[0].data, std::string("\x80\x3f\xcd\x3d", 4));
  EXPECT_FALSE(ModelBuilder("m").SetWireDType(v1::INT32).Build().ok());
}

TEST(ModelBuilderTest, ChecksVectorsAgainstTheLayerShape) {
  struct Case {
    std::string name;
    DenseLayer layer;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"weight", {.weight = {1, 2, 3}, .in_features = 2, .out_features = 2}, "layers[0].weight"},
      {"bias",
       {.weight = {1, 2, 3, 4}, .in_features = 2, .out_features = 2, .bias = {1}},
       "layers[0].bias: 1 values"},
      {"gamma",
       {.weight = {1, 2, 3, 4}, .in_features = 2, .out_features = 2, .layernorm = true,
        .gamma = {1, 2, 3}},
       "layers[0].gamma"},
      {"beta",
       {.weight = {1, 2, 3, 4}, .in_features = 2, .out_features = 2, .layernorm = true,
        .beta = {1}},
       "layers[0].beta"},
      {"gamma without layernorm",
       {.weight = {1, 2, 3, 4}, .in_features = 2, .out_features = 2, .gamma = {1, 2}},
       "without layernorm"},
      {"negative", {.in_features = -1, .out_features = 2}, "negative"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelUpload> upload = ModelBuilder("m").AddLayer(c.layer).Build();
    ASSERT_FALSE(upload.ok()) << c.name;
    EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(upload.status().message()), HasSubstr(c.message)) << c.name;
  }
  // Chaining across layers is the server's to check (it names the field).
  EXPECT_TRUE(ModelBuilder("m")
                  .AddLayer({.weight = {1, 2}, .in_features = 1, .out_features = 2})
                  .AddLayer({.weight = {1, 2, 3}, .in_features = 3, .out_features = 1})
                  .Build()
                  .ok());
}

TEST(ModelBuilderTest, DenseRequestAndOutput) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  absl::StatusOr<v1::DenseRequest> request = MakeDenseRequest("m", x, 2, 3, v1::FLOAT16);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->model(), "m");
  EXPECT_EQ(request->input().dtype(), v1::FLOAT16);
  EXPECT_THAT(request->input().shape(), ElementsAre(2, 3));
  EXPECT_EQ(request->input().data().size(), 12u);
  EXPECT_FALSE(MakeDenseRequest("m", x, 4, 2).ok());

  v1::DenseResponse response;
  const int64_t shape[] = {3, 2};
  *response.mutable_output() = *MakeTensor(x, shape, v1::BFLOAT16);
  absl::StatusOr<DenseOutput> out = DecodeDenseOutput(response);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->rows, 3);
  EXPECT_EQ(out->cols, 2);
  EXPECT_EQ(out->dtype, v1::BFLOAT16);
  EXPECT_THAT(out->values, ElementsAre(1, 2, 3, 4, 5, 6));

  *response.mutable_output() = MakeTensor(absl::Span<const float>(x));  // 1-D
  EXPECT_FALSE(DecodeDenseOutput(response).ok());
  response.mutable_output()->set_dtype(v1::INT32);
  response.mutable_output()->add_shape(1);
  EXPECT_FALSE(DecodeDenseOutput(response).ok());
}

TEST(ModelBuilderTest, ReferenceByHand) {
  // Layer 0: LayerNorm (eps ~0, gamma 2, beta 1) of rows [1, 3] -> [-1, 3] (normalised [-1, 1]),
  // then W = [[1, 0, 2], [0, 1, 1]], b = [0, 0, -1]: [-1, 3, 0] -> relu [0, 3, 0].
  // Layer 1: W = [[1], [1], [1]], b = [0.5], none: 3.5.
  const std::vector<DenseLayer> layers = {
      {.weight = {1, 0, 2, 0, 1, 1},
       .in_features = 2,
       .out_features = 3,
       .bias = {0, 0, -1},
       .layernorm = true,
       .eps = 1e-300,  // > 0 as the server requires; negligible next to a variance of 1
       .gamma = {2, 2},
       .beta = {1, 1},
       .activation = v1::ACTIVATION_RELU},
      {.weight = {1, 1, 1}, .in_features = 3, .out_features = 1, .bias = {0.5f}}};
  const std::vector<double> x = {1, 3, 10, 10};
  absl::StatusOr<std::vector<double>> y = DenseReference(layers, x, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  // Second row: constant -> normalised 0 -> beta 1 each -> [1, 1, 2] -> [1, 1, 2] -> 4.5.
  EXPECT_THAT(*y, ElementsAre(3.5, 4.5));

  // Activations, one layer of identity weight.
  const double gelu_tanh_1 = 0.5 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (1 + 0.044715)));
  const struct {
    v1::Activation a;
    double at_one, at_minus_two;
  } acts[] = {
      {v1::ACTIVATION_NONE, 1, -2},
      {v1::ACTIVATION_RELU, 1, 0},
      {v1::ACTIVATION_SILU, 1 / (1 + std::exp(-1.0)), -2 / (1 + std::exp(2.0))},
      {v1::ACTIVATION_GELU_ERF, 0.5 * (1 + std::erf(1 / std::sqrt(2.0))),
       -1 * (1 + std::erf(-2 / std::sqrt(2.0)))},
      {v1::ACTIVATION_GELU_TANH, gelu_tanh_1,
       -1 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (-2 - 0.044715 * 8)))},
  };
  for (const auto& c : acts) {
    absl::StatusOr<std::vector<double>> r = DenseReference(
        {{.weight = {1}, .in_features = 1, .out_features = 1, .activation = c.a}},
        std::vector<double>{1, -2}, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR((*r)[0], c.at_one, 1e-15) << ActivationName(c.a);
    EXPECT_NEAR((*r)[1], c.at_minus_two, 1e-15) << ActivationName(c.a);
  }

  EXPECT_FALSE(DenseReference(layers, x, 3).ok());
  std::vector<DenseLayer> broken = layers;
  broken[1].in_features = 2;
  broken[1].weight = {1, 1};
  EXPECT_FALSE(DenseReference(broken, x, 2).ok());
}

TEST(ModelBuilderTest, RelativeL2ErrorNeverPassesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_DOUBLE_EQ(RelativeL2Error(std::vector<double>{3, 4}, std::vector<double>{3, 4}), 0);
  EXPECT_DOUBLE_EQ(RelativeL2Error(std::vector<double>{3, 5}, std::vector<double>{3, 4}), 0.2);
  EXPECT_TRUE(std::isnan(RelativeL2Error(std::vector<double>{nan, 4}, std::vector<double>{3, 4})));
  EXPECT_FALSE(RelativeL2Error(std::vector<double>{nan}, std::vector<double>{1}) <= 1.0);
  EXPECT_TRUE(std::isinf(RelativeL2Error(std::vector<double>{1}, std::vector<double>{0})));
  EXPECT_TRUE(std::isnan(RelativeL2Error(std::vector<double>{1}, std::vector<double>{1, 2})));
}

}  // namespace
}  // namespace gpucompute::client
