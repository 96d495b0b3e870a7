// A C++ client of several servers (ClientOptions::round_robin, client/cpp/balance.h): round
// robin over every address, each plain call whole on one server, models and shared-memory
// regions on every server, resident tensors refused unless pinned. Two real server binaries on
// loopback (CPU backend), counted by their own ServerInfo.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/balance.h"
#include "client/cpp/client.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/tensor_util.h"
#include "gtest/gtest.h"
#include "tests/client/server_process.h"

namespace gpucompute {
namespace {

using client::Client;
using client::ClientOptions;

TEST(TargetAddressesTest, ListsNamesAndSingleEndpoints) {
  EXPECT_EQ(client::TargetAddresses("ipv4:10.0.0.1:5,10.0.0.2:5"),
            (std::vector<std::string>{"ipv4:10.0.0.1:5", "ipv4:10.0.0.2:5"}));
  EXPECT_EQ(client::TargetAddresses("ipv6:[::1]:5,[::2]:6"),
            (std::vector<std::string>{"ipv6:[::1]:5", "ipv6:[::2]:6"}));
  // localhost has an address of each family: one server, reached by IPv4.
  EXPECT_EQ(client::TargetAddresses("localhost:7"), std::vector<std::string>{"ipv4:127.0.0.1:7"});
  EXPECT_EQ(client::TargetAddresses("dns:///localhost:7"),
            std::vector<std::string>{"ipv4:127.0.0.1:7"});
  for (const std::string one : {"unix:/run/gpucompute.sock", "no-port-here", "name.invalid:7"}) {
    EXPECT_EQ(client::TargetAddresses(one), std::vector<std::string>{one});
  }
  EXPECT_EQ(client::TargetHost("dns:///svc.ns:50051"), "svc.ns");
  EXPECT_EQ(client::TargetHost("ipv4:10.0.0.1:5"), std::nullopt);
}

class BalanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      test::ServerProcess::Options o;
      o.binary = GPUCOMPUTE_SERVER_BIN;
      auto s = test::ServerProcess::Start(o);
      ASSERT_TRUE(s.ok()) << s.status();
      ports_.push_back((*s)->port());
      servers_.push_back(*std::move(s));
    }
    target_ = absl::StrCat("ipv4:127.0.0.1:", ports_[0], ",127.0.0.1:", ports_[1]);
  }

  std::unique_ptr<Client> Connect(ClientOptions options = {}) {
    options.connect_timeout = absl::Seconds(30);
    auto c = Client::Connect(target_, options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Periodogram requests each server has run.
  std::vector<int64_t> PeriodogramCalls() {
    std::vector<int64_t> calls;
    for (int port : ports_) {
      auto one = Client::Connect(absl::StrCat("127.0.0.1:", port));
      auto info = (*one)->ServerInfo();
      EXPECT_TRUE(info.ok()) << info.status();
      calls.push_back(info.ok() ? info->info.periodogram_batching().requests() : -1);
    }
    return calls;
  }

  static v1::PeriodogramRequest Periodogram() {
    std::vector<double> t, y;
    for (int i = 0; i < 200; ++i) {
      t.push_back(0.37 * i);
      y.push_back(std::sin(2 * M_PI * 0.4 * t.back()));
    }
    return *client::PeriodogramRequestBuilder().AddSeries(t, y).Build();
  }

  static v1::EchoRequest Echo(const std::vector<double>& values) {
    v1::EchoRequest r;
    *r.mutable_tensor() = client::MakeTensor(values);
    return r;
  }

  std::vector<std::unique_ptr<test::ServerProcess>> servers_;
  std::vector<int> ports_;
  std::string target_;
};

TEST_F(BalanceTest, CallsGoRoundRobinOverBothServersAndPinnedToOne) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->servers().size(), 2u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->Periodogram(Periodogram()).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(client->PeriodogramAsync(Periodogram()).get().ok());
  EXPECT_EQ(PeriodogramCalls(), (std::vector<int64_t>{3, 3}));
  Client& pinned = client->Pin();  // the first server: the turn is at 6
  EXPECT_EQ(pinned.servers(), std::vector<std::string>{client->servers()[0]});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pinned.Periodogram(Periodogram()).ok());
  EXPECT_EQ(PeriodogramCalls(), (std::vector<int64_t>{6, 3}));

  ClientOptions pick_first;
  pick_first.round_robin = false;
  auto one = Connect(pick_first);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->servers(), std::vector<std::string>{target_});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(one->Periodogram(Periodogram()).ok());
  EXPECT_EQ(PeriodogramCalls(), (std::vector<int64_t>{10, 3}));
}

