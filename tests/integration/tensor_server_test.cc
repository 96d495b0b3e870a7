// Resident tensors and shared memory through a real server on loopback, driven by the C++
// client: every operation with inputs by handle and in shared memory and outputs kept or in
// shared memory gives exactly the inline result; dense chaining; parallel and ranged transfers;
// quotas, expiry, owner isolation and bad references.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "client/cpp/assimilation_request.h"
#include "client/cpp/client.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/shared_memory_region.h"
#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/loopback_server.h"

namespace gpucompute {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

constexpr int64_t kRegionBytes = 16 << 20;

class TensorServer : public ::testing::Test {
 protected:
  void SetUp() override { Start([](ServerConfig&) {}); }

  template <typename Configure>
  void Start(Configure configure) {
    ServerConfig c = testing::LoopbackConfig();
    c.allow_shared_memory = true;
    c.tensors.sweep_interval = absl::Milliseconds(20);
    configure(c);
    loopback_.Start(c);
    ASSERT_NE(loopback_.server, nullptr);
    client::ClientOptions options;
    options.default_timeout = absl::Seconds(60);
    client_ = client::Client::FromChannel(loopback_.channel, options);
    auto region = client::SharedMemoryRegion::Create(kRegionBytes);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = std::make_unique<client::SharedMemoryRegion>(*std::move(region));
    ASSERT_TRUE(client_->RegisterSharedMemory("shm", region_->key(), 0, region_->size()).ok());
  }

  void TearDown() override {
    client_.reset();
    loopback_.server.reset();
  }

  // Uploads every tensor in `tensors` and replaces it by its handle (dtype and shape left unset
  // on every other one, to check both forms).
  void ToHandles(const std::vector<v1::Tensor*>& tensors) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      v1::Tensor* t = tensors[i];
      auto put = client_->PutTensor(t->dtype(), {t->shape().begin(), t->shape().end()}, t->data());
      ASSERT_TRUE(put.ok()) << put.status();
      ASSERT_TRUE(put->info.complete());
      *t = i % 2 == 0 ? client::HandleTensor(put->info.handle(), t->dtype(),
                                             {t->shape().begin(), t->shape().end()})
                      : client::HandleTensor(put->info.handle());
    }
  }

  // Copies every tensor into the region from `*offset` on and replaces it by its reference.
  void ToSharedMemory(const std::vector<v1::Tensor*>& tensors, int64_t* offset) {
    for (v1::Tensor* t : tensors) {
      ASSERT_LE(*offset + static_cast<int64_t>(t->data().size()), region_->size());
      std::memcpy(region_->data() + *offset, t->data().data(), t->data().size());
      auto ref = client::SharedMemoryTensor("shm", *offset, t->dtype(),
                                            {t->shape().begin(), t->shape().end()});
      ASSERT_TRUE(ref.ok()) << ref.status();
      *offset += (static_cast<int64_t>(t->data().size()) + 63) / 64 * 64 + 64;
      *t = *std::move(ref);
    }
  }

  // Fetches outputs that are handles or shared-memory refs back inline.
  void Inline(const std::vector<v1::Tensor*>& tensors) {
    for (v1::Tensor* t : tensors) {
      if (t->has_handle()) {
        auto got = client_->GetTensor(t->handle(), {.chunk_bytes = 1000});
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->info.dtype(), t->dtype());
        EXPECT_TRUE(std::equal(got->info.shape().begin(), got->info.shape().end(),
                               t->shape().begin(), t->shape().end()));
        t->set_data(std::move(got->data));
      } else if (t->has_shared_memory()) {
        const v1::SharedMemoryRef ref = t->shared_memory();
        EXPECT_EQ(ref.region(), "shm");
        EXPECT_EQ(ref.offset() % 64, 0);
        t->set_data(region_->data() + ref.offset(), static_cast<size_t>(ref.length()));
      }
    }
  }

  testing::LoopbackServer loopback_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::SharedMemoryRegion> region_;
};

enum class In { kInline, kHandle, kShm };
enum class Out { kInline, kKeep, kShm };

std::string Name(In in, Out out) {
  static const char* ins[] = {"inline", "handle", "shm"};
  static const char* outs[] = {"inline", "keep", "shm"};
  return absl::StrCat("inputs ", ins[static_cast<int>(in)], ", outputs ",
                      outs[static_cast<int>(out)]);
}

