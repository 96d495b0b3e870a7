// Integration test of the dense-model calls of the C++ client and the `gpucompute model` /
// `gpucompute dense` / `gpucompute demo` commands against the real server binary on a loopback
// port ($GPUCOMPUTE_TEST_BACKEND, default cpu). Results are checked against the float64
// reference (client::DenseReference) within 1e-5 (float32) and 1e-2 (bfloat16, float16)
// relative l2 error. Each test starts its own server and stops it with SIGTERM (exit 0).
//
// GPUCOMPUTE_SERVER_BIN and GPUCOMPUTE_CLI_BIN are compile definitions (tests/client/CMakeLists).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/npy.h"
#include "client/cpp/client.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/client_server_fixture.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;
using test::ProcessResult;

double Tolerance(v1::DType dtype) { return dtype == v1::FLOAT32 ? 1e-5 : 1e-2; }

client::DenseLayer RandomLayer(std::mt19937_64& rng, int64_t in, int64_t out, bool layernorm,
                               v1::Activation activation, bool gamma_beta = false) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  client::DenseLayer layer{.in_features = in, .out_features = out, .layernorm = layernorm,
                           .activation = activation};
  layer.weight.resize(in * out);
  for (float& w : layer.weight) w = normal(rng) / std::sqrt(static_cast<float>(in));
  layer.bias.resize(out);
  for (float& b : layer.bias) b = 0.1f * normal(rng);
  if (gamma_beta) {
    layer.gamma.resize(in);
    layer.beta.resize(in);
    for (float& g : layer.gamma) g = 1 + 0.1f * normal(rng);
    for (float& b : layer.beta) b = 0.1f * normal(rng);
  }
  return layer;
}

std::vector<float> RandomRows(std::mt19937_64& rng, int64_t rows, int64_t cols) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<double> ToDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

class DenseIntegrationTest : public test::ClientServerTest {
 protected:
  void SetUp() override {
    const unsigned seed = std::random_device{}();
    std::printf("seed %u\n", seed);
    rng_.seed(seed);
    StartServer("gpucompute-dense-it", test::TestBackend());
  }

  absl::StatusOr<client::LoadModelResult> Load(const std::string& name,
                                               const std::vector<client::DenseLayer>& layers,
                                               v1::DType dtype, int64_t chunk_bytes =
                                                                    client::kDefaultChunkBytes) {
    client::ModelBuilder builder(name);
    builder.SetDType(dtype);
    for (const client::DenseLayer& l : layers) builder.AddLayer(l);
    absl::StatusOr<client::ModelUpload> upload = builder.Build();
    if (!upload.ok()) return upload.status();
    return client_->LoadModel(*std::move(upload), {}, chunk_bytes);
  }

  // Runs `rows` random rows through `name` and checks them against the reference.
  void ExpectMatches(const std::string& name, const std::vector<client::DenseLayer>& layers,
                     v1::DType dtype, int64_t rows) {
    const std::vector<float> x = RandomRows(rng_, rows, layers[0].in_features);
    absl::StatusOr<client::DenseResult> r =
        client_->Dense(*client::MakeDenseRequest(name, x, rows, layers[0].in_features));
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<client::DenseOutput> y = client::DecodeDenseOutput(r->response);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->dtype, dtype);
    ASSERT_EQ(y->rows, rows);
    ASSERT_EQ(y->cols, layers.back().out_features);
    absl::StatusOr<std::vector<double>> ref = client::DenseReference(layers, ToDoubles(x), rows);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const double error = client::RelativeL2Error(ToDoubles(y->values), *ref);
    EXPECT_LE(error, Tolerance(dtype)) << name << ", " << rows << " rows";  // fails on NaN
  }

  std::string WriteNpy(const std::string& name, std::vector<int64_t> shape,
                       const std::vector<float>& values, int item_size = 4) {
    const std::string path = PathIn(name);
    std::ofstream(path, std::ios::binary) << cli::EncodeNpy(shape, ToDoubles(values), item_size);
    return path;
  }

  std::mt19937_64 rng_;
};

