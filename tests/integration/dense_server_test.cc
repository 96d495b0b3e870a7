// Dense models through a real server on loopback: load (streamed in chunks), list, infer,
// unload; every bad-input rule followed by a good request; 128 concurrent callers batched.
// The backend is $GPUCOMPUTE_TEST_BACKEND (default cpu; the GPU machine runs it with cuda).
// References are computed here in float64, independently of the server's CPU backend.
#include <cmath>
#include <cstdlib>
#include <random>
#include <thread>

#include <grpcpp/create_channel.h>

#include "gmock/gmock.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gtest/gtest.h"
#include "common/element_type.h"
#include "server/server.h"
#include "server/service/tensor_codec.h"
#include "tests/integration/loopback_server.h"

namespace gpucompute {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string BackendKind() { return testing::TestBackend(); }

// A layer as a user holds it: weight in x out, optional bias, LayerNorm with gamma/beta.
struct TestLayer {
  int64_t in = 0, out = 0;
  std::vector<double> weight, bias, gamma, beta;
  bool layernorm = false;
  double eps = 1e-5;
  v1::Activation activation = v1::ACTIVATION_NONE;
};

TestLayer RandomLayer(std::mt19937_64& rng, int64_t in, int64_t out, bool ln, bool affine,
                      v1::Activation act) {
  std::normal_distribution<double> g(0, 1);
  TestLayer l;
  l.in = in;
  l.out = out;
  l.layernorm = ln;
  l.activation = act;
  for (int64_t i = 0; i < in * out; ++i) l.weight.push_back(g(rng) / std::sqrt(double(in)));
  for (int64_t j = 0; j < out; ++j) l.bias.push_back(0.5 * g(rng));
  if (ln && affine) {
    for (int64_t k = 0; k < in; ++k) l.gamma.push_back(1 + 0.3 * g(rng));
    for (int64_t k = 0; k < in; ++k) l.beta.push_back(0.3 * g(rng));
  }
  return l;
}

double Act(v1::Activation a, double x) {
  switch (a) {
    case v1::ACTIVATION_GELU_TANH: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case v1::ACTIVATION_GELU_ERF: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case v1::ACTIVATION_RELU: return x > 0 ? x : 0;
    case v1::ACTIVATION_SILU: return x / (1 + std::exp(-x));
    default: return x;
  }
}

std::vector<double> Reference(const std::vector<TestLayer>& layers, std::vector<double> x, int64_t rows) {
  for (const TestLayer& l : layers) {
    std::vector<double> y(rows * l.out);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> a(x.begin() + r * l.in, x.begin() + (r + 1) * l.in);
      if (l.layernorm) {
        double mean = 0, var = 0;
        for (double v : a) mean += v;
        mean /= l.in;
        for (double v : a) var += (v - mean) * (v - mean);
        var /= l.in;
        for (int64_t k = 0; k < l.in; ++k) {
          a[k] = (a[k] - mean) / std::sqrt(var + l.eps);
          if (!l.gamma.empty()) a[k] = a[k] * l.gamma[k] + l.beta[k];
        }
      }
      for (int64_t j = 0; j < l.out; ++j) {
        double s = l.bias.empty() ? 0 : l.bias[j];
        for (int64_t k = 0; k < l.in; ++k) s += a[k] * l.weight[k * l.out + j];
        y[r * l.out + j] = Act(l.activation, s);
      }
    }
    x = std::move(y);
  }
  return x;
}

// ||got - want|| / ||want||; NaN or infinity anywhere gives infinity (never passes).
double RelativeL2(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

ElementType ToElement(v1::DType d) { return *FloatElementType(d, ""); }

v1::Tensor MakeTensor(const std::vector<double>& values, std::vector<int64_t> shape, v1::DType dtype) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  std::string bytes(values.size() * DTypeSize(dtype), '\0');
  FromDouble(values.data(), static_cast<int64_t>(values.size()), ToElement(dtype), bytes.data());
  t.set_data(std::move(bytes));
  return t;
}