const std::vector<std::pair<In, Out>>& Combinations() {
  static const auto* all = new std::vector<std::pair<In, Out>>{
      {In::kHandle, Out::kInline}, {In::kShm, Out::kInline}, {In::kInline, Out::kKeep},
      {In::kInline, Out::kShm},    {In::kHandle, Out::kKeep}, {In::kShm, Out::kShm},
      {In::kHandle, Out::kShm},    {In::kShm, Out::kKeep}};
  return *all;
}

// Outputs go after the inputs in the region.
constexpr int64_t kOutputOffset = 8 << 20;

v1::OutputPlacement Placement(Out out) {
  switch (out) {
    case Out::kKeep: return client::KeepOutputs();
    case Out::kShm: return client::SharedMemoryOutputs("shm", kOutputOffset, 0);
    default: return v1::OutputPlacement();
  }
}

// ---------------------------------------------------------------- each operation

v1::PeriodogramRequest PeriodogramRequest() {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g(0, 1);
  v1::PeriodogramRequest r;
  for (int s = 0; s < 3; ++s) {
    const int n = 50 + 37 * s;
    std::vector<double> t(n), y(n), dy(n);
    for (int i = 0; i < n; ++i) {
      t[i] = 10.0 * i / n + 0.01 * g(rng);
      y[i] = std::sin(2 * M_PI * 1.3 * t[i]) + 0.1 * g(rng);
      dy[i] = 0.5 + 0.1 * std::abs(g(rng));
    }
    v1::Series* series = r.add_series();
    *series->mutable_t() = client::MakeTensor(t);
    *series->mutable_y() = client::MakeTensor(y);
    if (s != 1) *series->mutable_dy() = client::MakeTensor(dy);
  }
  *r.mutable_frequency() = client::UniformGrid(0.05, 0.01, 301 + 0);
  return r;
}

std::vector<v1::Tensor*> Inputs(v1::PeriodogramRequest& r) {
  std::vector<v1::Tensor*> out;
  for (v1::Series& s : *r.mutable_series()) {
    out.push_back(s.mutable_t());
    out.push_back(s.mutable_y());
    if (s.has_dy()) out.push_back(s.mutable_dy());
  }
  return out;
}

std::vector<v1::Tensor*> Outputs(v1::PeriodogramResponse& r) {
  std::vector<v1::Tensor*> out;
  for (v1::SeriesResult& s : *r.mutable_results()) out.push_back(s.mutable_power());
  return out;
}

TEST_F(TensorServer, PeriodogramMatchesInlineForEveryPlacement) {
  v1::PeriodogramRequest inline_request = PeriodogramRequest();
  auto want = client_->Periodogram(inline_request);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const auto& [in, out] : Combinations()) {
    SCOPED_TRACE(Name(in, out));
    v1::PeriodogramRequest r = inline_request;
    int64_t offset = 0;
    if (in == In::kHandle) ToHandles(Inputs(r));
    if (in == In::kShm) ToSharedMemory(Inputs(r), &offset);
    *r.mutable_output_placement() = Placement(out);
    auto got = client_->Periodogram(r);
    ASSERT_TRUE(got.ok()) << got.status();
    for (const v1::SeriesResult& s : got->response.results()) {
      EXPECT_EQ(s.power().payload_case(), out == Out::kKeep  ? v1::Tensor::kHandle
                                          : out == Out::kShm ? v1::Tensor::kSharedMemory
                                                             : v1::Tensor::kData);
    }
    Inline(Outputs(got->response));
    EXPECT_TRUE(MessageDifferencer::Equals(got->response, want->response));
  }
}

// A two-layer float32 model "mlp": 24 -> 16 -> 24 features.
client::ModelUpload Mlp() {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> g(0, 1);
  client::ModelBuilder b("mlp");
  for (auto [in, out] : std::vector<std::pair<int, int>>{{24, 16}, {16, 24}}) {
    client::DenseLayer l;
    l.in_features = in;
    l.out_features = out;
    for (int i = 0; i < in * out; ++i) l.weight.push_back(g(rng) / 4);
    for (int j = 0; j < out; ++j) l.bias.push_back(g(rng));
    l.layernorm = true;
    l.activation = v1::ACTIVATION_GELU_TANH;
    b.AddLayer(std::move(l));
  }
  return *b.Build();
}

v1::DenseRequest DenseRequest(int rows) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(rows * 24);
  for (float& v : x) v = g(rng);
  return *client::MakeDenseRequest("mlp", x, rows, 24);
}

