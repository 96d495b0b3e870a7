// Every RPC through a real server on loopback (in-process, real gRPC channel). The backend is
// $GPUCOMPUTE_TEST_BACKEND (default cpu; the GPU machine runs it with cuda too).
#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include "gmock/gmock.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "server/server.h"
#include "server/service/tensor_codec.h"
#include "tests/integration/loopback_server.h"
#include "tests/server/ops/periodogram/test_series.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

std::string Backend() { return testing::TestBackend(); }

v1::Tensor Vec(const std::vector<double>& v) {
  v1::Tensor t;
  EncodeVector(v1::FLOAT64, static_cast<int64_t>(v.size()),
               std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8), &t);
  return t;
}

class PeriodogramServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Backend() == "cuda" && !CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
    ServerConfig c = testing::LoopbackConfig();
    c.scheduler.max_queue_delay = absl::Milliseconds(2);
    c.limits.max_request_bytes = 4 << 20;
    loopback_.Start(c);
    ASSERT_NE(loopback_.server, nullptr);
    server_ = std::move(loopback_.server);
    channel_ = loopback_.channel;
    stub_ = std::move(loopback_.stub);
  }

  grpc::Status Call(const v1::PeriodogramRequest& req, v1::PeriodogramResponse* resp,
                    grpc::ClientContext* ctx = nullptr) {
    grpc::ClientContext local;
    if (!ctx) ctx = &local;
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Periodogram(ctx, req, resp);
  }

  // A request of `count` random series and the decoded specs the server should compute.
  v1::PeriodogramRequest RandomRequest(std::mt19937_64& rng, int count, v1::DType dtype,
                                       std::vector<periodogram::SeriesSpec>* specs) {
    v1::PeriodogramRequest req;
    req.set_dtype(dtype);
    std::uniform_int_distribution<int> len(20, 300);
    for (int i = 0; i < count; ++i) {
      auto s = periodogram::testing::RandomSeries(rng, len(rng), 1.0 + 0.3 * i, i % 2);
      auto* out = req.add_series();
      *out->mutable_t() = Vec(s.t);
      *out->mutable_y() = Vec(s.y);
      if (!s.dy.empty()) *out->mutable_dy() = Vec(s.dy);
      s.grid.uniform = *periodogram::AutoFrequency(s.t, {});
      specs->push_back(std::move(s));
    }
    return req;
  }

  static void ExpectMatches(const std::vector<periodogram::SeriesSpec>& specs, v1::DType dtype,
                            const v1::PeriodogramResponse& resp) {
    ASSERT_EQ(resp.results_size(), static_cast<int>(specs.size()));
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto& r = resp.results(static_cast<int>(i));
      const auto ref = periodogram::ComputeSeriesCpu(specs[i], ElementType::kFloat64);
      const double* p = reinterpret_cast<const double*>(ref.power.data());
      auto got = DecodeVector(r.power(), "power", false);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), static_cast<size_t>(specs[i].grid.size()));
      EXPECT_EQ(r.grid().n(), specs[i].grid.size());
      EXPECT_DOUBLE_EQ(r.grid().df(), specs[i].grid.uniform->df);
      for (size_t k = 0; k < got->size(); ++k) {
        ASSERT_NEAR((*got)[k], p[k], dtype == v1::FLOAT32 ? 1e-4 : 1e-9) << "series " << i << " k " << k;
      }
      // Near-ties may pick either bin: the power at the reported peak is the maximum.
      EXPECT_GE(p[r.peak_index()], p[ref.peak_index] - (dtype == v1::FLOAT32 ? 1e-4 : 1e-9));
      EXPECT_DOUBLE_EQ(r.peak_frequency(), specs[i].grid.frequency(r.peak_index()));
    }
  }

  // `t` viewed as 1-D of `shape` elements (DecodeVector reads 1-D tensors only).
  static v1::Tensor TensorOfShape(const v1::Tensor& t, std::initializer_list<int64_t> shape) {
    v1::Tensor out = t;
    out.clear_shape();
    for (int64_t d : shape) out.add_shape(d);
    return out;
  }

  testing::LoopbackServer loopback_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Compute::Stub> stub_;
};