TEST_F(DenseIntegrationTest, LoadRunListUnload) {
  const std::vector<client::DenseLayer> layers = {
      RandomLayer(rng_, 96, 200, true, v1::ACTIVATION_GELU_TANH, /*gamma_beta=*/true),
      RandomLayer(rng_, 200, 77, true, v1::ACTIVATION_SILU),
      RandomLayer(rng_, 77, 10, false, v1::ACTIVATION_NONE)};
  for (v1::DType dtype : {v1::FLOAT32, v1::BFLOAT16, v1::FLOAT16}) {
    const std::string name = absl::StrCat("mlp-", DTypeName(dtype));
    absl::StatusOr<client::LoadModelResult> loaded = Load(name, layers, dtype, 10007);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->info.name(), name);
    EXPECT_EQ(loaded->info.dtype(), dtype);
    ASSERT_EQ(loaded->info.layers_size(), 3);
    EXPECT_EQ(loaded->info.layers(1).in_features(), 200);
    EXPECT_TRUE(loaded->info.layers(1).layernorm());
    EXPECT_EQ(loaded->info.layers(0).activation(), v1::ACTIVATION_GELU_TANH);
    EXPECT_GT(loaded->info.device_bytes(), 0);
    EXPECT_GT(loaded->messages, 10);
    for (int64_t rows : {1, 2, 37, 300}) ExpectMatches(name, layers, dtype, rows);
  }
  absl::StatusOr<client::ListModelsResult> list = client_->ListModels();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->response.models_size(), 3);
  ASSERT_TRUE(client_->UnloadModel("mlp-float32").ok());
  EXPECT_EQ(client_->UnloadModel("mlp-float32").status().code(), absl::StatusCode::kNotFound);
  const std::vector<float> x(96, 1.0f);
  EXPECT_EQ(client_->Dense(*client::MakeDenseRequest("mlp-float32", x, 1, 96)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ListModels()->response.models_size(), 2);
}

TEST_F(DenseIntegrationTest, ConcurrentCallsWithDifferentRowCounts) {
  const std::vector<client::DenseLayer> layers = {
      RandomLayer(rng_, 64, 128, true, v1::ACTIVATION_GELU_ERF),
      RandomLayer(rng_, 128, 24, false, v1::ACTIVATION_RELU)};
  ASSERT_TRUE(Load("c", layers, v1::FLOAT32).ok());
  std::vector<std::vector<float>> inputs;
  std::vector<std::future<absl::StatusOr<client::DenseResult>>> calls;
  for (int i = 0; i < 128; ++i) {
    const int64_t rows = 1 + i % 40;
    inputs.push_back(RandomRows(rng_, rows, 64));
    calls.push_back(client_->DenseAsync(*client::MakeDenseRequest("c", inputs.back(), rows, 64)));
  }
  for (int i = 0; i < 128; ++i) {
    absl::StatusOr<client::DenseResult> r = calls[i].get();
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<client::DenseOutput> y = client::DecodeDenseOutput(r->response);
    ASSERT_TRUE(y.ok()) << y.status();
    const int64_t rows = 1 + i % 40;
    ASSERT_EQ(y->rows, rows) << i;
    const std::vector<double> ref = *client::DenseReference(layers, ToDoubles(inputs[i]), rows);
    EXPECT_LE(client::RelativeL2Error(ToDoubles(y->values), ref), 1e-5) << i;
  }
  absl::StatusOr<client::ServerInfoResult> info = client_->ServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GE(info->info.dense_batching().requests(), 128);
}