TEST_F(TensorServer, DenseMatchesInlineForEveryPlacement) {
  ASSERT_TRUE(client_->LoadModel(Mlp()).ok());
  const v1::DenseRequest inline_request = DenseRequest(37);
  auto want = client_->Dense(inline_request);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const auto& [in, out] : Combinations()) {
    SCOPED_TRACE(Name(in, out));
    v1::DenseRequest r = inline_request;
    int64_t offset = 0;
    if (in == In::kHandle) ToHandles({r.mutable_input()});
    if (in == In::kShm) ToSharedMemory({r.mutable_input()}, &offset);
    *r.mutable_output_placement() = Placement(out);
    auto got = client_->Dense(r);
    ASSERT_TRUE(got.ok()) << got.status();
    Inline({got->response.mutable_output()});
    EXPECT_TRUE(MessageDifferencer::Equals(got->response, want->response));
  }
}

TEST_F(TensorServer, DenseOutputsChainOnTheServer) {
  // The model maps 24 features to 24, so its output feeds it again.
  ASSERT_TRUE(client_->LoadModel(Mlp()).ok());
  v1::DenseRequest first = DenseRequest(19);
  // Inline: twice through the model, the bytes travelling both ways in between.
  auto a = client_->Dense(first);
  ASSERT_TRUE(a.ok());
  v1::DenseRequest second_inline;
  second_inline.set_model("mlp");
  *second_inline.mutable_input() = a->response.output();
  auto want = client_->Dense(second_inline);
  ASSERT_TRUE(want.ok()) << want.status();
  // Resident: the first output stays on the server and is the second's input by handle.
  *first.mutable_output_placement() = client::KeepOutputs();
  auto kept = client_->Dense(first);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(kept->response.output().has_handle());
  EXPECT_EQ(kept->response.output().shape_size(), 2);
  v1::DenseRequest second;
  second.set_model("mlp");
  *second.mutable_input() = client::HandleTensor(kept->response.output().handle());
  auto got = client_->Dense(second);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(MessageDifferencer::Equals(got->response, want->response));
  // The kept output is the caller's to delete.
  EXPECT_TRUE(client_->DeleteTensor(kept->response.output().handle()).ok());
  EXPECT_EQ(client_->Dense(second).status().code(), absl::StatusCode::kNotFound);
}

v1::AssimilateRequest AssimilateRequest() {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g(0, 1);
  v1::AssimilateRequest r;
  for (int k = 0; k < 2; ++k) {
    client::AssimilationProblem p;
    p.n = 12 + k;
    p.m = 5 + k;
    p.members = 8;
    for (int64_t i = 0; i < p.n * p.members; ++i) p.x.push_back(g(rng));
    for (int64_t i = 0; i < p.m * p.members; ++i) p.hx.push_back(g(rng));
    for (int64_t i = 0; i < p.m; ++i) p.y.push_back(g(rng));
    for (int64_t i = 0; i < p.m; ++i) p.obs_error.push_back(0.5 + 0.1 * i);
    if (k == 1) {
      p.method = v1::ASSIMILATION_METHOD_ENKF;
      for (int64_t i = 0; i < p.m * p.members; ++i) p.perturbations.push_back(0.3 * g(rng));
    }
    *r.add_problems() = *client::MakeAssimilationProblem(p);
  }
  return r;
}

TEST_F(TensorServer, AssimilateMatchesInlineForEveryPlacement) {
  const v1::AssimilateRequest inline_request = AssimilateRequest();
  auto want = client_->Assimilate(inline_request);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const auto& [in, out] : Combinations()) {
    SCOPED_TRACE(Name(in, out));
    v1::AssimilateRequest r = inline_request;
    std::vector<v1::Tensor*> inputs;
    for (v1::AssimilationProblem& p : *r.mutable_problems()) {
      for (v1::Tensor* t : {p.mutable_x(), p.mutable_hx(), p.mutable_y()}) inputs.push_back(t);
      inputs.push_back(p.mutable_obs_error_variance());
      if (p.has_perturbations()) inputs.push_back(p.mutable_perturbations());
    }
    int64_t offset = 0;
    if (in == In::kHandle) ToHandles(inputs);
    if (in == In::kShm) ToSharedMemory(inputs, &offset);
    *r.mutable_output_placement() = Placement(out);
    auto got = client_->Assimilate(r);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<v1::Tensor*> outputs;
    for (v1::AssimilationResult& a : *got->response.mutable_results()) {
      outputs.push_back(a.mutable_analysis());
      outputs.push_back(a.mutable_innovation_mean());
    }
    Inline(outputs);
    EXPECT_TRUE(MessageDifferencer::Equals(got->response, want->response));
  }
}

