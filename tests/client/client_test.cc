// Tests of gpucompute::client::Client against an in-process fake Compute service: futures,
// deadlines, status mapping, trailing-metadata timings, message size limits.
#include "client/cpp/client.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gpucompute::client {
namespace {

using ::testing::HasSubstr;

// Echoes each series' y as its power, reports fixed timings, and honours two test-only request
// metadata keys: "x-test-delay-ms" (finish late, from another thread) and "x-test-fail"
// (finish with that gRPC status code).
class FakeCompute final : public v1::Compute::CallbackService {
 public:
  ~FakeCompute() override { JoinAll(); }

  grpc::ServerUnaryReactor* Periodogram(grpc::CallbackServerContext* context,
                                        const v1::PeriodogramRequest* request,
                                        v1::PeriodogramResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    int fail = 0, delay_ms = 0;
    for (const auto& [key, value] : context->client_metadata()) {
      const std::string k(key.data(), key.size()), v(value.data(), value.size());
      if (k == "x-test-fail") (void)absl::SimpleAtoi(v, &fail);
      if (k == "x-test-delay-ms") (void)absl::SimpleAtoi(v, &delay_ms);
    }
    if (fail != 0) {
      reactor->Finish(grpc::Status(static_cast<grpc::StatusCode>(fail),
                                   "series[0].t: must be finite", "detail-bytes"));
      return reactor;
    }
    for (const v1::Series& s : request->series()) {
      v1::SeriesResult* r = response->add_results();
      *r->mutable_power() = s.y();
      r->set_peak_frequency(1.25);
    }
    context->AddTrailingMetadata(kQueueUsKey, "12");
    context->AddTrailingMetadata(kComputeUsKey, "345");
    context->AddTrailingMetadata(kTotalUsKey, "400");
    context->AddTrailingMetadata(kBatchRequestsKey, "3");
    if (delay_ms > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([reactor, delay_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        reactor->Finish(grpc::Status::OK);
      });
      return reactor;
    }
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* context,
                                       const v1::ServerInfoRequest*,
                                       v1::ServerInfoResponse* response) override {
    response->set_version("test");
    response->set_backend("fake");
    response->mutable_limits()->set_max_batch_size(8);
    context->AddTrailingMetadata(kTotalUsKey, "not-a-number");
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(1 << 30);
    builder.SetMaxSendMessageSize(1 << 30);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    target_ = "127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    service_.JoinAll();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  static v1::PeriodogramRequest Request(std::vector<double> y) {
    std::vector<double> t(y.size());
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<double>(i);
    return *PeriodogramRequestBuilder().AddSeries(t, y).Build();
  }

  FakeCompute service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string target_;
};

TEST_F(ClientTest, PeriodogramReturnsResponseAndTimings) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(), target_);
  absl::StatusOr<PeriodogramResult> r = (*client)->Periodogram(Request({1, 2, 3}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->response.results_size(), 1);
  EXPECT_EQ(*TensorToDoubles(r->response.results(0).power()), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(r->timings.queue_us, 12);
  EXPECT_EQ(r->timings.compute_us, 345);
  EXPECT_EQ(r->timings.total_us, 400);
  EXPECT_EQ(r->timings.batch_requests, 3);
  EXPECT_GT(r->latency, absl::ZeroDuration());
}

TEST_F(ClientTest, ManyConcurrentAsyncCalls) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_);
  ASSERT_TRUE(client.ok());
  std::vector<std::future<absl::StatusOr<PeriodogramResult>>> futures;
  for (int i = 0; i < 64; ++i) {
    futures.push_back((*client)->PeriodogramAsync(Request({static_cast<double>(i)})));
  }
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<PeriodogramResult> r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*TensorToDoubles(r->response.results(0).power()), std::vector<double>{double(i)});
  }
}

