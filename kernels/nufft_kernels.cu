// The fast periodogram's kernels (see nufft_kernels.cuh).
#include "kernels/nufft_kernels.cuh"

#include "math/lombscargle_harmonic.cuh"
#include "kernels/lombscargle_low.cuh"
#include "math/lombscargle_math.cuh"
#include "math/nufft_math.cuh"

namespace gpucompute::kernels {
namespace {

constexpr int kSpreadCells = kNufftMaxWidth;  // 8 to 20 cells used (MakeNufftPlan)
constexpr int kSpreadBlock = 8 * kSpreadCells;
constexpr int kCorrectionBlock = 256;
constexpr int kExpandBlock = 256;
constexpr int kExpandPerThread = 16;

// A complex cell (interleaved re, im; 8- or 16-byte aligned) in one vector load.
__device__ __forceinline__ float2 Load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ double2 Load2(const double* p) { return *reinterpret_cast<const double2*>(p); }

__device__ __forceinline__ void AddComplex(float* cell, double re, double im) {
  atomicAdd(cell, static_cast<float>(re));
  atomicAdd(cell + 1, static_cast<float>(im));
}
__device__ __forceinline__ void AddComplex(double* cell, double re, double im) {
  atomicAdd(cell, re);
  atomicAdd(cell + 1, im);
}

// One thread per (point, transform, kernel cell): kSpreadCells threads of a row share a point
// (the strength a_i exp(2 pi i j fc t_i) and the cell geometry in float64, the same in each),
// and each adds one cell of the transform's grid or window. A few thousand points: latency,
// not throughput, is what counts, hence a thread per cell rather than a loop over them.
template <typename T>
__global__ void __launch_bounds__(kSpreadBlock)
NufftSpread(const NufftSeriesDesc* __restrict__ series, const NufftTransform* __restrict__ transforms,
            const double* __restrict__ t, const T* __restrict__ w, const T* __restrict__ wy,
            T* __restrict__ grid, T* __restrict__ windows) {
  const NufftTransform tr = transforms[blockIdx.y];
  const NufftSeriesDesc& d = series[tr.series];
  const int q = threadIdx.x % kSpreadCells;
  const int i = blockIdx.x * (kSpreadBlock / kSpreadCells) + threadIdx.x / kSpreadCells;
  if (i >= d.n_samples || q >= d.width) return;
  const long long g = d.sample_offset + i;
  const double ti = t[g];
  const double a = static_cast<double>(tr.weighted_y ? wy[g] : w[g]);
  double r = tr.j * d.fc * ti;
  r -= rint(r);
  double s, c;
  sincospi(2.0 * r, &s, &c);
  long long first;
  double z0;
  gpucompute_kernels::NufftCells(tr.j * d.df * ti, d.grid_size, d.width, &first, &z0);
  const double k = a * gpucompute_kernels::EsKernel(z0 + q * (2.0 / d.width), d.beta);
  const long long m = d.grid_size;
  const long long local = blockIdx.y - d.first_transform;
  if (d.window > 0) {
    // Cell n at n + L / 2 (mod M), inside [0, L) by the host's choice of L.
    const long long l = d.window;
    const long long cell = (((first + q + l / 2) % m) + m) % m;
    if (cell < l) AddComplex(windows + 2 * (d.window_offset + local * l + cell), c * k, s * k);
    return;
  }
  const long long cell = (((first + q) % m) + m) % m;
  AddComplex(grid + 2 * (d.grid_offset + local * m + cell), c * k, s * k);
}

// grid[i][r][m] = window[i][m] exp(2 pi i r (m - L / 2) / M): blockIdx.z the transform,
// blockIdx.y the copy r, x over chunks of kExpandPerThread * kExpandBlock cells m, a thread
// taking every kExpandBlock-th cell of its block's chunk. The phase is reduced exactly in
// integers. Float64 rotates the first cell's twiddle by the step's (one complex product per
// cell instead of a sincospi: the float64 sincospi made this kernel arithmetic-bound, 41 us of
// double trigonometry for 63 MB of writes at 1M modes on the H200); the rotation's rounding
// grows by one ulp per step, 16 ulp at most. Float32 evaluates each twiddle (sincospif is
// cheap, and float's rounding would grow by the same 16 ulp).
template <typename T>
__global__ void __launch_bounds__(kExpandBlock)
NufftExpand(const NufftSeriesDesc* __restrict__ series, int index, const T* __restrict__ windows,
            T* __restrict__ grid) {
  const NufftSeriesDesc& d = series[index];
  const int l = static_cast<int>(d.window);
  const long long m = d.grid_size;
  const int first = blockIdx.x * (kExpandBlock * kExpandPerThread) + threadIdx.x;
  const int r = blockIdx.y, tr = blockIdx.z;
  const T* x = windows + 2 * (d.window_offset + static_cast<long long>(tr) * l);
  T* out = grid + 2 * (d.grid_offset + tr * m + static_cast<long long>(r) * l);
  // r (i - L/2) lies in [-M/2, M/2] (r < R, |i - L/2| <= L/2, M = R L < 2^31): the angle
  // 2 pi ph / M needs no reduction.
  auto phase = [&](int i) { return static_cast<double>(r * (i - l / 2)) * d.two_over_m; };
  if constexpr (sizeof(T) == 8) {
    double s, c, ds, dc;
    sincospi(phase(first), &s, &c);
    sincospi(static_cast<double>(r) * kExpandBlock * d.two_over_m, &ds, &dc);
#pragma unroll
    for (int e = 0; e < kExpandPerThread; ++e) {
      const int i = first + e * kExpandBlock;
      if (i >= l) break;
      const double2 v = Load2(x + 2 * i);
      reinterpret_cast<double2*>(out)[i] = make_double2(v.x * c - v.y * s, v.x * s + v.y * c);
      const double c_next = c * dc - s * ds;
      s = s * dc + c * ds;
      c = c_next;
    }
  } else {
#pragma unroll
    for (int e = 0; e < kExpandPerThread; ++e) {
      const int i = first + e * kExpandBlock;
      if (i >= l) break;
      float s, c;
      sincospif(static_cast<float>(phase(i)), &s, &c);  // x in [-1, 1]: float's rounding is 6e-8
      const float2 v = Load2(x + 2 * i);
      reinterpret_cast<float2*>(out)[i] = make_float2(v.x * c - v.y * s, v.x * s + v.y * c);
    }
  }
}

__global__ void __launch_bounds__(kCorrectionBlock)
NufftCorrection(const NufftCorrectionNodes nodes, long long modes, long long centre,
                long long grid_size, int width, double* __restrict__ correction) {
  const long long k = static_cast<long long>(blockIdx.x) * kCorrectionBlock + threadIdx.x;
  if (k >= modes) return;
  const double pi = 3.14159265358979323846;
  const double a = pi * static_cast<double>(k - centre) * width / static_cast<double>(grid_size);
  double sum = 0;
  for (int q = 0; q < nodes.count; ++q) sum += nodes.weight_phi[q] * cos(a * nodes.x[q]);
  correction[k] = 1.0 / (0.5 * width * sum);
}

// The power at one mode from the series' transforms: transform i's sum at the mode is at
// cell + 2 i m (interleaved re, im), deconvolved by `corr`. Float64 arithmetic whatever T:
// the sums are what the dtype limits. Transforms in HarmonicTerms order.
template <typename T, int Q>
__device__ __forceinline__ double PowerFromTransforms(const NufftSeriesDesc& d, const T* cell,
                                                      long long m, double corr) {
  auto sum = [&](int i, double* re, double* im) {
    const auto v = Load2(cell + 2 * static_cast<long long>(i) * m);  // one 8- or 16-byte load
    *re = static_cast<double>(v.x) * corr;
    *im = static_cast<double>(v.y) * corr;
  };
  if (Q == 1) {
    double c1 = 0, s1 = 0, c2, s2, yc, ys;
    if (d.fit_mean) {
      sum(0, &c1, &s1);
      sum(1, &c2, &s2);
      sum(2, &yc, &ys);
    } else {  // no w sum at j = 1
      sum(0, &c2, &s2);
      sum(1, &yc, &ys);
    }
    return gpucompute_kernels::LombScarglePower<double>(c1, s1, yc, ys, 0.5 * (1 + c2), 0.5 * s2,
                                                        d.fit_mean != 0, d.normalization, d.yy,
                                                        d.psd_scale);
  }
  double cw[2 * Q + 1], sw[2 * Q + 1], yc[Q + 1], ys[Q + 1];
  cw[0] = 1;  // the weights sum to 1
  sw[0] = 0;
  yc[0] = ys[0] = 0;
#pragma unroll
  for (int j = 1; j <= 2 * Q; ++j) sum(j - 1, &cw[j], &sw[j]);
#pragma unroll
  for (int j = 1; j <= Q; ++j) sum(2 * Q + j - 1, &yc[j], &ys[j]);
  return gpucompute_kernels::HarmonicPower<double>(cw, sw, yc, ys, Q, d.fit_mean != 0,
                                                   d.normalization, d.yy, d.psd_scale);
}

// The power launches' blocks past main_blocks run the low piece's frequencies, one a block
// (lombscargle_low.cuh); true for such a block, which has nothing else to do.
template <typename T>
__device__ __forceinline__ bool RanLowPieceBlock(unsigned main_blocks, const NufftLowPiece<T>& low,
                                                 T* __restrict__ power, LsPeak* __restrict__ partials) {
  if (blockIdx.x < main_blocks) return false;
  LowFrequencyBlock<kNufftPowerBlock>(low.desc[low.index], blockIdx.x - main_blocks, low.t, low.w,
                                      low.wy, power, partials);
  return true;
}

// One thread per mode: the series' harmonic sums at k, deconvolved, then the power (float64
// arithmetic whatever T: the sums are what the dtype limits). Q is the series' nterms, so that
// the sums stay in registers.
template <typename T, int Q>
__global__ void __launch_bounds__(kNufftPowerBlock)
NufftPower(const NufftSeriesDesc* __restrict__ series, int index, const T* __restrict__ grid,
           const double* __restrict__ correction, T* __restrict__ power,
           LsPeak* __restrict__ partials, unsigned main_blocks, NufftLowPiece<T> low) {
  if (RanLowPieceBlock(main_blocks, low, power, partials)) return;
  const NufftSeriesDesc& d = series[index];
  const long long k = static_cast<long long>(blockIdx.x) * kNufftPowerBlock + threadIdx.x;
  double best = 0;
  long long best_k = -1;
  if (k >= d.low && k < d.modes) {
    const long long mode = k - d.centre;
    const long long m = d.grid_size;
    const long long at = mode >= 0 ? mode : mode + m;
    const T* cell = grid + 2 * (d.grid_offset + at);
    const double corr = correction[k];
    const T out = static_cast<T>(PowerFromTransforms<T, Q>(d, cell, m, corr));
    if (d.out_offset >= 0) power[d.out_offset + k] = out;
    gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(out), k);
  }
  gpucompute_kernels::BlockReducePeak<kNufftPowerBlock>(best, best_k);
  if (threadIdx.x == 0) partials[d.peak_offset + blockIdx.x] = LsPeak{best_k, best};
}

// The power of a windowed series: block = tile of kWindowTile q x kWindowTile r. Mode
// k - c = R q + r is bin kp = q mod L of copy r, sign (-1)^kp. Phase 1 stages the tile's
// deconvolution factors (along r: coalesced in k), phase 2 reads the sums along q (coalesced
// in the grid) and computes the power, phase 3 writes it along r.
template <typename T, int Q>
__global__ void __launch_bounds__(kNufftPowerBlock)
NufftPowerWindowed(const NufftSeriesDesc* __restrict__ series, int index, const T* __restrict__ grid,
                   const double* __restrict__ correction, T* __restrict__ power,
                   LsPeak* __restrict__ partials, unsigned main_blocks, NufftLowPiece<T> low) {
  if (RanLowPieceBlock(main_blocks, low, power, partials)) return;
  constexpr int kRows = kNufftPowerBlock / kWindowTile;  // 8
  __shared__ double s_corr[kWindowTile][kWindowTile + 1];  // [q][r]
  __shared__ T s_power[kWindowTile][kWindowTile + 1];      // [q][r]
  const NufftSeriesDesc& d = series[index];
  const int m = static_cast<int>(d.grid_size), l = static_cast<int>(d.window), copies = m / l;
  const int tiles_r = (copies + kWindowTile - 1) / kWindowTile;
  const int r0 = (blockIdx.x % tiles_r) * kWindowTile;
  const long long q0 = d.q_min + static_cast<long long>(blockIdx.x / tiles_r) * kWindowTile;
  const long long q_end = d.q_min + d.q_count;
  const long long k_low = d.low, k_end = d.modes, centre = d.centre;
  const int tx = threadIdx.x % kWindowTile, ty = threadIdx.x / kWindowTile;
  // k of (q, r), or -1 outside the grid.
  auto mode_k = [&](long long q, int r) -> long long {
    if (r >= copies || q >= q_end) return -1;
    const long long k = q * copies + r + centre;
    return k >= k_low && k < k_end ? k : -1;
  };
#pragma unroll
  for (int e = 0; e < kWindowTile / kRows; ++e) {
    const int ql = ty + e * kRows;
    const long long k = mode_k(q0 + ql, r0 + tx);
    s_corr[ql][tx] = k >= 0 ? correction[k] : 0.0;
  }
  __syncthreads();
  double best = 0;
  long long best_k = -1;
#pragma unroll
  for (int e = 0; e < kWindowTile / kRows; ++e) {
    const int rl = ty + e * kRows;
    const long long q = q0 + tx;
    const long long k = mode_k(q, r0 + rl);
    if (k < 0) continue;
    const int kp = static_cast<int>(q < 0 ? q + l : q);
    const T* cell = grid + 2 * (d.grid_offset + static_cast<long long>(r0 + rl) * l + kp);
    const double corr = (kp & 1) ? -s_corr[tx][rl] : s_corr[tx][rl];
    const T out = static_cast<T>(PowerFromTransforms<T, Q>(d, cell, m, corr));
    s_power[tx][rl] = out;
    gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(out), k);
  }
  __syncthreads();
  if (d.out_offset >= 0) {
#pragma unroll
    for (int e = 0; e < kWindowTile / kRows; ++e) {
      const int ql = ty + e * kRows;
      const long long k = mode_k(q0 + ql, r0 + tx);
      if (k >= 0) power[d.out_offset + k] = s_power[ql][tx];
    }
  }
  gpucompute_kernels::BlockReducePeak<kNufftPowerBlock>(best, best_k);
  if (threadIdx.x == 0) partials[d.peak_offset + blockIdx.x] = LsPeak{best_k, best};
}