TEST_F(TensorServer, EchoEveryPathReturnsTheBytes) {
  std::string bytes(100003, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  v1::Tensor inline_tensor;
  inline_tensor.set_dtype(v1::UINT8);
  inline_tensor.add_shape(static_cast<int64_t>(bytes.size()));
  inline_tensor.set_data(bytes);
  for (const auto& [in, out] : Combinations()) {
    SCOPED_TRACE(Name(in, out));
    v1::EchoRequest r;
    *r.mutable_tensor() = inline_tensor;
    int64_t offset = 0;
    if (in == In::kHandle) ToHandles({r.mutable_tensor()});
    if (in == In::kShm) ToSharedMemory({r.mutable_tensor()}, &offset);
    *r.mutable_output_placement() = Placement(out);
    auto got = client_->Echo(r);
    ASSERT_TRUE(got.ok()) << got.status();
    Inline({got->response.mutable_tensor()});
    EXPECT_TRUE(MessageDifferencer::Equals(got->response.tensor(), inline_tensor));
  }
}

// A client that moves every tensor of 512 bytes or more in parallel slices (resident tensors
// made and deleted by each call: here the ensembles, most series and every power) gets what
// the inline calls get, and leaves nothing behind.
TEST_F(TensorServer, LargeTensorsMoveByTransferAndLeaveNothing) {
  client::ClientOptions options;
  options.transfer_threshold_bytes = 512;
  auto mover = client::Client::FromChannel(loopback_.channel, options);
  const v1::PeriodogramRequest periodogram = PeriodogramRequest();
  auto p_want = client_->Periodogram(periodogram);
  auto p_got = mover->Periodogram(periodogram);
  ASSERT_TRUE(p_want.ok() && p_got.ok()) << p_got.status();
  EXPECT_TRUE(MessageDifferencer::Equals(p_got->response, p_want->response));
  const v1::AssimilateRequest assimilate = AssimilateRequest();
  auto a_want = client_->Assimilate(assimilate);
  auto a_got = mover->Assimilate(assimilate);
  ASSERT_TRUE(a_want.ok() && a_got.ok()) << a_got.status();
  EXPECT_TRUE(MessageDifferencer::Equals(a_got->response, a_want->response));
  v1::EchoRequest echo;
  std::string bytes(300007, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 13 + 5);
  echo.mutable_tensor()->set_dtype(v1::UINT8);
  echo.mutable_tensor()->add_shape(static_cast<int64_t>(bytes.size()));
  echo.mutable_tensor()->set_data(bytes);
  auto e = mover->Echo(echo);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->response.tensor().data(), bytes);
  // A failed call (an unknown model) leaves nothing behind either.
  v1::DenseRequest dense;
  dense.set_model("no-such-model");
  *dense.mutable_input() = echo.tensor();
  EXPECT_EQ(mover->Dense(dense).status().code(), absl::StatusCode::kNotFound);
  auto left = client_->ListTensors();
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->tensors_size(), 0);
}

TEST_F(TensorServer, DiscardedOutputsAndOutputsKeptAboveASize) {
  v1::PeriodogramRequest r = PeriodogramRequest();
  r.set_top_k(3);
  auto want = client_->Periodogram(r);
  ASSERT_TRUE(want.ok()) << want.status();
  *r.mutable_output_placement() = client::DiscardOutputs();
  auto lean = client_->Periodogram(r);
  ASSERT_TRUE(lean.ok()) << lean.status();
  for (int i = 0; i < lean->response.results_size(); ++i) {
    const v1::SeriesResult& got = lean->response.results(i);
    EXPECT_EQ(got.power().payload_case(), v1::Tensor::PAYLOAD_NOT_SET);
    EXPECT_EQ(got.power().shape(0), 301);
    v1::SeriesResult expected = want->response.results(i);
    expected.mutable_power()->clear_payload();
    EXPECT_TRUE(MessageDifferencer::Equals(got, expected));
    auto decoded = client::DecodeSeriesResult(got);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_TRUE(decoded->power.empty());
    EXPECT_EQ(decoded->frequency.size(), 301u);
  }
  v1::EchoRequest echo;
  echo.mutable_tensor()->set_dtype(v1::UINT8);
  echo.mutable_tensor()->add_shape(2000);
  echo.mutable_tensor()->set_data(std::string(2000, 'k'));
  *echo.mutable_output_placement() = client::KeepOutputsAbove(1999);
  auto kept = client_->Echo(echo);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(kept->response.tensor().has_handle());
  EXPECT_TRUE(client_->DeleteTensor(kept->response.tensor().handle()).ok());
  *echo.mutable_output_placement() = client::KeepOutputsAbove(2000);
  auto inline_echo = client_->Echo(echo);
  ASSERT_TRUE(inline_echo.ok()) << inline_echo.status();
  EXPECT_EQ(inline_echo->response.tensor().data(), std::string(2000, 'k'));
}