TEST_F(ClientTest, MapsErrorsWithCodeMessageAndDetails) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_);
  ASSERT_TRUE(client.ok());
  CallOptions options;
  options.metadata.emplace_back("x-test-fail", "3");  // INVALID_ARGUMENT
  absl::StatusOr<PeriodogramResult> r = (*client)->Periodogram(Request({1}), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "series[0].t: must be finite");
  absl::optional<absl::Cord> details = r.status().GetPayload("grpc-status-details-bin");
  ASSERT_TRUE(details.has_value());
  EXPECT_EQ(std::string(*details), "detail-bytes");

  options.metadata = {{"x-test-fail", "8"}};  // RESOURCE_EXHAUSTED
  EXPECT_EQ((*client)->Periodogram(Request({1}), options).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(ClientTest, EveryCallHasADeadline) {
  ClientOptions client_options;
  client_options.default_timeout = absl::Milliseconds(100);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_, client_options);
  ASSERT_TRUE(client.ok());
  CallOptions slow;
  slow.metadata.emplace_back("x-test-delay-ms", "1000");
  // The client default applies...
  EXPECT_EQ((*client)->Periodogram(Request({1}), slow).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // ...a per-call timeout overrides it...
  slow.timeout = absl::Seconds(20);
  slow.metadata = {{"x-test-delay-ms", "50"}};
  EXPECT_TRUE((*client)->Periodogram(Request({1}), slow).ok());
  // ...and an absolute deadline overrides both.
  slow.deadline = absl::Now() + absl::Milliseconds(10);
  slow.metadata = {{"x-test-delay-ms", "1000"}};
  EXPECT_EQ((*client)->Periodogram(Request({1}), slow).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ClientTest, FutureOutlivesTheClient) {
  std::future<absl::StatusOr<PeriodogramResult>> future;
  {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_);
    ASSERT_TRUE(client.ok());
    CallOptions slow;
    slow.metadata.emplace_back("x-test-delay-ms", "200");
    future = (*client)->PeriodogramAsync(Request({4, 5}), slow);
  }
  absl::StatusOr<PeriodogramResult> r = future.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->response.results_size(), 1);
}

TEST_F(ClientTest, MessagesAboveFourMebibytes) {
  ClientOptions inline_only;  // one message each way (the fake has no resident tensors)
  inline_only.transfer_threshold_bytes = 0;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_, inline_only);
  ASSERT_TRUE(client.ok());
  std::vector<double> y(1 << 20, 0.5);  // 8 MiB each way
  absl::StatusOr<PeriodogramResult> r = (*client)->Periodogram(Request(y));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->response.results(0).power().data().size(), y.size() * 8);
}

TEST_F(ClientTest, ServerInfoAndUnparsableTimings) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target_);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<ServerInfoResult> info = (*client)->ServerInfoAsync().get();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->info.backend(), "fake");
  EXPECT_EQ(info->info.limits().max_batch_size(), 8);
  EXPECT_FALSE(info->timings.total_us.has_value());
  EXPECT_FALSE(info->timings.queue_us.has_value());
}

TEST(ClientConnectTest, RejectsBadArguments) {
  EXPECT_EQ(Client::Connect("").status().code(), absl::StatusCode::kInvalidArgument);
  ClientOptions options;
  options.default_timeout = absl::ZeroDuration();
  EXPECT_EQ(Client::Connect("127.0.0.1:1", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClientConnectTest, UnreachableServer) {
  // Port 1 on loopback refuses connections.
  ClientOptions options;
  options.connect_timeout = absl::Milliseconds(200);
  EXPECT_EQ(Client::Connect("127.0.0.1:1", options).status().code(),
            absl::StatusCode::kUnavailable);
  // Lazily connected: the call fails fast with UNAVAILABLE, not at its deadline.
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect("127.0.0.1:1");
  ASSERT_TRUE(client.ok());
  const absl::Time start = absl::Now();
  EXPECT_EQ((*client)->ServerInfo().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(StatusTest, ToAbslStatus) {
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
  for (int code = 1; code <= 16; ++code) {
    absl::Status s = ToAbslStatus(grpc::Status(static_cast<grpc::StatusCode>(code), "m"));
    EXPECT_EQ(static_cast<int>(s.code()), code);
    EXPECT_EQ(s.message(), "m");
  }
}

}  // namespace
}  // namespace gpucompute::client
