// The ETKF transform by a coupled Newton-Schulz iteration (see etkf_transform.cuh).
//
// Algebra. G is symmetric with eigenvalues in [N-1, s], s = min(max row sum of |G|, ||G||_F).
// With Y0 = G / s, Z0 = I and, each iteration, M = Z Y, Tk = (3 I - M) / 2, Y <- Y Tk,
// Z <- Tk Z (Higham, "Functions of Matrices", the stable coupled form), Z -> (G / s)^-1/2. Every
// iterate is a polynomial in G, so on an eigenvalue p = lambda / s the error e = 1 - z y obeys
// e' = e^2 (3 + e) / 4: monotone, so the smallest eigenvalue (p >= (N-1) / s) is the slowest,
// and the number of iterations follows from the bound before the first one (no residual test:
// one more than the scalar recurrence needs to reach 1e-9 from 1 - (N-1) / s, so the last
// error is ~1e-18; extra iterations are harmless because the coupled form is stable).
// Then wbar = G^-1 b = Z (Z b) / s with one step of refinement against G, and
// T = sqrt((N-1) / s) Z + wbar 1^T.
//
// Layout. One block per problem; the matrices in shared memory row-major, order Np (N rounded
// up to 8, padded with an identity block that the iteration keeps), leading dimension Np + 4
// (the A fragments' loads without bank conflicts, B's two-way). Products on the tensor cores:
// one warp per 8 x 8 output tile, mma.m8n8k4 in float64 (IEEE fused multiply-adds).
#include "kernels/assimilate/etkf_transform.cuh"

#include <algorithm>
#include <cmath>

#include "kernels/assimilate/assimilate_kernels.cuh"
#include "kernels/assimilate/warp_ops.cuh"

namespace gpucompute::assimilate::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxWarps = 32;
constexpr int kFromEigThreads = 256;

int PaddedOrder(int N) { return (N + 7) / 8 * 8; }

size_t NsSmem(int N) {
  const int Np = PaddedOrder(N);
  return (static_cast<size_t>(5) * Np * (Np + 4) + 4 * static_cast<size_t>(Np)) * sizeof(double);
}

int NsWarps(int N) {
  const int nt = PaddedOrder(N) / 8;
  return std::min(kMaxWarps, std::max(4, 2 * nt * nt));
}

// The lane's two elements (row bi*8 + lane/4, columns bj*8 + 2 (lane%4) + {0, 1}) of A B (both
// row-major, leading dimension ld, order Np). Two accumulator chains (even and odd k steps)
// halve the dependent MMA latency. B is read by columns although the exact iterates are
// symmetric: A B^T in place of A B is unstable (float64 experiments on the CPU, described in
// docs/design/assimilate.md: the rounding's antisymmetric part grows until the iteration
// diverges at cond(G) ~ 1e4), so are symmetrised iterates; only the plain products keep the
// coupled iteration's stability.
template <int kNp>
__device__ __forceinline__ void TileProduct(const double* __restrict__ a, const double* __restrict__ b,
                                            int bi, int bj, int lane, double& d0, double& d1) {
  constexpr int ld = kNp + 4;
  const int g = lane >> 2, q = lane & 3;
  const double* ar = a + (bi * 8 + g) * ld + q;
  const double* bc = b + q * ld + bj * 8 + g;
  double e0 = 0, e1 = 0, o0 = 0, o1 = 0;
#pragma unroll
  for (int k = 0; k < kNp; k += 8) {
    MmaF64(e0, e1, ar[k], bc[k * ld]);
    MmaF64(o0, o1, ar[k + 4], bc[(k + 4) * ld]);
  }
  d0 = e0 + o0;
  d1 = e1 + o1;
}

