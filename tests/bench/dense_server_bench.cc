// Dense inference through the server on loopback: many concurrent one-row requests on one
// model, with dynamic batching on and off, in the same run. Closed loop: each caller sends its
// next request when the previous one returns. JSON lines out.
// The transport's ceiling (Echo of the same input row, same client) is measured first.
//   dense_server_bench [--backend=cuda] [--seconds=3] [--concurrency=256] [--in=1024]
//                      [--out=4096] [--layers=1] [--dtype=bfloat16] [--channels=16]
//                      [--client=callback|sync] [--no-echo]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "common/element_type.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "tests/bench/bench_flags.h"

namespace gpucompute {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string backend = "cuda";
  double seconds = 3;
  int concurrency = 256;
  int64_t in = 1024;
  int64_t out = 4096;
  int layers = 1;
  std::string dtype = "bfloat16";
  int channels = 16;
  std::string client = "callback";  // or "sync": a thread per caller
  bool echo = true;                  // measure the Echo ceiling first
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto [key, value] = bench::SplitFlag(a);
    if (key == "--backend") o.backend = value;
    else if (key == "--seconds") (void)absl::SimpleAtod(value, &o.seconds);
    else if (key == "--concurrency") (void)absl::SimpleAtoi(value, &o.concurrency);
    else if (key == "--in") (void)absl::SimpleAtoi(value, &o.in);
    else if (key == "--out") (void)absl::SimpleAtoi(value, &o.out);
    else if (key == "--layers") (void)absl::SimpleAtoi(value, &o.layers);
    else if (key == "--dtype") o.dtype = value;
    else if (key == "--channels") (void)absl::SimpleAtoi(value, &o.channels);
    else if (key == "--client" && (value == "callback" || value == "sync")) o.client = value;
    else if (key == "--no-echo") o.echo = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

v1::DType WireDType(const std::string& name) {
  if (name == "float32") return v1::FLOAT32;
  if (name == "float16") return v1::FLOAT16;
  return v1::BFLOAT16;
}

// Loads a random model: layers alternate in -> out -> in ..., LayerNorm + GELU(tanh).
void LoadModel(v1::Compute::Stub& stub, const Options& o) {
  std::mt19937_64 rng(1);
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  auto writer = stub.LoadModel(&ctx, &info);
  v1::LoadModelChunk header;
  header.mutable_header()->set_name("bench");
  header.mutable_header()->set_dtype(WireDType(o.dtype));
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int l = 0; l < o.layers; ++l) shapes.emplace_back(l % 2 ? o.out : o.in, l % 2 ? o.in : o.out);
  for (const auto& [in, out] : shapes) {
    v1::LayerHeader* lh = header.mutable_header()->add_layers();
    lh->mutable_weight()->set_dtype(v1::FLOAT32);
    lh->mutable_weight()->add_shape(in);
    lh->mutable_weight()->add_shape(out);
    lh->mutable_layernorm();
    lh->set_activation(v1::ACTIVATION_GELU_TANH);
  }
  writer->Write(header);
  for (size_t l = 0; l < shapes.size(); ++l) {
    const auto [in, out] = shapes[l];
    // Uniform with the variance of N(0, 1/in), from a cheap generator (GiB-sized models).
    std::vector<float> w(in * out);
    const float scale = std::sqrt(3.f / static_cast<float>(in));
    uint64_t state = rng();
    for (float& v : w) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = scale * (static_cast<float>(state >> 40) * (2.f / 16777216.f) - 1.f);
    }
    const std::string bytes(reinterpret_cast<const char*>(w.data()), w.size() * 4);
    constexpr size_t kChunk = 4 << 20;
    for (size_t off = 0; off < bytes.size(); off += kChunk) {
      v1::LoadModelChunk c;
      c.mutable_chunk()->set_layer(static_cast<int>(l));
      c.mutable_chunk()->set_offset(static_cast<int64_t>(off));
      c.mutable_chunk()->set_data(bytes.substr(off, kChunk));
      writer->Write(c);
    }
  }
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  if (!s.ok()) {
    std::fprintf(stderr, "LoadModel: %s\n", s.error_message().c_str());
    std::exit(1);
  }
}

// What one closed-loop load measured.
struct LoadResult {
  double requests_per_s = 0;
  std::vector<double> latencies_us;  // sorted
  int64_t errors = 0;
  double Percentile(double p) const {
    return latencies_us.empty() ? 0.0
                                : latencies_us[std::min(latencies_us.size() - 1,
                                                        static_cast<size_t>(p * latencies_us.size()))];
  }
};

