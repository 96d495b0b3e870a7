// The peak of each series from the per-block peaks the periodogram kernel wrote (nvcc-built).
#pragma once

#include <cuda_runtime.h>

#include "kernels/lombscargle_abi.cuh"

namespace gpucompute::kernels {

using gpucompute_kernels::LsPeak;

// For each series s in [0, n_series): combines partials[begins[s] .. ends[s]) into out[s]:
// the largest value, the smallest index among equals, NaN-only ranges (index -1) losing to any
// value. One block per series.
cudaError_t LaunchReducePeaks(const LsPeak* partials, const long long* begins,
                              const long long* ends, int n_series, LsPeak* out,
                              cudaStream_t stream);

}  // namespace gpucompute::kernels
