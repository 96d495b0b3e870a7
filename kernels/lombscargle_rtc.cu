// Lomb-Scargle periodogram kernel, compiled at run time by NVRTC (server/runtime/cuda/
// kernel_cache) with these macros:
//   LS_T      float or double: accumulation and trigonometry type
//   LS_BLOCK  threads per block; LS_K frequencies per thread; LS_TILE samples per smem tile
//   LS_MIN_BLOCKS  resident blocks per SM the register allocation must allow (0: no bound)
// One launch covers every series and frequency of a batch: each block takes one
// (series, chunk) from the work table, with all its samples or, in a small batch, one part of
// them (GatherParts). A thread owns LS_K frequencies spaced LS_BLOCK grid
// steps apart. Phases are formed and reduced modulo one cycle in float64 (t is centred on the
// host), so float32 trigonometry sees an argument in [-pi, pi] however long the baseline. On
// uniform grids one exact sin/cos per sample seeds the thread's first frequency and angle
// addition reaches the others: one rotation by theta = 2 pi LS_BLOCK df t (tabulated per sample)
// gives the second, then the Chebyshev recurrence x_{j+1} = 2 cos(theta) x_j - x_{j-1} (one FMA
// each for cos and sin) the rest. Its rounding error grows at most linearly in j (<= LS_K ulp).
#include "lombscargle_abi.cuh"
#include "lombscargle_math.cuh"

using gpucompute_kernels::LsBlockWork;
using gpucompute_kernels::LsSeriesDesc;
typedef LS_T T;

__device__ __forceinline__ void SinCosPi(float x, float* s, float* c) { sincospif(x, s, c); }
__device__ __forceinline__ void SinCosPi(double x, double* s, double* c) { sincospi(x, s, c); }

// sin and cos of 2 pi * (x reduced modulo 1), the reduction in float64.
__device__ __forceinline__ void SinCosCycles(double x, T* s, T* c) {
  const double r = x - rint(x);
  SinCosPi(static_cast<T>(2.0 * r), s, c);
}

struct Acc {
  T c, s, yc, ys, cc, cs;
};

template <bool kShift>
__device__ __forceinline__ void Accumulate(Acc& a, T w, T wy, T cv, T sv) {
  if (kShift) cv -= T(1);
  const T wc = w * cv;
  a.c += wc;
  a.s = fma(w, sv, a.s);
  a.yc = fma(wy, cv, a.yc);
  a.ys = fma(wy, sv, a.ys);
  a.cc = fma(wc, cv, a.cc);
  a.cs = fma(wc, sv, a.cs);
}

// Adds one shared-memory tile of m samples to the thread's LS_K accumulators.
template <bool kShift>
__device__ __forceinline__ void AccumulateTile(bool uniform, int m, double f_first,
                                               const double* s_f, const double* s_t,
                                               const T* s_w, const T* s_wy, const T* s_dc,
                                               const T* s_ds, Acc* acc) {
  if (uniform) {
    for (int i = 0; i < m; ++i) {
      T s0, c0;
      SinCosCycles(f_first * s_t[i], &s0, &c0);
      const T wi = s_w[i], wyi = s_wy[i], dc = s_dc[i], ds = s_ds[i];
      Accumulate<kShift>(acc[0], wi, wyi, c0, s0);
#if LS_K > 1
      {
        T c1 = fma(c0, dc, -s0 * ds), s1 = fma(s0, dc, c0 * ds);
        Accumulate<kShift>(acc[1], wi, wyi, c1, s1);
        const T dc2 = dc + dc;
#pragma unroll
        for (int j = 2; j < LS_K; ++j) {
          const T c2 = fma(dc2, c1, -c0), s2 = fma(dc2, s1, -s0);
          Accumulate<kShift>(acc[j], wi, wyi, c2, s2);
          c0 = c1;
          s0 = s1;
          c1 = c2;
          s1 = s2;
        }
      }
#endif
    }
  } else {
    // One frequency at a time over the tile: a sin/cos per pair either way, and only one
    // in flight keeps the registers for the accumulators (no spills).
#pragma unroll
    for (int j = 0; j < LS_K; ++j) {
      const double fj = s_f[j * LS_BLOCK + threadIdx.x];
      for (int i = 0; i < m; ++i) {
        T sv, cv;
        SinCosCycles(fj * s_t[i], &sv, &cv);
        Accumulate<kShift>(acc[j], s_w[i], s_wy[i], cv, sv);
      }
    }
  }
}

#if LS_MIN_BLOCKS > 0
#define LS_LAUNCH_BOUNDS __launch_bounds__(LS_BLOCK, LS_MIN_BLOCKS)
#else
#define LS_LAUNCH_BOUNDS __launch_bounds__(LS_BLOCK)
#endif