std::vector<double> FromTensor(const v1::Tensor& t) {
  const int64_t n = static_cast<int64_t>(t.data().size()) / DTypeSize(t.dtype());
  std::vector<double> v(n);
  ToDouble(ToElement(t.dtype()), t.data().data(), n, v.data());
  return v;
}

class DenseServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BackendKind() == "cuda" && !CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
    ServerConfig c = testing::LoopbackConfig();
    c.dense_scheduler.max_queue_delay = absl::Milliseconds(2);
    c.limits.max_request_bytes = 4 << 20;
    c.limits.dense.max_model_bytes = 256 << 20;
    c.limits.dense.max_rows_per_request = 5000;
    c.limits.dense.max_models = 8;
    Configure(c);
    loopback_.Start(c);
    ASSERT_NE(loopback_.server, nullptr);
    server_ = std::move(loopback_.server);
    channel_ = loopback_.channel;
    stub_ = std::move(loopback_.stub);
  }
  virtual void Configure(ServerConfig&) {}

  // Streams `messages` as one LoadModel call.
  grpc::Status Send(const std::vector<v1::LoadModelChunk>& messages, v1::ModelInfo* info) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    auto writer = stub_->LoadModel(&ctx, info);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static v1::TensorHeader Header(v1::DType dtype, std::vector<int64_t> shape) {
    v1::TensorHeader h;
    h.set_dtype(dtype);
    for (int64_t d : shape) h.add_shape(d);
    return h;
  }

  // The header then every tensor in chunks of `chunk` bytes, sent as `wire` dtype.
  static std::vector<v1::LoadModelChunk> Messages(const std::string& name, v1::DType dtype,
                                                  const std::vector<TestLayer>& layers,
                                                  v1::DType wire = v1::FLOAT32,
                                                  size_t chunk = 1 << 20, bool tf32 = false) {
    std::vector<v1::LoadModelChunk> out(1);
    v1::ModelHeader* h = out[0].mutable_header();
    h->set_name(name);
    h->set_dtype(dtype);
    h->set_allow_tf32(tf32);
    for (const TestLayer& l : layers) {
      v1::LayerHeader* lh = h->add_layers();
      *lh->mutable_weight() = Header(wire, {l.in, l.out});
      if (!l.bias.empty()) *lh->mutable_bias() = Header(wire, {l.out});
      if (l.layernorm) {
        lh->mutable_layernorm()->set_eps(l.eps);
        if (!l.gamma.empty()) *lh->mutable_layernorm()->mutable_gamma() = Header(wire, {l.in});
        if (!l.beta.empty()) *lh->mutable_layernorm()->mutable_beta() = Header(wire, {l.in});
      }
      lh->set_activation(l.activation);
    }
    for (size_t i = 0; i < layers.size(); ++i) {
      const TestLayer& l = layers[i];
      const std::pair<v1::LayerTensor, const std::vector<double>*> tensors[] = {
          {v1::LAYER_TENSOR_WEIGHT, &l.weight}, {v1::LAYER_TENSOR_BIAS, &l.bias},
          {v1::LAYER_TENSOR_GAMMA, &l.gamma}, {v1::LAYER_TENSOR_BETA, &l.beta}};
      for (const auto& [which, values] : tensors) {
        if (values->empty()) continue;
        const std::string bytes = MakeTensor(*values, {}, wire).data();
        for (size_t off = 0; off < bytes.size(); off += chunk) {
          v1::LoadModelChunk m;
          m.mutable_chunk()->set_layer(static_cast<int>(i));
          m.mutable_chunk()->set_tensor(which);
          m.mutable_chunk()->set_offset(static_cast<int64_t>(off));
          m.mutable_chunk()->set_data(bytes.substr(off, chunk));
          out.push_back(std::move(m));
        }
      }
    }
    return out;
  }

  void Load(const std::string& name, v1::DType dtype, const std::vector<TestLayer>& layers,
            bool tf32 = false) {
    v1::ModelInfo info;
    const grpc::Status s = Send(Messages(name, dtype, layers, v1::FLOAT32, 1 << 20, tf32), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(info.name(), name);
    EXPECT_EQ(info.layers_size(), static_cast<int>(layers.size()));
  }

  grpc::Status Dense(const std::string& model, const v1::Tensor& input, v1::DenseResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::DenseRequest req;
    req.set_model(model);
    *req.mutable_input() = input;
    return stub_->Dense(&ctx, req, resp);
  }

  // Runs `rows` random rows through `model` and returns the relative l2 error.
  double Check(const std::string& model, const std::vector<TestLayer>& layers, int64_t rows,
               v1::DType input_dtype, std::mt19937_64& rng) {
    std::normal_distribution<double> g(0.3, 2);
    std::vector<double> x(rows * layers.front().in);
    for (double& v : x) v = g(rng);
    const v1::Tensor input = MakeTensor(x, {rows, layers.front().in}, input_dtype);
    x = FromTensor(input);  // what the server receives
    v1::DenseResponse resp;
    const grpc::Status s = Dense(model, input, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) return INFINITY;
    EXPECT_EQ(resp.output().shape(0), rows);
    EXPECT_EQ(resp.output().shape(1), layers.back().out);
    return RelativeL2(FromTensor(resp.output()), Reference(layers, x, rows));
  }

  testing::LoopbackServer loopback_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Compute::Stub> stub_;
};

