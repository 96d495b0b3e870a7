// Multi-harmonic direct sums (see harmonic_direct.cuh): one thread per frequency over
// shared-memory tiles of samples. Per pair one sincospi of the phase reduced modulo one cycle in
// float64, its powers e^{i j theta} by complex multiplication, sums in T; the solve
// (lombscargle_harmonic.cuh) in float64.
#include "kernels/harmonic_direct.cuh"

#include "math/lombscargle_harmonic.cuh"
#include "math/lombscargle_math.cuh"

namespace gpucompute::kernels {
namespace {

constexpr int kTile = 256;

__device__ __forceinline__ void SinCosPi(float x, float* s, float* c) { sincospif(x, s, c); }
__device__ __forceinline__ void SinCosPi(double x, double* s, double* c) { sincospi(x, s, c); }

template <typename T, int Q>
__global__ void __launch_bounds__(kHarmonicDirectBlock)
HarmonicDirect(const HarmonicDirectDesc* __restrict__ series, const LsBlockWork* __restrict__ work,
               const double* __restrict__ t, const T* __restrict__ w, const T* __restrict__ wy,
               const double* __restrict__ explicit_freqs, T* __restrict__ power,
               LsPeak* __restrict__ partials) {
  __shared__ double s_t[kTile];
  __shared__ T s_w[kTile], s_wy[kTile];
  const LsBlockWork job = work[blockIdx.x];
  const HarmonicDirectDesc& d = series[job.series];
  const long long k = static_cast<long long>(job.chunk) * kHarmonicDirectBlock + threadIdx.x;
  const bool active = k < d.n_freq;
  const double f = !active ? 0.0
                   : d.explicit_offset < 0 ? d.f0 + static_cast<double>(k) * d.df
                                            : explicit_freqs[d.explicit_offset + k];
  T wc[2 * Q + 1], ws[2 * Q + 1], yc[Q + 1], ys[Q + 1];
#pragma unroll
  for (int j = 0; j <= 2 * Q; ++j) wc[j] = ws[j] = T(0);
#pragma unroll
  for (int j = 0; j <= Q; ++j) yc[j] = ys[j] = T(0);

  for (int start = 0; start < d.n_samples; start += kTile) {
    const int m = min(kTile, d.n_samples - start);
    __syncthreads();
    for (int i = threadIdx.x; i < m; i += kHarmonicDirectBlock) {
      const long long g = d.sample_offset + start + i;
      s_t[i] = t[g];
      s_w[i] = w[g];
      s_wy[i] = wy[g];
    }
    __syncthreads();
    for (int i = 0; i < m; ++i) {
      double r = f * s_t[i];
      r -= rint(r);
      T s1, c1;
      SinCosPi(static_cast<T>(2.0 * r), &s1, &c1);
      const T wi = s_w[i], wyi = s_wy[i];
      T c = c1, s = s1;
#pragma unroll
      for (int j = 1; j <= 2 * Q; ++j) {
        wc[j] = fma(wi, c, wc[j]);
        ws[j] = fma(wi, s, ws[j]);
        if (j <= Q) {
          yc[j] = fma(wyi, c, yc[j]);
          ys[j] = fma(wyi, s, ys[j]);
        }
        const T c_next = fma(c, c1, -s * s1);
        s = fma(s, c1, c * s1);
        c = c_next;
      }
    }
  }

  double best = 0;
  long long best_k = -1;
  if (active) {
    double cw[2 * Q + 1], sw[2 * Q + 1], ycd[Q + 1], ysd[Q + 1];
    cw[0] = 1;  // the weights sum to 1
    sw[0] = 0;
#pragma unroll
    for (int j = 1; j <= 2 * Q; ++j) {
      cw[j] = wc[j];
      sw[j] = ws[j];
    }
    ycd[0] = ysd[0] = 0;
#pragma unroll
    for (int j = 1; j <= Q; ++j) {
      ycd[j] = yc[j];
      ysd[j] = ys[j];
    }
    const T p = static_cast<T>(gpucompute_kernels::HarmonicPower<double>(
        cw, sw, ycd, ysd, Q, d.fit_mean != 0, d.normalization, d.yy, d.psd_scale));
    if (d.out_offset >= 0) power[d.out_offset + k] = p;
    gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(p), k);
  }
  gpucompute_kernels::BlockReducePeak<kHarmonicDirectBlock>(best, best_k);
  if (threadIdx.x == 0) partials[d.peak_offset + job.chunk] = LsPeak{best_k, best};
}

template <typename T, int Q>
void Launch(const HarmonicDirectDesc* series, const LsBlockWork* work, int n_blocks,
            const double* t, const T* w, const T* wy, const double* explicit_freqs, T* power,
            LsPeak* partials, cudaStream_t stream) {
  HarmonicDirect<T, Q><<<n_blocks, kHarmonicDirectBlock, 0, stream>>>(series, work, t, w, wy,
                                                                      explicit_freqs, power, partials);
}

}  // namespace

template <typename T>
cudaError_t LaunchHarmonicDirect(int nterms, const HarmonicDirectDesc* series,
                                 const LsBlockWork* work, int n_blocks, const double* t,
                                 const T* w, const T* wy, const double* explicit_freqs, T* power,
                                 LsPeak* partials, cudaStream_t stream) {
  if (n_blocks == 0) return cudaSuccess;
  switch (nterms) {
    case 2: Launch<T, 2>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    case 3: Launch<T, 3>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    case 4: Launch<T, 4>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    case 5: Launch<T, 5>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    case 6: Launch<T, 6>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    case 7: Launch<T, 7>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    case 8: Launch<T, 8>(series, work, n_blocks, t, w, wy, explicit_freqs, power, partials, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaPeekAtLastError();
}

template cudaError_t LaunchHarmonicDirect<float>(int, const HarmonicDirectDesc*, const LsBlockWork*, int,
                                                 const double*, const float*, const float*,
                                                 const double*, float*, LsPeak*, cudaStream_t);
template cudaError_t LaunchHarmonicDirect<double>(int, const HarmonicDirectDesc*, const LsBlockWork*, int,
                                                  const double*, const double*, const double*,
                                                  const double*, double*, LsPeak*, cudaStream_t);

}  // namespace gpucompute::kernels
