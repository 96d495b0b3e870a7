// Dense inference through the server on loopback: many concurrent one-row requests on one
// model, with dynamic batching on and off, in the same run. Closed loop: each caller sends its
// next request when the previous one returns. JSON lines out.
//   dense_server_bench [--backend=cuda] [--seconds=3] [--concurrency=256] [--in=1024]
//                      [--out=4096] [--layers=1] [--dtype=bfloat16]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "server/common/element_type.h"
#include "server/service/server.h"
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

void Run(const Options& o, bool batching) {
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
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  std::vector<std::unique_ptr<v1::Compute::Stub>> stubs;
  for (int i = 0; i < o.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i);  // distinct channels, distinct connections
    stubs.push_back(v1::Compute::NewStub(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  LoadModel(*stubs[0], o);

  v1::DenseRequest request;
  request.set_model("bench");
  v1::Tensor* t = request.mutable_input();
  t->set_dtype(v1::FLOAT32);
  t->add_shape(1);
  t->add_shape(o.in);
  std::vector<float> x(o.in);
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0, 1);
  for (float& v : x) v = g(rng);
  t->set_data(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));

  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<int64_t> errors{0};
  std::vector<std::vector<double>> latencies(o.concurrency);
  std::vector<std::thread> callers;
  for (int i = 0; i < o.concurrency; ++i) {
    callers.emplace_back([&, i] {
      v1::Compute::Stub& stub = *stubs[i % stubs.size()];
      while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        v1::DenseResponse resp;
        const auto t0 = Clock::now();
        const grpc::Status s = stub.Dense(&ctx, request, &resp);
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (!measuring.load()) continue;
        if (!s.ok()) errors.fetch_add(1);
        else latencies[i].push_back(us);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // warm-up, excluded
  v1::ServerInfoResponse before;
  {
    grpc::ClientContext ctx;
    stubs[0]->ServerInfo(&ctx, {}, &before);
  }
  measuring = true;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  v1::ServerInfoResponse after;
  {
    grpc::ClientContext ctx;
    stubs[0]->ServerInfo(&ctx, {}, &after);
  }
  stop = true;
  for (auto& th : callers) th.join();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))]; };
  const int64_t requests = after.dense_batching().requests() - before.dense_batching().requests();
  const int64_t batches = after.dense_batching().batches() - before.dense_batching().batches();
  std::printf("%s\n", absl::StrFormat(
      R"({"what":"dense server one-row throughput","backend":"%s","batching":%s,"concurrency":%d,"in":%d,"out":%d,"layers":%d,"dtype":"%s","requests_per_s":%.0f,"p50_us":%.0f,"p99_us":%.0f,"mean_batch":%.1f,"largest_batch":%d,"errors":%d})",
      (*server)->backend_name(), batching ? "true" : "false", o.concurrency, o.in, o.out, o.layers, o.dtype,
      all.size() / elapsed, pct(0.5), pct(0.99), batches ? double(requests) / batches : 0.0,
      after.dense_batching().largest_batch(), errors.load()).c_str());
  std::fflush(stdout);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) {
  const gpucompute::Options o = gpucompute::Parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);  // stdout carries the JSON lines
  gpucompute::Run(o, /*batching=*/false);
  gpucompute::Run(o, /*batching=*/true);
  return 0;
}