// The result of a window of `elapsed` seconds from each caller's latencies.
LoadResult Summarize(const std::vector<std::vector<double>>& latencies, int64_t errors, double elapsed) {
  LoadResult r;
  for (const auto& l : latencies) r.latencies_us.insert(r.latencies_us.end(), l.begin(), l.end());
  std::sort(r.latencies_us.begin(), r.latencies_us.end());
  r.requests_per_s = r.latencies_us.size() / elapsed;
  r.errors = errors;
  return r;
}

// Warm-up for 0.5 s (excluded), then `o.seconds` with `measuring` set; `before`/`after` run at
// the edges of the measured window. Returns its length in seconds.
double MeasuredWindow(const Options& o, std::atomic<bool>& measuring, const std::function<void()>& before,
                      const std::function<void()>& after) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  before();
  measuring = true;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  after();
  return elapsed;
}

// Starts one call: `start(ctx, done)` issues an asynchronous call that runs `done(status)` when
// it ends (the gRPC callback API).
using StartCall = std::function<void(grpc::ClientContext*, std::function<void(grpc::Status)>)>;

// `concurrency` closed-loop callers, each sending its next call when the previous one
// returns, over MeasuredWindow. A few gRPC threads carry all callers, each starting its next call from
// the previous one's completion (--client=sync instead blocks a thread per caller).
LoadResult CallbackLoad(const Options& o, const StartCall& start, const std::function<void()>& before,
                        const std::function<void()>& after) {
  struct Caller {
    std::unique_ptr<grpc::ClientContext> ctx;
    Clock::time_point t0;
    std::vector<double> latencies;
    int64_t errors = 0;
  };
  std::vector<Caller> callers(o.concurrency);
  std::atomic<bool> measuring{false}, stop{false};
  absl::Mutex mu;
  int running = 0;
  std::function<void(Caller&)> issue = [&](Caller& c) {
    c.ctx = std::make_unique<grpc::ClientContext>();
    c.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    c.t0 = Clock::now();
    start(c.ctx.get(), [&, cp = &c](grpc::Status s) {
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - cp->t0).count();
      if (measuring.load()) {
        if (s.ok()) cp->latencies.push_back(us);
        else ++cp->errors;
      }
      if (!stop.load()) {
        issue(*cp);
        return;
      }
      absl::MutexLock lock(&mu);
      --running;
    });
  };
  {
    absl::MutexLock lock(&mu);
    running = o.concurrency;
  }
  for (Caller& c : callers) issue(c);
  const double elapsed = MeasuredWindow(o, measuring, before, after);
  stop = true;
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &running));
  }
  std::vector<std::vector<double>> latencies;
  int64_t errors = 0;
  for (Caller& c : callers) {
    latencies.push_back(std::move(c.latencies));
    errors += c.errors;
  }
  return Summarize(latencies, errors, elapsed);
}

// The same load from one thread per caller, each blocking on its call.
LoadResult SyncLoad(const Options& o, const StartCall& start, const std::function<void()>& before,
                    const std::function<void()>& after) {
  std::atomic<bool> measuring{false}, stop{false};
  std::vector<std::vector<double>> latencies(o.concurrency);
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < o.concurrency; ++i) {
    threads.emplace_back([&, i] {
      while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        absl::Notification done;
        grpc::Status status;
        const auto t0 = Clock::now();
        start(&ctx, [&](grpc::Status s) {
          status = std::move(s);
          done.Notify();
        });
        done.WaitForNotification();
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (!measuring.load()) continue;
        if (!status.ok()) errors.fetch_add(1);
        else latencies[i].push_back(us);
      }
    });
  }
  const double elapsed = MeasuredWindow(o, measuring, before, after);
  stop = true;
  for (auto& th : threads) th.join();
  return Summarize(latencies, errors.load(), elapsed);
}

LoadResult Load(const Options& o, const StartCall& start, const std::function<void()>& before = [] {},
                const std::function<void()>& after = [] {}) {
  return o.client == "sync" ? SyncLoad(o, start, before, after) : CallbackLoad(o, start, before, after);
}

// Starts a server (batching on or off) with `o.channels` client channels to it.
struct Fixture {
  std::unique_ptr<Server> server;
  std::vector<std::unique_ptr<v1::Compute::Stub>> stubs;
};

