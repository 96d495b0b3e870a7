// The direct periodogram as matrix products: operands and power (see lombscargle_product.cuh).
#include "kernels/lombscargle_product.cuh"

#include <cuda_fp16.h>

#include "kernels/lombscargle_low.cuh"
#include "math/lombscargle_math.cuh"

namespace gpucompute::kernels {
namespace {

constexpr int kOperandBlock = 256;

__device__ __forceinline__ void SinCosCycles(double cycles, float* s, float* c) {
  const double r = cycles - rint(cycles);
  sincospif(static_cast<float>(2.0 * r), s, c);
}
__device__ __forceinline__ void SinCosCycles(double cycles, double* s, double* c) {
  const double r = cycles - rint(cycles);
  sincospi(2.0 * r, s, c);
}

// The split of v into its segments along K: B's are [hi | hi | lo], A's [hi | lo | hi].
struct HalfSplit {
  __half hi, lo;
};
__device__ __forceinline__ HalfSplit Split(float v) {
  const __half hi = __float2half_rn(v);
  return HalfSplit{hi, __float2half_rn(v - __half2float(hi))};
}

template <typename E>
struct Store;
template <>
struct Store<__half> {
  // Element (row, col) of a column-major matrix with leading dimension ld, for the three
  // K segments of `seg` columns each.
  __device__ static void B(__half* m, long long ld, int seg, int row, int col, float v) {
    const HalfSplit x = Split(v);
    m[row + ld * col] = x.hi;
    m[row + ld * (col + seg)] = x.hi;
    m[row + ld * (col + 2 * seg)] = x.lo;
  }
  // A: K rows, so the segments are row offsets within a column.
  __device__ static void A(__half* m, long long ld, int seg, int row, int col, float v) {
    const HalfSplit x = Split(v);
    m[row + ld * col] = x.hi;
    m[row + seg + ld * col] = x.lo;
    m[row + 2 * seg + ld * col] = x.hi;
  }
};
template <>
struct Store<double> {
  __device__ static void B(double* m, long long ld, int, int row, int col, double v) {
    m[row + ld * col] = v;
  }
  __device__ static void A(double* m, long long ld, int, int row, int col, double v) {
    m[row + ld * col] = v;
  }
};

// B_1, B_2: thread (b, i) with b along x (coalesced: B is column-major with 2J rows), one
// block row per sample i of the chunk's padded width.
template <typename E, typename V>
__global__ void __launch_bounds__(kOperandBlock)
ProductFine(const ProductSeriesDesc* __restrict__ series, int index, int first, int n, int seg,
            const double* __restrict__ t, E* __restrict__ b1, E* __restrict__ b2) {
  const ProductSeriesDesc& d = series[index];
  const int b = blockIdx.x * kOperandBlock + threadIdx.x;
  const int i = blockIdx.y;
  if (b >= d.j) return;
  V c = 0, s = 0, c2 = 0, s2 = 0;
  if (i < n) {
    const double cycles = static_cast<double>(b) * d.df * t[d.sample_offset + first + i];
    SinCosCycles(cycles, &s, &c);
    c2 = c * c - s * s;
    s2 = 2 * s * c;
  }
  const long long ld = 2LL * d.j;
  Store<E>::B(b1, ld, seg, b, i, c);
  Store<E>::B(b1, ld, seg, d.j + b, i, s);
  Store<E>::B(b2, ld, seg, b, i, c2);
  Store<E>::B(b2, ld, seg, d.j + b, i, s2);
}

// A_1 (columns w cos, w sin, w y cos, w y sin; rows each) and A_2 (w cos 2, w sin 2): thread
// (i, a) with i along x (coalesced: A is column-major with K rows).
template <typename E, typename V, typename T>
__global__ void __launch_bounds__(kOperandBlock)
ProductCoarse(const ProductSeriesDesc* __restrict__ series, int index, int first, int n, int seg,
              const double* __restrict__ t, const T* __restrict__ w, const T* __restrict__ wy,
              E* __restrict__ a1, E* __restrict__ a2) {
  const ProductSeriesDesc& d = series[index];
  const int i = blockIdx.x * kOperandBlock + threadIdx.x;
  const int a = blockIdx.y;
  if (i >= seg) return;
  V c = 0, s = 0, c2 = 0, s2 = 0, x = 0, xy = 0;
  if (i < n) {
    const long long g = d.sample_offset + first + i;
    const double f = d.f_start + static_cast<double>(a) * d.j * d.df;
    SinCosCycles(f * t[g], &s, &c);
    c2 = c * c - s * s;
    s2 = 2 * s * c;
    x = static_cast<V>(static_cast<double>(w[g]) / d.scale_w);
    xy = static_cast<V>(static_cast<double>(wy[g]) / d.scale_wy);
  }
  const long long ld = sizeof(E) == 2 ? 3LL * seg : seg;
  Store<E>::A(a1, ld, seg, i, a, x * c);
  Store<E>::A(a1, ld, seg, i, d.rows + a, x * s);
  Store<E>::A(a1, ld, seg, i, 2 * d.rows + a, xy * c);
  Store<E>::A(a1, ld, seg, i, 3 * d.rows + a, xy * s);
  Store<E>::A(a2, ld, seg, i, a, x * c2);
  Store<E>::A(a2, ld, seg, i, d.rows + a, x * s2);
}

// One thread per frequency h = J a + b of the series' product range.
template <typename C, typename T>
__global__ void __launch_bounds__(kProductPowerBlock)
ProductPower(const ProductSeriesDesc* __restrict__ series, int index, const C* __restrict__ c1,
             const C* __restrict__ c2, T* __restrict__ power, LsPeak* __restrict__ partials) {
  const ProductSeriesDesc& d = series[index];
  const long long h = static_cast<long long>(blockIdx.x) * kProductPowerBlock + threadIdx.x;
  double best = 0;
  long long best_k = -1;
  if (h < d.n_high) {
    const long long a = h / d.j, b = h % d.j, j = d.j, rows = d.rows, ld = 2 * j;
    // Re and Im of the sum whose cos column is col_c and sin column col_s.
    auto sum = [&](const C* m, long long col_c, long long col_s, double scale, double* re,
                   double* im) {
      const double cc = m[b + ld * col_c], sc = m[j + b + ld * col_c];
      const double cs = m[b + ld * col_s], ss = m[j + b + ld * col_s];
      *re = (cc - ss) * scale;
      *im = (cs + sc) * scale;
    };
    double c, s, yc, ys, w2c, w2s;
    sum(c1, a, rows + a, d.scale_w, &c, &s);
    sum(c1, 2 * rows + a, 3 * rows + a, d.scale_wy, &yc, &ys);
    sum(c2, a, rows + a, d.scale_w, &w2c, &w2s);
    const long long k = d.first_k + h;
    const T p = static_cast<T>(gpucompute_kernels::LombScarglePower<double>(
        c, s, yc, ys, 0.5 * (1 + w2c), 0.5 * w2s, d.fit_mean != 0, d.normalization, d.yy,
        d.psd_scale));
    if (d.out_offset >= 0) power[d.out_offset + k] = p;
    gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(p), k);
  }
  gpucompute_kernels::BlockReducePeak<kProductPowerBlock>(best, best_k);
  if (threadIdx.x == 0) partials[d.peak_offset + blockIdx.x] = LsPeak{best_k, best};
}

// The low piece: one block per frequency (lombscargle_low.cuh).
template <typename T>
__global__ void __launch_bounds__(kProductLowBlock)
ProductLow(const ProductSeriesDesc* __restrict__ series, int index, const double* __restrict__ t,
           const T* __restrict__ w, const T* __restrict__ wy, T* __restrict__ power,
           LsPeak* __restrict__ partials) {
  LowFrequencyBlock<kProductLowBlock>(series[index], blockIdx.x, t, w, wy, power, partials);
}

template <typename E, typename V, typename T>
cudaError_t LaunchOperands(const ProductSeriesDesc* series, int index, const ProductSeriesDesc& host,
                           int first, int n, int k, const double* t, const T* w, const T* wy,
                           E* b1, E* b2, E* a1, E* a2, cudaStream_t stream) {
  const int seg = sizeof(E) == 2 ? k / 3 : k;
  const dim3 fine((host.j + kOperandBlock - 1) / kOperandBlock, seg);
  ProductFine<E, V><<<fine, kOperandBlock, 0, stream>>>(series, index, first, n, seg, t, b1, b2);
  const dim3 coarse((seg + kOperandBlock - 1) / kOperandBlock, host.rows);
  ProductCoarse<E, V, T><<<coarse, kOperandBlock, 0, stream>>>(series, index, first, n, seg, t, w,
                                                               wy, a1, a2);
  return cudaPeekAtLastError();
}

}  // namespace