TEST_F(PeriodogramServer, ComputesBatchAndSendsTimings) {
  std::mt19937_64 rng(std::random_device{}());
  for (auto dtype : {v1::FLOAT64, v1::FLOAT32}) {
    std::vector<periodogram::SeriesSpec> specs;
    auto req = RandomRequest(rng, 5, dtype, &specs);
    v1::PeriodogramResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(Call(req, &resp, &ctx).ok());
    ExpectMatches(specs, dtype, resp);
    const auto& md = ctx.GetServerTrailingMetadata();
    for (const char* key : {"x-gpucompute-queue-us", "x-gpucompute-compute-us",
                            "x-gpucompute-total-us", "x-gpucompute-batch-requests"}) {
      EXPECT_EQ(md.count(key), 1u) << key;
    }
  }
}

// The same series packed, results as columns: every column row equals the SeriesResult the
// plain request gets, and each SeriesResult then holds only its power.
TEST_F(PeriodogramServer, PackedSeriesAndResultColumnsMatchPlainSeries) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<periodogram::SeriesSpec> specs;
  v1::PeriodogramRequest plain = RandomRequest(rng, 6, v1::FLOAT64, &specs);
  for (v1::Series& s : *plain.mutable_series()) s.clear_dy();  // packed: all or none with dy
  plain.set_top_k(4);
  plain.mutable_false_alarm()->add_probabilities(0.01);
  plain.mutable_false_alarm()->add_powers(0.3);
  plain.mutable_false_alarm()->add_powers(0.6);
  v1::PeriodogramRequest packed = plain;
  packed.clear_series();
  std::vector<double> t, y;
  for (const v1::Series& s : plain.series()) {
    const std::vector<double> st = *DecodeVector(s.t(), "t"), sy = *DecodeVector(s.y(), "y");
    t.insert(t.end(), st.begin(), st.end());
    y.insert(y.end(), sy.begin(), sy.end());
    packed.mutable_packed_series()->add_lengths(static_cast<int64_t>(st.size()));
  }
  *packed.mutable_packed_series()->mutable_t() = Vec(t);
  *packed.mutable_packed_series()->mutable_y() = Vec(y);
  packed.set_result_columns(true);
  v1::PeriodogramResponse want, got;
  ASSERT_TRUE(Call(plain, &want).ok());
  ASSERT_TRUE(Call(packed, &got).ok());
  ASSERT_EQ(got.results_size(), 6);
  const v1::PeriodogramColumns& c = got.columns();
  const std::vector<double> peak_frequency = *DecodeVector(c.peak_frequency(), "f");
  const std::vector<double> grid = *DecodeVector(TensorOfShape(c.grid(), {18}), "grid");
  const std::vector<double> peaks_power = *DecodeVector(TensorOfShape(c.peaks_power(), {24}), "p");
  const std::vector<double> levels = *DecodeVector(TensorOfShape(c.false_alarm_levels(), {6}), "l");
  const std::vector<double> probabilities =
      *DecodeVector(TensorOfShape(c.false_alarm_probabilities(), {12}), "p");
  ASSERT_EQ(c.peak_index().dtype(), v1::INT64);
  const auto* peak_index = reinterpret_cast<const int64_t*>(c.peak_index().data().data());
  const auto* peaks_index = reinterpret_cast<const int64_t*>(c.peaks_index().data().data());
  EXPECT_THAT(c.peaks_index().shape(), ::testing::ElementsAre(6, 4));
  for (int i = 0; i < 6; ++i) {
    const v1::SeriesResult& w = want.results(i);
    const v1::SeriesResult& g = got.results(i);
    EXPECT_EQ(g.power().data(), w.power().data()) << i;
    EXPECT_FALSE(g.has_grid() || g.has_false_alarm() || g.peaks_size() > 0) << i;
    EXPECT_EQ(peak_frequency[i], w.peak_frequency());
    EXPECT_EQ(peak_index[i], w.peak_index());
    EXPECT_EQ(grid[3 * i], w.grid().f0());
    EXPECT_EQ(grid[3 * i + 1], w.grid().df());
    EXPECT_EQ(grid[3 * i + 2], static_cast<double>(w.grid().n()));
    for (int j = 0; j < 4; ++j) {
      if (j < w.peaks_size()) {
        EXPECT_EQ(peaks_index[4 * i + j], w.peaks(j).index());
        EXPECT_EQ(peaks_power[4 * i + j], w.peaks(j).power());
      } else {
        EXPECT_EQ(peaks_index[4 * i + j], -1);
      }
    }
    EXPECT_EQ(levels[i], w.false_alarm().levels(0));
    EXPECT_EQ(probabilities[2 * i + 1], w.false_alarm().probabilities(1));
  }
}

