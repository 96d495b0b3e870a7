// Scrape-time runtime metrics (see runtime_metrics.h).
#include "server/runtime/runtime_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace gpucompute {
namespace {

using metrics::MetricType;
using metrics::Sample;

// One sample per device of the field `field` of DeviceMemoryUsage, labelled gpu="<index>".
metrics::CollectFn PerDevice(const Backend* backend, int64_t DeviceMemoryUsage::*field) {
  return [backend, field] {
    std::vector<Sample> out;
    for (const DeviceMemoryUsage& u : backend->MemoryUsage()) {
      out.push_back({{absl::StrCat(u.index)}, static_cast<double>(u.*field)});
    }
    return out;
  };
}

// The one unlabelled sample of `value(KernelStats())`.
template <typename F>
metrics::CollectFn FromKernelStats(const Backend* backend, F value) {
  return [backend, value] {
    return std::vector<Sample>{{{}, static_cast<double>(value(backend->KernelStats()))}};
  };
}

}  // namespace

void RegisterRuntimeMetrics(metrics::Registry* registry, const Backend* backend,
                            const ModelRegistry* models, bool model_names) {
  metrics::Registry& r = *registry;
  const std::string backend_name = backend->name();
  r.AddCallback(MetricType::kGauge, "gpucompute_build_info",
                "Always 1: the server's version and backend as labels.", {"version", "backend"},
                [backend_name] { return std::vector<Sample>{{{GPUCOMPUTE_VERSION, backend_name}, 1}}; });

  // Device memory: none on the CPU backend (the families are there, empty).
  r.AddCallback(MetricType::kGauge, "gpucompute_gpu_memory_used_bytes",
                "Device memory in use (total - free, every process), by GPU index.", {"gpu"},
                PerDevice(backend, &DeviceMemoryUsage::used_bytes));
  r.AddCallback(MetricType::kGauge, "gpucompute_gpu_memory_total_bytes",
                "Device memory in total, by GPU index.", {"gpu"},
                PerDevice(backend, &DeviceMemoryUsage::total_bytes));
  r.AddCallback(MetricType::kGauge, "gpucompute_gpu_memory_pool_reserved_bytes",
                "Device memory our stream-ordered pool holds (part of used), by GPU index.", {"gpu"},
                PerDevice(backend, &DeviceMemoryUsage::pool_reserved_bytes));
  r.AddCallback(MetricType::kGauge, "gpucompute_gpu_memory_pool_used_bytes",
                "Of the pool's reserved memory, the part allocated to work in flight, by GPU index.",
                {"gpu"}, PerDevice(backend, &DeviceMemoryUsage::pool_used_bytes));

  r.AddCallback(MetricType::kGauge, "gpucompute_gpu_healthy",
                "1 while the GPU serves, 0 after a sticky device fault (restart needed), by GPU index.",
                {"gpu"}, [backend] {
                  std::vector<Sample> out;
                  for (const DeviceDescription& d : backend->Devices()) {
                    out.push_back({{absl::StrCat(d.index)}, d.healthy ? 1.0 : 0.0});
                  }
                  return out;
                });

  r.AddCallback(MetricType::kCounter, "gpucompute_gpu_batches_total",
                "Batches (of any operation) run to completion, by GPU index: how the work is "
                "spread over the GPUs.", {"gpu"}, [backend] {
                  std::vector<Sample> out;
                  for (const DeviceDescription& d : backend->Devices()) {
                    out.push_back({{absl::StrCat(d.index)}, static_cast<double>(d.batches)});
                  }
                  return out;
                });

  // Kernel cache (NVRTC): zero on the CPU backend.
  r.AddCallback(MetricType::kCounter, "gpucompute_kernel_cache_hits_total",
                "Kernel lookups served by a compiled kernel in memory.", {},
                FromKernelStats(backend, [](const KernelCacheStats& k) { return k.hits; }));
  r.AddCallback(MetricType::kCounter, "gpucompute_kernel_cache_misses_total",
                "Kernel lookups that found no compiled kernel in memory (compiled or read from disk).",
                {}, FromKernelStats(backend, [](const KernelCacheStats& k) { return k.misses; }));
  r.AddCallback(MetricType::kCounter, "gpucompute_kernel_cache_disk_hits_total",
                "Misses served from the on-disk kernel cache instead of a compile.", {},
                FromKernelStats(backend, [](const KernelCacheStats& k) { return k.disk_hits; }));
  r.AddCallback(MetricType::kCounter, "gpucompute_kernel_compile_seconds_total",
                "Time spent compiling kernels (NVRTC), in seconds.", {},
                FromKernelStats(backend, [](const KernelCacheStats& k) { return k.compile_ms_total / 1000; }));
  r.AddCallback(MetricType::kGauge, "gpucompute_kernel_cache_entries",
                "Compiled kernels held in memory.", {},
                FromKernelStats(backend, [](const KernelCacheStats& k) { return k.entries; }));

  // Resident dense models.
  r.AddCallback(MetricType::kGauge, "gpucompute_models_loaded", "Dense models resident now.", {},
                [models] {
                  return std::vector<Sample>{{{}, static_cast<double>(models->List().size())}};
                });
  if (model_names) {
    r.AddCallback(MetricType::kGauge, "gpucompute_model_bytes",
                  "Bytes a resident dense model holds on each device (host memory on the CPU backend), by model name.", {"model"},
                  [models] {
                    std::vector<Sample> out;
                    for (const dense::ModelInfo& m : models->List()) {
                      out.push_back({{m.name}, static_cast<double>(m.device_bytes)});
                    }
                    return out;
                  });
  } else {
    r.AddCallback(MetricType::kGauge, "gpucompute_model_bytes",
                  "Bytes the resident dense models hold on each device (host memory on the CPU backend), all models together (--metrics_model_names: by model).", {},
                  [models] {
                    double bytes = 0;
                    for (const dense::ModelInfo& m : models->List()) bytes += static_cast<double>(m.device_bytes);
                    return std::vector<Sample>{{{}, bytes}};
                  });
  }
}

}  // namespace gpucompute