template <typename T, int Q>
void LaunchPower(unsigned blocks, unsigned low_blocks, bool windowed, const NufftSeriesDesc* series,
                 int index, const T* grid, const double* correction, T* power, LsPeak* partials,
                 const NufftLowPiece<T>& low, cudaStream_t stream) {
  if (windowed) {
    NufftPowerWindowed<T, Q><<<blocks + low_blocks, kNufftPowerBlock, 0, stream>>>(
        series, index, grid, correction, power, partials, blocks, low);
  } else {
    NufftPower<T, Q><<<blocks + low_blocks, kNufftPowerBlock, 0, stream>>>(
        series, index, grid, correction, power, partials, blocks, low);
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchNufftSpread(const NufftSeriesDesc* series, const NufftTransform* transforms,
                              int n_transforms, int max_samples, const double* t, const T* w,
                              const T* wy, T* grid, T* windows, cudaStream_t stream) {
  if (n_transforms == 0 || max_samples == 0) return cudaSuccess;
  constexpr int kPoints = kSpreadBlock / kSpreadCells;
  const dim3 blocks((max_samples + kPoints - 1) / kPoints, n_transforms);
  NufftSpread<T><<<blocks, kSpreadBlock, 0, stream>>>(series, transforms, t, w, wy, grid, windows);
  return cudaPeekAtLastError();
}

template <typename T>
cudaError_t LaunchNufftExpand(const NufftSeriesDesc* series, int index, const NufftSeriesDesc& host,
                              const T* windows, T* grid, cudaStream_t stream) {
  if (host.window == 0 || host.n_transforms == 0) return cudaSuccess;
  constexpr int kChunk = kExpandBlock * kExpandPerThread;
  const dim3 blocks(static_cast<unsigned>((host.window + kChunk - 1) / kChunk),
                    static_cast<unsigned>(host.grid_size / host.window),
                    static_cast<unsigned>(host.n_transforms));
  NufftExpand<T><<<blocks, kExpandBlock, 0, stream>>>(series, index, windows, grid);
  return cudaPeekAtLastError();
}

template cudaError_t LaunchNufftExpand<float>(const NufftSeriesDesc*, int, const NufftSeriesDesc&,
                                              const float*, float*, cudaStream_t);
template cudaError_t LaunchNufftExpand<double>(const NufftSeriesDesc*, int, const NufftSeriesDesc&,
                                               const double*, double*, cudaStream_t);

cudaError_t LaunchNufftCorrection(const NufftCorrectionNodes& nodes, long long modes,
                                  long long centre, long long grid_size, int width,
                                  double* correction, cudaStream_t stream) {
  if (nodes.count < 0 || nodes.count > kMaxCorrectionNodes) return cudaErrorInvalidValue;
  if (modes == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((modes + kCorrectionBlock - 1) / kCorrectionBlock);
  NufftCorrection<<<blocks, kCorrectionBlock, 0, stream>>>(nodes, modes, centre, grid_size, width,
                                                           correction);
  return cudaPeekAtLastError();
}

template <typename T>
cudaError_t LaunchNufftPower(const NufftSeriesDesc* series, int index, const NufftSeriesDesc& host,
                             const T* grid, const double* correction, T* power, LsPeak* partials,
                             const NufftLowPiece<T>& low, cudaStream_t stream) {
  if (host.modes == 0) return cudaSuccess;
  const bool windowed = host.window > 0;
  const unsigned blocks = static_cast<unsigned>(NufftPowerBlocks(
      host.modes, windowed ? host.grid_size / host.window : 0, host.q_count));
  const unsigned low_blocks = low.desc != nullptr ? static_cast<unsigned>(host.low) : 0;
  const int nterms = host.nterms;
  switch (nterms) {
    case 1: LaunchPower<T, 1>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 2: LaunchPower<T, 2>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 3: LaunchPower<T, 3>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 4: LaunchPower<T, 4>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 5: LaunchPower<T, 5>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 6: LaunchPower<T, 6>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 7: LaunchPower<T, 7>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    case 8: LaunchPower<T, 8>(blocks, low_blocks, windowed, series, index, grid, correction, power, partials, low, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaPeekAtLastError();
}

template cudaError_t LaunchNufftSpread<float>(const NufftSeriesDesc*, const NufftTransform*, int, int,
                                              const double*, const float*, const float*, float*,
                                              float*, cudaStream_t);
template cudaError_t LaunchNufftSpread<double>(const NufftSeriesDesc*, const NufftTransform*, int, int,
                                               const double*, const double*, const double*, double*,
                                               double*, cudaStream_t);
template cudaError_t LaunchNufftPower<float>(const NufftSeriesDesc*, int, const NufftSeriesDesc&,
                                             const float*, const double*, float*, LsPeak*,
                                             const NufftLowPiece<float>&, cudaStream_t);
template cudaError_t LaunchNufftPower<double>(const NufftSeriesDesc*, int, const NufftSeriesDesc&,
                                              const double*, const double*, double*, LsPeak*,
                                              const NufftLowPiece<double>&, cudaStream_t);

}  // namespace gpucompute::kernels