TEST_F(TensorServer, SubmitStreamUsesHandlesAndPlacements) {
  // The Submit stream goes through the same calls as the unary RPCs.
  v1::EchoRequest echo;
  v1::Tensor* t = echo.mutable_tensor();
  t->set_dtype(v1::FLOAT32);
  t->add_shape(4);
  t->set_data(std::string(16, '\x3f'));
  ToHandles({t});
  *echo.mutable_output_placement() = client::SharedMemoryOutputs("shm", 128);
  grpc::ClientContext context;
  auto stream = loopback_.stub->Submit(&context);
  v1::SubmitRequest job;
  job.set_id("a");
  *job.mutable_echo() = echo;
  ASSERT_TRUE(stream->Write(job));
  stream->WritesDone();
  v1::SubmitResponse result;
  ASSERT_TRUE(stream->Read(&result));
  ASSERT_EQ(result.code(), 0) << result.message();
  EXPECT_EQ(result.echo().tensor().shared_memory().offset(), 128);
  EXPECT_EQ(std::string(region_->data() + 128, 16), std::string(16, '\x3f'));
  EXPECT_TRUE(stream->Finish().ok());
}

// ---------------------------------------------------------------- transfers

// Resident tensors are checked for NaN and infinities as their bytes arrive, so that an
// operation can skip its own pass: a non-finite value still gets the precise error, however the
// bytes were cut into chunks (whole elements, elements split across chunks, several streams),
// and the same tensor made finite is accepted.
TEST_F(TensorServer, NonFiniteValuesInResidentTensorsAreFoundWhateverTheChunks) {
  const v1::AssimilateRequest inline_request = AssimilateRequest();
  const v1::Tensor& x = inline_request.problems(1).x();  // 13 x 8 doubles
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    for (auto [chunk, streams] : std::vector<std::pair<int64_t, int>>{{8, 1}, {13, 1}, {40, 3}, {client::kDefaultChunkBytes, 1}}) {
      SCOPED_TRACE(absl::StrCat(bad, ", chunks of ", chunk, " bytes over ", streams, " streams"));
      std::string bytes = x.data();
      std::memcpy(bytes.data() + 8 * (3 * 8 + 5), &bad, 8);  // x[3, 5]
      for (bool finite : {false, true}) {
        if (finite) bytes = x.data();
        auto put = client_->PutTensor(v1::FLOAT64, {x.shape().begin(), x.shape().end()}, bytes,
                                      {.chunk_bytes = chunk, .streams = streams});
        ASSERT_TRUE(put.ok()) << put.status();
        v1::AssimilateRequest r = inline_request;
        *r.mutable_problems(1)->mutable_x() = client::HandleTensor(put->info.handle());
        auto got = client_->Assimilate(r);
        if (finite) {
          EXPECT_TRUE(got.ok()) << got.status();
        } else {
          EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
          EXPECT_THAT(std::string(got.status().message()),
                      HasSubstr("problems[1].x: values must be finite (x[3, 5] is"));
        }
        EXPECT_TRUE(client_->DeleteTensor(put->info.handle()).ok());
      }
    }
  }
}