cudaError_t LaunchProductOperandsF16(const ProductSeriesDesc* series, int index,
                                     const ProductSeriesDesc& host, int first, int n, int k,
                                     const double* t, const float* w, const float* wy, void* b1,
                                     void* b2, void* a1, void* a2, cudaStream_t stream) {
  return LaunchOperands<__half, float, float>(
      series, index, host, first, n, k, t, w, wy, static_cast<__half*>(b1),
      static_cast<__half*>(b2), static_cast<__half*>(a1), static_cast<__half*>(a2), stream);
}

cudaError_t LaunchProductOperandsF64(const ProductSeriesDesc* series, int index,
                                     const ProductSeriesDesc& host, int first, int n, int k,
                                     const double* t, const double* w, const double* wy,
                                     double* b1, double* b2, double* a1, double* a2,
                                     cudaStream_t stream) {
  return LaunchOperands<double, double, double>(series, index, host, first, n, k, t, w, wy, b1, b2,
                                                a1, a2, stream);
}

template <typename T>
cudaError_t LaunchProductLow(const ProductSeriesDesc* series, int index,
                             const ProductSeriesDesc& host, const double* t, const T* w,
                             const T* wy, T* power, LsPeak* partials, cudaStream_t stream) {
  if (host.n_high == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(ProductPartials(host));
  ProductLow<T><<<blocks, kProductLowBlock, 0, stream>>>(series, index, t, w, wy, power, partials);
  return cudaPeekAtLastError();
}

template cudaError_t LaunchProductLow<float>(const ProductSeriesDesc*, int, const ProductSeriesDesc&,
                                             const double*, const float*, const float*, float*,
                                             LsPeak*, cudaStream_t);
template cudaError_t LaunchProductLow<double>(const ProductSeriesDesc*, int, const ProductSeriesDesc&,
                                              const double*, const double*, const double*, double*,
                                              LsPeak*, cudaStream_t);

template <typename C, typename T>
cudaError_t LaunchProductPower(const ProductSeriesDesc* series, int index,
                               const ProductSeriesDesc& host, const C* c1, const C* c2, T* power,
                               LsPeak* partials, cudaStream_t stream) {
  if (host.n_high == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(ProductPowerBlocks(host.n_high));
  ProductPower<C, T><<<blocks, kProductPowerBlock, 0, stream>>>(series, index, c1, c2, power,
                                                                partials);
  return cudaPeekAtLastError();
}

template cudaError_t LaunchProductPower<float, float>(const ProductSeriesDesc*, int,
                                                      const ProductSeriesDesc&, const float*,
                                                      const float*, float*, LsPeak*, cudaStream_t);
template cudaError_t LaunchProductPower<double, double>(const ProductSeriesDesc*, int,
                                                        const ProductSeriesDesc&, const double*,
                                                        const double*, double*, LsPeak*,
                                                        cudaStream_t);

}  // namespace gpucompute::kernels