double Tolerance(v1::DType dtype, bool tf32) {
  if (dtype == v1::FLOAT32) return tf32 ? 1e-3 : 1e-5;
  return 1e-2;
}

TEST_F(DenseServer, LoadListInferUnload) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<TestLayer> layers = {RandomLayer(rng, 64, 96, true, true, v1::ACTIVATION_GELU_TANH),
                                   RandomLayer(rng, 96, 40, false, false, v1::ACTIVATION_NONE)};
  Load("mlp", v1::FLOAT32, layers);
  v1::ListModelsResponse list;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListModels(&ctx, {}, &list).ok());
  }
  ASSERT_EQ(list.models_size(), 1);
  EXPECT_EQ(list.models(0).name(), "mlp");
  EXPECT_EQ(list.models(0).dtype(), v1::FLOAT32);
  EXPECT_EQ(list.models(0).layers(0).in_features(), 64);
  EXPECT_EQ(list.models(0).layers(1).out_features(), 40);
  EXPECT_TRUE(list.models(0).layers(0).layernorm());
  EXPECT_EQ(list.models(0).layers(0).activation(), v1::ACTIVATION_GELU_TANH);
  EXPECT_GT(list.models(0).device_bytes(), 0);
  for (int64_t rows : {1, 3, 8, 9, 100}) {
    EXPECT_LE(Check("mlp", layers, rows, v1::FLOAT32, rng), 1e-5) << rows << " rows";
  }
  {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest req;
    req.set_name("mlp");
    v1::UnloadModelResponse resp;
    ASSERT_TRUE(stub_->UnloadModel(&ctx, req, &resp).ok());
  }
  v1::DenseResponse resp;
  EXPECT_EQ(Dense("mlp", MakeTensor(std::vector<double>(64), {1, 64}, v1::FLOAT32), &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx;
  v1::UnloadModelRequest again;
  again.set_name("mlp");
  v1::UnloadModelResponse r2;
  EXPECT_EQ(stub_->UnloadModel(&ctx, again, &r2).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DenseServer, EveryDtypeActivationAndInputType) {
  std::mt19937_64 rng(std::random_device{}());
  int n = 0;
  for (v1::DType dtype : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16}) {
    for (bool tf32 : {false, true}) {
      if (tf32 && dtype != v1::FLOAT32) continue;
      for (v1::Activation act : {v1::ACTIVATION_NONE, v1::ACTIVATION_GELU_TANH, v1::ACTIVATION_GELU_ERF,
                                 v1::ACTIVATION_RELU, v1::ACTIVATION_SILU}) {
        const std::string name = absl::StrCat("m", n++);
        std::vector<TestLayer> layers = {RandomLayer(rng, 37, 45, true, n % 2, act),
                                         RandomLayer(rng, 45, 33, n % 3 == 0, true, act)};
        Load(name, dtype, layers, tf32);
        for (v1::DType input : {v1::FLOAT32, v1::FLOAT64, v1::FLOAT16, v1::BFLOAT16}) {
          for (int64_t rows : {1, 5, 70}) {
            EXPECT_LE(Check(name, layers, rows, input, rng), Tolerance(dtype, tf32))
                << DTypeName(dtype) << (tf32 ? " tf32 " : " ") << v1::Activation_Name(act) << " input "
                << DTypeName(input) << " rows " << rows;
          }
        }
        grpc::ClientContext ctx;
        v1::UnloadModelRequest req;
        req.set_name(name);
        v1::UnloadModelResponse resp;
        ASSERT_TRUE(stub_->UnloadModel(&ctx, req, &resp).ok());
      }
    }
  }
}

TEST_F(DenseServer, ModelLargerThanTheMessageLimitLoadsInChunks) {
  std::mt19937_64 rng(7);
  // 1024 x 1536 float32 weights: 6 MiB, over the 4 MiB receive limit of this server.
  std::vector<TestLayer> layers = {RandomLayer(rng, 1024, 1536, true, false, v1::ACTIVATION_RELU)};
  Load("big", v1::BFLOAT16, layers);
  EXPECT_LE(Check("big", layers, 4, v1::FLOAT32, rng), 1e-2);
}

TEST_F(DenseServer, ZeroRowsGiveAnEmptyOutput) {
  std::mt19937_64 rng(1);
  std::vector<TestLayer> layers = {RandomLayer(rng, 8, 5, false, false, v1::ACTIVATION_NONE)};
  Load("tiny", v1::FLOAT32, layers);
  v1::DenseResponse resp;
  ASSERT_TRUE(Dense("tiny", MakeTensor({}, {0, 8}, v1::FLOAT32), &resp).ok());
  EXPECT_EQ(resp.output().shape(0), 0);
  EXPECT_EQ(resp.output().shape(1), 5);
  EXPECT_TRUE(resp.output().data().empty());
}

TEST_F(DenseServer, BadDenseRequestsAreRejectedAndTheNextRequestIsServed) {
  std::mt19937_64 rng(2);
  std::vector<TestLayer> layers = {RandomLayer(rng, 16, 12, true, false, v1::ACTIVATION_SILU)};
  Load("m", v1::FLOAT32, layers);
  struct Case {
    std::string model;
    v1::Tensor input;
    grpc::StatusCode code;
    std::vector<std::string> says;
  };
  v1::Tensor wrong_size = MakeTensor(std::vector<double>(16), {1, 16}, v1::FLOAT32);
  wrong_size.mutable_data()->resize(10);
  v1::Tensor ints = MakeTensor(std::vector<double>(16), {1, 16}, v1::FLOAT32);
  ints.set_dtype(v1::INT32);
  const std::vector<Case> cases = {
      {"nope", MakeTensor(std::vector<double>(16), {1, 16}, v1::FLOAT32), grpc::StatusCode::NOT_FOUND, {"nope"}},
      {"m", MakeTensor(std::vector<double>(20), {1, 20}, v1::FLOAT32), grpc::StatusCode::INVALID_ARGUMENT,
       {"input.shape[1] is 20", "takes 16"}},
      {"m", ints, grpc::StatusCode::INVALID_ARGUMENT, {"input.dtype is int32", "float32"}},
      {"m", MakeTensor(std::vector<double>(16), {16}, v1::FLOAT32), grpc::StatusCode::INVALID_ARGUMENT,
       {"input.shape must have 2 dimensions"}},
      {"m", wrong_size, grpc::StatusCode::INVALID_ARGUMENT, {"input.data"}},
      {"m", MakeTensor(std::vector<double>(16 * 5001), {5001, 16}, v1::FLOAT32),
       grpc::StatusCode::RESOURCE_EXHAUSTED, {"5001 rows"}},
  };
  for (const Case& c : cases) {
    v1::DenseResponse resp;
    const grpc::Status s = Dense(c.model, c.input, &resp);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    for (const auto& text : c.says) EXPECT_THAT(s.error_message(), HasSubstr(text));
    EXPECT_LE(Check("m", layers, 3, v1::FLOAT32, rng), 1e-5);
  }
}

TEST_F(DenseServer, BadModelsAreRejectedAndNothingIsHalfLoaded) {
  std::mt19937_64 rng(3);
  const std::vector<TestLayer> good = {RandomLayer(rng, 10, 20, true, true, v1::ACTIVATION_RELU),
                                       RandomLayer(rng, 20, 6, false, false, v1::ACTIVATION_NONE)};
  struct Case {
    std::string what;
    std::vector<v1::LoadModelChunk> messages;
    grpc::StatusCode code;
    std::string says;
  };
  std::vector<Case> cases;
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    m[0].mutable_header()->mutable_layers(1)->mutable_weight()->set_shape(0, 21);
    cases.push_back({"shape mismatch", m, grpc::StatusCode::INVALID_ARGUMENT,
                     "header.layers[1].weight.shape[0] is 21 but layers[0] has 20 output features"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    m[0].mutable_header()->set_name("no spaces allowed");
    cases.push_back({"name", m, grpc::StatusCode::INVALID_ARGUMENT, "header.name"});
  }
  {
    auto m = Messages("bad", v1::FLOAT64, good);
    cases.push_back({"dtype", m, grpc::StatusCode::INVALID_ARGUMENT, "header.dtype is float64"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    m[0].mutable_header()->mutable_layers(0)->mutable_bias()->set_shape(0, 3);
    cases.push_back({"bias shape", m, grpc::StatusCode::INVALID_ARGUMENT, "header.layers[0].bias.shape is [3]"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    m[0].mutable_header()->mutable_layers(0)->mutable_layernorm()->set_eps(-1);
    cases.push_back({"eps", m, grpc::StatusCode::INVALID_ARGUMENT, "layernorm.eps"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    m.erase(m.begin());
    cases.push_back({"no header", m, grpc::StatusCode::INVALID_ARGUMENT, "first LoadModel message must be the header"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good, v1::FLOAT32, 64);
    std::swap(m[1], m[2]);
    cases.push_back({"out of order", m, grpc::StatusCode::INVALID_ARGUMENT, "must arrive in order"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good, v1::FLOAT32, 64);
    m.pop_back();
    cases.push_back({"missing bytes", m, grpc::StatusCode::INVALID_ARGUMENT, "received"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    float nan = NAN;
    m[1].mutable_chunk()->mutable_data()->replace(8, 4, reinterpret_cast<const char*>(&nan), 4);
    cases.push_back({"nan weight", m, grpc::StatusCode::INVALID_ARGUMENT, "values must be finite"});
  }
  {
    auto m = Messages("bad", v1::FLOAT32, good);
    m[1].mutable_chunk()->set_layer(7);
    cases.push_back({"layer index", m, grpc::StatusCode::INVALID_ARGUMENT, "chunk.layer 7 is out of range"});
  }
  {
    std::vector<v1::LoadModelChunk> m(1);
    m[0].mutable_header()->set_name("huge");
    *m[0].mutable_header()->add_layers()->mutable_weight() = Header(v1::FLOAT32, {100000, 100000});
    cases.push_back({"over max_model_bytes", m, grpc::StatusCode::RESOURCE_EXHAUSTED, "--max_model_bytes"});
  }
  for (const Case& c : cases) {
    v1::ModelInfo info;
    const grpc::Status s = Send(c.messages, &info);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.says)) << c.what;
    v1::ListModelsResponse list;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListModels(&ctx, {}, &list).ok());
    EXPECT_EQ(list.models_size(), 0) << c.what << ": a failed load left a model behind";
  }
  // The name is free again and the server still serves.
  Load("bad", v1::FLOAT32, good);
  EXPECT_LE(Check("bad", good, 2, v1::FLOAT32, rng), 1e-5);
  v1::ModelInfo info;
  EXPECT_EQ(Send(Messages("bad", v1::FLOAT32, good), &info).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_LE(Check("bad", good, 2, v1::FLOAT32, rng), 1e-5);
}

TEST_F(DenseServer, CancelledUploadLoadsNothingAndFreesTheName) {
  std::mt19937_64 rng(4);
  const std::vector<TestLayer> layers = {RandomLayer(rng, 64, 64, true, false, v1::ACTIVATION_RELU)};
  auto messages = Messages("half", v1::FLOAT32, layers, v1::FLOAT32, 1024);
  {
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    auto writer = stub_->LoadModel(&ctx, &info);
    for (size_t i = 0; i < messages.size() / 2; ++i) ASSERT_TRUE(writer->Write(messages[i]));
    ctx.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The server may see the cancellation a moment later: the name frees itself then.
  v1::ModelInfo info;
  grpc::Status s;
  for (int attempt = 0; attempt < 100; ++attempt) {
    s = Send(messages, &info);
    if (s.error_code() != grpc::StatusCode::ALREADY_EXISTS) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LE(Check("half", layers, 3, v1::FLOAT32, rng), 1e-5);
}

class DenseServerLargeModels : public DenseServer {
  void Configure(ServerConfig& c) override { c.limits.dense.max_model_bytes = int64_t{1} << 50; }
};

TEST_F(DenseServerLargeModels, ModelThatDoesNotFitInMemoryIsResourceExhausted) {
  // 2^20 x 2^20 float32 weights: 4 TiB, more than any device or host here has. Refused from
  // the header alone, before any byte of weights is sent.
  std::vector<v1::LoadModelChunk> m(1);
  m[0].mutable_header()->set_name("too_big");
  *m[0].mutable_header()->add_layers()->mutable_weight() = Header(v1::FLOAT32, {1 << 20, 1 << 20});
  v1::ModelInfo info;
  const grpc::Status s = Send(m, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("free"));
  v1::ListModelsResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListModels(&ctx, {}, &list).ok());
  EXPECT_EQ(list.models_size(), 0);
}

TEST_F(DenseServer, ConcurrentCallersAreBatchedAndEachGetsItsOwnRows) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<TestLayer> layers = {RandomLayer(rng, 48, 64, true, true, v1::ACTIVATION_GELU_TANH),
                                   RandomLayer(rng, 64, 24, true, false, v1::ACTIVATION_NONE)};
  Load("shared", v1::FLOAT32, layers);
  constexpr int kCallers = 128;
  std::vector<double> errors(kCallers, INFINITY);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 local(rng() + i);
      errors[i] = Check("shared", layers, 1 + i % 37, v1::FLOAT32, local);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kCallers; ++i) EXPECT_LE(errors[i], 1e-5) << "caller " << i;
  v1::ServerInfoResponse info;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ServerInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.dense_batching().requests(), kCallers);
  EXPECT_GT(info.dense_batching().largest_batch(), 1) << "no batch held more than one request";
  EXPECT_LT(info.dense_batching().batches(), kCallers);
}

}  // namespace
}  // namespace gpucompute
