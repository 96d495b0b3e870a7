// The fast periodogram's kernels (see nufft_kernels.cuh).
#include "kernels/nufft_kernels.cuh"

#include "kernels/lombscargle_harmonic.cuh"
#include "kernels/lombscargle_math.cuh"
#include "kernels/nufft_math.cuh"

namespace gpucompute::kernels {
namespace {

constexpr int kSpreadBlock = 128;
constexpr int kCorrectionBlock = 256;

__device__ __forceinline__ void AddComplex(float* cell, double re, double im) {
  atomicAdd(cell, static_cast<float>(re));
  atomicAdd(cell + 1, static_cast<float>(im));
}
__device__ __forceinline__ void AddComplex(double* cell, double re, double im) {
  atomicAdd(cell, re);
  atomicAdd(cell + 1, im);
}

// One thread per (point, transform): the strength a_i exp(2 pi i j fc t_i) and the kernel
// weights in float64 (a few thousand points: their cost is nothing next to the FFT), added
// into `width` cells of the transform's grid.
template <typename T>
__global__ void __launch_bounds__(kSpreadBlock)
NufftSpread(const NufftSeriesDesc* __restrict__ series, const NufftTransform* __restrict__ transforms,
            const double* __restrict__ t, const T* __restrict__ w, const T* __restrict__ wy,
            T* __restrict__ grid) {
  const NufftTransform tr = transforms[blockIdx.y];
  const NufftSeriesDesc& d = series[tr.series];
  const int i = blockIdx.x * kSpreadBlock + threadIdx.x;
  if (i >= d.n_samples) return;
  const long long g = d.sample_offset + i;
  const double ti = t[g];
  const double a = static_cast<double>(tr.weighted_y ? wy[g] : w[g]);
  double r = tr.j * d.fc * ti;
  r -= rint(r);
  double s, c;
  sincospi(2.0 * r, &s, &c);
  const double re = a * c, im = a * s;
  long long first;
  double z0;
  gpucompute_kernels::NufftCells(tr.j * d.df * ti, d.grid_size, d.width, &first, &z0);
  const long long m = d.grid_size;
  long long cell = ((first % m) + m) % m;
  T* base = grid + 2 * (d.grid_offset + static_cast<long long>(blockIdx.y - d.first_transform) * m);
  const double step = 2.0 / d.width;
  for (int q = 0; q < d.width; ++q) {
    const double k = gpucompute_kernels::EsKernel(z0 + q * step, d.beta);
    AddComplex(base + 2 * cell, re * k, im * k);
    if (++cell == m) cell = 0;
  }
}

__global__ void __launch_bounds__(kCorrectionBlock)
NufftCorrection(const double* __restrict__ x, const double* __restrict__ weight_phi, int nodes,
                long long modes, long long centre, long long grid_size, int width,
                double* __restrict__ correction) {
  const long long k = static_cast<long long>(blockIdx.x) * kCorrectionBlock + threadIdx.x;
  if (k >= modes) return;
  const double pi = 3.14159265358979323846;
  const double a = pi * static_cast<double>(k - centre) * width / static_cast<double>(grid_size);
  double sum = 0;
  for (int q = 0; q < nodes; ++q) sum += weight_phi[q] * cos(a * x[q]);
  correction[k] = 1.0 / (0.5 * width * sum);
}

// One thread per mode: the series' harmonic sums at k, deconvolved, then the power (float64
// arithmetic whatever T: the sums are what the dtype limits).
template <typename T>
__global__ void __launch_bounds__(kNufftPowerBlock)
NufftPower(const NufftSeriesDesc* __restrict__ series, int index,
           const NufftTransform* __restrict__ transforms, const T* __restrict__ grid,
           const double* __restrict__ correction, T* __restrict__ power,
           LsPeak* __restrict__ partials) {
  const NufftSeriesDesc& d = series[index];
  const long long k = static_cast<long long>(blockIdx.x) * kNufftPowerBlock + threadIdx.x;
  double best = 0;
  long long best_k = -1;
  if (k < d.modes) {
    constexpr int kMaxJ = 2 * gpucompute_kernels::kMaxHarmonicTerms + 1;
    double cw[kMaxJ], sw[kMaxJ], yc[gpucompute_kernels::kMaxHarmonicTerms + 1],
        ys[gpucompute_kernels::kMaxHarmonicTerms + 1];
    const int q = d.nterms;
    for (int j = 0; j <= 2 * q; ++j) cw[j] = sw[j] = 0;
    for (int j = 0; j <= q; ++j) yc[j] = ys[j] = 0;
    cw[0] = 1;  // the weights sum to 1
    const long long mode = k - d.centre;
    const long long at = mode >= 0 ? mode : mode + d.grid_size;
    const double corr = correction[k];
    for (int i = 0; i < d.n_transforms; ++i) {
      const NufftTransform tr = transforms[d.first_transform + i];
      const T* cell = grid + 2 * (d.grid_offset + static_cast<long long>(i) * d.grid_size + at);
      const double re = static_cast<double>(cell[0]) * corr, im = static_cast<double>(cell[1]) * corr;
      if (tr.weighted_y) {
        yc[tr.j] = re;
        ys[tr.j] = im;
      } else {
        cw[tr.j] = re;
        sw[tr.j] = im;
      }
    }
    double p;
    if (q == 1) {
      p = gpucompute_kernels::LombScarglePower<double>(cw[1], sw[1], yc[1], ys[1], 0.5 * (1 + cw[2]),
                                                       0.5 * sw[2], d.fit_mean != 0, d.normalization,
                                                       d.yy, d.psd_scale);
    } else {
      p = gpucompute_kernels::HarmonicPower<double>(cw, sw, yc, ys, q, d.fit_mean != 0,
                                                    d.normalization, d.yy, d.psd_scale);
    }
    const T out = static_cast<T>(p);
    if (d.out_offset >= 0) power[d.out_offset + k] = out;
    gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(out), k);
  }
  gpucompute_kernels::BlockReducePeak<kNufftPowerBlock>(best, best_k);
  if (threadIdx.x == 0) partials[d.peak_offset + blockIdx.x] = LsPeak{best_k, best};
}

}  // namespace