TEST_F(DenseIntegrationTest, BadInputIsRejectedAndTheServerKeepsServing) {
  const std::vector<client::DenseLayer> layers = {
      RandomLayer(rng_, 24, 40, true, v1::ACTIVATION_GELU_TANH),
      RandomLayer(rng_, 40, 8, false, v1::ACTIVATION_NONE)};
  ASSERT_TRUE(Load("good", layers, v1::FLOAT32).ok());

  // Layers that do not chain: INVALID_ARGUMENT naming the layer; nothing registered.
  absl::StatusOr<client::LoadModelResult> bad =
      Load("bad", {RandomLayer(rng_, 16, 32, false, v1::ACTIVATION_NONE),
                   RandomLayer(rng_, 31, 8, false, v1::ACTIVATION_NONE)},
           v1::BFLOAT16);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("layers[1]"));
  EXPECT_EQ(client_->ListModels()->response.models_size(), 1);
  ExpectMatches("good", layers, v1::FLOAT32, 3);

  // A loaded name.
  EXPECT_EQ(Load("good", layers, v1::BFLOAT16).status().code(),
            absl::StatusCode::kAlreadyExists);
  ExpectMatches("good", layers, v1::FLOAT32, 3);

  // Wrong feature count: both sizes named.
  const std::vector<float> x(2 * 25, 1.0f);
  absl::StatusOr<client::DenseResult> r = client_->Dense(*client::MakeDenseRequest("good", x, 2, 25));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("25"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("24"));
  ExpectMatches("good", layers, v1::FLOAT32, 1);

  // An integer input.
  v1::DenseRequest ints;
  ints.set_model("good");
  ints.mutable_input()->set_dtype(v1::INT32);
  ints.mutable_input()->add_shape(1);
  ints.mutable_input()->add_shape(24);
  ints.mutable_input()->set_data(std::string(24 * 4, '\0'));
  EXPECT_EQ(client_->Dense(ints).status().code(), absl::StatusCode::kInvalidArgument);
  ExpectMatches("good", layers, v1::FLOAT32, 5);

  // Unknown model.
  EXPECT_EQ(client_->Dense(*client::MakeDenseRequest("nope", x, 2, 25)).status().code(),
            absl::StatusCode::kNotFound);
  ExpectMatches("good", layers, v1::FLOAT32, 2);
}