// A chunk summed in parts (LsBlockWork): each block stores its sums in its row of `part_sums`
// (6 per frequency: LS_K x LS_BLOCK x 6 values a row) and counts itself in the chunk's
// `part_done` (zero before the launch); the last one in reads every row, in part order.
// Returns false in the blocks that are not last.
__device__ __forceinline__ bool GatherParts(const LsBlockWork& job, Acc* acc, T* part_sums,
                                            unsigned int* part_done) {
  const int row = LS_K * LS_BLOCK * 6;
  T* mine = part_sums + static_cast<long long>(job.sums + job.part) * row;
#pragma unroll
  for (int j = 0; j < LS_K; ++j) {
    T* o = mine + (j * LS_BLOCK + threadIdx.x) * 6;
    o[0] = acc[j].c; o[1] = acc[j].s; o[2] = acc[j].yc; o[3] = acc[j].ys; o[4] = acc[j].cc; o[5] = acc[j].cs;
  }
  __threadfence();
  __syncthreads();
  __shared__ bool s_last;
  if (threadIdx.x == 0) s_last = atomicAdd(&part_done[job.slot], 1u) == static_cast<unsigned int>(job.parts - 1);
  __syncthreads();
  if (!s_last) return false;
  __threadfence();
#pragma unroll
  for (int j = 0; j < LS_K; ++j) {
    Acc a = Acc{0, 0, 0, 0, 0, 0};
    for (int p = 0; p < job.parts; ++p) {
      const T* in = part_sums + static_cast<long long>(job.sums + p) * row + (j * LS_BLOCK + threadIdx.x) * 6;
      a.c += __ldcg(in); a.s += __ldcg(in + 1); a.yc += __ldcg(in + 2);
      a.ys += __ldcg(in + 3); a.cc += __ldcg(in + 4); a.cs += __ldcg(in + 5);
    }
    acc[j] = a;
  }
  return true;
}

extern "C" __global__ void LS_LAUNCH_BOUNDS
lombscargle(const LsSeriesDesc* __restrict__ series, const LsBlockWork* __restrict__ work,
            const double* __restrict__ t, const T* __restrict__ w, const T* __restrict__ wy,
            const double* __restrict__ explicit_freqs, T* __restrict__ power,
            gpucompute_kernels::LsPeak* __restrict__ block_peaks, T* __restrict__ part_sums,
            unsigned int* __restrict__ part_done) {
  __shared__ double s_t[LS_TILE];
  __shared__ T s_w[LS_TILE], s_wy[LS_TILE], s_dc[LS_TILE], s_ds[LS_TILE];

  const LsBlockWork job = work[blockIdx.x];
  const LsSeriesDesc d = series[job.series];
  const long long k_first = static_cast<long long>(job.chunk) * (LS_BLOCK * LS_K) + threadIdx.x;
  const bool uniform = d.explicit_offset < 0;

  // Uniform grids need only the thread's first frequency; explicit grids keep the block's
  // frequencies in shared memory rather than LS_K registers per thread.
  __shared__ double s_f[LS_BLOCK * LS_K];
  const double f_first = uniform ? d.f0 + static_cast<double>(k_first) * d.df : 0.0;
  if (!uniform) {
    for (int j = 0; j < LS_K; ++j) {
      const long long k = k_first + static_cast<long long>(j) * LS_BLOCK;
      s_f[j * LS_BLOCK + threadIdx.x] = k < d.n_freq ? explicit_freqs[d.explicit_offset + k] : 0.0;
    }
  }
  const double f_step = static_cast<double>(LS_BLOCK) * d.df;

  // Sums over cos - 1 (see LombScarglePower) where it matters: with a floating mean, in blocks
  // holding frequencies whose phases span under a quarter cycle either side of the reference
  // sample (there cos clusters near 1), and on explicit grids. Elsewhere the plain sums are as
  // accurate and cost one operation less per pair.
  const double f_lo = uniform ? d.f0 + static_cast<double>(job.chunk) * (LS_BLOCK * LS_K) * d.df : 0.0;
  const bool shifted = d.fit_mean != 0 && f_lo * d.t_absmax < 0.25;

  Acc acc[LS_K];
#pragma unroll
  for (int j = 0; j < LS_K; ++j) acc[j] = Acc{0, 0, 0, 0, 0, 0};

  for (int start = job.sample_begin; start < job.sample_end; start += LS_TILE) {
    const int m = min(LS_TILE, job.sample_end - start);
    __syncthreads();
    for (int i = threadIdx.x; i < m; i += LS_BLOCK) {
      const long long g = d.sample_offset + start + i;
      const double ti = t[g];
      s_t[i] = ti;
      s_w[i] = w[g];
      s_wy[i] = wy[g];
      if (uniform) SinCosCycles(f_step * ti, &s_ds[i], &s_dc[i]);
    }
    __syncthreads();
    if (shifted) {
      AccumulateTile<true>(uniform, m, f_first, s_f, s_t, s_w, s_wy, s_dc, s_ds, acc);
    } else {
      AccumulateTile<false>(uniform, m, f_first, s_f, s_t, s_w, s_wy, s_dc, s_ds, acc);
    }
  }

  if (job.parts > 1 && !GatherParts(job, acc, part_sums, part_done)) return;

  const T yy = static_cast<T>(d.yy), psd = static_cast<T>(d.psd_scale);
  double best = 0;
  long long best_k = -1;
#pragma unroll
  for (int j = 0; j < LS_K; ++j) {
    const long long k = k_first + static_cast<long long>(j) * LS_BLOCK;
    if (k < d.n_freq) {
      const Acc& a = acc[j];
      const T p = gpucompute_kernels::LombScarglePower<T>(
          a.c, a.s, a.yc, a.ys, a.cc, a.cs, d.fit_mean != 0, d.normalization, yy, psd,
          shifted);
      power[d.out_offset + k] = p;
      gpucompute_kernels::BetterPeak(best, best_k, static_cast<double>(p), k);
    }
  }
  // The block's peak; the peak-reduction kernel combines a series' blocks, so the power is
  // never read back for it.
  gpucompute_kernels::BlockReducePeak<LS_BLOCK>(best, best_k);
  if (threadIdx.x == 0) block_peaks[job.slot] = gpucompute_kernels::LsPeak{best_k, best};
}
