// `gpucompute info`: the server's ServerInfo, readable or as JSON.
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"

namespace gpucompute::cli {
namespace {

void PrintReadable(const std::string& target, const v1::ServerInfoResponse& info) {
  std::printf("server        %s\n", target.c_str());
  std::printf("version       %s\n", info.version().c_str());
  std::printf("backend       %s%s\n", info.backend().c_str(),
              info.nvrtc_version().empty() ? ""
                                           : absl::StrCat(" (NVRTC ", info.nvrtc_version(), ")").c_str());
  std::printf("devices       %d\n", info.devices_size());
  for (const v1::DeviceInfo& d : info.devices()) {
    std::printf("  [%d] %s, sm_%d%d, %s, %d SMs, %d streams\n", d.index(), d.name().c_str(),
                d.compute_capability_major(), d.compute_capability_minor(),
                FormatBytes(d.total_memory_bytes()).c_str(), d.multiprocessors(), d.streams());
  }
  const v1::Limits& l = info.limits();
  std::printf("limits        request %s, %lld series/request, %lld samples/series,\n",
              FormatBytes(l.max_request_bytes()).c_str(), static_cast<long long>(l.max_series_per_request()),
              static_cast<long long>(l.max_samples_per_series()));
  std::printf("              %lld frequencies/series, %lld sample x frequency pairs/request\n",
              static_cast<long long>(l.max_frequencies_per_series()),
              static_cast<long long>(l.max_pairs_per_request()));
  std::printf("batching      up to %d requests per launch, %lld us max queue delay, queue depth %d\n",
              l.max_batch_size(), static_cast<long long>(l.max_queue_delay_us()),
              l.max_queue_depth());
  const v1::KernelCacheInfo& k = info.kernel_cache();
  std::printf("kernel cache  %lld entries, %lld hits, %lld misses, %lld from disk, %.1f ms compiling\n",
              static_cast<long long>(k.entries()), static_cast<long long>(k.hits()),
              static_cast<long long>(k.misses()), static_cast<long long>(k.disk_hits()),
              k.compile_ms_total());
  if (!k.directory().empty()) std::printf("  directory   %s\n", k.directory().c_str());
  for (const std::string& name : k.kernels()) std::printf("  - %s\n", name.c_str());
  auto print_batching = [](const char* label, const v1::BatchingStats& b) {
    std::printf("%-13s %lld requests in %lld batches (largest %lld), %lld rejected (queue "
                "full), %lld expired before dispatch, %lld queued now\n",
                label, static_cast<long long>(b.requests()), static_cast<long long>(b.batches()),
                static_cast<long long>(b.largest_batch()),
                static_cast<long long>(b.rejected_queue_full()),
                static_cast<long long>(b.expired_before_dispatch()),
                static_cast<long long>(b.queued()));
  };
  print_batching("periodogram", info.periodogram_batching());
  print_batching("dense", info.dense_batching());
  const v1::DenseLimits& dl = info.dense_limits();
  std::printf("dense limits  %d models of %s each, %d layers, %lld rows/request; batches of up to "
              "%d requests, %lld rows\n",
              dl.max_models(), FormatBytes(dl.max_model_bytes()).c_str(), dl.max_layers(),
              static_cast<long long>(dl.max_rows_per_request()), dl.max_batch_size(),
              static_cast<long long>(dl.max_batch_rows()));
}

}  // namespace

int RunInfo(const GlobalOptions& global, const InfoOptions& options) {
  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectFromFlags(global);
  if (!client.ok()) return Fail(global.target, client.status());
  absl::StatusOr<client::ServerInfoResult> result = (*client)->ServerInfo();
  if (!result.ok()) return Fail("ServerInfo", result.status());
  if (options.json) return PrintJson(result->info, "ServerInfo");
  PrintReadable(global.target, result->info);
  return 0;
}

}  // namespace gpucompute::cli
