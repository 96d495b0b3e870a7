// What the device layer reports about itself: each GPU's description and memory, and the
// kernel cache's counters. Plain data (no CUDA types), so that the backends, the metrics and
// ServerInfo read them in CPU builds too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpucompute {

struct DeviceDescription {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int64_t total_memory_bytes = 0;
  int multiprocessors = 0;
  int streams = 0;
  bool healthy = true;
  std::string health_message;  // why the device is unhealthy; empty while healthy
  int64_t batches = 0;         // batches run to completion here since start
};

// One device's memory at the time of asking (for the metrics endpoint).
struct DeviceMemoryUsage {
  int index = 0;
  int64_t used_bytes = 0;           // total - free (cudaMemGetInfo): every process's, ours included
  int64_t total_bytes = 0;
  int64_t pool_reserved_bytes = 0;  // held by our stream-ordered pool (counted in used_bytes)
  int64_t pool_used_bytes = 0;      // of the reserved bytes, those allocated to work in flight
};

struct KernelCacheStats {
  int64_t entries = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t disk_hits = 0;
  double compile_ms_total = 0;
  std::vector<std::string> kernels;
  std::string directory;
};

}  // namespace gpucompute