Fixture Start(const Options& o, bool batching) {
  ServerConfig c;
  c.address = "127.0.0.1:0";
  c.backend.kind = o.backend;
  c.backend.kernel_cache_dir = "/tmp/gpucompute-bench-kernels";
  c.completion_threads = 4;
  if (!batching) c.dense_scheduler.max_batch_size = 1;
  auto server = Server::Start(c);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    std::exit(1);
  }
  Fixture f{std::move(*server), {}};
  const std::string target = absl::StrCat("127.0.0.1:", f.server->port());
  for (int i = 0; i < o.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i);  // distinct channels, distinct connections
    f.stubs.push_back(v1::Compute::NewStub(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  return f;
}

// Starts each call on the fixture's next channel in turn with a response of its own, kept until
// the call ends: `issue(async_stub, ctx, response, done)` makes the call.
template <typename Response, typename Issue>
StartCall OverChannels(Fixture& f, Issue issue) {
  auto next = std::make_shared<std::atomic<uint64_t>>(0);
  return [&f, next, issue](grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
    auto response = std::make_shared<Response>();
    v1::Compute::Stub& stub = *f.stubs[next->fetch_add(1) % f.stubs.size()];
    issue(stub.async(), ctx, response.get(),
          [response, done = std::move(done)](grpc::Status s) { done(std::move(s)); });
  };
}

// A random input row of `o.in` float32 values (converted on the GPU).
v1::Tensor InputRow(const Options& o) {
  v1::Tensor t;
  t.set_dtype(v1::FLOAT32);
  t.add_shape(1);
  t.add_shape(o.in);
  std::vector<float> x(o.in);
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0, 1);
  for (float& v : x) v = g(rng);
  t.set_data(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  return t;
}

void MeasureDense(const Options& o, bool batching) {
  Fixture f = Start(o, batching);
  LoadModel(*f.stubs[0], o);
  v1::DenseRequest request;
  request.set_model("bench");
  *request.mutable_input() = InputRow(o);

  const StartCall start =
      OverChannels<v1::DenseResponse>(f, [&](auto* async, auto* ctx, auto* response, auto done) {
        async->Dense(ctx, &request, response, std::move(done));
      });
  v1::ServerInfoResponse info_before, info_after;
  auto info = [&](v1::ServerInfoResponse* out) {
    grpc::ClientContext ctx;
    f.stubs[0]->ServerInfo(&ctx, {}, out);
  };
  const LoadResult r = Load(o, start, [&] { info(&info_before); }, [&] { info(&info_after); });
  const int64_t requests = info_after.dense_batching().requests() - info_before.dense_batching().requests();
  const int64_t batches = info_after.dense_batching().batches() - info_before.dense_batching().batches();
  std::printf("%s\n", absl::StrFormat(
      R"({"what":"dense server one-row throughput","backend":"%s","client":"%s","batching":%s,"concurrency":%d,"in":%d,"out":%d,"layers":%d,"dtype":"%s","requests_per_s":%.0f,"p50_us":%.0f,"p99_us":%.0f,"mean_batch":%.1f,"largest_batch":%d,"errors":%d})",
      f.server->backend_name(), o.client, batching ? "true" : "false", o.concurrency, o.in, o.out, o.layers, o.dtype,
      r.requests_per_s, r.Percentile(0.5), r.Percentile(0.99), batches ? double(requests) / batches : 0.0,
      info_after.dense_batching().largest_batch(), r.errors).c_str());
  std::fflush(stdout);
  f.server->Shutdown();
}

// The transport's ceiling for the same calls: Echo with the same input row, the same client
// and concurrency, returning nothing (a Dense reply also carries the output row: 8 KiB for
// 4096 bf16 outputs, so the ceiling is slightly generous).
void MeasureEcho(const Options& o) {
  Fixture f = Start(o, true);
  v1::EchoRequest request;
  *request.mutable_tensor() = InputRow(o);
  request.set_discard(true);
  const StartCall start =
      OverChannels<v1::EchoResponse>(f, [&](auto* async, auto* ctx, auto* response, auto done) {
        async->Echo(ctx, &request, response, std::move(done));
      });
  const LoadResult r = Load(o, start);
  std::printf("%s\n", absl::StrFormat(
      R"({"what":"echo one-row ceiling","client":"%s","concurrency":%d,"in":%d,"requests_per_s":%.0f,"p50_us":%.0f,"p99_us":%.0f,"errors":%d})",
      o.client, o.concurrency, o.in, r.requests_per_s, r.Percentile(0.5), r.Percentile(0.99), r.errors).c_str());
  std::fflush(stdout);
  f.server->Shutdown();
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) {
  const gpucompute::Options o = gpucompute::Parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);  // stdout carries the JSON lines
  if (o.echo) gpucompute::MeasureEcho(o);
  gpucompute::MeasureDense(o, /*batching=*/false);
  gpucompute::MeasureDense(o, /*batching=*/true);
  return 0;
}
