// Per-segment argmax (see peak_reduce.cuh).
#include "kernels/peak_reduce.cuh"

#include <cfloat>

namespace gpucompute::kernels {
namespace {

constexpr int kThreads = 256;

// Larger value wins; on ties the smaller index; NaN (index -1) always loses.
__device__ __forceinline__ void Better(double& v, long long& i, double v2, long long i2) {
  if (i2 < 0) return;
  if (i < 0 || v2 > v || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
SegmentArgmax(const T* __restrict__ values, const long long* __restrict__ offsets,
              SegmentPeak* __restrict__ out) {
  const long long begin = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
  double best = -DBL_MAX;
  long long best_i = -1;
  for (long long k = begin + threadIdx.x; k < end; k += kThreads) {
    const double v = static_cast<double>(values[k]);
    if (v == v) Better(best, best_i, v, k - begin);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const double v2 = __shfl_down_sync(0xffffffffu, best, offset);
    const long long i2 = __shfl_down_sync(0xffffffffu, best_i, offset);
    Better(best, best_i, v2, i2);
  }
  __shared__ double s_v[kThreads / 32];
  __shared__ long long s_i[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    s_v[warp] = best;
    s_i[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < kThreads / 32 ? s_v[lane] : -DBL_MAX;
    best_i = lane < kThreads / 32 ? s_i[lane] : -1;
    for (int offset = 16; offset > 0; offset /= 2) {
      const double v2 = __shfl_down_sync(0xffffffffu, best, offset);
      const long long i2 = __shfl_down_sync(0xffffffffu, best_i, offset);
      Better(best, best_i, v2, i2);
    }
    if (lane == 0) out[blockIdx.x] = SegmentPeak{best_i, best};
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchSegmentArgmax(const T* values, const long long* offsets, int n_segments,
                                SegmentPeak* out, cudaStream_t stream) {
  if (n_segments == 0) return cudaSuccess;
  SegmentArgmax<T><<<n_segments, kThreads, 0, stream>>>(values, offsets, out);
  return cudaPeekAtLastError();
}

template cudaError_t LaunchSegmentArgmax<float>(const float*, const long long*, int,
                                                SegmentPeak*, cudaStream_t);
template cudaError_t LaunchSegmentArgmax<double>(const double*, const long long*, int,
                                                 SegmentPeak*, cudaStream_t);

}  // namespace gpucompute::kernels
