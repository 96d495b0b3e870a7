// Metrics the runtime already keeps, computed at each scrape: device memory (per GPU), the
// kernel cache's hits, misses and compile time, resident dense models, and build info.
#pragma once

#include "server/metrics/metrics.h"
#include "server/runtime/backend.h"
#include "server/runtime/model_registry.h"

namespace gpucompute {

// Registers the families in `registry`. `backend` and `models` are borrowed: they must
// outlive every scrape of the registry (stop the metrics endpoint first). Model names appear
// (as gpucompute_model_bytes's `model` label) only with `model_names`; else that family is one
// total over the models.
void RegisterRuntimeMetrics(metrics::Registry* registry, const Backend* backend,
                            const ModelRegistry* models, bool model_names);

}  // namespace gpucompute