TEST_F(TensorServer, ParallelPutAndRangedGet) {
  std::string bytes(3 * 1000 * 1000 + 8, '\0');  // 375,001 doubles' worth
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::vector<int64_t> shape = {static_cast<int64_t>(bytes.size() / 8)};
  for (int streams : {1, 4, 7}) {
    SCOPED_TRACE(absl::StrCat(streams, " streams"));
    auto put = client_->PutTensor(v1::FLOAT64, shape, bytes,
                                  {.chunk_bytes = 100000, .streams = streams});
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_TRUE(put->info.complete());
    EXPECT_EQ(put->bytes_sent, static_cast<int64_t>(bytes.size()));
    auto all = client_->GetTensor(put->info.handle());
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_TRUE(all->data == bytes);
    EXPECT_EQ(all->info.bytes(), static_cast<int64_t>(bytes.size()));
    struct Range {
      int64_t offset, length, chunk;
    };
    for (const Range& r : std::vector<Range>{{0, 1, 0}, {5, 0, 4096}, {123457, 654321, 77777},
                                             {static_cast<int64_t>(bytes.size()) - 3, 3, 1},
                                             {static_cast<int64_t>(bytes.size()), 0, 0}}) {
      for (int get_streams : {1, 3}) {  // 3: parallel slices into one buffer
        auto got = client_->GetTensor(put->info.handle(), {r.offset, r.length, r.chunk, get_streams});
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_TRUE(got->data == bytes.substr(r.offset, r.length == 0 ? std::string::npos : r.length))
            << "offset " << r.offset << " length " << r.length << " streams " << get_streams;
      }
    }
    EXPECT_EQ(client_->GetTensor(put->info.handle(), {.offset = 10, .length = static_cast<int64_t>(bytes.size())})
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(client_->DeleteTensor(put->info.handle()).ok());
  }
}

TEST_F(TensorServer, ParallelPutOverSeparateConnections) {
  // A client made by Connect opens a channel of its own per extra stream.
  client::ClientOptions options;
  options.default_timeout = absl::Seconds(60);
  auto connected =
      client::Client::Connect(absl::StrCat("127.0.0.1:", loopback_.server->port()), options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  std::string bytes(1 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
  for (int round = 0; round < 2; ++round) {  // the second round reuses the channels
    auto put = (*connected)->PutTensor(v1::UINT8, {static_cast<int64_t>(bytes.size())}, bytes,
                                       {.chunk_bytes = 65536, .streams = 5});
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_TRUE(put->info.complete());
    // The same owner on every connection: the peer's address without its port.
    auto got = client_->GetTensor(put->info.handle());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->data == bytes);
    // And back over 4 connections in parallel slices.
    auto parallel = (*connected)->GetTensor(put->info.handle(), {.chunk_bytes = 65536, .streams = 4});
    ASSERT_TRUE(parallel.ok()) << parallel.status();
    EXPECT_TRUE(parallel->data == bytes);
    EXPECT_EQ(parallel->info.handle(), put->info.handle());
  }
  EXPECT_EQ((*connected)->GetTensor("no-such-handle", {.streams = 4}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(TensorServer, ListAndDelete) {
  auto a = client_->PutTensor(v1::INT32, {2, 3}, std::string(24, 'a'));
  auto b = client_->PutTensor(v1::UINT8, {5}, std::string(5, 'b'));
  ASSERT_TRUE(a.ok() && b.ok());
  auto list = client_->ListTensors();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->tensors_size(), 2);
  EXPECT_EQ(list->bytes(), 29);
  EXPECT_TRUE(client_->DeleteTensor(a->info.handle()).ok());
  EXPECT_EQ(client_->DeleteTensor(a->info.handle()).code(), absl::StatusCode::kNotFound);
  list = client_->ListTensors();
  ASSERT_EQ(list->tensors_size(), 1);
  EXPECT_EQ(list->tensors(0).handle(), b->info.handle());
}

TEST_F(TensorServer, IncompleteTensorsAreNotInputs) {
  auto reserved = client_->CreateTensor(v1::FLOAT64, {4});
  ASSERT_TRUE(reserved.ok());
  EXPECT_FALSE(reserved->complete());
  v1::EchoRequest r;
  *r.mutable_tensor() = client::HandleTensor(reserved->handle());
  auto echo = client_->Echo(r);
  EXPECT_EQ(echo.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(echo.status().message()), HasSubstr("tensor.handle"));
  EXPECT_EQ(client_->GetTensor(reserved->handle()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(TensorServer, OtherClientsCannotSeeMyTensors) {
  client::CallOptions alice, bob;
  alice.metadata = {{"x-gpucompute-client", "alice"}};
  bob.metadata = {{"x-gpucompute-client", "bob"}};
  auto put = client_->PutTensor(v1::UINT8, {3}, "abc", {}, alice);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->info.owner(), "alice");
  const std::string h = put->info.handle();
  EXPECT_EQ(client_->GetTensor(h, {}, bob).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->DeleteTensor(h, bob).code(), absl::StatusCode::kNotFound);
  v1::EchoRequest r;
  *r.mutable_tensor() = client::HandleTensor(h);
  EXPECT_EQ(client_->Echo(r, bob).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ListTensors(bob)->tensors_size(), 0);
  EXPECT_TRUE(client_->Echo(r, alice).ok());
  // Regions are per client too: "shm" was registered without the metadata.
  v1::EchoRequest s;
  *s.mutable_tensor() = *client::SharedMemoryTensor("shm", 0, v1::UINT8, {3});
  EXPECT_EQ(client_->Echo(s, bob).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TensorServer, BadReferencesNameTheField) {
  ASSERT_TRUE(client_->LoadModel(Mlp()).ok());
  struct Case {
    std::string what;
    std::function<absl::Status()> call;
    absl::StatusCode code;
    std::string message;
  };
  auto assimilate_with_x = [this](v1::Tensor x) {
    v1::AssimilateRequest r = AssimilateRequest();
    *r.mutable_problems(0)->mutable_x() = std::move(x);
    return client_->Assimilate(r).status();
  };
  auto put = client_->PutTensor(v1::FLOAT32, {2, 24}, std::string(2 * 24 * 4, '\0'));
  ASSERT_TRUE(put.ok());
  const std::string h = put->info.handle();
  auto dense_with = [this](v1::Tensor x) {
    v1::DenseRequest r;
    r.set_model("mlp");
    *r.mutable_input() = std::move(x);
    return client_->Dense(r).status();
  };
  std::vector<Case> cases = {
      {"unknown handle", [&] { return assimilate_with_x(client::HandleTensor("abc")); },
       absl::StatusCode::kNotFound, "problems[0].x.handle: no resident tensor \"abc\""},
      {"dtype mismatch", [&] { return dense_with(client::HandleTensor(h, v1::FLOAT64)); },
       absl::StatusCode::kInvalidArgument, "input.dtype"},
      {"shape mismatch", [&] { return dense_with(client::HandleTensor(h, v1::FLOAT32, {1, 48})); },
       absl::StatusCode::kInvalidArgument, "input.shape"},
      {"unknown region",
       [&] { return dense_with(*client::SharedMemoryTensor("nope", 0, v1::FLOAT32, {2, 24})); },
       absl::StatusCode::kNotFound, "input.shared_memory.region"},
      {"length mismatch",
       [&] {
         v1::Tensor t = *client::SharedMemoryTensor("shm", 0, v1::FLOAT32, {2, 24});
         t.mutable_shared_memory()->set_length(100);
         return dense_with(t);
       },
       absl::StatusCode::kInvalidArgument, "input.shared_memory.length"},
      {"outside the region",
       [&] { return dense_with(*client::SharedMemoryTensor("shm", kRegionBytes - 8, v1::FLOAT32, {2, 24})); },
       absl::StatusCode::kInvalidArgument, "input.shared_memory.length"},
      {"negative offset",
       [&] { return dense_with(*client::SharedMemoryTensor("shm", -8, v1::FLOAT32, {2, 24})); },
       absl::StatusCode::kInvalidArgument, "input.shared_memory.offset"},
      {"placement region unknown",
       [&] {
         v1::DenseRequest r = DenseRequest(2);
         *r.mutable_output_placement() = client::SharedMemoryOutputs("nope");
         return client_->Dense(r).status();
       },
       absl::StatusCode::kNotFound, "output_placement.shared_memory.region"},
      {"placement too small",
       [&] {
         v1::DenseRequest r = DenseRequest(2);
         *r.mutable_output_placement() = client::SharedMemoryOutputs("shm", 0, 100);
         return client_->Dense(r).status();
       },
       absl::StatusCode::kResourceExhausted, "output_placement.shared_memory.length"},
      {"periodogram placement too small",
       [&] {
         v1::PeriodogramRequest r = PeriodogramRequest();
         // Three powers of 301 doubles (2408 bytes) at multiples of 64: 2432 + 2432 + 2408.
         *r.mutable_output_placement() = client::SharedMemoryOutputs("shm", 0, 7271);
         return client_->Periodogram(r).status();
       },
       absl::StatusCode::kResourceExhausted, "need 7272 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const absl::Status s = c.call();
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  // And the server still serves.
  v1::PeriodogramRequest r = PeriodogramRequest();
  *r.mutable_output_placement() = client::SharedMemoryOutputs("shm", 0, 7272);
  EXPECT_TRUE(client_->Periodogram(r).ok());
}

// Registration writes the server's proof at the start of the region for the length of the call
// and puts back what was there; a region too small for a proof is refused by the client.
TEST_F(TensorServer, RegisteringKeepsWhatTheRegionHolds) {
  auto region = client::SharedMemoryRegion::Create(4096);
  ASSERT_TRUE(region.ok()) << region.status();
  for (int i = 0; i < 4096; ++i) region->data()[i] = static_cast<char>(i * 31 + 7);
  const std::string before(region->data(), 4096);
  ASSERT_TRUE(client_->RegisterSharedMemory("kept", region->key(), 0, 4096).ok());
  EXPECT_TRUE(std::string(region->data(), 4096) == before);
  EXPECT_TRUE(client_->UnregisterSharedMemory("kept").ok());
  auto tiny = client::SharedMemoryRegion::Create(40);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(client_->RegisterSharedMemory("tiny", tiny->key(), 0, 40).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TensorServer, RegisterErrors) {
  EXPECT_EQ(client_->RegisterSharedMemory("shm", region_->key(), 0, 64).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client_->RegisterSharedMemory("x", "/gpucompute-no-such-object", 0, 64).code(),
            absl::StatusCode::kNotFound);  // the client cannot write the proof there
  EXPECT_EQ(client_->RegisterSharedMemory("x", region_->key(), 0, kRegionBytes + 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterSharedMemory("bad name", region_->key(), 0, 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(client_->UnregisterSharedMemory("shm").ok());
  EXPECT_EQ(client_->UnregisterSharedMemory("shm").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client_->UnregisterSharedMemory("").ok());
}

TEST_F(TensorServer, ServerInfoReportsTheLimits) {
  auto info = client_->ServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->info.shared_memory_enabled());
  EXPECT_EQ(info->info.tensor_limits().max_bytes_per_client(), TensorStoreOptions{}.max_bytes_per_client);
  EXPECT_EQ(info->info.tensor_limits().max_tensors_per_client(), TensorStoreOptions{}.max_tensors_per_client);
  EXPECT_EQ(info->info.tensor_limits().idle_expiry_ms(), 600000);
}

// ---------------------------------------------------------------- limits

class LimitedTensorServer : public TensorServer {
 protected:
  void SetUp() override {
    Start([](ServerConfig& c) {
      c.tensors.max_bytes_per_client = 10000;
      c.tensors.max_tensors_per_client = 4;
    });
  }
};

class ExpiringTensorServer : public TensorServer {
 protected:
  void SetUp() override {
    Start([](ServerConfig& c) { c.tensors.idle_expiry = absl::Milliseconds(300); });
  }
};

TEST_F(LimitedTensorServer, QuotaThenTheServerServesTheNextRequest) {
  auto big = client_->PutTensor(v1::UINT8, {10001}, std::string(10001, 'x'));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("--tensor_quota_bytes"));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client_->PutTensor(v1::UINT8, {10}, "0123456789").ok());
  auto fifth = client_->PutTensor(v1::UINT8, {10}, "0123456789");
  EXPECT_EQ(fifth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(fifth.status().message()), HasSubstr("--tensor_quota_count"));
  // Kept outputs count too: RESOURCE_EXHAUSTED naming the placement.
  v1::EchoRequest keep;
  keep.mutable_tensor()->set_dtype(v1::UINT8);
  keep.mutable_tensor()->add_shape(3);
  keep.mutable_tensor()->set_data("abc");
  *keep.mutable_output_placement() = client::KeepOutputs();
  auto kept = client_->Echo(keep);
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(kept.status().message()), HasSubstr("output_placement.keep"));
  // The next request is served.
  keep.clear_output_placement();
  EXPECT_TRUE(client_->Echo(keep).ok());
}

TEST_F(ExpiringTensorServer, IdleTensorsExpire) {
  auto put = client_->PutTensor(v1::UINT8, {3}, "abc");
  ASSERT_TRUE(put.ok());
  // Expiry is a lower bound (the sweep runs now and then): wait for it, up to 60 s.
  for (int i = 0; i < 3000 && client_->ListTensors()->tensors_size() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(client_->ListTensors()->tensors_size(), 0);
  EXPECT_EQ(client_->GetTensor(put->info.handle()).status().code(), absl::StatusCode::kNotFound);
}

class NoSharedMemoryServer : public ::testing::Test {};

TEST_F(NoSharedMemoryServer, SharedMemoryIsOffByDefault) {
  testing::LoopbackServer loopback;
  loopback.Start(testing::LoopbackConfig());
  ASSERT_NE(loopback.server, nullptr);
  auto client = client::Client::FromChannel(loopback.channel);
  auto region = client::SharedMemoryRegion::Create(4096);
  ASSERT_TRUE(region.ok());
  const absl::Status s = client->RegisterSharedMemory("r", region->key(), 0, 4096);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--allow_shared_memory"));
  v1::EchoRequest r;
  *r.mutable_tensor() = *client::SharedMemoryTensor("r", 0, v1::UINT8, {1});
  const absl::Status e = client->Echo(r).status();
  EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(e.message()), HasSubstr("tensor.shared_memory"));
  EXPECT_FALSE(client->ServerInfo()->info.shared_memory_enabled());
}

}  // namespace
}  // namespace gpucompute