TEST_F(BalanceTest, APlainCallMovingLargeTensorsStaysOnOneServer) {
  ClientOptions options;
  options.transfer_threshold_bytes = 4096;  // uploads and fetches around every call below
  auto client = Connect(options);
  ASSERT_NE(client, nullptr);
  for (int n : {10000, 30000, 7000, 20000}) {
    std::vector<double> x(n);
    for (int i = 0; i < n; ++i) x[i] = std::sin(0.1 * i) * n;
    auto echoed = client->Echo(Echo(x));
    ASSERT_TRUE(echoed.ok()) << echoed.status();
    EXPECT_EQ(*client::TensorToDoubles(echoed->response.tensor()), x);
  }
}

TEST_F(BalanceTest, ResidentTensorsNeedAPinnedClient) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  const std::vector<double> x = {1, 2, 3, 4};
  EXPECT_EQ(client->CreateTensor(v1::FLOAT64, {4}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->ListTensors().status().code(), absl::StatusCode::kFailedPrecondition);
  v1::EchoRequest keep = Echo(x);
  *keep.mutable_output_placement() = client::KeepOutputs();
  EXPECT_EQ(client->Echo(keep).status().code(), absl::StatusCode::kFailedPrecondition);

  Client& pinned = client->Pin();
  std::string bytes(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(double));
  auto put = pinned.PutTensor(v1::FLOAT64, {4}, bytes);
  ASSERT_TRUE(put.ok()) << put.status();
  v1::EchoRequest named;
  *named.mutable_tensor() = client::HandleTensor(put->info.handle());
  auto refused = client->Echo(named);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("Pin()"), std::string::npos) << refused.status();
  auto echoed = pinned.Echo(named);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*client::TensorToDoubles(echoed->response.tensor()), x);
  EXPECT_TRUE(pinned.DeleteTensor(put->info.handle()).ok());
}

TEST_F(BalanceTest, ModelsAreLoadedOnEveryServer) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  client::DenseLayer layer;
  layer.in_features = 3;
  layer.out_features = 2;
  layer.weight = {1, 0, 0, 1, 1, 1};  // [in, out]
  client::ModelBuilder builder("m");
  builder.SetDType(v1::FLOAT32).AddLayer(layer);
  auto loaded = client->LoadModel(*builder.Build());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (int port : ports_) {
    auto one = Client::Connect(absl::StrCat("127.0.0.1:", port));
    auto models = (*one)->ListModels();
    ASSERT_TRUE(models.ok()) << models.status();
    ASSERT_EQ(models->response.models_size(), 1);
    EXPECT_EQ(models->response.models(0).name(), "m");
  }
  const std::vector<float> x = {1, 2, 3};
  for (int i = 0; i < 4; ++i) {
    auto y = client->Dense(*client::MakeDenseRequest("m", x, 1, 3));
    ASSERT_TRUE(y.ok()) << y.status();
    auto out = client::DecodeDenseOutput(y->response);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->values, (std::vector<float>{1 + 3, 2 + 3}));
  }
  ASSERT_TRUE(client->UnloadModel("m").ok());
  for (int port : ports_) {
    auto one = Client::Connect(absl::StrCat("127.0.0.1:", port));
    EXPECT_EQ((*one)->ListModels()->response.models_size(), 0);
  }
}

TEST_F(BalanceTest, AModelOneServerRefusesStaysOnNoneItReached) {
  client::DenseLayer layer;
  layer.in_features = 2;
  layer.out_features = 2;
  layer.weight = {1, 0, 0, 1};
  client::ModelBuilder builder("m");
  builder.SetDType(v1::FLOAT32).AddLayer(layer);
  const client::ModelUpload model = *builder.Build();
  auto second = Client::Connect(absl::StrCat("127.0.0.1:", ports_[1]));
  ASSERT_TRUE((*second)->LoadModel(model).ok());
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->LoadModel(model).status().code(), absl::StatusCode::kAlreadyExists);
  auto first = Client::Connect(absl::StrCat("127.0.0.1:", ports_[0]));
  EXPECT_EQ((*first)->ListModels()->response.models_size(), 0);
  EXPECT_EQ((*second)->ListModels()->response.models_size(), 1);
}

}  // namespace
}  // namespace gpucompute
