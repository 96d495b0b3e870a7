// The /metrics endpoint of a real server on loopback: successful and failing calls of several
// operations (unary and on a Submit stream), a model load and unload, then a scrape with an
// HTTP client. Checks that the text parses (every sample line is `name{labels} value`, every
// family has HELP and TYPE before its samples, histograms are cumulative and end in +Inf =
// _count) and that the counts moved exactly as the calls did.
// The backend is $GPUCOMPUTE_TEST_BACKEND (default cpu; the GPU machine runs it with cuda).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gtest/gtest.h"
#include "common/version.h"
#include "server/server.h"
#include "server/service/tensor_codec.h"
#include "tests/integration/loopback_server.h"
#include "tests/server/ops/periodogram/test_series.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// One scrape, parsed: every sample by its series ("name{a=\"x\",b=\"y\"}", labels as sent),
// and each family's type.
struct Scrape {
  std::string text;
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;

  double Get(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? 0 : it->second;
  }
  bool Has(const std::string& series) const { return samples.count(series) > 0; }
};

// Parses the text format 0.0.4 strictly enough for our own output; ADD_FAILUREs on any line
// that does not fit.
Scrape Parse(const std::string& text) {
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+)$)");
  static const std::regex kHelp(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  Scrape s;
  s.text = text;
  std::set<std::string> helped;
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the exposition must end in a newline";
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::string l(line);
    std::smatch m;
    if (std::regex_match(l, m, kHelp)) {
      EXPECT_TRUE(helped.insert(m[1]).second) << "two HELP lines for " << m[1];
    } else if (std::regex_match(l, m, kType)) {
      EXPECT_TRUE(helped.count(m[1])) << "TYPE before HELP for " << m[1];
      EXPECT_TRUE(s.types.emplace(m[1], m[2]).second) << "two TYPE lines for " << m[1];
    } else if (std::regex_match(l, m, kSample)) {
      const std::string name = m[1];
      // The family a sample belongs to: histograms expose name_bucket/_sum/_count.
      std::string family = name;
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (absl::EndsWith(name, suffix)) {
          const std::string base = name.substr(0, name.size() - strlen(suffix));
          if (s.types.count(base) && s.types[base] == "histogram") family = base;
        }
      }
      EXPECT_TRUE(s.types.count(family)) << "sample without a TYPE: " << l;
      double v = 0;
      const std::string value = m[5];
      if (value == "+Inf") {
        v = INFINITY;
      } else {
        EXPECT_TRUE(absl::SimpleAtod(value, &v)) << "bad value: " << l;
      }
      const size_t space = l.rfind(' ');
      EXPECT_TRUE(s.samples.emplace(l.substr(0, space), v).second) << "duplicate series: " << l;
    } else {
      ADD_FAILURE() << "not a text-format line: '" << l << "'";
    }
  }
  return s;
}

v1::Tensor Vec(const std::vector<double>& v) {
  v1::Tensor t;
  EncodeVector(v1::FLOAT64, static_cast<int64_t>(v.size()),
               std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8), &t);
  return t;
}

// Runs `call(context)` with a 60 s deadline on the context.
template <typename Call>
grpc::Status WithDeadline(Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return call(&ctx);
}

class MetricsServer : public ::testing::Test {
 protected:
  void SetUp() override { Start(/*model_names=*/false); }

