// Large tensors through the server on loopback, by every path: Echo inline (the wire), Echo
// from one shared-memory region into another (the same-node path; target >= 5 GB/s at
// 256 MiB), Echo from a resident tensor into shared memory, PutTensor over 1, 4, 8 and 16
// streams (each on its own connection), and GetTensor. GB/s is the tensor's bytes over the call's time (one direction's bytes, as
// "moves a 256 MiB tensor"); median and best of --reps calls after one warm-up. The backend
// does not matter (Echo and the tensor RPCs do not compute). JSON lines out.
//   tensor_transfer_bench [--sizes_mib=64,256] [--reps=5] [--only=PATH_SUBSTRING]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cpp/client.h"
#include "client/cpp/shared_memory_region.h"
#include "client/cpp/tensor_util.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "tests/bench/bench_flags.h"

namespace gpucompute {
namespace {

struct Options {
  std::vector<int64_t> sizes_mib = {64, 256};
  int reps = 5;
  std::string only;  // run the paths whose name holds this (empty: every path)
};

Options g_options;

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto [key, value] = bench::SplitFlag(a);
    if (key == "--reps") {
      (void)absl::SimpleAtoi(value, &o.reps);
    } else if (key == "--only") {
      o.only = std::string(value);
    } else if (key == "--sizes_mib") {
      o.sizes_mib.clear();
      for (absl::string_view s : absl::StrSplit(value, ',')) {
        int64_t v = 0;
        if (absl::SimpleAtoi(s, &v) && v > 0) o.sizes_mib.push_back(v);
      }
    }
  }
  return o;
}

// Runs `call` once to warm up and `reps` times; prints one JSON line.
void Measure(const char* path, int64_t bytes, int reps, const std::function<absl::Status()>& call) {
  if (!absl::StrContains(path, g_options.only)) return;
  if (absl::Status s = call(); !s.ok()) {
    std::printf("{\"path\":\"%s\",\"bytes\":%lld,\"error\":\"%s\"}\n", path,
                static_cast<long long>(bytes), std::string(s.message()).c_str());
    return;
  }
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    const absl::Time start = absl::Now();
    if (absl::Status s = call(); !s.ok()) {
      spdlog::error("{}: {}", path, s.ToString());
      return;
    }
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2], best = seconds.front();
  std::printf(
      "{\"path\":\"%s\",\"bytes\":%lld,\"reps\":%d,\"median_ms\":%.3f,\"best_ms\":%.3f,"
      "\"median_gbps\":%.3f,\"best_gbps\":%.3f}\n",
      path, static_cast<long long>(bytes), reps, median * 1e3, best * 1e3, bytes / median / 1e9,
      bytes / best / 1e9);
  std::fflush(stdout);
}

int Run(const Options& o) {
  spdlog::set_level(spdlog::level::warn);
  ServerConfig config;
  config.address = "127.0.0.1:0";
  config.backend.kind = "cpu";
  config.allow_shared_memory = true;
  config.limits.max_request_bytes = int64_t{2} << 30;
  config.limits.max_response_bytes = int64_t{2} << 30;
  config.tensors.max_bytes_per_client = int64_t{64} << 30;
  auto server = Server::Start(config);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  client::ClientOptions options;
  options.default_timeout = absl::Minutes(5);
  options.max_send_message_bytes = INT32_MAX;
  options.max_receive_message_bytes = INT32_MAX;
  options.transfer_threshold_bytes = 0;  // each path as named: "inline" means one message
  auto c = client::Client::Connect(absl::StrFormat("127.0.0.1:%d", (*server)->port()), options);
  if (!c.ok()) return 1;
  client::Client& client = **c;

  for (const int64_t mib : o.sizes_mib) {
    const int64_t bytes = mib << 20;
    auto region = client::SharedMemoryRegion::Create(2 * bytes + 4096);
    if (!region.ok()) {
      spdlog::critical("{}", region.status().ToString());
      return 1;
    }
    // Registered first: registration writes its proof at the start of the region.
    if (absl::Status s = client.RegisterSharedMemory("bench", region->key(), 0, region->size());
        !s.ok()) {
      spdlog::critical("{}", s.ToString());
      return 1;
    }
    for (int64_t i = 0; i < bytes; i += 4096) region->data()[i] = static_cast<char>(i >> 12);
    const std::vector<int64_t> shape = {bytes};
    std::string inline_bytes(region->data(), static_cast<size_t>(bytes));

    v1::EchoRequest inline_echo;
    inline_echo.mutable_tensor()->set_dtype(v1::UINT8);
    inline_echo.mutable_tensor()->add_shape(bytes);
    inline_echo.mutable_tensor()->set_data(inline_bytes);
    Measure("echo_inline", bytes, o.reps,
            [&] { return client.Echo(inline_echo).status(); });

    v1::EchoRequest shm_echo;
    *shm_echo.mutable_tensor() = *client::SharedMemoryTensor("bench", 0, v1::UINT8, shape);
    *shm_echo.mutable_output_placement() = client::SharedMemoryOutputs("bench", bytes + 64);
    Measure("echo_shm_to_shm", bytes, o.reps, [&] { return client.Echo(shm_echo).status(); });

    for (const int streams : {1, 4, 8, 16}) {
      const std::string path = absl::StrFormat("put_tensor_%d_streams", streams);
      Measure(path.c_str(), bytes, o.reps, [&]() -> absl::Status {
        auto put = client.PutTensor(v1::UINT8, shape, inline_bytes, {.streams = streams});
        if (!put.ok()) return put.status();
        return client.DeleteTensor(put->info.handle());
      });
    }

    auto resident = client.PutTensor(v1::UINT8, shape, inline_bytes);
    if (!resident.ok()) return 1;
    for (const int streams : {1, 4, 8, 16}) {
      const std::string path = absl::StrFormat("get_tensor_%d_streams", streams);
      Measure(path.c_str(), bytes, o.reps, [&] {
        return client.GetTensor(resident->info.handle(), {.streams = streams}).status();
      });
    }
    v1::EchoRequest handle_echo;
    *handle_echo.mutable_tensor() = client::HandleTensor(resident->info.handle());
    *handle_echo.mutable_output_placement() = client::SharedMemoryOutputs("bench", bytes + 64);
    Measure("echo_handle_to_shm", bytes, o.reps, [&] { return client.Echo(handle_echo).status(); });
    (void)client.DeleteTensor(resident->info.handle());
    (void)client.UnregisterSharedMemory("bench");
  }
  c->reset();
  (*server)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) {
  gpucompute::g_options = gpucompute::Parse(argc, argv);
  return gpucompute::Run(gpucompute::g_options);
}
