// The seed's EnKF problem end to end through the server on loopback: one stochastic analysis
// with n = m = N (3000 by default) and client-supplied perturbations, sent with the C++ client
// and default channel settings (float64, then float32 end to end), the time split into the server's compute (copies to and from
// the device included, x-gpucompute-compute-us), its queue and the rest of the call: the
// wire and (de)serialisation of the ~216 MB request and the 72 MB response. Median of
// --reps calls after one warm-up. JSON lines out.
//   assimilate_server_bench [--backend=cuda] [--n=3000] [--reps=5]
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/cpp/assimilation_request.h"
#include "client/cpp/client.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "tests/bench/bench_flags.h"

namespace gpucompute {
namespace {

struct Options {
  std::string backend = "cuda";
  int64_t n = 3000;
  int reps = 5;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto [key, value] = bench::SplitFlag(a);
    if (key == "--backend") o.backend = value;
    else if (key == "--n") (void)absl::SimpleAtoi(value, &o.n);
    else if (key == "--reps") (void)absl::SimpleAtoi(value, &o.reps);
  }
  return o;
}

// A well-posed random problem: linear H (every state variable observed with noise), R diagonal.
client::AssimilationProblem SeedProblem(int64_t n) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g(0, 1);
  client::AssimilationProblem p;
  p.n = p.m = p.members = n;
  p.x.resize(static_cast<size_t>(n * n));
  for (double& v : p.x) v = g(rng);
  p.hx = p.x;
  for (double& v : p.hx) v += 0.1 * g(rng);
  p.y.resize(static_cast<size_t>(n));
  for (double& v : p.y) v = g(rng);
  p.obs_error.assign(static_cast<size_t>(n), 0.5);
  p.method = v1::ASSIMILATION_METHOD_ENKF;
  p.perturbations.resize(static_cast<size_t>(n * n));
  for (double& v : p.perturbations) v = std::sqrt(0.5) * g(rng);
  return p;
}

int Run(const Options& o) {
  ServerConfig c;
  c.address = "127.0.0.1:0";
  c.backend.kind = o.backend;
  c.backend.kernel_cache_dir = "/tmp/gpucompute-bench-kernels";
  auto server = Server::Start(c);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  auto cl = client::Client::Connect(absl::StrCat("127.0.0.1:", (*server)->port()));
  if (!cl.ok()) {
    std::fprintf(stderr, "%s\n", cl.status().ToString().c_str());
    return 1;
  }
  const client::AssimilationProblem p = SeedProblem(o.n);
  for (v1::DType wire : {v1::FLOAT64, v1::FLOAT32}) {
    auto problem = client::MakeAssimilationProblem(p, wire);
    if (!problem.ok()) {
      std::fprintf(stderr, "%s\n", problem.status().ToString().c_str());
      return 1;
    }
    v1::AssimilateRequest request;
    *request.add_problems() = *std::move(problem);
    request.set_dtype(wire);
    const size_t request_bytes = request.ByteSizeLong();
    std::vector<double> round_trip, compute, queue, server_total;
    size_t response_bytes = 0;
    for (int r = 0; r <= o.reps; ++r) {
      client::CallOptions options;
      options.timeout = absl::Seconds(120);
      auto result = (*cl)->Assimilate(request, options);
      if (!result.ok()) {
        std::fprintf(stderr, "Assimilate: %s\n", result.status().ToString().c_str());
        return 1;
      }
      if (r == 0) continue;  // warm-up: first use of this shape
      response_bytes = result->response.ByteSizeLong();
      round_trip.push_back(absl::ToDoubleMilliseconds(result->latency));
      compute.push_back(result->timings.compute_us.value_or(0) / 1e3);
      queue.push_back(result->timings.queue_us.value_or(0) / 1e3);
      server_total.push_back(result->timings.total_us.value_or(0) / 1e3);
    }
    const double rt = bench::Median(round_trip), comp = bench::Median(compute);
    std::printf("%s\n", absl::StrFormat(
        R"({"what":"assimilate server end to end","backend":"%s","n":%d,"m":%d,"N":%d,"method":"enkf","perturbations":"client","dtype":"%s","request_mb":%.1f,"response_mb":%.1f,"round_trip_ms":%.1f,"server_compute_ms":%.2f,"server_queue_ms":%.2f,"server_total_ms":%.1f,"transfer_ms":%.1f,"transfer_share":%.3f,"wire_gb_per_s":%.2f,"reps":%d})",
        (*server)->backend_name(), o.n, o.n, o.n, wire == v1::FLOAT64 ? "float64" : "float32",
        request_bytes / 1e6, response_bytes / 1e6, rt, comp, bench::Median(queue),
        bench::Median(server_total),
        rt - comp, (rt - comp) / rt, (request_bytes + response_bytes) / ((rt - comp) * 1e6), o.reps).c_str());
    std::fflush(stdout);
  }
  (*server)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // stdout carries the JSON lines
  return gpucompute::Run(gpucompute::Parse(argc, argv));
}