  void Start(bool model_names) {
    if (testing::TestBackend() == "cuda" && !CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
    ServerConfig c = testing::LoopbackConfig();
    c.metrics_port = 0;
    c.metrics_model_names = model_names;
    loopback_.Start(c);
    ASSERT_NE(loopback_.server, nullptr);
    ASSERT_GT(loopback_.server->metrics_port(), 0);
    stub_ = loopback_.stub.get();
  }

  Scrape DoScrape() {
    httplib::Client http("127.0.0.1", loopback_.server->metrics_port());
    http.set_read_timeout(10, 0);
    auto res = http.Get("/metrics");
    if (!res) {
      ADD_FAILURE() << "scrape failed: " << httplib::to_string(res.error());
      return {};
    }
    EXPECT_EQ(res->status, 200);
    EXPECT_THAT(res->get_header_value("Content-Type"), StartsWith("text/plain; version=0.0.4"));
    return Parse(res->body);
  }

  grpc::Status Periodogram(bool valid) {
    std::mt19937_64 rng(7);
    auto s = periodogram::testing::RandomSeries(rng, 50, 1.5, false);
    v1::PeriodogramRequest req;
    req.set_dtype(v1::FLOAT64);
    auto* series = req.add_series();
    *series->mutable_t() = Vec(s.t);
    if (!valid) s.y.pop_back();  // t and y of different lengths
    *series->mutable_y() = Vec(s.y);
    v1::PeriodogramResponse resp;
    return WithDeadline([&](grpc::ClientContext* ctx) { return stub_->Periodogram(ctx, req, &resp); });
  }

  grpc::Status Echo() {
    v1::EchoRequest req;
    *req.mutable_tensor() = Vec({1, 2, 3});
    v1::EchoResponse resp;
    return WithDeadline([&](grpc::ClientContext* ctx) { return stub_->Echo(ctx, req, &resp); });
  }

  grpc::Status LoadTinyModel(const std::string& name) {
    v1::LoadModelChunk header;
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_dtype(v1::FLOAT32);
    v1::TensorHeader* w = header.mutable_header()->add_layers()->mutable_weight();
    w->set_dtype(v1::FLOAT32);
    w->add_shape(4);
    w->add_shape(2);
    v1::LoadModelChunk chunk;
    chunk.mutable_chunk()->set_layer(0);
    chunk.mutable_chunk()->set_tensor(v1::LAYER_TENSOR_WEIGHT);
    const std::vector<float> weights = {1, 2, 3, 4, 5, 6, 7, 8};
    chunk.mutable_chunk()->set_data(std::string(reinterpret_cast<const char*>(weights.data()), 32));
    v1::ModelInfo info;
    return WithDeadline([&](grpc::ClientContext* ctx) {
      auto writer = stub_->LoadModel(ctx, &info);
      writer->Write(header);
      writer->Write(chunk);
      writer->WritesDone();
      return writer->Finish();
    });
  }

  grpc::Status Unload(const std::string& name) {
    v1::UnloadModelRequest req;
    req.set_name(name);
    v1::UnloadModelResponse resp;
    return WithDeadline([&](grpc::ClientContext* ctx) { return stub_->UnloadModel(ctx, req, &resp); });
  }

  testing::LoopbackServer loopback_;
  v1::Compute::Stub* stub_ = nullptr;
};

TEST_F(MetricsServer, CountsMoveWithCallsAndTheTextParses) {
  const Scrape before = DoScrape();
  // Every family is there from the start, typed, even without samples yet.
  const std::map<std::string, std::string> families = {
      {"gpucompute_request_success_total", "counter"},
      {"gpucompute_request_failure_total", "counter"},
      {"gpucompute_request_duration_seconds", "histogram"},
      {"gpucompute_queue_duration_seconds", "histogram"},
      {"gpucompute_compute_duration_seconds", "histogram"},
      {"gpucompute_batch_size", "histogram"},
      {"gpucompute_pending_requests", "gauge"},
      {"gpucompute_gpu_memory_used_bytes", "gauge"},
      {"gpucompute_gpu_memory_total_bytes", "gauge"},
      {"gpucompute_gpu_memory_pool_reserved_bytes", "gauge"},
      {"gpucompute_gpu_memory_pool_used_bytes", "gauge"},
      {"gpucompute_kernel_cache_hits_total", "counter"},
      {"gpucompute_kernel_cache_misses_total", "counter"},
      {"gpucompute_kernel_cache_disk_hits_total", "counter"},
      {"gpucompute_kernel_compile_seconds_total", "counter"},
      {"gpucompute_kernel_cache_entries", "gauge"},
      {"gpucompute_resident_tensors", "gauge"},
      {"gpucompute_resident_tensor_bytes", "gauge"},
      {"gpucompute_models_loaded", "gauge"},
      {"gpucompute_model_bytes", "gauge"},
      {"gpucompute_build_info", "gauge"},
  };
  for (const auto& [name, type] : families) {
    auto it = before.types.find(name);
    ASSERT_NE(it, before.types.end()) << name << " missing from\n" << before.text;
    EXPECT_EQ(it->second, type) << name;
  }
  // Each op's success series is there (0) before its first call.
  for (const char* op : {"periodogram", "dense", "assimilate", "echo", "load_model", "unload_model"}) {
    EXPECT_TRUE(before.Has(absl::StrCat("gpucompute_request_success_total{op=\"", op, "\"}"))) << op;
  }
  const std::string backend = loopback_.server->backend_name();
  EXPECT_EQ(before.Get(absl::StrCat("gpucompute_build_info{version=\"", GPUCOMPUTE_VERSION,
                                    "\",backend=\"", backend, "\"}")),
            1)
      << before.text;
  if (backend == "cuda") {
    EXPECT_GT(before.Get("gpucompute_gpu_memory_total_bytes{gpu=\"0\"}"), 0);
    EXPECT_GT(before.Get("gpucompute_gpu_memory_used_bytes{gpu=\"0\"}"), 0);
    EXPECT_GT(before.Get("gpucompute_kernel_cache_misses_total"), 0);  // the start-up warm-up
  } else {
    EXPECT_THAT(before.text, ::testing::Not(HasSubstr("gpucompute_gpu_memory_total_bytes{")));
  }

  // 3 good and 2 bad periodograms, 2 echoes and 1 echo on a stream, a dense call for a
  // model that is not there, a model loaded and unloaded twice (the second: NOT_FOUND).
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Periodogram(true).ok());
  for (int i = 0; i < 2; ++i) ASSERT_EQ(Periodogram(false).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Echo().ok());
  ASSERT_TRUE(Echo().ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->Submit(&ctx);
    v1::SubmitRequest job;
    job.set_id("e");
    *job.mutable_echo()->mutable_tensor() = Vec({4, 5});
    ASSERT_TRUE(stream->Write(job));
    stream->WritesDone();
    v1::SubmitResponse result;
    ASSERT_TRUE(stream->Read(&result));
    EXPECT_EQ(result.code(), 0) << result.message();
    ASSERT_TRUE(stream->Finish().ok());
  }
  {
    v1::DenseRequest req;
    req.set_model("absent");
    *req.mutable_input() = Vec({1, 2, 3, 4});
    v1::DenseResponse resp;
    ASSERT_EQ(WithDeadline([&](grpc::ClientContext* ctx) { return stub_->Dense(ctx, req, &resp); })
                  .error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  ASSERT_TRUE(LoadTinyModel("tiny").ok());
  const Scrape loaded = DoScrape();
  EXPECT_EQ(loaded.Get("gpucompute_models_loaded"), 1);
  // Model names are the clients' data: by default only the total, and no name anywhere.
  EXPECT_GE(loaded.Get("gpucompute_model_bytes"), 32);
  EXPECT_EQ(loaded.text.find("tiny"), std::string::npos) << loaded.text;
  ASSERT_TRUE(Unload("tiny").ok());
  ASSERT_EQ(Unload("tiny").error_code(), grpc::StatusCode::NOT_FOUND);

  const Scrape after = DoScrape();
  auto delta = [&](const std::string& series) { return after.Get(series) - before.Get(series); };
  const std::pair<std::string, double> expected_deltas[] = {
      {"gpucompute_request_success_total{op=\"periodogram\"}", 3},
      {"gpucompute_request_failure_total{op=\"periodogram\",code=\"INVALID_ARGUMENT\"}", 2},
      {"gpucompute_request_success_total{op=\"echo\"}", 3},
      {"gpucompute_request_failure_total{op=\"dense\",code=\"NOT_FOUND\"}", 1},
      {"gpucompute_request_success_total{op=\"load_model\"}", 1},
      {"gpucompute_request_success_total{op=\"unload_model\"}", 1},
      {"gpucompute_request_failure_total{op=\"unload_model\",code=\"NOT_FOUND\"}", 1},
      {"gpucompute_request_duration_seconds_count{op=\"periodogram\"}", 5},
      {"gpucompute_request_duration_seconds_count{op=\"echo\"}", 3},
      // Only the valid periodograms reached the scheduler: each queued once, computed once.
      {"gpucompute_queue_duration_seconds_count{op=\"periodogram\"}", 3},
      {"gpucompute_compute_duration_seconds_count{op=\"periodogram\"}", 3},
      {"gpucompute_batch_size_sum{op=\"periodogram\"}", 3},
      {"gpucompute_request_success_total{op=\"dense\"}", 0},
  };
  for (const auto& [series, expected] : expected_deltas) {
    EXPECT_EQ(delta(series), expected) << series << " in\n" << after.text;
  }
  EXPECT_GT(delta("gpucompute_request_duration_seconds_sum{op=\"periodogram\"}"), 0);
  EXPECT_GE(delta("gpucompute_batch_size_count{op=\"periodogram\"}"), 1);
  EXPECT_EQ(after.Get("gpucompute_pending_requests{op=\"periodogram\"}"), 0);
  EXPECT_EQ(after.Get("gpucompute_models_loaded"), 0);
  EXPECT_EQ(after.Get("gpucompute_model_bytes"), 0);

  // Histograms: buckets cumulative, non-decreasing, ending in +Inf == _count.
  for (const std::string family : {"gpucompute_request_duration_seconds", "gpucompute_queue_duration_seconds",
                                   "gpucompute_compute_duration_seconds", "gpucompute_batch_size"}) {
    const std::string labels = "op=\"periodogram\"";
    // std::map orders le lexically, not numerically: collect (bound, count) and sort.
    std::vector<std::pair<double, double>> by_bound;
    for (const auto& [series, value] : after.samples) {
      const std::string prefix = family + "_bucket{" + labels + ",le=\"";
      if (!absl::StartsWith(series, prefix)) continue;
      const std::string le = series.substr(prefix.size(), series.size() - prefix.size() - 2);
      double bound = INFINITY;
      if (le != "+Inf") ASSERT_TRUE(absl::SimpleAtod(le, &bound)) << series;
      by_bound.emplace_back(bound, value);
    }
    EXPECT_GT(by_bound.size(), 1u) << family;
    std::sort(by_bound.begin(), by_bound.end());
    double previous = 0;
    for (const auto& [bound, count] : by_bound) {
      EXPECT_GE(count, previous) << family << " le=" << bound;
      previous = count;
    }
    ASSERT_FALSE(by_bound.empty());
    EXPECT_TRUE(std::isinf(by_bound.back().first));
    EXPECT_EQ(by_bound.back().second, after.Get(family + "_count{" + labels + "}")) << family;
  }
}

// A call its client cancels is counted CANCELLED, not DEADLINE_EXCEEDED (the batch it was in,
// left by every caller, ends DEADLINE_EXCEEDED on the server).
// --metrics_model_names: the operator who keeps /metrics in-cluster gets a series per model.
class MetricsServerWithModelNames : public MetricsServer {
 protected:
  void SetUp() override { Start(/*model_names=*/true); }
};

TEST_F(MetricsServerWithModelNames, ModelBytesAreLabelledByName) {
  ASSERT_TRUE(LoadTinyModel("tiny").ok());
  EXPECT_GE(DoScrape().Get("gpucompute_model_bytes{model=\"tiny\"}"), 32);
  ASSERT_TRUE(Unload("tiny").ok());
  EXPECT_FALSE(DoScrape().Has("gpucompute_model_bytes{model=\"tiny\"}"));
}

TEST_F(MetricsServer, CancelledCallsAreCountedCancelled) {
  std::mt19937_64 rng(11);
  // Seconds of work: 8e9 pairs on the CPU, 64 times that on a GPU (an H100 took ~50 ms for
  // 2,000 samples).
  const int samples = test::TestBackend() == "cuda" ? 128'000 : 2000;
  auto s = periodogram::testing::RandomSeries(rng, samples, 1.5, false);
  v1::PeriodogramRequest req;
  auto* series = req.add_series();
  *series->mutable_t() = Vec(s.t);
  *series->mutable_y() = Vec(s.y);
  auto* grid = req.mutable_frequency()->mutable_uniform();
  grid->set_f0(0.01);
  grid->set_df(1e-6);
  grid->set_n(4'000'000);
  req.set_method(v1::PERIODOGRAM_METHOD_DIRECT);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::thread canceller([&] {  // once the call is running (its queue time observed)
    const std::string dispatched = R"(gpucompute_queue_duration_seconds_count{op="periodogram"})";
    for (int i = 0; i < 3000 && DoScrape().Get(dispatched) < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ctx.TryCancel();
  });
  v1::PeriodogramResponse resp;
  const grpc::Status status = stub_->Periodogram(&ctx, req, &resp);
  canceller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  const std::string cancelled = R"(gpucompute_request_failure_total{op="periodogram",code="CANCELLED"})";
  Scrape after;
  for (int i = 0; i < 200 && !after.Has(cancelled); ++i) {  // the server ends it shortly after
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = DoScrape();
  }
  EXPECT_EQ(after.Get(cancelled), 1) << after.text;
  EXPECT_FALSE(after.Has(R"(gpucompute_request_failure_total{op="periodogram",code="DEADLINE_EXCEEDED"})"))
      << after.text;
}

// Clients that send their request a byte at a time (slowloris) hold only their own
// connections: scrapes are answered meanwhile.
TEST_F(MetricsServer, SlowClientsDoNotStallScrapes) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> slow;
  for (int i = 0; i < 6; ++i) {
    slow.emplace_back([&] {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(loopback_.server->metrics_port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
        const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
        for (size_t k = 0; k < request.size() && !stop.load(); ++k) {
          (void)send(fd, &request[k], 1, MSG_NOSIGNAL);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
      }
      close(fd);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // every slow client connected
  for (int i = 0; i < 5; ++i) {
    const absl::Time start = absl::Now();
    const Scrape s = DoScrape();
    EXPECT_TRUE(s.Has("gpucompute_build_info") || !s.samples.empty()) << "scrape " << i;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "scrape " << i << " waited for the slow clients";
  }
  stop.store(true);
  for (auto& t : slow) t.join();
}

TEST_F(MetricsServer, ATakenPortIsAnErrorAndShutdownClosesTheEndpoint) {
  ServerConfig c = testing::LoopbackConfig();
  c.metrics_port = loopback_.server->metrics_port();
  auto second = Server::Start(c);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();

  const int port = loopback_.server->metrics_port();
  loopback_.server->Shutdown(absl::Seconds(1));
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(2, 0);
  EXPECT_FALSE(http.Get("/metrics")) << "the endpoint still answers after Shutdown";
}

TEST(MetricsServerOff, NoEndpointWithoutAPortButTheRegistryRecords) {
  if (testing::TestBackend() == "cuda" && !CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  testing::LoopbackServer loopback;
  loopback.Start(testing::LoopbackConfig());  // metrics_port -1
  ASSERT_NE(loopback.server, nullptr);
  EXPECT_EQ(loopback.server->metrics_port(), 0);
  v1::EchoRequest req;
  *req.mutable_tensor() = Vec({1});
  v1::EchoResponse resp;
  ASSERT_TRUE(
      WithDeadline([&](grpc::ClientContext* ctx) { return loopback.stub->Echo(ctx, req, &resp); })
          .ok());
  EXPECT_THAT(loopback.server->metrics_registry().Expose(),
              HasSubstr("gpucompute_request_success_total{op=\"echo\"} 1\n"));
}

}  // namespace
}  // namespace gpucompute
