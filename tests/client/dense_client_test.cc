// Tests of the client's dense-model calls against an in-process fake Compute service: what
// LoadModel streams (header first, each tensor's chunks in order, sizes under the limit), early
// server errors, Dense/ListModels/UnloadModel results, timings and status mapping.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/cpp/client.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpucompute::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string MetadataValue(grpc::CallbackServerContext* context, const std::string& key) {
  for (const auto& [k, v] : context->client_metadata()) {
    if (std::string(k.data(), k.size()) == key) return std::string(v.data(), v.size());
  }
  return "";
}

// Records every LoadModel stream; answers with a ModelInfo built from the header. Request
// metadata "x-test-fail-after" = n finishes the stream with ALREADY_EXISTS after n messages.
// Dense echoes its input (as float32) with fixed timings; UnloadModel knows only "known".
class FakeDense final : public v1::Compute::CallbackService {
 public:
  grpc::ServerReadReactor<v1::LoadModelChunk>* LoadModel(grpc::CallbackServerContext* context,
                                                         v1::ModelInfo* response) override {
    int fail_after = 0;
    (void)absl::SimpleAtoi(MetadataValue(context, "x-test-fail-after"), &fail_after);
    return new Reader(this, context, response, fail_after);
  }

  grpc::ServerUnaryReactor* Dense(grpc::CallbackServerContext* context,
                                  const v1::DenseRequest* request,
                                  v1::DenseResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (request->model() != "known") {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "no model " + request->model()));
      return reactor;
    }
    std::vector<int64_t> shape(request->input().shape().begin(), request->input().shape().end());
    *response->mutable_output() =
        *MakeTensor(*TensorToFloats(request->input()), shape, v1::FLOAT32);
    context->AddTrailingMetadata(kQueueUsKey, "7");
    context->AddTrailingMetadata(kBatchRequestsKey, "5");
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest*,
                                       v1::ListModelsResponse* response) override {
    v1::ModelInfo* m = response->add_models();
    m->set_name("known");
    m->set_dtype(v1::BFLOAT16);
    m->set_device_bytes(4096);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(request->name() == "known"
                        ? grpc::Status::OK
                        : grpc::Status(grpc::StatusCode::NOT_FOUND, "no model " + request->name()));
    return reactor;
  }

  std::vector<std::vector<v1::LoadModelChunk>> streams() {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
  }

 private:
  class Reader final : public grpc::ServerReadReactor<v1::LoadModelChunk> {
   public:
    Reader(FakeDense* service, grpc::CallbackServerContext* context, v1::ModelInfo* response,
           int fail_after)
        : service_(service), context_(context), response_(response), fail_after_(fail_after) {
      StartRead(&message_);
    }

    void OnReadDone(bool ok) override {
      if (!ok) {  // the client sent WritesDone
        if (!messages_.empty() && messages_[0].has_header()) {
          const v1::ModelHeader& h = messages_[0].header();
          response_->set_name(h.name());
          response_->set_dtype(h.dtype());
          for (const v1::LayerHeader& l : h.layers()) {
            v1::LayerInfo* info = response_->add_layers();
            info->set_in_features(l.weight().shape(0));
            info->set_out_features(l.weight().shape(1));
            info->set_layernorm(l.has_layernorm());
            info->set_activation(l.activation());
          }
          response_->set_device_bytes(999);
        }
        context_->AddTrailingMetadata(kTotalUsKey, "42");
        Record();
        Finish(grpc::Status::OK);
        return;
      }
      messages_.push_back(message_);
      if (fail_after_ > 0 && static_cast<int>(messages_.size()) == fail_after_) {
        Record();
        Finish(grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "model m is loaded"));
        return;
      }
      StartRead(&message_);
    }

    void OnDone() override { delete this; }

   private:
    void Record() {
      std::lock_guard<std::mutex> lock(service_->mu_);
      service_->streams_.push_back(std::move(messages_));
    }

    FakeDense* service_;
    grpc::CallbackServerContext* context_;
    v1::ModelInfo* response_;
    const int fail_after_;
    v1::LoadModelChunk message_;
    std::vector<v1::LoadModelChunk> messages_;
  };

  std::mutex mu_;
  std::vector<std::vector<v1::LoadModelChunk>> streams_;
};

class DenseClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // gRPC's default message limits on the server: the client's chunks must fit under them.
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect("127.0.0.1:" + std::to_string(port));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  void TearDown() override {
    client_.reset();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // Two layers: in x hidden (with bias, LayerNorm gamma/beta) and hidden x 3.
  static ModelUpload Model(int64_t in, int64_t hidden) {
    DenseLayer l0{.in_features = in, .out_features = hidden, .layernorm = true,
                  .activation = v1::ACTIVATION_GELU_TANH};
    for (int64_t i = 0; i < in * hidden; ++i) l0.weight.push_back(static_cast<float>(i % 97));
    l0.bias.assign(hidden, 0.5f);
    l0.gamma.assign(in, 2.0f);
    l0.beta.assign(in, 1.0f);
    DenseLayer l1{.in_features = hidden, .out_features = 3};
    l1.weight.assign(hidden * 3, -1.0f);
    absl::StatusOr<ModelUpload> upload =
        ModelBuilder("m").SetDType(v1::BFLOAT16).AddLayer(l0).AddLayer(l1).Build();
    EXPECT_TRUE(upload.ok()) << upload.status();
    return *std::move(upload);
  }

  FakeDense service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(DenseClientTest, LoadModelStreamsHeaderThenEachTensorInOrderedChunks) {
  const ModelUpload model = Model(50, 40);
  absl::StatusOr<LoadModelResult> r = client_->LoadModel(model, {}, /*chunk_bytes=*/1001);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->info.name(), "m");
  EXPECT_EQ(r->info.dtype(), v1::BFLOAT16);
  ASSERT_EQ(r->info.layers_size(), 2);
  EXPECT_EQ(r->info.layers(0).in_features(), 50);
  EXPECT_EQ(r->info.device_bytes(), 999);
  EXPECT_EQ(r->timings.total_us, 42);
  EXPECT_EQ(r->bytes_sent, model.tensor_bytes());

  const std::vector<std::vector<v1::LoadModelChunk>> streams = service_.streams();
  ASSERT_EQ(streams.size(), 1u);
  const std::vector<v1::LoadModelChunk>& s = streams[0];
  EXPECT_EQ(r->messages, static_cast<int64_t>(s.size()));
  ASSERT_TRUE(s[0].has_header());
  EXPECT_EQ(s[0].header().SerializeAsString(), model.header.SerializeAsString());
  // Reassemble: tensors one after another, each from offset 0 upwards, in the upload's order.
  std::vector<std::pair<std::pair<int, int>, std::string>> tensors;
  for (size_t i = 1; i < s.size(); ++i) {
    ASSERT_TRUE(s[i].has_chunk()) << i;
    const v1::TensorChunk& c = s[i].chunk();
    EXPECT_LE(c.data().size(), 1001u);
    EXPECT_GT(c.data().size(), 0u);
    const std::pair<int, int> key = {c.layer(), c.tensor()};
    if (tensors.empty() || tensors.back().first != key) tensors.push_back({key, ""});
    EXPECT_EQ(c.offset(), static_cast<int64_t>(tensors.back().second.size())) << i;
    tensors.back().second += c.data();
  }
  ASSERT_EQ(tensors.size(), model.tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    EXPECT_EQ(tensors[t].first.first, model.tensors[t].layer);
    EXPECT_EQ(tensors[t].first.second, model.tensors[t].tensor);
    EXPECT_EQ(tensors[t].second, model.tensors[t].data) << t;
  }
  // 50 x 40 floats in 1001-byte chunks: 8 chunks, the last one short.
  EXPECT_EQ(s.size(), 1u + 8 + 1 + 1 + 1 + 1);
}

TEST_F(DenseClientTest, DefaultChunksFitTheDefaultMessageLimit) {
  const ModelUpload model = Model(1024, 1536);  // 6 MiB of weight, above any one message
  absl::StatusOr<LoadModelResult> r = client_->LoadModel(model);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<v1::LoadModelChunk> s = service_.streams().at(0);
  EXPECT_EQ(s[1].chunk().data().size(), static_cast<size_t>(kDefaultChunkBytes));
  EXPECT_EQ(s[2].chunk().offset(), kDefaultChunkBytes);
  for (const v1::LoadModelChunk& m : s) EXPECT_LT(m.ByteSizeLong(), 4u << 20);
}

TEST_F(DenseClientTest, EarlyServerErrorCompletesTheCall) {
  CallOptions options;
  options.metadata.emplace_back("x-test-fail-after", "1");  // right after the header
  absl::StatusOr<LoadModelResult> r = client_->LoadModel(Model(512, 512), options, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.status().message(), "model m is loaded");
  // The channel stays usable.
  EXPECT_TRUE(client_->ListModels().ok());
}

TEST_F(DenseClientTest, ManyConcurrentLoads) {
  std::vector<std::future<absl::StatusOr<LoadModelResult>>> futures;
  for (int i = 0; i < 16; ++i) futures.push_back(client_->LoadModelAsync(Model(33, 17), {}, 100));
  for (auto& f : futures) {
    absl::StatusOr<LoadModelResult> r = f.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->info.layers_size(), 2);
  }
  EXPECT_EQ(service_.streams().size(), 16u);
}

TEST_F(DenseClientTest, LoadModelArguments) {
  EXPECT_EQ(client_->LoadModel(Model(2, 2), {}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A header alone (no tensors) is streamed as one message.
  ModelUpload header_only;
  header_only.header.set_name("empty");
  absl::StatusOr<LoadModelResult> r = client_->LoadModel(std::move(header_only));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages, 1);
  EXPECT_EQ(r->bytes_sent, 0);
}

TEST_F(DenseClientTest, LoadModelHonoursTheDeadline) {
  CallOptions options;
  options.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_EQ(client_->LoadModel(Model(8, 8), options).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(DenseClientTest, DenseListUnload) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  absl::StatusOr<DenseResult> r = client_->Dense(*MakeDenseRequest("known", x, 3, 2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->timings.queue_us, 7);
  EXPECT_EQ(r->timings.batch_requests, 5);
  absl::StatusOr<DenseOutput> y = DecodeDenseOutput(r->response);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->rows, 3);
  EXPECT_THAT(y->values, ElementsAre(1, 2, 3, 4, 5, 6));

  absl::StatusOr<DenseResult> missing = client_->DenseAsync(*MakeDenseRequest("x", x, 3, 2)).get();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no model x"));

  absl::StatusOr<ListModelsResult> list = client_->ListModels();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->response.models_size(), 1);
  EXPECT_EQ(list->response.models(0).name(), "known");

  EXPECT_TRUE(client_->UnloadModel("known").ok());
  EXPECT_EQ(client_->UnloadModelAsync("other").get().status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucompute::client