TEST_F(PeriodogramServer, ServerInfoReportsBackendAndLimits) {
  grpc::ClientContext ctx;
  v1::ServerInfoResponse info;
  ASSERT_TRUE(stub_->ServerInfo(&ctx, v1::ServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.backend(), Backend());
  EXPECT_FALSE(info.version().empty());
  EXPECT_EQ(info.limits().max_request_bytes(), 4 << 20);
  if (Backend() == "cuda") {
    EXPECT_GE(info.devices_size(), 1);
    EXPECT_GE(info.kernel_cache().entries(), 4);  // warmed at start-up
  }
}

TEST_F(PeriodogramServer, HealthServiceServes) {
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer request;  // HealthCheckRequest{service: ""}: empty message
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> l(mu);
                      status = s;
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING
}

TEST_F(PeriodogramServer, BadInputGetsPreciseStatusAndServerKeepsServing) {
  std::mt19937_64 rng(1);
  std::vector<periodogram::SeriesSpec> specs;
  const auto good = RandomRequest(rng, 2, v1::FLOAT64, &specs);
  struct Case {
    std::function<void(v1::PeriodogramRequest*)> mutate;
    grpc::StatusCode code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {[](auto* r) { *r->mutable_series(1)->mutable_y() = Vec({1, 2}); }, grpc::INVALID_ARGUMENT, "series[1].y: length 2 differs"},
      {[](auto* r) { r->clear_series(); }, grpc::INVALID_ARGUMENT, "series: at least one"},
      {[](auto* r) { r->mutable_series(0)->mutable_y()->mutable_data()->replace(0, 8, std::string("\0\0\0\0\0\0\xf8\x7f", 8)); }, grpc::INVALID_ARGUMENT, "series[0].y: values must be finite"},
      {[](auto* r) { auto n = r->series(0).t().shape(0); std::vector<double> dy(n, 1.0); dy[3] = -1; *r->mutable_series(0)->mutable_dy() = Vec(dy); }, grpc::INVALID_ARGUMENT, "series[0].dy: values must be finite and > 0 (index 3"},
      {[](auto* r) { *r->mutable_frequency()->mutable_explicit_frequencies() = Vec({1.0, -2.0}); }, grpc::INVALID_ARGUMENT, "frequency.explicit_frequencies: frequencies must be finite and > 0 (index 1"},
      {[](auto* r) { r->mutable_series(0)->mutable_t()->set_dtype(v1::FLOAT32); }, grpc::INVALID_ARGUMENT, "series[0].t.data: holds"},
      {[](auto* r) { r->mutable_series(0)->mutable_t()->set_dtype(v1::DTYPE_UNSPECIFIED); }, grpc::INVALID_ARGUMENT, "series[0].t.dtype"},
      {[](auto* r) { auto* u = r->mutable_frequency()->mutable_uniform(); u->set_f0(1); u->set_df(1); u->set_n(int64_t{1} << 40); }, grpc::RESOURCE_EXHAUSTED, "frequency.uniform.n"},
      // Over max_request_bytes (4 MiB here): refused by gRPC itself. After such a refusal the
      // server's shutdown at the end of the test sometimes takes ~10 s inside gRPC 1.51.
      {[](auto* r) { *r->mutable_series(0)->mutable_y() = Vec(std::vector<double>(600000, 1.0)); }, grpc::RESOURCE_EXHAUSTED, ""},
  };
  for (const Case& c : cases) {
    v1::PeriodogramRequest bad = good;
    c.mutate(&bad);
    v1::PeriodogramResponse resp;
    const grpc::Status s = Call(bad, &resp);
    EXPECT_EQ(s.error_code(), c.code) << c.text << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.text));
    v1::PeriodogramResponse ok;
    ASSERT_TRUE(Call(good, &ok).ok()) << "after " << c.text;
    ExpectMatches(specs, v1::FLOAT64, ok);
  }
}