template <typename T, int kNp>
__global__ void __launch_bounds__(kMaxWarps * kWarp) EtkfNsKernel(int N, const T* __restrict__ c_all,
                                                                  int64_t c_stride, T* __restrict__ t_all,
                                                                  T* __restrict__ v_all, int* __restrict__ flag,
                                                                  bool force_fallback) {
  extern __shared__ __align__(16) double smem[];
  __shared__ double red[2][kMaxWarps];
  __shared__ int bad;
  constexpr int Np = kNp, ld = kNp + 4, nt = kNp / 8, tiles = nt * nt, mat = Np * ld;
  double* y = smem;
  double* z = y + mat;
  double* tm = z + mat;
  double* y2 = tm + mat;
  double* z2 = y2 + mat;
  double* b = z2 + mat;  // b, then Z b / r
  double* u = b + Np;
  double* w = u + Np;
  double* r = w + Np;
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, warps = blockDim.x / kWarp;
  const int p = blockIdx.x;
  const int64_t nn = static_cast<int64_t>(N) * N;
  const T* gp = c_all + p * c_stride;  // column-major; lower triangle of G, then b
  auto G = [&](int i, int j) -> double {
    return static_cast<double>(i >= j ? gp[j * N + i] : gp[i * N + j]);
  };
  for (int e = tid; e < Np * Np; e += blockDim.x) {
    const int i = e / Np, j = e - i * Np;
    const double id = i == j ? 1.0 : 0.0;
    y[i * ld + j] = i < N && j < N ? G(i, j) : id;
    z[i * ld + j] = id;
  }
  if (tid < N) b[tid] = static_cast<double>(gp[nn + tid]);
  if (tid == 0) bad = 0;
  __syncthreads();
  // s >= lambda_max: the smaller of the largest absolute row sum and the Frobenius norm.
  double gersh = 0, frob = 0;
  for (int i = warp; i < N; i += warps) {
    double sa = 0, sq = 0;
    for (int j = lane; j < N; j += kWarp) {
      const double v = y[i * ld + j];
      sa += fabs(v);
      sq += v * v;
    }
    gersh = fmax(gersh, WarpSum(sa));
    frob += WarpSum(sq);
  }
  if (lane == 0) {
    red[0][warp] = gersh;
    red[1][warp] = frob;
  }
  __syncthreads();
  double gm = 0, fr = 0;
  for (int k = 0; k < warps; ++k) {
    gm = fmax(gm, red[0][k]);
    fr += red[1][k];
  }
  const double s = fmin(gm, sqrt(fr));
  const double bound = s / (N - 1);
  bool fallback = force_fallback || !(bound <= kEtkfNsMaxCondition);  // NaN: fall back
  if (!fallback) {
    int iterations = 1;
    for (double e = fmax(0.0, 1.0 - (N - 1) / s); e > 1e-9; e = e * e * (3 + e) / 4) ++iterations;
    const double inv_s = 1.0 / s;
    for (int e = tid; e < N * N; e += blockDim.x) {
      const int i = e / N, j = e - i * N;
      y[i * ld + j] *= inv_s;
    }
    __syncthreads();
    const int g = lane >> 2, q = lane & 3;
    for (int it = 0; it < iterations; ++it) {
      // Tk = (3 I - Z Y) / 2.
      for (int task = warp; task < tiles; task += warps) {
        const int bi = task / nt, bj = task - bi * nt;
        double d0, d1;
        TileProduct<kNp>(z, y, bi, bj, lane, d0, d1);
        const int row = bi * 8 + g, col = bj * 8 + 2 * q;
        tm[row * ld + col] = (row == col ? 1.5 : 0.0) - 0.5 * d0;
        tm[row * ld + col + 1] = (row == col + 1 ? 1.5 : 0.0) - 0.5 * d1;
      }
      __syncthreads();
      // Z <- Tk Z (tasks [0, tiles)), Y <- Y Tk (tasks [tiles, 2 tiles); not after the last).
      const int tasks = it + 1 == iterations ? tiles : 2 * tiles;
      for (int task = warp; task < tasks; task += warps) {
        const bool zt = task < tiles;
        const int tt = zt ? task : task - tiles;
        const int bi = tt / nt, bj = tt - bi * nt;
        double d0, d1;
        if (zt) {
          TileProduct<kNp>(tm, z, bi, bj, lane, d0, d1);
        } else {
          TileProduct<kNp>(y, tm, bi, bj, lane, d0, d1);
        }
        double* o = zt ? z2 : y2;
        const int row = bi * 8 + g, col = bj * 8 + 2 * q;
        *reinterpret_cast<double2*>(o + row * ld + col) = make_double2(d0, d1);
      }
      __syncthreads();
      double* sw = z;
      z = z2;
      z2 = sw;
      sw = y;
      y = y2;
      y2 = sw;
    }
    // tm <- Zs = (Z + Z^T) / 2 (the iterate's rounding is not symmetric).
    for (int e = tid; e < N * N; e += blockDim.x) {
      const int i = e / N, j = e - i * N;
      tm[i * ld + j] = 0.5 * (z[i * ld + j] + z[j * ld + i]);
    }
    __syncthreads();
    // out[i] = sum_k A(i, k) x[k], one warp per row; A = Zs (tm) or, with use_g, G from global.
    auto matvec = [&](const double* x, double* out, double scale, bool use_g, bool add) {
      for (int i = warp; i < N; i += warps) {
        double acc = 0;
        for (int k = lane; k < N; k += kWarp) acc = fma(use_g ? G(i, k) : tm[i * ld + k], x[k], acc);
        acc = WarpSum(acc) * scale;
        if (lane == 0) out[i] = add ? out[i] + acc : acc;
      }
      __syncthreads();
    };
    matvec(b, u, 1.0, false, false);    // u = Zs b
    matvec(u, w, inv_s, false, false);  // w = Zs u / s ~ G^-1 b
    matvec(w, r, -1.0, true, false);    // r = -G w
    if (tid < N) r[tid] += b[tid];      // r = b - G w
    __syncthreads();
    matvec(r, u, 1.0, false, false);   // u = Zs r
    matvec(u, w, inv_s, false, true);  // w += Zs u / s
    const double f = sqrt((N - 1) * inv_s);
    T* t = t_all + p * nn;
    for (int e = tid; e < N * N; e += blockDim.x) {
      const int k = e / N, j = e - k * N;  // column-major (j, k)
      const double v = fma(f, tm[j * ld + k], w[j]);
      if (!isfinite(v)) bad = 1;
      t[e] = static_cast<T>(v);
    }
    __syncthreads();
    fallback = bad != 0;
  }
  if (fallback) {
    T* v = v_all + p * nn;
    for (int e = tid; e < N * N; e += blockDim.x) {
      const int k = e / N, j = e - k * N;
      v[e] = static_cast<T>(G(j, k));
    }
  }
  if (tid == 0) flag[p] = fallback ? 1 : 0;
}

