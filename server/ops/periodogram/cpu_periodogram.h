// CPU reference of the periodogram: float64 arithmetic for both output dtypes. It is the
// oracle the CUDA backend is tested against, and the backend of GPU-less servers.
#pragma once

#include <cstdint>

#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {

// How many frequencies one call of ComputePowerCpu may take: `direct_chunk` for the direct
// method, the whole grid for the fast one (its FFTs cover every frequency at once).
int64_t CpuTaskFrequencies(const SeriesSpec& series, int64_t direct_chunk);

// Computes power[k] for k in [k_begin, k_end) of `series`' grid into `out` (elements of
// `dtype`, indexed from 0 = frequency k_begin). `prepared` is Prepare(series).
void ComputePowerCpu(const SeriesSpec& series, const PreparedSeries& prepared, ElementType dtype,
                     int64_t k_begin, int64_t k_end, void* out);

// The whole series: power bytes and peak.
SeriesPower ComputeSeriesCpu(const SeriesSpec& series, ElementType dtype);

}  // namespace gpucompute::periodogram