TEST_F(PeriodogramServer, ConcurrentClientsAreBatchedAndCorrect) {
  constexpr int kClients = 64;
  std::atomic<int> correct{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(1000 + c);
      std::vector<periodogram::SeriesSpec> specs;
      const auto req = RandomRequest(rng, 1 + c % 3, c % 2 ? v1::FLOAT32 : v1::FLOAT64, &specs);
      v1::PeriodogramResponse resp;
      if (!Call(req, &resp).ok()) return;
      ExpectMatches(specs, req.dtype(), resp);
      if (!::testing::Test::HasFailure()) correct.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(correct.load(), kClients);
  grpc::ClientContext ctx;
  v1::ServerInfoResponse info;
  ASSERT_TRUE(stub_->ServerInfo(&ctx, v1::ServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.periodogram_batching().requests(), kClients);
  EXPECT_GT(info.periodogram_batching().largest_batch(), 1);
  EXPECT_LT(info.periodogram_batching().batches(), kClients);
}

TEST_F(PeriodogramServer, ExpiredDeadlineIsDeadlineExceeded) {
  std::mt19937_64 rng(2);
  std::vector<periodogram::SeriesSpec> specs;
  const auto req = RandomRequest(rng, 1, v1::FLOAT64, &specs);
  grpc::ClientContext ctx;
  // Already past when the call starts (a deadline 1 us ahead could, on a loaded machine, see the
  // server's answer arrive before the client's deadline timer ran).
  ctx.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  v1::PeriodogramResponse resp;
  EXPECT_EQ(stub_->Periodogram(&ctx, req, &resp).error_code(), grpc::DEADLINE_EXCEEDED);
}

TEST_F(PeriodogramServer, AbandonedLongRequestDoesNotHoldTheServer) {
  // 20,000 samples x 2,000,000 frequencies: minutes on the CPU backend (tens of ms on a GPU,
  // where it may finish in time). Its caller gives up after 300 ms; the server must stop
  // computing it and serve the next request promptly.
  std::mt19937_64 rng(4);
  auto big_series = periodogram::testing::RandomSeries(rng, 20000, 3.0, false, 0, 1000);
  v1::PeriodogramRequest big;
  *big.add_series()->mutable_t() = Vec(big_series.t);
  *big.mutable_series(0)->mutable_y() = Vec(big_series.y);
  auto* u = big.mutable_frequency()->mutable_uniform();
  u->set_f0(0.001);
  u->set_df(1e-5);
  u->set_n(2000000);
  grpc::ClientContext big_ctx;
  big_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  v1::PeriodogramResponse big_resp;
  const grpc::StatusCode code = stub_->Periodogram(&big_ctx, big, &big_resp).error_code();
  EXPECT_TRUE(code == grpc::DEADLINE_EXCEEDED || (Backend() == "cuda" && code == grpc::OK)) << code;

  std::vector<periodogram::SeriesSpec> specs;
  const auto small = RandomRequest(rng, 1, v1::FLOAT64, &specs);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::PeriodogramResponse resp;
  ASSERT_TRUE(stub_->Periodogram(&ctx, small, &resp).ok());
  ExpectMatches(specs, v1::FLOAT64, resp);
}

TEST_F(PeriodogramServer, ShutdownDrainsInFlightCalls) {
  std::mt19937_64 rng(3);
  std::vector<periodogram::SeriesSpec> specs;
  const auto req = RandomRequest(rng, 3, v1::FLOAT64, &specs);
  constexpr int kCalls = 16;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&] {
      v1::PeriodogramResponse resp;
      if (Call(req, &resp).ok() && resp.results_size() == 3) ok.fetch_add(1);
    });
  }
  // Shut down once the scheduler has taken some of the calls (a sleep here could end, on a
  // loaded machine, before any call had arrived).
  int64_t accepted = 0;
  for (int i = 0; i < 6000 && accepted == 0; ++i) {
    grpc::ClientContext ctx;
    v1::ServerInfoResponse info;
    ASSERT_TRUE(stub_->ServerInfo(&ctx, v1::ServerInfoRequest(), &info).ok());
    accepted = info.periodogram_batching().requests() + info.periodogram_batching().queued();
    if (accepted == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(accepted, 0) << "no call reached the scheduler in 60 s";
  server_->Shutdown(absl::Seconds(30));
  for (auto& t : threads) t.join();
  // Calls that reached the server before shutdown completed; later ones were refused cleanly.
  EXPECT_GE(ok.load(), accepted);
}

TEST(ServerStart, FailuresAreErrorsNotCrashes) {
  ServerConfig bad_address;
  bad_address.address = "999.1.1.1:5";
  bad_address.backend.kind = "cpu";
  EXPECT_FALSE(Server::Start(bad_address).ok());
  ServerConfig bad_backend;
  bad_backend.address = "127.0.0.1:0";
  bad_backend.backend.kind = "tpu";
  EXPECT_EQ(Server::Start(bad_backend).status().code(), absl::StatusCode::kInvalidArgument);
  if (!CudaDeviceAvailable()) {
    ServerConfig no_gpu;
    no_gpu.address = "127.0.0.1:0";
    no_gpu.backend.kind = "cuda";
    EXPECT_FALSE(Server::Start(no_gpu).ok());
  }
}

}  // namespace
}  // namespace gpucompute