template <typename T>
cudaError_t LaunchNufftSpread(const NufftSeriesDesc* series, const NufftTransform* transforms,
                              int n_transforms, int max_samples, const double* t, const T* w,
                              const T* wy, T* grid, cudaStream_t stream) {
  if (n_transforms == 0 || max_samples == 0) return cudaSuccess;
  const dim3 blocks((max_samples + kSpreadBlock - 1) / kSpreadBlock, n_transforms);
  NufftSpread<T><<<blocks, kSpreadBlock, 0, stream>>>(series, transforms, t, w, wy, grid);
  return cudaPeekAtLastError();
}

cudaError_t LaunchNufftCorrection(const double* x, const double* weight_phi, int nodes,
                                  long long modes, long long centre, long long grid_size,
                                  int width, double* correction, cudaStream_t stream) {
  if (modes == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((modes + kCorrectionBlock - 1) / kCorrectionBlock);
  NufftCorrection<<<blocks, kCorrectionBlock, 0, stream>>>(x, weight_phi, nodes, modes, centre,
                                                           grid_size, width, correction);
  return cudaPeekAtLastError();
}

template <typename T>
cudaError_t LaunchNufftPower(const NufftSeriesDesc* series, int index, long long modes,
                             const NufftTransform* transforms, const T* grid,
                             const double* correction, T* power, LsPeak* partials,
                             cudaStream_t stream) {
  if (modes == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((modes + kNufftPowerBlock - 1) / kNufftPowerBlock);
  NufftPower<T><<<blocks, kNufftPowerBlock, 0, stream>>>(series, index, transforms, grid,
                                                          correction, power, partials);
  return cudaPeekAtLastError();
}

template cudaError_t LaunchNufftSpread<float>(const NufftSeriesDesc*, const NufftTransform*, int, int,
                                              const double*, const float*, const float*, float*,
                                              cudaStream_t);
template cudaError_t LaunchNufftSpread<double>(const NufftSeriesDesc*, const NufftTransform*, int, int,
                                               const double*, const double*, const double*, double*,
                                               cudaStream_t);
template cudaError_t LaunchNufftPower<float>(const NufftSeriesDesc*, int, long long, const NufftTransform*,
                                             const float*, const double*, float*, LsPeak*, cudaStream_t);
template cudaError_t LaunchNufftPower<double>(const NufftSeriesDesc*, int, long long, const NufftTransform*,
                                              const double*, const double*, double*, LsPeak*, cudaStream_t);

}  // namespace gpucompute::kernels