TEST_F(DenseIntegrationTest, CliModelCommands) {
  const std::vector<client::DenseLayer> layers = {
      RandomLayer(rng_, 12, 20, true, v1::ACTIVATION_GELU_TANH, /*gamma_beta=*/true),
      RandomLayer(rng_, 20, 5, false, v1::ACTIVATION_SILU)};
  WriteNpy("w0.npy", {12, 20}, layers[0].weight);
  WriteNpy("b0.npy", {20}, layers[0].bias, 8);
  WriteNpy("g0.npy", {12}, layers[0].gamma);
  WriteNpy("beta0.npy", {12}, layers[0].beta);
  WriteNpy("w1.npy", {20, 5}, layers[1].weight);
  WriteNpy("b1.npy", {5}, layers[1].bias);
  const std::string manifest = PathIn("model.json");
  std::ofstream(manifest) << R"({"layers": [
      {"weight": "w0.npy", "bias": "b0.npy", "activation": "gelu_tanh",
       "layernorm": {"gamma": "g0.npy", "beta": "beta0.npy"}},
      {"weight": "w1.npy", "bias": "b1.npy", "activation": "silu"}]})";

  ProcessResult load = Cli({"model", "load", "clim", "--manifest", manifest, "--dtype", "float32",
                            "--chunk-mib", "0.0005"});
  ASSERT_EQ(load.exit_code, 0) << load.stdout_text << load.stderr_text;
  EXPECT_THAT(load.stdout_text, HasSubstr("model clim: float32"));
  EXPECT_THAT(load.stdout_text, HasSubstr("gelu_tanh"));

  ProcessResult again = Cli({"model", "load", "clim", "--manifest", manifest});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.stderr_text, HasSubstr("ALREADY_EXISTS"));

  ProcessResult list = Cli({"model", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.stderr_text;
  EXPECT_THAT(list.stdout_text, HasSubstr("clim"));
  EXPECT_THAT(list.stdout_text, HasSubstr("12->20 LN gelu_tanh, 20->5 silu"));
  ProcessResult list_json = Cli({"model", "list", "--json"});
  ASSERT_EQ(list_json.exit_code, 0) << list_json.stderr_text;
  const nlohmann::json j = nlohmann::json::parse(list_json.stdout_text);
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["name"], "clim");
  EXPECT_EQ(j["models"][0]["layers"].size(), 2u);

  // 7 rows of float32 in, .npy out; then one float16 row as a 1-D array, CSV out.
  const std::vector<float> x = RandomRows(rng_, 7, 12);
  const std::string x_path = WriteNpy("x.npy", {7, 12}, x);
  const std::string y_path = PathIn("y.npy");
  ProcessResult dense = Cli({"dense", "clim", "--input", x_path, "--output", y_path});
  ASSERT_EQ(dense.exit_code, 0) << dense.stderr_text;
  absl::StatusOr<cli::NpyArray> y = cli::ReadNpyFile(y_path);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->item_size, 4);
  ASSERT_EQ(y->shape, (std::vector<int64_t>{7, 5}));
  const std::vector<double> ref = *client::DenseReference(layers, ToDoubles(x), 7);
  EXPECT_LE(client::RelativeL2Error(y->data, ref), 1e-5);

  std::vector<float> row = RandomRows(rng_, 1, 12);
  for (float& v : row) v = client::HalfToFloat(client::FloatToHalf(v));  // exact in float16
  const std::string row_path = WriteNpy("row.npy", {12}, row, 2);
  ProcessResult csv = Cli({"dense", "clim", "-i", row_path});
  ASSERT_EQ(csv.exit_code, 0) << csv.stderr_text;
  EXPECT_THAT(csv.stderr_text, HasSubstr("1 x 12 float16 -> 1 x 5 float32"));
  std::vector<double> csv_values;
  for (absl::string_view field : absl::StrSplit(absl::StripAsciiWhitespace(csv.stdout_text), ',')) {
    double v = 0;
    ASSERT_TRUE(absl::SimpleAtod(field, &v)) << csv.stdout_text;
    csv_values.push_back(v);
  }
  EXPECT_LE(client::RelativeL2Error(csv_values, *client::DenseReference(layers, ToDoubles(row), 1)),
            1e-5);

  ProcessResult wrong = Cli({"dense", "clim", "-i", WriteNpy("bad.npy", {2, 11}, RandomRows(rng_, 2, 11))});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.stderr_text, HasSubstr("INVALID_ARGUMENT"));

  ProcessResult unload = Cli({"model", "unload", "clim"});
  EXPECT_EQ(unload.exit_code, 0) << unload.stderr_text;
  ProcessResult gone = Cli({"dense", "clim", "-i", x_path});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.stderr_text, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(Cli({"model", "list"}).stdout_text, HasSubstr("no models loaded"));

  // A manifest error names the field and sends nothing.
  const std::string broken = PathIn("broken.json");
  std::ofstream(broken) << R"([{"weight": "w0.npy", "activation": "gelu"}])";
  ProcessResult bad_manifest = Cli({"model", "load", "x", "--manifest", broken});
  EXPECT_EQ(bad_manifest.exit_code, 1);
  EXPECT_THAT(bad_manifest.stderr_text, HasSubstr("layers[0].activation"));
}

TEST_F(DenseIntegrationTest, CliDemoChecksDenseModels) {
  ProcessResult r = Cli({"demo", "--burst", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("dense models match"));
  EXPECT_THAT(r.stdout_text, HasSubstr("bfloat16 loaded"));
  EXPECT_THAT(r.stdout_text, HasSubstr("float32  loaded"));
  EXPECT_EQ(client_->ListModels()->response.models_size(), 0);  // the demo cleaned up
}

}  // namespace
}  // namespace gpucompute
