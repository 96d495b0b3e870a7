// The standard process families every Prometheus client library exports
// (process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds), read from /proc at each
// scrape, so that the usual dashboards and alerts work on every backend.
#pragma once

#include "server/metrics/metrics.h"

namespace gpucompute::metrics {

// Registers the process families on `registry` (once).
void RegisterProcessMetrics(Registry* registry);

}  // namespace gpucompute::metrics
