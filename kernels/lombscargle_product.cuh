// The direct periodogram (nterms = 1) on a uniform grid as matrix products, nvcc-built: the
// same sums as the direct kernel, exact algebra, on the tensor cores.
//
// With the grid's frequencies from first_k on split as k = first_k + J a + b (a < rows, b < J),
// each phase is theta = 2 pi (f_start + J a df) t_i + 2 pi b df t_i = alpha_ai + beta_bi, so
//   Z_p(a, b) = sum_i x_i exp(i p theta) = sum_i [x_i exp(i p alpha_ai)] exp(i p beta_bi)
// for the three sums the power needs (x = w, p = 1; x = w y, p = 1; x = w, p = 2: c, s, yc, ys
// and cc = (1 + Re Z_w2) / 2, cs = Im Z_w2 / 2) is a product of a rows x N and an N x J matrix.
// As real products, per p: C_p = B_p A_p with
//   B_p (2J x K, column-major): rows b < J cos(p beta_bi), rows J + b sin(p beta_bi), column i;
//   A_p (K x cols, column-major): per amplitude x, column x cos(p alpha_ai), then x sin;
//   so Re Z = C[b][x cos] - C[J + b][x sin], Im Z = C[b][x sin] + C[J + b][x cos].
// Float64 runs DGEMM (DMMA). Float32 runs FP16 products with FP32 accumulation on operands
// split as v = hi + lo (both FP16, hi = v rounded): hi hi + hi lo + lo hi, which carries v to
// 2^-22 of its magnitude (FP16's subnormal floor makes that an absolute 2^-25 of the column's
// scale: amplitudes are scaled to at most 1), as float32 storage would; K = 3 n, segments
// [hi | hi | lo] in B against [hi | lo | hi] in A. The host multiplies the last two segments
// (hi lo + lo hi) first and the first (hi hi) onto them: the tensor cores truncate the FP32
// accumulator at each k step (Fasi et al. 2021), so the full sums see n / 16 truncations, not
// 3 n / 16 (measured at 1,024 x 1M: 1.4e-5 of the power in one product of K = 3 n, 7e-6 so;
// the direct kernel's float32 sums: 1.6e-6). Chunks of kProductChunk samples bound that count
// for long series (each chunk's GEMMs add onto the previous chunks' sums once, rounding to
// nearest). Samples go in chunks of at most
// kProductChunk (accumulated by the GEMM's beta), padded with zeros to a multiple of 16.
//
// Where the phases of a series stay near the reference sample (the grid's lowest frequencies,
// LowFrequencyPrefix in server/ops/periodogram/nufft.h), the double-angle form of cc loses
// what the direct kernel's shifted sums keep (lombscargle_math.cuh): with a floating mean,
// cc - c^2 is O(theta^4) there and its error that of the O(1) sums. Those frequencies form a
// piece of their own (`direct`), summed directly over cos - 1 in float64 by one block per
// frequency (about a hundred frequencies on fine grids: spread over the GPU, not a block's
// worth of threads). The fast method's host code uses the same piece for the same reason.
#pragma once

#include <cuda_runtime.h>

#include "kernels/lombscargle_abi.cuh"

namespace gpucompute::kernels {

using gpucompute_kernels::LsPeak;

// One product-form series (host-packed, read by the kernels).
struct ProductSeriesDesc {
  long long sample_offset;  // into t / w / wy
  long long first_k;        // frequencies below are the direct kernel's
  long long n_high;         // frequencies first_k .. first_k + n_high - 1 are this path's
  long long out_offset;     // elements of power (of frequency 0); -1: peak only
  long long peak_offset;    // the first partial peak of the power kernel's blocks
  double f_start;           // f0 + first_k df
  double df;
  double scale_w;           // float32: the operands carry w / scale_w, w y / scale_wy
  double scale_wy;
  double yy;                // sum w y^2
  double psd_scale;         // sum(dy^-2) / 2
  int n_samples;
  int j;                    // J (a multiple of 32)
  int rows;                 // ceil(n_high / J)
  int fit_mean;
  int normalization;
  int direct;               // 1: the low piece, direct sums (LaunchProductLow)
};

constexpr int kProductChunk = 1024;      // samples per GEMM (see the truncation note above)
constexpr int kProductPowerBlock = 256;  // frequencies per power block (and partial peak)

// K of one chunk of n samples: padded to 16, times the split count (3 for float32, 1 float64).
inline int ProductChunkK(int n, bool f32) { return ((n + 15) / 16 * 16) * (f32 ? 3 : 1); }

// Element counts of the operands and products of a series (J, rows) for chunks of K.
inline long long ProductBElements(int j, int k) { return 2LL * j * k; }                 // per p
inline long long ProductA1Elements(int rows, int k) { return 4LL * rows * k; }
inline long long ProductA2Elements(int rows, int k) { return 2LL * rows * k; }
inline long long ProductC1Elements(int j, int rows) { return 2LL * j * 4 * rows; }
inline long long ProductC2Elements(int j, int rows) { return 2LL * j * 2 * rows; }
constexpr int kProductLowBlock = 1024;    // threads per frequency of the low piece
inline long long ProductPowerBlocks(long long n_high) {
  return (n_high + kProductPowerBlock - 1) / kProductPowerBlock;
}
// Partial peaks of a piece (one per block of its power or low kernel).
inline long long ProductPartials(const ProductSeriesDesc& d) {
  return d.direct ? d.n_high : ProductPowerBlocks(d.n_high);
}

// Writes B_1, B_2, A_1, A_2 for samples [first, first + n) of series[index] (host copy `host`),
// k the chunk's K (ProductChunkK). E is __half (float32 series, split) or double.
// Then the host multiplies; then LaunchProductPower.
cudaError_t LaunchProductOperandsF16(const ProductSeriesDesc* series, int index,
                                     const ProductSeriesDesc& host, int first, int n, int k,
                                     const double* t, const float* w, const float* wy, void* b1,
                                     void* b2, void* a1, void* a2, cudaStream_t stream);
cudaError_t LaunchProductOperandsF64(const ProductSeriesDesc* series, int index,
                                     const ProductSeriesDesc& host, int first, int n, int k,
                                     const double* t, const double* w, const double* wy,
                                     double* b1, double* b2, double* a1, double* a2,
                                     cudaStream_t stream);

// The power of frequencies first_k .. first_k + n_high - 1 from C_1 and C_2 (float32 products
// for float32 series, float64 for float64; power in T), and one partial peak per block at
// peak_offset + block.
// A direct piece: the power of its frequencies (T the series' dtype) and its partial peaks.
template <typename T>
cudaError_t LaunchProductLow(const ProductSeriesDesc* series, int index,
                             const ProductSeriesDesc& host, const double* t, const T* w,
                             const T* wy, T* power, LsPeak* partials, cudaStream_t stream);

template <typename C, typename T>
cudaError_t LaunchProductPower(const ProductSeriesDesc* series, int index,
                               const ProductSeriesDesc& host, const C* c1, const C* c2, T* power,
                               LsPeak* partials, cudaStream_t stream);

}  // namespace gpucompute::kernels
