// Per-segment argmax on the device (nvcc-built): the peak of each series' power.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gpucompute::kernels {

struct SegmentPeak {
  long long index;  // within the segment; -1 when every value is NaN
  double value;
};

// For each segment s in [0, n_segments): the largest non-NaN value of
// values[offsets[s] .. offsets[s+1]) and its first index. One block per segment.
template <typename T>
cudaError_t LaunchSegmentArgmax(const T* values, const long long* offsets, int n_segments,
                                SegmentPeak* out, cudaStream_t stream);

}  // namespace gpucompute::kernels
