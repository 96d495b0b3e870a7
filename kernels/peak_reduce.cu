// Per-series peak from per-block peaks (see peak_reduce.cuh).
#include "kernels/peak_reduce.cuh"

#include "math/lombscargle_math.cuh"

namespace gpucompute::kernels {
namespace {

// A series' partials are one per block of the power kernels, ~1,500 at 1M frequencies: one
// load per thread keeps this latency-bound launch short (128 threads: 6.2 us at 1M on the
// H200).
constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads)
ReducePeaks(const LsPeak* __restrict__ partials, const long long* __restrict__ begins,
            const long long* __restrict__ ends, LsPeak* __restrict__ out) {
  const long long begin = begins[blockIdx.x], end = ends[blockIdx.x];
  double best = 0;
  long long best_i = -1;
  for (long long k = begin + threadIdx.x; k < end; k += kThreads) {
    gpucompute_kernels::BetterPeak(best, best_i, partials[k].value, partials[k].index);
  }
  gpucompute_kernels::BlockReducePeak<kThreads>(best, best_i);
  if (threadIdx.x == 0) out[blockIdx.x] = LsPeak{best_i, best};
}

}  // namespace

cudaError_t LaunchReducePeaks(const LsPeak* partials, const long long* begins,
                              const long long* ends, int n_series, LsPeak* out,
                              cudaStream_t stream) {
  if (n_series == 0) return cudaSuccess;
  ReducePeaks<<<n_series, kThreads, 0, stream>>>(partials, begins, ends, out);
  return cudaPeekAtLastError();
}

}  // namespace gpucompute::kernels
