// Tests of the CLI's JSON model manifests (client/cli/model_manifest.h), on .npy files written
// to a temporary folder.
#include "client/cli/model_manifest.h"

#include <fstream>
#include <string>
#include <vector>

#include "client/cli/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/server_process.h"

namespace gpucompute::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ModelManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = test::MakeTempDir("gpucompute-manifest");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    WriteNpy("w0.npy", {2, 3}, {1, 2, 3, 4, 5, 6});
    WriteNpy("b0.npy", {3}, {0.5, 0.25, 0.125});
    WriteNpy("g0.npy", {2}, {1.5, 2.5}, 2);  // float16
    WriteNpy("beta0.npy", {2}, {-1, 1}, 8);
    WriteNpy("w1.npy", {3, 1}, {7, 8, 9}, 8);
    WriteNpy("vector.npy", {6}, {1, 2, 3, 4, 5, 6});
  }

  void WriteNpy(const std::string& name, std::vector<int64_t> shape, std::vector<double> data,
                int item_size = 4) {
    Write(name, EncodeNpy(shape, data, item_size));
  }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  absl::StatusOr<ModelManifest> Parse(const std::string& json) {
    return ParseModelManifest(json, dir_);
  }

  std::string dir_;
};

TEST_F(ModelManifestTest, ReadsEveryField) {
  const std::string path = Write("model.json", R"({
    "dtype": "float16", "allow_tf32": true,
    "layers": [
      {"weight": "w0.npy", "bias": "b0.npy",
       "layernorm": {"eps": 1e-6, "gamma": "g0.npy", "beta": "beta0.npy"},
       "activation": "gelu_tanh"},
      {"weight": "w1.npy", "layernorm": true, "activation": "silu"}
    ]})");
  absl::StatusOr<ModelManifest> m = ReadModelManifest(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dtype, "float16");
  EXPECT_EQ(m->allow_tf32, true);
  ASSERT_EQ(m->layers.size(), 2u);
  const client::DenseLayer& l0 = m->layers[0];
  EXPECT_EQ(l0.in_features, 2);
  EXPECT_EQ(l0.out_features, 3);
  EXPECT_THAT(l0.weight, ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(l0.bias, ElementsAre(0.5, 0.25, 0.125));
  EXPECT_TRUE(l0.layernorm);
  EXPECT_EQ(l0.eps, 1e-6);
  EXPECT_THAT(l0.gamma, ElementsAre(1.5, 2.5));
  EXPECT_THAT(l0.beta, ElementsAre(-1, 1));
  EXPECT_EQ(l0.activation, v1::ACTIVATION_GELU_TANH);
  const client::DenseLayer& l1 = m->layers[1];
  EXPECT_EQ(l1.in_features, 3);
  EXPECT_EQ(l1.out_features, 1);
  EXPECT_TRUE(l1.bias.empty());
  EXPECT_TRUE(l1.layernorm);
  EXPECT_FALSE(l1.eps.has_value());
  EXPECT_TRUE(l1.gamma.empty());
  EXPECT_EQ(l1.activation, v1::ACTIVATION_SILU);

  // The manifest's layers build into an upload.
  client::ModelBuilder builder("m");
  for (const client::DenseLayer& layer : m->layers) builder.AddLayer(layer);
  EXPECT_TRUE(builder.Build().ok());
}

TEST_F(ModelManifestTest, BareArrayAndDefaults) {
  absl::StatusOr<ModelManifest> m =
      Parse(R"([{"weight": "w0.npy", "layernorm": false}, {"weight": ")" + dir_ +
            R"(/w1.npy", "bias": null, "activation": null}])");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->dtype.has_value());
  EXPECT_FALSE(m->allow_tf32.has_value());
  ASSERT_EQ(m->layers.size(), 2u);
  EXPECT_FALSE(m->layers[0].layernorm);
  EXPECT_EQ(m->layers[0].activation, v1::ACTIVATION_NONE);
  EXPECT_THAT(m->layers[1].weight, ElementsAre(7, 8, 9));  // absolute path
}

TEST_F(ModelManifestTest, RelativePathsFollowTheManifest) {
  // Read from another working directory: paths resolve against the manifest's folder.
  const std::string path = Write("m.json", R"({"layers": [{"weight": "w0.npy"}]})");
  absl::StatusOr<ModelManifest> m = ReadModelManifest(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layers[0].in_features, 2);
}

TEST_F(ModelManifestTest, ReportsErrorsWithTheirPath) {
  struct Case {
    std::string json;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{", "not valid JSON"},
      {"{\"layers\": []}", "at least one layer"},
      {"{\"layers\": 3}", "expected an array"},
      {"{\"layer\": []}", "unknown key \"layer\""},
      {"{\"layers\": [{\"weight\": \"w0.npy\"}], \"dtype\": 16}", "dtype"},
      {"[{\"bias\": \"b0.npy\"}]", "layers[0]: \"weight\" is required"},
      {"[{\"weight\": \"w0.npy\", \"activaton\": \"relu\"}]", "unknown key \"activaton\""},
      {"[{\"weight\": \"w0.npy\"}, {\"weight\": \"w1.npy\", \"activation\": \"gelu\"}]",
       "layers[1].activation: unknown activation 'gelu'"},
      {"[{\"weight\": \"vector.npy\"}]", "layers[0].weight"},
      {"[{\"weight\": \"w0.npy\", \"bias\": \"w0.npy\"}]", "layers[0].bias"},
      {"[{\"weight\": \"w0.npy\", \"layernorm\": \"yes\"}]", "layers[0].layernorm"},
      {"[{\"weight\": \"w0.npy\", \"layernorm\": {\"epsilon\": 1}}]", "unknown key \"epsilon\""},
      {"[{\"weight\": \"w0.npy\", \"layernorm\": {\"eps\": \"small\"}}]",
       "layers[0].layernorm.eps"},
      {"[{\"weight\": \"w0.npy\", \"layernorm\": {\"gamma\": \"w0.npy\"}}]",
       "layers[0].layernorm.gamma"},
      {"[{\"weight\": 5}]", "expected a .npy path"},
      {"[\"w0.npy\"]", "layers[0]: expected an object"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelManifest> m = Parse(c.json);
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.message)) << c.json;
  }
  absl::StatusOr<ModelManifest> missing = Parse("[{\"weight\": \"nope.npy\"}]");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("layers[0].weight"));
  absl::StatusOr<ModelManifest> no_file = ReadModelManifest(dir_ + "/none.json");
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
  const std::string bad = Write("bad.json", "[]");
  absl::StatusOr<ModelManifest> bad_file = ReadModelManifest(bad);
  ASSERT_FALSE(bad_file.ok());
  EXPECT_THAT(std::string(bad_file.status().message()), HasSubstr(bad));
}

}  // namespace
}  // namespace gpucompute::cli