// The flagged problems after the Jacobi eigendecomposition of v (V column-major, eigenvalues
// ev): T = V diag(sqrt((N-1)/ev)) V^T + (V diag(1/ev) V^T b) 1^T; info[p] = 1 when an
// eigenvalue is not positive.
template <typename T>
__global__ void __launch_bounds__(kFromEigThreads) EtkfFromEigKernel(
    int N, const T* __restrict__ v_all, const T* __restrict__ ev_all, const T* __restrict__ c_all,
    int64_t c_stride, T* __restrict__ t_all, int* __restrict__ info, const int* __restrict__ flag) {
  const int p = blockIdx.x;
  if (flag[p] == 0) return;
  __shared__ double uu[kMaxEtkfNsOrder], ff[kMaxEtkfNsOrder];
  const int64_t nn = static_cast<int64_t>(N) * N;
  const T* v = v_all + p * nn;
  const T* ev = ev_all + static_cast<int64_t>(p) * N;
  const T* b = c_all + p * c_stride + nn;
  const int tid = threadIdx.x;
  if (tid < N) {
    const double lam = static_cast<double>(ev[tid]);
    double acc = 0;
    for (int i = 0; i < N; ++i) acc += static_cast<double>(v[tid * N + i]) * static_cast<double>(b[i]);
    const bool ok = lam > 0;
    uu[tid] = ok ? acc / lam : 0.0;
    ff[tid] = ok ? sqrt((N - 1) / lam) : 0.0;
    if (!ok) info[p] = 1;
  }
  __syncthreads();
  T* t = t_all + p * nn;
  for (int e = tid; e < N * N; e += blockDim.x) {
    const int k = e / N, j = e - k * N;
    double acc = 0;
    for (int l = 0; l < N; ++l) {
      const double vjl = static_cast<double>(v[l * N + j]);
      acc += vjl * (ff[l] * static_cast<double>(v[l * N + k]) + uu[l]);
    }
    t[e] = static_cast<T>(acc);
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchEtkfTransform(int P, int N, const T* c, int64_t c_stride, T* t, T* v, T* ev,
                                int* info, int* flag, bool force_fallback, cudaStream_t stream) {
  if (N < 2 || N > kMaxEtkfNsOrder || P < 1) return cudaErrorInvalidValue;
  const size_t smem = NsSmem(N);
  auto launch = [&](auto kernel) {
    const cudaError_t a = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (a != cudaSuccess) return a;
    kernel<<<P, NsWarps(N) * kWarp, smem, stream>>>(N, c, c_stride, t, v, flag, force_fallback);
    return cudaGetLastError();
  };
  cudaError_t e = cudaErrorInvalidValue;
  switch (PaddedOrder(N)) {  // the order as a constant: the products' loops fully unrolled
    case 8: e = launch(EtkfNsKernel<T, 8>); break;
    case 16: e = launch(EtkfNsKernel<T, 16>); break;
    case 24: e = launch(EtkfNsKernel<T, 24>); break;
    case 32: e = launch(EtkfNsKernel<T, 32>); break;
    case 40: e = launch(EtkfNsKernel<T, 40>); break;
    case 48: e = launch(EtkfNsKernel<T, 48>); break;
    case 56: e = launch(EtkfNsKernel<T, 56>); break;
    case 64: e = launch(EtkfNsKernel<T, 64>); break;
  }
  if (e != cudaSuccess) return e;
  // The fallback: blocks of unflagged problems return at once.
  if ((e = LaunchJacobiEig<T>(P, N, v, ev, stream, flag)) != cudaSuccess) return e;
  EtkfFromEigKernel<T><<<P, kFromEigThreads, 0, stream>>>(N, v, ev, c, c_stride, t, info, flag);
  return cudaGetLastError();
}

template cudaError_t LaunchEtkfTransform<float>(int, int, const float*, int64_t, float*, float*, float*,
                                                int*, int*, bool, cudaStream_t);
template cudaError_t LaunchEtkfTransform<double>(int, int, const double*, int64_t, double*, double*,
                                                 double*, int*, int*, bool, cudaStream_t);

}  // namespace gpucompute::assimilate::kernels
