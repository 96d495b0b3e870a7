// Top-k local maxima of each series' power (see top_peaks.cuh).
#include "kernels/top_peaks.cuh"

#include "math/lombscargle_math.cuh"

namespace gpucompute::kernels {
namespace {

// A survey's series have a few thousand frequencies: 256 threads read one coalesced stretch
// at a time and each keeps its own k best, merged by the block at the end.
constexpr int kThreads = 256;

// Whether p[i] (= v, not NaN) is a local maximum of p[0, n): above its nearest non-NaN left
// neighbour, not below its nearest non-NaN right one.
template <typename T>
__device__ __forceinline__ bool IsLocalMaximum(const T* p, long long n, long long i, double v) {
  long long left = i - 1, right = i + 1;
  while (left >= 0 && isnan(static_cast<double>(p[left]))) --left;
  while (right < n && isnan(static_cast<double>(p[right]))) ++right;
  if (left >= 0 && !(v > static_cast<double>(p[left]))) return false;
  return right >= n || v >= static_cast<double>(p[right]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
TopPeaksKernel(const T* __restrict__ power, const TopPeaksDesc* __restrict__ descs,
               LsPeak* __restrict__ out) {
  const TopPeaksDesc d = descs[blockIdx.x];
  const T* p = power + d.power_offset;
  // This thread's best, highest first; a thread's indices rise, so an equal value found later
  // has the higher index and goes after (the order ties are broken in).
  double kept_v[kMaxDeviceTopPeaks];
  long long kept_i[kMaxDeviceTopPeaks];
  int count = 0;
  for (long long i = threadIdx.x; i < d.n; i += kThreads) {
    const double v = static_cast<double>(p[i]);
    if (isnan(v) || (count == d.k && !(v > kept_v[d.k - 1]))) continue;
    if (!IsLocalMaximum(p, d.n, i, v)) continue;
    int at = count < d.k ? count++ : d.k - 1;
    for (; at > 0 && v > kept_v[at - 1]; --at) {
      kept_v[at] = kept_v[at - 1];
      kept_i[at] = kept_i[at - 1];
    }
    kept_v[at] = v;
    kept_i[at] = i;
  }
  // k rounds: the best of the threads' heads wins and its thread moves on (indices are unique).
  __shared__ long long s_winner;
  int head = 0;
  for (int r = 0; r < d.k; ++r) {
    double v = head < count ? kept_v[head] : 0.0;
    long long i = head < count ? kept_i[head] : -1;
    gpucompute_kernels::BlockReducePeak<kThreads>(v, i);  // starts with a barrier
    if (threadIdx.x == 0) {
      s_winner = i;
      out[d.out_offset + r] = LsPeak{i, i < 0 ? nan("") : v};
    }
    __syncthreads();
    if (head < count && kept_i[head] == s_winner) ++head;
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchTopPeaks(const T* power, const TopPeaksDesc* descs, int n_series, LsPeak* out,
                           cudaStream_t stream) {
  if (n_series == 0) return cudaSuccess;
  TopPeaksKernel<T><<<n_series, kThreads, 0, stream>>>(power, descs, out);
  return cudaPeekAtLastError();
}

template cudaError_t LaunchTopPeaks<float>(const float*, const TopPeaksDesc*, int, LsPeak*,
                                           cudaStream_t);
template cudaError_t LaunchTopPeaks<double>(const double*, const TopPeaksDesc*, int, LsPeak*,
                                            cudaStream_t);

}  // namespace gpucompute::kernels
