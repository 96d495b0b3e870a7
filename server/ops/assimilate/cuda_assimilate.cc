// CUDA host code of the Assimilate op (see cuda_assimilate.h; the algebra is assimilate.h's).
#include "server/ops/assimilate/cuda_assimilate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <cublas_v2.h>
#include <cusolverDn.h>

#include "absl/strings/internal/resize_uninitialized.h"
#include "absl/strings/str_cat.h"
#include "kernels/assimilate/assimilate_kernels.cuh"
#include "kernels/assimilate/etkf_transform.cuh"
#include "kernels/assimilate/letkf.cuh"
#include "math/chebyshev.h"
#include "math/inverse_sqrt.h"
#include "common/nvtx.h"
#include "common/parallel_copy.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "server/device/cuda_resources.h"
#include "server/device/cusolver.h"
#include "server/device/stream_buffers.h"
#include "server/ops/assimilate/letkf_geometry.h"
#include "server/ops/assimilate/tuning.h"

namespace gpucompute::assimilate {
namespace {

using kernels::ProblemParams;



// ---- cuBLAS / cuSOLVER for float and double under one name -------------------------------

template <typename T>
struct Lib;

template <>
struct Lib<double> {
  static cublasStatus_t GemmSB(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                               int n, int k, double alpha, const double* a, int lda, int64_t sa,
                               const double* b, int ldb, int64_t sb, double beta, double* c,
                               int ldc, int64_t sc, int batch) {
    return cublasDgemmStridedBatched(h, ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c,
                                     ldc, sc, batch);
  }
  static cublasStatus_t Gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                             int n, int k, double alpha, const double* a, int lda, const double* b,
                             int ldb, double beta, double* c, int ldc) {
    return cublasDgemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  }
  static cublasStatus_t GemvSB(cublasHandle_t h, cublasOperation_t t, int m, int n, const double* a,
                               int lda, int64_t sa, const double* x, int incx, int64_t sx, double* y,
                               int64_t sy, int batch) {
    const double one = 1, zero = 0;
    return cublasDgemvStridedBatched(h, t, m, n, &one, a, lda, sa, x, incx, sx, &zero, y, 1, sy, batch);
  }
  static cublasStatus_t Syrk(cublasHandle_t h, cublasOperation_t t, int n, int k, const double* a,
                             int lda, double* c, int ldc) {
    const double one = 1, zero = 0;
    return cublasDsyrk(h, CUBLAS_FILL_MODE_LOWER, t, n, k, &one, a, lda, &zero, c, ldc);
  }
  static cublasStatus_t Trsm(cublasHandle_t h, cublasSideMode_t side, cublasOperation_t t, int m,
                             int n, const double* a, int lda, double* b, int ldb) {
    const double one = 1;
    return cublasDtrsm(h, side, CUBLAS_FILL_MODE_LOWER, t, CUBLAS_DIAG_NON_UNIT, m, n, &one, a, lda,
                       b, ldb);
  }
  static cublasStatus_t TrsmBatched(cublasHandle_t h, cublasSideMode_t side, cublasOperation_t t,
                                    int m, int n, const double* const* a, int lda,
                                    double* const* b, int ldb, int batch) {
    const double one = 1;
    return cublasDtrsmBatched(h, side, CUBLAS_FILL_MODE_LOWER, t, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                              a, lda, b, ldb, batch);
  }
  static cusolverStatus_t PotrfSize(cusolverDnHandle_t h, int n, double* a, int lda, int* lwork) {
    return cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, lwork);
  }
  static cusolverStatus_t Potrf(cusolverDnHandle_t h, int n, double* a, int lda, double* work,
                                int lwork, int* info) {
    return cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, work, lwork, info);
  }
  static cusolverStatus_t PotrfBatched(cusolverDnHandle_t h, int n, double** a, int lda, int* info,
                                       int batch) {
    return cusolverDnDpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, info, batch);
  }
  static cusolverStatus_t SyevdSize(cusolverDnHandle_t h, int n, double* a, int lda, double* w,
                                    int* lwork) {
    return cusolverDnDsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, a,
                                       lda, w, lwork);
  }
  static cusolverStatus_t Syevd(cusolverDnHandle_t h, int n, double* a, int lda, double* w,
                                double* work, int lwork, int* info) {
    return cusolverDnDsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, a, lda, w, work,
                            lwork, info);
  }
  static cusolverStatus_t SyevjBatchedSize(cusolverDnHandle_t h, int n, double* a, int lda,
                                           double* w, int* lwork, syevjInfo_t params, int batch) {
    return cusolverDnDsyevjBatched_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                              a, lda, w, lwork, params, batch);
  }
  static cusolverStatus_t SyevjBatched(cusolverDnHandle_t h, int n, double* a, int lda, double* w,
                                       double* work, int lwork, int* info, syevjInfo_t params,
                                       int batch) {
    return cusolverDnDsyevjBatched(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, a, lda, w,
                                   work, lwork, info, params, batch);
  }
};

template <>
struct Lib<float> {
  static cublasStatus_t GemmSB(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                               int n, int k, float alpha, const float* a, int lda, int64_t sa,
                               const float* b, int ldb, int64_t sb, float beta, float* c, int ldc,
                               int64_t sc, int batch) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c,
                                     ldc, sc, batch);
  }
  static cublasStatus_t Gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                             int n, int k, float alpha, const float* a, int lda, const float* b,
                             int ldb, float beta, float* c, int ldc) {
    return cublasSgemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  }
  static cublasStatus_t GemvSB(cublasHandle_t h, cublasOperation_t t, int m, int n, const float* a,
                               int lda, int64_t sa, const float* x, int incx, int64_t sx, float* y,
                               int64_t sy, int batch) {
    const float one = 1, zero = 0;
    return cublasSgemvStridedBatched(h, t, m, n, &one, a, lda, sa, x, incx, sx, &zero, y, 1, sy, batch);
  }
  static cublasStatus_t Syrk(cublasHandle_t h, cublasOperation_t t, int n, int k, const float* a,
                             int lda, float* c, int ldc) {
    const float one = 1, zero = 0;
    return cublasSsyrk(h, CUBLAS_FILL_MODE_LOWER, t, n, k, &one, a, lda, &zero, c, ldc);
  }
  static cublasStatus_t Trsm(cublasHandle_t h, cublasSideMode_t side, cublasOperation_t t, int m,
                             int n, const float* a, int lda, float* b, int ldb) {
    const float one = 1;
    return cublasStrsm(h, side, CUBLAS_FILL_MODE_LOWER, t, CUBLAS_DIAG_NON_UNIT, m, n, &one, a, lda,
                       b, ldb);
  }
  static cublasStatus_t TrsmBatched(cublasHandle_t h, cublasSideMode_t side, cublasOperation_t t,
                                    int m, int n, const float* const* a, int lda, float* const* b,
                                    int ldb, int batch) {
    const float one = 1;
    return cublasStrsmBatched(h, side, CUBLAS_FILL_MODE_LOWER, t, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                              a, lda, b, ldb, batch);
  }
  static cusolverStatus_t PotrfSize(cusolverDnHandle_t h, int n, float* a, int lda, int* lwork) {
    return cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, lwork);
  }
  static cusolverStatus_t Potrf(cusolverDnHandle_t h, int n, float* a, int lda, float* work,
                                int lwork, int* info) {
    return cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, work, lwork, info);
  }
  static cusolverStatus_t PotrfBatched(cusolverDnHandle_t h, int n, float** a, int lda, int* info,
                                       int batch) {
    return cusolverDnSpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, info, batch);
  }
  static cusolverStatus_t SyevdSize(cusolverDnHandle_t h, int n, float* a, int lda, float* w,
                                    int* lwork) {
    return cusolverDnSsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, a,
                                       lda, w, lwork);
  }
  static cusolverStatus_t Syevd(cusolverDnHandle_t h, int n, float* a, int lda, float* w,
                                float* work, int lwork, int* info) {
    return cusolverDnSsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, a, lda, w, work,
                            lwork, info);
  }
  static cusolverStatus_t SyevjBatchedSize(cusolverDnHandle_t h, int n, float* a, int lda, float* w,
                                           int* lwork, syevjInfo_t params, int batch) {
    return cusolverDnSsyevjBatched_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                              a, lda, w, lwork, params, batch);
  }
  static cusolverStatus_t SyevjBatched(cusolverDnHandle_t h, int n, float* a, int lda, float* w,
                                       float* work, int lwork, int* info, syevjInfo_t params,
                                       int batch) {
    return cusolverDnSsyevjBatched(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, a, lda, w,
                                   work, lwork, info, params, batch);
  }
};

constexpr cublasOperation_t kN = CUBLAS_OP_N;
constexpr cublasOperation_t kT = CUBLAS_OP_T;

// ---- inputs the GPU reads where they are ---------------------------------------------------


// True when the GPU can copy `a` as it is: in the compute dtype, large, and in page-locked host
// memory (a resident tensor in the backend's page-locked blocks: BackendOptions::
// pinned_tensor_bytes), which the copy engine reads by DMA.
bool ReadsInPlace(const ArrayView& a, ElementType dtype) {
  if (a.dtype != dtype || a.bytes.size() < kInPlaceMinBytes) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, a.bytes.data()) != cudaSuccess) {
    cudaGetLastError();  // not an error worth keeping: the array is packed
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

InPlace ChooseInPlace(const Problem& p, ElementType dtype, bool stochastic, bool full_r) {
  InPlace in_place;
  in_place.x = ReadsInPlace(p.x, dtype);
  in_place.obs = ReadsInPlace(p.hx, dtype) &&
                 (!stochastic || !p.has_perturbations || ReadsInPlace(p.perturbations, dtype));
  in_place.r = full_r && ReadsInPlace(p.obs_error, dtype);
  return in_place;
}

// Queues the copies of group `g`'s in-place sections into `in_dev` (the layout PackGroup
// writes), and records each section's [begin, end) in `sections` (offsets into the input
// arena) so that the staging buffer's copy skips them.
template <typename T>
absl::Status CopyInPlace(const Group& g, const Batch& batch, char* in_dev, cudaStream_t stream,
                         std::vector<std::pair<size_t, size_t>>* sections) {
  const size_t n = static_cast<size_t>(g.key.n), m = static_cast<size_t>(g.key.m),
               N = static_cast<size_t>(g.key.N), W = static_cast<size_t>(g.W), es = sizeof(T);
  for (int p = 0; p < g.P(); ++p) {
    const InPlace& in_place = g.in_place[static_cast<size_t>(p)];
    const Problem& pr = batch.requests[static_cast<size_t>(g.members[p].first)]
                            ->problems[static_cast<size_t>(g.members[p].second)];
    const size_t pi = static_cast<size_t>(p);
    if (in_place.x) {
      const size_t at = g.x + pi * n * N * es;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(in_dev + at, pr.x.bytes.data(), n * N * es,
                                           cudaMemcpyHostToDevice, stream));
      sections->emplace_back(at, at + n * N * es);
    }
    if (in_place.obs) {
      const size_t at = g.obs + pi * m * W * es;
      char* rows = in_dev + at;
      CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(rows, W * es, pr.hx.bytes.data(), N * es, N * es, m,
                                             cudaMemcpyHostToDevice, stream));
      CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(rows + N * es, W * es, 0, es, m, stream));
      if (g.stochastic() && pr.has_perturbations) {
        CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(rows + (N + 1) * es, W * es, pr.perturbations.bytes.data(),
                                               N * es, N * es, m, cudaMemcpyHostToDevice, stream));
      } else if (g.stochastic()) {
        CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(rows + (N + 1) * es, W * es, 0, N * es, m, stream));
      }
      sections->emplace_back(at, at + m * W * es);
    }
    if (in_place.r) {
      const size_t at = g.r + pi * m * m * es;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(in_dev + at, pr.obs_error.bytes.data(), m * m * es,
                                           cudaMemcpyHostToDevice, stream));
      sections->emplace_back(at, at + m * m * es);
    }
  }
  return absl::OkStatus();
}

// ---- host packing -----------------------------------------------------------------------

template <typename T>
void ConvertInto(const ArrayView& a, int64_t first, int64_t count, T* out) {
  const char* src = a.bytes.data() + first * ElementSize(a.dtype);
  if constexpr (std::is_same_v<T, double>) {
    ToDouble(a.dtype, src, count, out);
  } else {
    ToFloat(a.dtype, src, count, out);
  }
}

// Packs an LETKF group's own sections: coordinates and domains in double, the geometries, the
// inverse square root's table and the Chebyshev series'.
void PackLetkf(const Group& g, const Batch& batch, char* in) {
  const int64_t n = g.key.n, m = g.key.m, d = g.key.dims;
  inverse_sqrt::WriteTable(reinterpret_cast<double*>(in + g.table));
  chebyshev::WriteTable(reinterpret_cast<double*>(in + g.chebyshev));
  for (int p = 0; p < g.P(); ++p) {
    const Problem& pr = batch.requests[static_cast<size_t>(g.members[p].first)]
                            ->problems[static_cast<size_t>(g.members[p].second)];
    const Localization& l = pr.localization;
    double* state = reinterpret_cast<double*>(in + g.state_coords) + p * n * d;
    double* obs = reinterpret_cast<double*>(in + g.obs_coords) + p * m * d;
    constexpr int64_t kChunk = int64_t{1} << 18;
    const int64_t state_chunks = (n * d + kChunk - 1) / kChunk, obs_chunks = (m * d + kChunk - 1) / kChunk;
    ParallelFor(state_chunks + obs_chunks, (n + m) * d * static_cast<int64_t>(sizeof(double)),
                [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const bool is_state = t < state_chunks;
        const ArrayView& a = is_state ? l.state_coords : l.obs_coords;
        const int64_t first = (is_state ? t : t - state_chunks) * kChunk;
        const int64_t count = std::min(kChunk, (is_state ? n : m) * d - first);
        ToDouble(a.dtype, a.bytes.data() + first * ElementSize(a.dtype), count, (is_state ? state : obs) + first);
      }
    }, kPackBytesPerThread);
    double* domain = reinterpret_cast<double*>(in + g.domain) + p * d;
    for (int64_t k = 0; k < d; ++k) domain[k] = k < static_cast<int64_t>(l.domain.size()) ? l.domain[k] : 0.0;
    reinterpret_cast<kernels::LetkfGeometry*>(in + g.geometry)[p] = MakeLetkfGeometry(pr);
  }
}

// Packs group `g` into `in` (the pinned staging). `packed(end)` is called as the packing goes
// (after X, then after each wave of observation rows) with an offset into `in` below which
// everything of this group and the ones before it is packed: the caller starts copying that
// much to the GPU while the rest is packed.
template <typename T>
void PackGroup(const Group& g, const Batch& batch, char* in, char* scratch_dev, char* in_dev,
               const std::function<void(size_t end)>& packed) {
  const int64_t n = g.key.n, m = g.key.m, N = g.key.N, W = g.W;
  const int P = g.P();
  auto problem = [&](int p) -> const Problem& {
    return batch.requests[static_cast<size_t>(g.members[p].first)]->problems[static_cast<size_t>(
        g.members[p].second)];
  };
  // X, then the observation rows (HX, perturbations, y, R), each as (problem, chunk of rows)
  // tasks over the worker threads: one large problem and many small ones alike convert on
  // several threads (the seed problem's 144 MB of observation rows took ~40 ms on one). A chunk
  // holds about kChunkElements values whatever the row length (the seed's X, 3000 rows of 3000,
  // is 18 chunks).
  constexpr int64_t kChunkElements = int64_t{1} << 19;
  const int64_t x_chunk_rows = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(1, N));
  const int64_t x_chunks = (n + x_chunk_rows - 1) / x_chunk_rows;
  int64_t x_packed = 0;  // problems whose X is packed (not copied in place)
  for (const InPlace& in_place : g.in_place) x_packed += in_place.x ? 0 : 1;
  ParallelFor(P * x_chunks, x_packed * n * N * static_cast<int64_t>(sizeof(T)),
              [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / x_chunks, c = t - p * x_chunks;
      if (g.in_place[static_cast<size_t>(p)].x) continue;
      const int64_t r0 = c * x_chunk_rows, r1 = std::min(n, r0 + x_chunk_rows);
      T* x = reinterpret_cast<T*>(in + g.x) + p * n * N;
      ConvertInto(problem(static_cast<int>(p)).x, r0 * N, (r1 - r0) * N, x + r0 * N);
    }
  }, kPackBytesPerThread);
  packed(g.obs);
  const int64_t r_row = g.full_r() ? m : 1;  // values of R per observation row
  const int64_t obs_chunk_rows = std::max<int64_t>(1, kChunkElements / (W + r_row));
  const int64_t obs_chunks = (m + obs_chunk_rows - 1) / obs_chunk_rows;
  // In waves of tasks: the observation rows of tasks [0, t) are a prefix of the section
  // (problem-major, then rows), copied to the GPU while the next wave is packed.
  auto pack_rows = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / obs_chunks, c = t - p * obs_chunks;
      const int64_t i0 = c * obs_chunk_rows, i1 = std::min(m, i0 + obs_chunk_rows);
      const Problem& pr = problem(static_cast<int>(p));
      const InPlace& in_place = g.in_place[static_cast<size_t>(p)];
      T* obs = reinterpret_cast<T*>(in + g.obs) + p * m * W;
      for (int64_t i = i0; i < i1 && !in_place.obs; ++i) {
        ConvertInto(pr.hx, i * N, N, obs + i * W);
        obs[i * W + N] = T(0);
        if (g.stochastic()) {
          if (pr.has_perturbations) {
            ConvertInto(pr.perturbations, i * N, N, obs + i * W + N + 1);
          } else {
            std::fill(obs + i * W + N + 1, obs + i * W + 2 * N + 1, T(0));
          }
        }
      }
      double* y = reinterpret_cast<double*>(in + g.y) + p * m;
      ToDouble(pr.y.dtype, pr.y.bytes.data() + i0 * ElementSize(pr.y.dtype), i1 - i0, y + i0);
      if (g.full_r() && !in_place.r) {
        T* r = reinterpret_cast<T*>(in + g.r) + p * m * m;
        ConvertInto(pr.obs_error, i0 * m, (i1 - i0) * m, r + i0 * m);
      } else if (!g.full_r()) {
        T* r = reinterpret_cast<T*>(in + g.r) + p * m;
        for (int64_t i = i0; i < i1; ++i) r[i] = static_cast<T>(1.0 / std::sqrt(pr.obs_error.at(i)));
      }
      if (c != 0) continue;
      ProblemParams& pp = reinterpret_cast<ProblemParams*>(in + g.params)[p];
      pp = ProblemParams{};
      pp.inflation = pr.inflation;
      pp.relaxation_factor = pr.relaxation_factor;
      pp.seed = pr.seed;
      pp.index = static_cast<uint32_t>(g.members[static_cast<size_t>(p)].second);
      pp.relaxation = pr.relaxation == Relaxation::kRtpp ? 1 : pr.relaxation == Relaxation::kRtps ? 2 : 0;
      pp.max_candidates = static_cast<uint64_t>(pr.localization.max_candidates);
    }
  };
  const int64_t tasks = P * obs_chunks;
  constexpr int64_t kWaves = 4;
  for (int64_t wave = 0; wave < kWaves; ++wave) {
    const int64_t t0 = tasks * wave / kWaves, t1 = tasks * (wave + 1) / kWaves;
    if (t0 == t1) continue;
    // The wave's real work: a chunk holds min(m, obs_chunk_rows) rows (counting whole chunks
    // of small problems made every wave of a batch of small problems start threads).
    ParallelFor(t1 - t0, (t1 - t0) * std::min(m, obs_chunk_rows) * (W + r_row) * static_cast<int64_t>(sizeof(T)),
                [&](int64_t b, int64_t e) { pack_rows(t0 + b, t0 + e); }, kPackBytesPerThread);
    const int64_t p_end = (t1 - 1) / obs_chunks, c_end = (t1 - 1) - p_end * obs_chunks;
    const int64_t rows_end = std::min(m, (c_end + 1) * obs_chunk_rows);
    packed(g.obs + static_cast<size_t>((p_end * m + rows_end) * W) * sizeof(T));
  }
  if (g.split_k()) {
    T* ones = reinterpret_cast<T*>(in + g.ones);
    std::fill(ones, ones + kSplitChunks + 1, T(1));
  }
  // Device pointer arrays for the batched routines.
  const int64_t f_order = g.ensemble() ? N : m;
  const int64_t f_stride = g.ensemble() ? N * g.CCols() : m * m;
  T** ptr_r = reinterpret_cast<T**>(in + g.ptr_r);
  T** ptr_obs = reinterpret_cast<T**>(in + g.ptr_obs);
  T** ptr_f = reinterpret_cast<T**>(in + g.ptr_f);
  T** ptr_rhs = reinterpret_cast<T**>(in + g.ptr_rhs);
  T* r_dev = reinterpret_cast<T*>(in_dev + g.r);
  T* obs_dev = reinterpret_cast<T*>(in_dev + g.obs);
  T* f_dev = reinterpret_cast<T*>(scratch_dev + (g.ensemble() ? g.c : g.s));
  for (int p = 0; p < P; ++p) {
    ptr_r[p] = g.full_r() ? r_dev + static_cast<int64_t>(p) * m * m : nullptr;
    ptr_obs[p] = obs_dev + static_cast<int64_t>(p) * m * W;
    ptr_f[p] = f_dev + static_cast<int64_t>(p) * f_stride;
    if (g.ensemble()) {
      ptr_rhs[p] = f_dev + static_cast<int64_t>(p) * f_stride + N * (N + 1);  // B of C = [G | b | B]
    } else if (g.stochastic()) {
      ptr_rhs[p] = obs_dev + static_cast<int64_t>(p) * m * W + N + 1;  // Dw
    } else {
      ptr_rhs[p] = reinterpret_cast<T*>(scratch_dev + g.z) + static_cast<int64_t>(p) * m * (N + 1);
    }
  }
  (void)f_order;
  if (g.letkf()) PackLetkf(g, batch, in);
}

// ---- the device steps of one group -------------------------------------------------------

template <typename T>
class GroupRunner {
 public:
  GroupRunner(DeviceContext& device, StreamSlot& slot, StreamScratch& scratch, const Group& g,
              char* in, char* sc, char* out, int* info_r, int* info_f, int* info_e, double* spread,
              unsigned long long* candidates, const EnqueueOptions* options)
      : device_(device), slot_(slot), scratch_(scratch), g_(g), in_(in), sc_(sc), out_(out),
        info_r_(info_r + g.q0), info_f_(info_f + g.q0), info_e_(info_e + g.q0),
        spread_(spread + g.q0), candidates_(candidates + g.q0), unbatched_(options && options->force_unbatched),
        no_fused_(options && options->no_fused),
        trsm_block_(options && options->trsm_block >= 0 ? options->trsm_block : kDefaultTrsmBlock<T>),
        solve_(options ? options->solve : SolveVariant::kAuto),
        eig_(options ? options->eig : EigVariant::kAuto),
        rows_per_warp_(options && options->rows_per_warp > 0 ? options->rows_per_warp : 0),
        small_kernel_(options ? options->small_kernel : SmallKernel::kWarpPerProblem),
        marks_(options ? options->marks : nullptr) {}

  absl::Status Run();

 private:
  // The N x N transforms of the group's problems, `stride` elements apart.
  struct Transform {
    T* t = nullptr;
    int64_t stride = 0;
  };
  // The steps of Run, in order. RunFusedSmall: the whole analysis in one kernel.
  absl::Status RunFusedSmall();
  // The LETKF: centring and whitening as the ETKF's, then per problem the binning and the
  // local analyses (kernels/assimilate/letkf.cuh).
  absl::Status RunLetkf();
  absl::Status CentreState();
  absl::Status PrepareObservations();
  // Ensemble space: C = Yw^T [Yw | dw | Dw], then T from G = C's first N columns.
  absl::StatusOr<Transform> EnsembleTransform();
  absl::StatusOr<Transform> StochasticEnsembleTransform(T* c, int64_t c_stride);
  absl::StatusOr<Transform> EigenEnsembleTransform(T* c, int64_t c_stride);
  // Observation space: S = Yw Yw^T + (N-1) I and its Cholesky factor, then T.
  absl::StatusOr<Transform> ObservationTransform();
  absl::StatusOr<Transform> StochasticObservationTransform(const T* sm);
  absl::StatusOr<Transform> SquareRootObservationTransform(const T* sm);
  // Xa from X and T: in one pass over the state, or as a GEMM then a finishing pass.
  absl::Status TransformRows(const Transform& t);
  absl::Status UpdateAndFinishRows(const Transform& t);

  template <typename U>
  U* In(size_t off) const { return reinterpret_cast<U*>(in_ + off); }
  template <typename U>
  U* Sc(size_t off) const { return reinterpret_cast<U*>(sc_ + off); }
  cublasHandle_t blas() const { return slot_.cublas.get(); }
  cusolverDnHandle_t solver() const { return slot_.cusolver.get(); }
  cudaStream_t stream() const { return slot_.stream.get(); }
  absl::Status Launched() {
    CUDA_RETURN_IF_LAUNCH_ERROR(stream(), device_.debug_sync());
    return absl::OkStatus();
  }
  // Records a timing event named `name` (benchmarks only).
  absl::Status Mark(const char* name) {
    if (marks_ == nullptr) return absl::OkStatus();
    cudaEvent_t e = nullptr;
    CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    marks_->emplace_back(name, e);
    CUDA_RETURN_IF_ERROR(cudaEventRecord(e, stream()));
    return absl::OkStatus();
  }
  // C (N x cc, ld N) = Yw^T [first cc columns of the obs rows], split over chunks of rows.
  absl::Status SplitGemm(int cc, T* c);
  bool Batched(int64_t order, int64_t limit = kMaxBatchedOrder) const {
    return !unbatched_ && g_.P() > 1 && order <= limit;
  }
  // The whole analysis of each problem in one block (stochastic, diagonal R, ensemble space,
  // small enough for shared memory).
  bool FusedSmall() const {
    return !no_fused_ && !unbatched_ && g_.stochastic() && !g_.full_r() && g_.ensemble() &&
           kernels::SmallEnkfFits(g_.key.n, g_.key.m, static_cast<int>(g_.key.N), sizeof(T),
                                  static_cast<int>(small_kernel_));
  }
  // The ensemble-space ETKF transform by Newton-Schulz (etkf_transform.cuh) rather than an
  // eigendecomposition (EigVariant kAuto, or kNewtonSchulzFallback: its eigendecomposition
  // fallback forced).
  bool NsTransform() const {
    return !no_fused_ && (eig_ == EigVariant::kAuto || eig_ == EigVariant::kNewtonSchulzFallback) && g_.key.N >= 2 &&
           g_.key.N <= kernels::kMaxEtkfNsOrder;
  }
  // Centring, the update product and the finishing pass in one pass over the state.
  bool FusedRows() const { return !no_fused_ && g_.key.N <= kernels::kMaxFusedRowsMembers; }
  // B (order x cols, column-major, ld ldb) <- L^-1 B (op N) or L^-T B (op T), L lower (ld ldl):
  // TRSM on diagonal blocks of trsm_block_, GEMM for the off-diagonal blocks.
  absl::Status BlockedTrsmLeft(cublasOperation_t op, int order, int cols, const T* l, int ldl, T* b,
                               int ldb);
  // One problem: B (N x N, ld N) <- G^-1 B from G's Cholesky factor l: the diagonal blocks of
  // L inverted (small TRSMs), then both block substitutions as GEMMs only (through z, N x N).
  absl::Status BlockInverseSolve(int N, const T* l, T* b, T* z);

  // Cholesky of P matrices of order n (lda n) `stride` apart; ptrs: their device pointer array.
  absl::Status Potrf(int n, T* a, int64_t stride, T** ptrs, int* info);
  // B <- A^-1 B (left) or B A^-1 (right, A = L L^T, lower factor) for P pairs.
  absl::Status CholSolve(cublasSideMode_t side, int rows, int cols, const T* l, int ldl,
                         int64_t l_stride, T** l_ptrs, T* b, int ldb, int64_t b_stride, T** b_ptrs);
  // B <- B L^-T for P pairs (whitening rows by a full R's factor).
  absl::Status Whiten(int rows, int cols);
  // Symmetric eigendecomposition of P contiguous N x N matrices in place; eigenvalues in ev.
  absl::Status Eig(int N, T* a, T* ev, int* info);

  DeviceContext& device_;
  StreamSlot& slot_;
  StreamScratch& scratch_;
  const Group& g_;
  char* in_;
  char* sc_;
  char* out_;
  int* info_r_;
  int* info_f_;
  int* info_e_;
  double* spread_;
  unsigned long long* candidates_;  // the group's first problem's count (LETKF)
  bool unbatched_;
  bool no_fused_;
  int trsm_block_;
  SolveVariant solve_;
  EigVariant eig_;
  int rows_per_warp_;
  SmallKernel small_kernel_;
  std::vector<std::pair<const char*, cudaEvent_t>>* marks_;
};

template <typename T>
absl::Status GroupRunner<T>::SplitGemm(int cc, T* c) {
  const int64_t m = g_.key.m, N = g_.key.N, W = g_.W;
  const int64_t chunk = (m + kSplitChunks - 1) / kSplitChunks;
  const int64_t full = m / chunk, rest = m - full * chunk;
  T* obs = In<T>(g_.obs);
  T* part = Sc<T>(g_.split);
  const int64_t ps = N * cc;
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, static_cast<int>(N), cc, static_cast<int>(chunk),
                                        T(1), obs, static_cast<int>(W), chunk * W, obs,
                                        static_cast<int>(W), chunk * W, T(0), part, static_cast<int>(N),
                                        ps, static_cast<int>(full)));
  int parts = static_cast<int>(full);
  if (rest > 0) {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, static_cast<int>(N), cc, static_cast<int>(rest),
                                          T(1), obs + full * chunk * W, static_cast<int>(W), 0,
                                          obs + full * chunk * W, static_cast<int>(W), 0, T(0),
                                          part + full * ps, static_cast<int>(N), ps, 1));
    ++parts;
  }
  // C = partials . ones
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemvSB(blas(), kN, static_cast<int>(ps), parts, part,
                                        static_cast<int>(ps), 0, In<T>(g_.ones), 1, 0, c, 0, 1));
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::Potrf(int n, T* a, int64_t stride, T** ptrs, int* info) {
  const int P = g_.P();
  if (Batched(n)) {
    CUSOLVER_RETURN_IF_ERROR(Lib<T>::PotrfBatched(solver(), n, ptrs, n, info, P));
    return Launched();
  }
  int lwork = 0;
  CUSOLVER_RETURN_IF_ERROR(Lib<T>::PotrfSize(solver(), n, a, n, &lwork));
  ASSIGN_OR_RETURN(void* work, scratch_.Get(static_cast<size_t>(std::max(lwork, 1)) * sizeof(T)));
  for (int p = 0; p < P; ++p) {
    CUSOLVER_RETURN_IF_ERROR(Lib<T>::Potrf(solver(), n, a + p * stride, n, static_cast<T*>(work),
                                           lwork, info + p));
  }
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::BlockedTrsmLeft(cublasOperation_t op, int order, int cols, const T* l,
                                             int ldl, T* b, int ldb) {
  const int nb = trsm_block_;
  const int blocks = (order + nb - 1) / nb;
  for (int s = 0; s < blocks; ++s) {
    const int k = op == kN ? s : blocks - 1 - s;
    const int k0 = k * nb, kb = std::min(nb, order - k0);
    const T* lkk = l + k0 + static_cast<int64_t>(k0) * ldl;
    CUBLAS_RETURN_IF_ERROR(Lib<T>::Trsm(blas(), CUBLAS_SIDE_LEFT, op, kb, cols, lkk, ldl, b + k0, ldb));
    if (op == kN) {
      const int rest = order - k0 - kb;
      if (rest > 0) {  // B[k0+kb:] -= L[k0+kb:, k0:k0+kb] B[k0:k0+kb]
        CUBLAS_RETURN_IF_ERROR(Lib<T>::Gemm(blas(), kN, kN, rest, cols, kb, T(-1), lkk + kb, ldl,
                                            b + k0, ldb, T(1), b + k0 + kb, ldb));
      }
    } else if (k0 > 0) {  // B[:k0] -= L[k0:k0+kb, :k0]^T B[k0:k0+kb]
      CUBLAS_RETURN_IF_ERROR(Lib<T>::Gemm(blas(), kT, kN, k0, cols, kb, T(-1), l + k0, ldl, b + k0,
                                          ldb, T(1), b, ldb));
    }
  }
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::BlockInverseSolve(int N, const T* l, T* b, T* z) {
  // Blocks of order nb = kInverseBase x 2^levels.
  int nb = kernels::kInverseBase;
  while (nb < (trsm_block_ > 0 ? trsm_block_ : kDefaultInverseBlock)) nb *= 2;
  const int blocks = (N + nb - 1) / nb;
  const int npad = blocks * nb;
  const int64_t pp = static_cast<int64_t>(npad) * npad, dstride = static_cast<int64_t>(nb) * (npad + 1);
  ASSIGN_OR_RETURN(void* lmem, scratch_.Get(static_cast<size_t>(pp) * sizeof(T)));
  ASSIGN_OR_RETURN(void* dmem, scratch_.Get(static_cast<size_t>(pp) * sizeof(T)));
  ASSIGN_OR_RETURN(void* tmem, scratch_.Get(static_cast<size_t>(npad) * nb / 2 * sizeof(T)));
  T* lp = static_cast<T*>(lmem);
  T* d = static_cast<T*>(dmem);
  T* tmp = static_cast<T*>(tmem);
  // D_k = L_kk^-1 without TRSM (on the H200 cuBLAS TRSM costs ~0.45 us per row of the triangle
  // whatever the right-hand sides: 1.3 ms for the diagonal blocks of N = 3000): the diagonal
  // blocks padded with an identity, inverses of 32 x 32 blocks by a kernel, then per level two
  // strided-batched GEMMs: [A 0; C D]^-1 = [A^-1 0; -D^-1 C A^-1 D^-1].
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d, 0, static_cast<size_t>(pp) * sizeof(T), stream()));
  CUDA_RETURN_IF_ERROR(kernels::LaunchPadDiagonalBlocks<T>(N, npad, nb, l, lp, stream()));
  CUDA_RETURN_IF_ERROR(kernels::LaunchInvertBaseBlocks<T>(npad, lp, d, stream()));
  RETURN_IF_ERROR(Launched());
  for (int h = kernels::kInverseBase; h < nb; h *= 2) {
    const int batch = npad / (2 * h);
    const int64_t st = static_cast<int64_t>(2 * h) * (npad + 1);
    CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kN, h, h, h, T(1), lp + h, npad, st, d, npad, st, T(0),
                                          tmp, h, static_cast<int64_t>(h) * h, batch));
    CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kN, h, h, h, T(-1), d + static_cast<int64_t>(h) * (npad + 1),
                                          npad, st, tmp, h, static_cast<int64_t>(h) * h, T(0), d + h, npad, st,
                                          batch));
  }
  RETURN_IF_ERROR(Launched());
  RETURN_IF_ERROR(Mark("diag_inverses"));
  auto k0 = [&](int k) { return k * nb; };
  auto kb = [&](int k) { return std::min(nb, N - k * nb); };
  auto lblock = [&](int row, int col) { return l + row + static_cast<int64_t>(col) * N; };
  auto dk = [&](int k) { return d + k * dstride; };
  // Forward, Z = L^-1 B into z: Z_k = D_k B_k; B_below -= L_below,k Z_k.
  for (int k = 0; k < blocks; ++k) {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::Gemm(blas(), kN, kN, kb(k), N, kb(k), T(1), dk(k), npad, b + k0(k), N,
                                        T(0), z + k0(k), N));
    const int below = N - k0(k) - kb(k);
    if (below > 0) {
      CUBLAS_RETURN_IF_ERROR(Lib<T>::Gemm(blas(), kN, kN, below, N, kb(k), T(-1),
                                          lblock(k0(k) + kb(k), k0(k)), N, z + k0(k), N, T(1),
                                          b + k0(k) + kb(k), N));
    }
  }
  // Backward, X = L^-T Z into b: X_k = D_k^T Z_k; Z_above -= L_k,above^T X_k.
  for (int k = blocks - 1; k >= 0; --k) {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::Gemm(blas(), kT, kN, kb(k), N, kb(k), T(1), dk(k), npad, z + k0(k), N,
                                        T(0), b + k0(k), N));
    if (k0(k) > 0) {
      CUBLAS_RETURN_IF_ERROR(Lib<T>::Gemm(blas(), kT, kN, k0(k), N, kb(k), T(-1), lblock(k0(k), 0), N,
                                          b + k0(k), N, T(1), z, N));
    }
  }
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::CholSolve(cublasSideMode_t side, int rows, int cols, const T* l,
                                       int ldl, int64_t l_stride, T** l_ptrs, T* b, int ldb,
                                       int64_t b_stride, T** b_ptrs) {
  // Left: L^-T (L^-1 B). Right: (B L^-T) L^-1.
  const cublasOperation_t first = side == CUBLAS_SIDE_LEFT ? kN : kT;
  const cublasOperation_t second = side == CUBLAS_SIDE_LEFT ? kT : kN;
  const int order = side == CUBLAS_SIDE_LEFT ? rows : cols;
  if (Batched(order)) {
    for (cublasOperation_t op : {first, second}) {
      CUBLAS_RETURN_IF_ERROR(Lib<T>::TrsmBatched(blas(), side, op, rows, cols, l_ptrs, ldl, b_ptrs,
                                                 ldb, g_.P()));
    }
    return Launched();
  }
  const bool blocked = side == CUBLAS_SIDE_LEFT && trsm_block_ > 0 && order >= 2 * trsm_block_;
  for (int p = 0; p < g_.P(); ++p) {
    for (cublasOperation_t op : {first, second}) {
      if (blocked) {
        RETURN_IF_ERROR(BlockedTrsmLeft(op, rows, cols, l + p * l_stride, ldl, b + p * b_stride, ldb));
        continue;
      }
      CUBLAS_RETURN_IF_ERROR(Lib<T>::Trsm(blas(), side, op, rows, cols, l + p * l_stride, ldl,
                                          b + p * b_stride, ldb));
    }
  }
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::Whiten(int rows, int cols) {
  const int64_t m = g_.key.m;
  T* l = In<T>(g_.r);
  T* b = In<T>(g_.obs);
  if (Batched(m)) {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::TrsmBatched(blas(), CUBLAS_SIDE_RIGHT, kT, rows, cols,
                                               In<T*>(g_.ptr_r), static_cast<int>(m),
                                               In<T*>(g_.ptr_obs), static_cast<int>(g_.W), g_.P()));
    return Launched();
  }
  for (int p = 0; p < g_.P(); ++p) {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::Trsm(blas(), CUBLAS_SIDE_RIGHT, kT, rows, cols, l + p * m * m,
                                        static_cast<int>(m), b + p * m * g_.W, static_cast<int>(g_.W)));
  }
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::Eig(int N, T* a, T* ev, int* info) {
  const int P = g_.P();
  if (eig_ != EigVariant::kLibrary && !no_fused_ && !unbatched_ && P > 1 && N <= kernels::kMaxJacobiOrder) {
    // One block per matrix (parallel cyclic Jacobi): on the H200 10,000 of order 20 in 3.2 ms
    // against syevjBatched's 4.2 ms. For one matrix SYEVD is faster (50 x 50: 0.61 ms, Jacobi
    // 1.03 ms).
    // Never fails (info stays 0).
    CUDA_RETURN_IF_ERROR(kernels::LaunchJacobiEig<T>(P, N, a, ev, stream()));
    return Launched();
  }
  if (eig_ == EigVariant::kBatchedSyev) {
    // cuSOLVER's batched SYEV (also for one matrix).
    cusolverDnParams_t prm = nullptr;
    CUSOLVER_RETURN_IF_ERROR(cusolverDnCreateParams(&prm));
    struct ParamsGuard {
      cusolverDnParams_t p;
      ~ParamsGuard() { cusolverDnDestroyParams(p); }
    } prm_guard{prm};
    const cudaDataType dt = sizeof(T) == 8 ? CUDA_R_64F : CUDA_R_32F;
    size_t device_bytes = 0, host_bytes = 0;
    CUSOLVER_RETURN_IF_ERROR(cusolverDnXsyevBatched_bufferSize(
        solver(), prm, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, N, dt, a, N, dt, ev, dt,
        &device_bytes, &host_bytes, P));
    if (host_bytes == 0) {  // a host workspace would have to outlive the enqueue
      ASSIGN_OR_RETURN(void* work, scratch_.Get(std::max<size_t>(device_bytes, 1)));
      CUSOLVER_RETURN_IF_ERROR(cusolverDnXsyevBatched(
          solver(), prm, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, N, dt, a, N, dt, ev, dt,
          work, device_bytes, nullptr, 0, info, P));
      return Launched();
    }
  }
  if (Batched(N, kMaxSyevjBatchedOrder)) {
    syevjInfo_t params = nullptr;
    CUSOLVER_RETURN_IF_ERROR(cusolverDnCreateSyevjInfo(&params));
    struct Guard {
      syevjInfo_t p;
      ~Guard() { cusolverDnDestroySyevjInfo(p); }
    } guard{params};
    int lwork = 0;
    CUSOLVER_RETURN_IF_ERROR(Lib<T>::SyevjBatchedSize(solver(), N, a, N, ev, &lwork, params, P));
    ASSIGN_OR_RETURN(void* work, scratch_.Get(static_cast<size_t>(std::max(lwork, 1)) * sizeof(T)));
    CUSOLVER_RETURN_IF_ERROR(Lib<T>::SyevjBatched(solver(), N, a, N, ev, static_cast<T*>(work), lwork,
                                                  info, params, P));
    return Launched();
  }
  int lwork = 0;
  CUSOLVER_RETURN_IF_ERROR(Lib<T>::SyevdSize(solver(), N, a, N, ev, &lwork));
  ASSIGN_OR_RETURN(void* work, scratch_.Get(static_cast<size_t>(std::max(lwork, 1)) * sizeof(T)));
  const int64_t nn = static_cast<int64_t>(N) * N;
  for (int p = 0; p < P; ++p) {
    CUSOLVER_RETURN_IF_ERROR(Lib<T>::Syevd(solver(), N, a + p * nn, N, ev + static_cast<int64_t>(p) * N,
                                           static_cast<T*>(work), lwork, info + p));
  }
  return Launched();
}

template <typename T>
absl::Status GroupRunner<T>::Run() {
  if (g_.letkf()) return RunLetkf();
  if (FusedSmall()) return RunFusedSmall();
  const bool fused_rows = FusedRows();
  if (!fused_rows) RETURN_IF_ERROR(CentreState());
  RETURN_IF_ERROR(PrepareObservations());
  ASSIGN_OR_RETURN(const Transform t, g_.ensemble() ? EnsembleTransform() : ObservationTransform());
  RETURN_IF_ERROR(Mark("transform"));
  return fused_rows ? TransformRows(t) : UpdateAndFinishRows(t);
}

template <typename T>
absl::Status GroupRunner<T>::RunFusedSmall() {
  CUDA_RETURN_IF_ERROR(kernels::LaunchSmallEnkf<T>(
      g_.P(), g_.key.n, g_.key.m, static_cast<int>(g_.key.N), static_cast<int>(g_.W), In<T>(g_.x),
      In<T>(g_.obs), In<double>(g_.y), In<T>(g_.r), In<const ProblemParams>(g_.params),
      g_.key.seeded, reinterpret_cast<T*>(out_ + g_.xa),
      reinterpret_cast<double*>(out_ + g_.innovation), spread_, info_f_, stream(), static_cast<int>(small_kernel_)));
  RETURN_IF_ERROR(Launched());
  return Mark("fused_small");
}

template <typename T>
absl::Status GroupRunner<T>::RunLetkf() {
  RETURN_IF_ERROR(CentreState());
  RETURN_IF_ERROR(PrepareObservations());
  const int64_t n = g_.key.n, m = g_.key.m, N = g_.key.N, d = g_.key.dims;
  const auto* geometry = In<const kernels::LetkfGeometry>(g_.geometry);
  for (int p = 0; p < g_.P(); ++p) {
    const double* obs_coords = In<double>(g_.obs_coords) + p * m * d;
    const double* state_coords = In<double>(g_.state_coords) + p * n * d;
    CUDA_RETURN_IF_ERROR(kernels::LaunchLetkfBin(geometry + p, m, g_.max_cells, obs_coords, Sc<void>(g_.bin),
                                                 g_.bin_bytes, Sc<int>(g_.sorted), Sc<int>(g_.cell_start),
                                                 Sc<double>(g_.sorted_coords), stream()));
    RETURN_IF_ERROR(Launched());
    CUDA_RETURN_IF_ERROR(kernels::LaunchLetkfCountCandidates(geometry + p, n, state_coords, Sc<int>(g_.cell_start),
                                                             candidates_ + p, stream()));
    RETURN_IF_ERROR(Launched());
    int warps = 0;
    CUDA_RETURN_IF_ERROR(kernels::LaunchLetkfAnalysis<T>(
        geometry + p, n, static_cast<int>(N), static_cast<int>(g_.W), In<T>(g_.x) + p * n * N,
        Sc<double>(g_.xbar) + p * n, In<T>(g_.obs) + p * m * g_.W, state_coords, Sc<double>(g_.sorted_coords),
        In<double>(g_.domain) + p * d, Sc<int>(g_.sorted), Sc<int>(g_.cell_start),
        In<const ProblemParams>(g_.params) + p, candidates_ + p, In<double>(g_.table), In<double>(g_.chebyshev),
        kernels::LetkfListsAt(Sc<char>(g_.lists), n), reinterpret_cast<T*>(out_ + g_.xa) + p * n * N,
        Sc<double>(g_.partials), &warps, stream()));
    RETURN_IF_ERROR(Launched());
    CUDA_RETURN_IF_ERROR(kernels::LaunchReduceSpread(1, warps, n, Sc<double>(g_.partials), spread_ + p, stream()));
    RETURN_IF_ERROR(Launched());
  }
  return Mark("letkf");
}

template <typename T>
absl::Status GroupRunner<T>::CentreState() {
  // State anomalies A = lambda (X - xbar 1^T), in place.
  CUDA_RETURN_IF_ERROR(kernels::LaunchCentreState<T>(g_.P(), g_.key.n, static_cast<int>(g_.key.N),
                                                     In<T>(g_.x), Sc<double>(g_.xbar),
                                                     In<const ProblemParams>(g_.params), stream()));
  RETURN_IF_ERROR(Launched());
  return Mark("centre_state");
}

template <typename T>
absl::Status GroupRunner<T>::PrepareObservations() {
  const int P = g_.P();
  const int64_t m = g_.key.m;
  const int iN = static_cast<int>(g_.key.N), im = static_cast<int>(m), iW = static_cast<int>(g_.W);
  T* obs = In<T>(g_.obs);
  // R: Cholesky factor in place (full R).
  if (g_.full_r()) {
    RETURN_IF_ERROR(Potrf(im, In<T>(g_.r), m * m, In<T*>(g_.ptr_r), info_r_));
  }
  // Observation rows: Yw, dw, and Ew or Dw.
  const bool seeded = g_.key.seeded;
  CUDA_RETURN_IF_ERROR(kernels::LaunchPrepareObs<T>(
      P, m, iN, iW, obs, In<double>(g_.y), g_.full_r() ? nullptr : In<T>(g_.r),
      In<const ProblemParams>(g_.params), g_.stochastic(), seeded, /*form_d=*/!g_.full_r(),
      reinterpret_cast<double*>(out_ + g_.innovation), stream()));
  RETURN_IF_ERROR(Launched());
  if (g_.full_r()) {
    // Whiten [Yw | dw] (and client perturbations) once: rows <- L^-1 rows.
    const int cols = g_.stochastic() && !seeded ? iW : iN + 1;
    RETURN_IF_ERROR(Whiten(cols, im));
    if (g_.stochastic()) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchFormD<T>(P, m, iN, iW, obs, stream()));
      RETURN_IF_ERROR(Launched());
    }
  }
  return Mark("prepare_obs");
}

template <typename T>
absl::StatusOr<typename GroupRunner<T>::Transform> GroupRunner<T>::EnsembleTransform() {
  const int P = g_.P();
  const int64_t m = g_.key.m, N = g_.key.N, W = g_.W, mw = m * W;
  const int iN = static_cast<int>(N), im = static_cast<int>(m), iW = static_cast<int>(W);
  const cudaStream_t s = stream();
  T* obs = In<T>(g_.obs);
  // C = Yw^T [Yw | dw | Dw] (N x (N+1) or N x (2N+1)): G, b, B.
  const int64_t cc = g_.CCols();
  T* c = Sc<T>(g_.c);
  const int64_t c_stride = N * cc;
  if (g_.split_k()) {
    RETURN_IF_ERROR(SplitGemm(static_cast<int>(cc), c));
  } else if (g_.stochastic() && P == 1) {
    // One large problem: SYRK for G (half the flops), GEMM for B.
    CUBLAS_RETURN_IF_ERROR(Lib<T>::Syrk(blas(), kN, iN, im, obs, iW, c, iN));
    CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, iN, iN, im, T(1), obs, iW, mw,
                                          obs + N + 1, iW, mw, T(0), c + N * (N + 1), iN,
                                          c_stride, 1));
  } else {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, iN, static_cast<int>(cc), im, T(1), obs,
                                          iW, mw, obs, iW, mw, T(0), c, iN, c_stride, P));
  }
  RETURN_IF_ERROR(Launched());
  CUDA_RETURN_IF_ERROR(kernels::LaunchAddDiagonal<T>(P, iN, c, N, c_stride, static_cast<T>(N - 1), s));
  RETURN_IF_ERROR(Launched());
  RETURN_IF_ERROR(Mark("ensemble_products"));
  if (g_.stochastic()) return StochasticEnsembleTransform(c, c_stride);
  if (NsTransform()) {
    // T = sqrt(N-1) G^-1/2 + (G^-1 b) 1^T without an eigendecomposition (50 x 50 on the
    // H200: SYEVD alone took 0.6 ms); the Jacobi kernel only for problems beyond the
    // iteration's bound.
    const Transform t{Sc<T>(g_.t), N * N};
    CUDA_RETURN_IF_ERROR(kernels::LaunchEtkfTransform<T>(P, iN, c, c_stride, t.t, Sc<T>(g_.v),
                                                         Sc<T>(g_.ev), info_e_, Sc<int>(g_.flag),
                                                         /*force_fallback=*/eig_ == EigVariant::kNewtonSchulzFallback, s));
    RETURN_IF_ERROR(Launched());
    RETURN_IF_ERROR(Mark("eig"));
    return t;
  }
  return EigenEnsembleTransform(c, c_stride);
}

template <typename T>
absl::StatusOr<typename GroupRunner<T>::Transform> GroupRunner<T>::StochasticEnsembleTransform(
    T* c, int64_t c_stride) {
  // T = I + G^-1 B.
  const int P = g_.P();
  const int64_t N = g_.key.N;
  const int iN = static_cast<int>(N);
  RETURN_IF_ERROR(Potrf(iN, c, c_stride, In<T*>(g_.ptr_f), info_f_));
  RETURN_IF_ERROR(Mark("potrf"));
  T* b = c + N * (N + 1);
  const int inverse_block = trsm_block_ > 0 ? trsm_block_ : kDefaultInverseBlock;
  const bool block_inverse = P == 1 && (solve_ == SolveVariant::kBlockInverse ||
                                        (solve_ == SolveVariant::kAuto && N >= kMinBlockInverseOrder &&
                                         N >= 2 * inverse_block));
  if (block_inverse) {
    RETURN_IF_ERROR(BlockInverseSolve(iN, c, b, Sc<T>(g_.t)));
  } else {
    RETURN_IF_ERROR(CholSolve(CUBLAS_SIDE_LEFT, iN, iN, c, iN, c_stride, In<T*>(g_.ptr_f), b, iN,
                              c_stride, In<T*>(g_.ptr_rhs)));
  }
  CUDA_RETURN_IF_ERROR(kernels::LaunchAddDiagonal<T>(P, iN, b, N, c_stride, T(1), stream()));
  RETURN_IF_ERROR(Launched());
  return Transform{b, c_stride};
}

template <typename T>
absl::StatusOr<typename GroupRunner<T>::Transform> GroupRunner<T>::EigenEnsembleTransform(
    T* c, int64_t c_stride) {
  // G = V diag(g) V^T; u = diag(1/g) V^T b; wbar = V u; W = V diag(sqrt((N-1)/g)) V^T.
  const int P = g_.P();
  const int64_t N = g_.key.N, nn = N * N;
  const int iN = static_cast<int>(N);
  const cudaStream_t s = stream();
  T* v = Sc<T>(g_.v);
  T* ev = Sc<T>(g_.ev);
  T* u = Sc<T>(g_.u);
  T* wbar = Sc<T>(g_.wbar);
  T* vf = Sc<T>(g_.vf);
  T* t = Sc<T>(g_.t);
  CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(v, nn * sizeof(T), c, c_stride * sizeof(T), nn * sizeof(T),
                                         P, cudaMemcpyDeviceToDevice, s));
  RETURN_IF_ERROR(Eig(iN, v, ev, info_e_));
  RETURN_IF_ERROR(Mark("eig"));
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemvSB(blas(), kT, iN, iN, v, iN, nn, c + nn, 1, c_stride, u, N, P));
  CUDA_RETURN_IF_ERROR(kernels::LaunchEigenFunction<T>(P, iN, v, ev, vf, u, /*ensemble=*/true,
                                                       info_e_, s));
  RETURN_IF_ERROR(Launched());
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemvSB(blas(), kN, iN, iN, v, iN, nn, u, 1, N, wbar, N, P));
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, iN, iN, iN, T(1), vf, iN, nn, v, iN, nn,
                                        T(0), t, iN, nn, P));
  CUDA_RETURN_IF_ERROR(kernels::LaunchAddColumnVector<T>(P, iN, t, wbar, N, s));
  RETURN_IF_ERROR(Launched());
  return Transform{t, nn};
}

template <typename T>
absl::StatusOr<typename GroupRunner<T>::Transform> GroupRunner<T>::ObservationTransform() {
  // S = Yw Yw^T + (N-1) I (m x m), Cholesky.
  const int P = g_.P();
  const int64_t m = g_.key.m, N = g_.key.N, W = g_.W, mw = m * W, mm = m * m;
  const int iN = static_cast<int>(N), im = static_cast<int>(m), iW = static_cast<int>(W);
  T* obs = In<T>(g_.obs);
  T* sm = Sc<T>(g_.s);
  if (P == 1) {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::Syrk(blas(), kT, im, iN, obs, iW, sm, im));
  } else {
    CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kT, kN, im, im, iN, T(1), obs, iW, mw, obs, iW, mw,
                                          T(0), sm, im, mm, P));
  }
  RETURN_IF_ERROR(Launched());
  CUDA_RETURN_IF_ERROR(kernels::LaunchAddDiagonal<T>(P, im, sm, m, mm, static_cast<T>(N - 1), stream()));
  RETURN_IF_ERROR(Launched());
  RETURN_IF_ERROR(Mark("syrk_s"));
  RETURN_IF_ERROR(Potrf(im, sm, mm, In<T*>(g_.ptr_f), info_f_));
  RETURN_IF_ERROR(Mark("potrf"));
  return g_.stochastic() ? StochasticObservationTransform(sm) : SquareRootObservationTransform(sm);
}

template <typename T>
absl::StatusOr<typename GroupRunner<T>::Transform>
GroupRunner<T>::StochasticObservationTransform(const T* sm) {
  // Z = S^-1 Dw (rows of Dw: right solves on its column-major transpose); T = I + Yw^T Z.
  const int P = g_.P();
  const int64_t m = g_.key.m, N = g_.key.N, W = g_.W, mw = m * W, mm = m * m, nn = N * N;
  const int iN = static_cast<int>(N), im = static_cast<int>(m), iW = static_cast<int>(W);
  T* obs = In<T>(g_.obs);
  T* d = obs + N + 1;
  RETURN_IF_ERROR(CholSolve(CUBLAS_SIDE_RIGHT, iN, im, sm, im, mm, In<T*>(g_.ptr_f), d, iW, mw,
                            In<T*>(g_.ptr_rhs)));
  T* t = Sc<T>(g_.t);
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, iN, iN, im, T(1), obs, iW, mw, d, iW, mw,
                                        T(0), t, iN, nn, P));
  RETURN_IF_ERROR(Launched());
  CUDA_RETURN_IF_ERROR(kernels::LaunchAddDiagonal<T>(P, iN, t, N, nn, T(1), stream()));
  RETURN_IF_ERROR(Launched());
  return Transform{t, nn};
}

template <typename T>
absl::StatusOr<typename GroupRunner<T>::Transform>
GroupRunner<T>::SquareRootObservationTransform(const T* sm) {
  // [Z | z] = S^-1 [Yw | dw]; C = Yw^T [Z | z] = [I - M | wbar]; W = M^(1/2).
  const int P = g_.P();
  const int64_t m = g_.key.m, N = g_.key.N, W = g_.W, mw = m * W, mm = m * m, nn = N * N;
  const int iN = static_cast<int>(N), im = static_cast<int>(m), iW = static_cast<int>(W);
  const cudaStream_t s = stream();
  T* obs = In<T>(g_.obs);
  T* z = Sc<T>(g_.z);
  const int64_t zs = m * (N + 1);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(z, obs, static_cast<size_t>(P * zs) * sizeof(T),
                                       cudaMemcpyDeviceToDevice, s));
  RETURN_IF_ERROR(CholSolve(CUBLAS_SIDE_RIGHT, iN + 1, im, sm, im, mm, In<T*>(g_.ptr_f), z, iN + 1,
                            zs, In<T*>(g_.ptr_rhs)));
  T* c = Sc<T>(g_.c);
  const int64_t c_stride = N * (N + 1);
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, iN, iN + 1, im, T(1), obs, iW, mw, z, iN + 1,
                                        zs, T(0), c, iN, c_stride, P));
  RETURN_IF_ERROR(Launched());
  T* v = Sc<T>(g_.v);
  T* ev = Sc<T>(g_.ev);
  T* vf = Sc<T>(g_.vf);
  T* t = Sc<T>(g_.t);
  CUDA_RETURN_IF_ERROR(kernels::LaunchIdentityMinusSym<T>(P, iN, c, c_stride, v, s));
  RETURN_IF_ERROR(Launched());
  RETURN_IF_ERROR(Eig(iN, v, ev, info_e_));
  CUDA_RETURN_IF_ERROR(kernels::LaunchEigenFunction<T>(P, iN, v, ev, vf, nullptr,
                                                       /*ensemble=*/false, info_e_, s));
  RETURN_IF_ERROR(Launched());
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kN, kT, iN, iN, iN, T(1), vf, iN, nn, v, iN, nn,
                                        T(0), t, iN, nn, P));
  CUDA_RETURN_IF_ERROR(kernels::LaunchAddColumnVector<T>(P, iN, t, c + nn, c_stride, s));
  RETURN_IF_ERROR(Launched());
  return Transform{t, nn};
}

template <typename T>
absl::Status GroupRunner<T>::TransformRows(const Transform& t) {
  // One pass: raw X in, finished Xa out (centring, Xa = A T, mean, relaxation, spread).
  const int P = g_.P();
  int bpp = 0;
  double* partials = Sc<double>(g_.partials);
  CUDA_RETURN_IF_ERROR(kernels::LaunchTransformRows<T>(
      P, g_.key.n, static_cast<int>(g_.key.N), In<T>(g_.x), t.t, t.stride,
      In<const ProblemParams>(g_.params), reinterpret_cast<T*>(out_ + g_.xa), partials, &bpp,
      stream(), rows_per_warp_));
  RETURN_IF_ERROR(Launched());
  CUDA_RETURN_IF_ERROR(kernels::LaunchReduceSpread(P, bpp, g_.key.n, partials, spread_, stream()));
  RETURN_IF_ERROR(Launched());
  return Mark("transform_rows");
}

template <typename T>
absl::Status GroupRunner<T>::UpdateAndFinishRows(const Transform& t) {
  // Xa = A T (rows of members: column-major Xa^T = T^T A^T), then mean, relaxation, spread.
  const int P = g_.P();
  const int64_t n = g_.key.n, N = g_.key.N;
  const int iN = static_cast<int>(N);
  T* x = In<T>(g_.x);
  T* xa = reinterpret_cast<T*>(out_ + g_.xa);
  CUBLAS_RETURN_IF_ERROR(Lib<T>::GemmSB(blas(), kT, kN, iN, static_cast<int>(n), iN, T(1), t.t, iN,
                                        t.stride, x, iN, n * N, T(0), xa, iN, n * N, P));
  RETURN_IF_ERROR(Launched());
  RETURN_IF_ERROR(Mark("update_gemm"));
  int bpp = 0;
  double* partials = Sc<double>(g_.partials);
  CUDA_RETURN_IF_ERROR(kernels::LaunchFinishRows<T>(P, n, iN, xa, x, Sc<double>(g_.xbar),
                                                    In<const ProblemParams>(g_.params), partials,
                                                    &bpp, stream()));
  RETURN_IF_ERROR(Launched());
  CUDA_RETURN_IF_ERROR(kernels::LaunchReduceSpread(P, bpp, n, partials, spread_, stream()));
  RETURN_IF_ERROR(Launched());
  return Mark("finish_rows");
}

// ---- the batch ------------------------------------------------------------------------------

template <typename T>
absl::StatusOr<PendingAssimilate> Enqueue(DeviceContext& device, StreamSlot& slot,
                                          const Batch& batch, const EnqueueOptions* options) {
  RETURN_IF_ERROR(device.MakeCurrent());
  const cudaStream_t stream = slot.stream.get();
  ASSIGN_OR_RETURN(BatchPlan plan, PlanBatch(batch));
  for (Group& g : plan.groups) {
    for (const auto& [r, k] : g.members) {
      g.in_place.push_back(options && options->pack_all
                               ? InPlace{}
                               : ChooseInPlace(batch.requests[r]->problems[k], batch.dtype,
                                               g.stochastic(), g.full_r()));
    }
  }
  const std::vector<Group>& groups = plan.groups;
  const int64_t q = plan.problems;
  PendingAssimilate pending;
  pending.dtype = batch.dtype;
  pending.requests = std::move(plan.slots);
  pending.problems = q;
  pending.spread = static_cast<int64_t>(plan.spread);
  pending.info = static_cast<int64_t>(plan.info);
  pending.candidates = static_cast<int64_t>(plan.candidates);
  if (q == 0) return pending;

  StreamScratch scratch(device.memory_pool(), stream);
  ASSIGN_OR_RETURN(void* workspace, scratch.Get(plan.workspace_bytes()));
  char* const in_dev = static_cast<char*>(workspace);
  char* const sc_dev = in_dev + plan.in_bytes;
  char* const out_dev = sc_dev + plan.scratch_bytes;
  RETURN_IF_ERROR(slot.staging_in.Reserve(plan.in_bytes));
  RETURN_IF_ERROR(slot.staging_out.Reserve(plan.out_bytes));
  {
    // The sections the GPU reads where they are go first, so that their copies run while the
    // rest is packed; the copy of the packed rest follows the packing in pieces (PackGroup's
    // `packed`), skipping those sections, so that most of it overlaps the packing too.
    NVTX_RANGE("assimilate.pack");
    std::vector<std::pair<size_t, size_t>> in_place;  // [begin, end) in `in`, ascending
    for (const Group& g : groups) {
      RETURN_IF_ERROR(CopyInPlace<T>(g, batch, in_dev, stream, &in_place));
    }
    std::sort(in_place.begin(), in_place.end());
    for (const auto& [begin, end] : in_place) pending.in_place_bytes += static_cast<int64_t>(end - begin);
    char* staging = static_cast<char*>(slot.staging_in.data());
    size_t copied = 0;
    size_t next_section = 0;
    cudaError_t copy_error = cudaSuccess;
    auto copy_range = [&](size_t begin, size_t end) {
      if (begin < end && copy_error == cudaSuccess) {
        copy_error = cudaMemcpyAsync(in_dev + begin, staging + begin, end - begin,
                                     cudaMemcpyHostToDevice, stream);
      }
    };
    auto copy_to = [&](size_t end) {
      while (copied < end) {
        if (next_section < in_place.size() && in_place[next_section].first < end) {
          const auto [begin, section_end] = in_place[next_section];
          copy_range(copied, begin);
          copied = std::max(copied, section_end);
          ++next_section;
        } else {
          copy_range(copied, end);
          copied = end;
        }
      }
    };
    for (const Group& g : groups) {
      PackGroup<T>(g, batch, staging, sc_dev, in_dev, copy_to);
    }
    copy_to(plan.in_bytes);
    CUDA_RETURN_IF_ERROR(copy_error);
  }
  if (options && options->before) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->before, stream));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out_dev + plan.info, 0, static_cast<size_t>(q) * 3 * sizeof(int), stream));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out_dev + plan.candidates, 0, static_cast<size_t>(q) * sizeof(unsigned long long),
                                       stream));
  int* info = reinterpret_cast<int*>(out_dev + plan.info);
  auto* candidates = reinterpret_cast<unsigned long long*>(out_dev + plan.candidates);
  {
    NVTX_RANGE("assimilate.enqueue");
    for (const Group& g : groups) {
      GroupRunner<T> runner(device, slot, scratch, g, in_dev, sc_dev, out_dev, info, info + q,
                            info + 2 * q, reinterpret_cast<double*>(out_dev + plan.spread), candidates, options);
      RETURN_IF_ERROR(runner.Run());
    }
  }
  if (options && options->after) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->after, stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(slot.staging_out.data(), out_dev, plan.out_bytes, cudaMemcpyDeviceToHost, stream));
  return pending;  // `scratch` frees the device memory after the copy out, in stream order
}

std::string NotPositiveDefinite(int64_t index, absl::string_view what, ElementType dtype) {
  return absl::StrCat("problems[", index, "].hx: the ", what, " is not numerically positive definite in ",
                      ElementName(dtype), " (ensemble anomalies far larger than the observation errors?)",
                      dtype == ElementType::kFloat32 ? "; try float64" : "");
}

}  // namespace

absl::StatusOr<PendingAssimilate> EnqueueAssimilate(DeviceContext& device, StreamSlot& slot,
                                                    const Batch& batch,
                                                    const EnqueueOptions* options) {
  if (batch.dtype == ElementType::kFloat32) return Enqueue<float>(device, slot, batch, options);
  if (batch.dtype == ElementType::kFloat64) return Enqueue<double>(device, slot, batch, options);
  return absl::InvalidArgumentError(
      absl::StrCat("assimilate: compute dtype ", ElementName(batch.dtype), " is not float32 or float64"));
}

std::vector<Output> UnpackAssimilate(const PendingAssimilate& pending, const StreamSlot& slot,
                                     const Batch& batch) {
  NVTX_RANGE("assimilate.unpack");
  const char* base = static_cast<const char*>(slot.staging_out.data());
  const auto* spread = reinterpret_cast<const double*>(base + pending.spread);
  const auto* info = reinterpret_cast<const int*>(base + pending.info);
  const auto* candidates = reinterpret_cast<const unsigned long long*>(base + pending.candidates);
  const int64_t Q = pending.problems;
  const int64_t es = ElementSize(pending.dtype);
  std::vector<Output> outputs(batch.requests.size());
  for (size_t r = 0; r < batch.requests.size(); ++r) {
    const Request& request = *batch.requests[r];
    Output& o = outputs[r];
    const auto& slots = pending.requests[r];
    // The first failing problem fails the request (as on the CPU).
    for (size_t k = 0; k < slots.size() && o.status.ok(); ++k) {
      const auto& s = slots[k];
      const Problem& p = request.problems[k];
      const int64_t index = static_cast<int64_t>(k);
      const auto pairs = static_cast<int64_t>(candidates[s.q]);
      if (p.method == Method::kLetkf && pairs > p.localization.max_candidates) {
        o.status = TooManyCandidates(index, pairs, p.localization.max_candidates);
      } else if (info[s.q] > 0) {
        o.status = absl::InvalidArgumentError(absl::StrCat(
            "problems[", index, "].obs_error: the covariance R is not positive definite (",
            ElementName(pending.dtype), " Cholesky factorisation failed at leading minor ", info[s.q],
            " of ", s.m, ")"));
      } else if (info[Q + s.q] != 0 || info[2 * Q + s.q] != 0) {
        const char* what = s.form == Form::kEnsembleSpace ? "ensemble-space matrix (N-1) I + Yw^T Yw"
                           : (p.method == Method::kEtkf && info[Q + s.q] == 0)
                               ? "matrix I - Yw^T S^-1 Yw"
                               : "innovation covariance Yw Yw^T + (N-1) I";
        o.status = absl::InvalidArgumentError(NotPositiveDefinite(index, what, pending.dtype));
      }
    }
    if (!o.status.ok()) continue;
    o.problems.resize(slots.size());
    for (size_t k = 0; k < slots.size(); ++k) {
      const auto& s = slots[k];
      ProblemResult& pr = o.problems[k];
      pr.form = s.form;
      const int64_t N = request.problems[k].N;
      // Uninitialised, then filled on several threads: a fresh buffer of tens of MB is mostly
      // page faults, which one thread takes serially.
      const int64_t bytes = s.n * N * es;
      absl::strings_internal::STLStringResizeUninitialized(&pr.analysis, static_cast<size_t>(bytes));
      ParallelCopy(pr.analysis.data(), base + s.analysis, bytes);
      const auto* innov = reinterpret_cast<const double*>(base + s.innovation);
      pr.innovation_mean.assign(innov, innov + s.m);
      pr.analysis_spread = spread[s.q];
    }
  }
  return outputs;
}

int64_t CudaLetkfMaxMembers() { return kernels::kMaxLetkfMembers; }

absl::Status WarmUpAssimilate(DeviceContext& device) {
  // Small problems of every variant; each slot runs them once (library kernels load lazily, per
  // module, and each handle sets itself up on first use).
  struct Arrays {
    std::vector<double> x, hx, y, var, cov, pert, state_coords, obs_coords;
  };
  const int64_t n = 12, m = 6, N = 5;
  Arrays a;
  for (int64_t i = 0; i < n * N; ++i) a.x.push_back(std::sin(0.7 * i) + 0.1 * i);
  for (int64_t i = 0; i < m * N; ++i) a.hx.push_back(std::cos(0.3 * i) + 0.05 * i);
  for (int64_t i = 0; i < m; ++i) a.y.push_back(0.2 * i);
  a.var.assign(m, 0.5);
  a.cov.assign(m * m, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < m; ++j) a.cov[i * m + j] = i == j ? 1.0 : 0.1;
  }
  for (int64_t i = 0; i < m * N; ++i) a.pert.push_back(0.3 * std::sin(1.3 * i));
  for (int64_t i = 0; i < n; ++i) a.state_coords.push_back(static_cast<double>(i));
  for (int64_t i = 0; i < m; ++i) a.obs_coords.push_back(2.0 * static_cast<double>(i));
  auto view = [](const std::vector<double>& v) {
    return ArrayView{ElementType::kFloat64,
                     absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double))};
  };
  std::vector<StreamSlot*> slots;
  for (int i = 0; i < device.num_streams(); ++i) slots.push_back(device.AcquireSlot());
  absl::Status status;
  for (ElementType dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    auto request = std::make_shared<Request>();
    request->dtype = dtype;
    for (Method method : {Method::kEtkf, Method::kStochastic}) {
      for (Form form : {Form::kEnsembleSpace, Form::kObservationSpace}) {
        for (int variant = 0; variant < 3; ++variant) {  // variances; full R; variances, seeded
          Problem p;
          p.n = n;
          p.m = m;
          p.N = N;
          p.method = method;
          p.form = form;
          p.x = view(a.x);
          p.hx = view(a.hx);
          p.y = view(a.y);
          p.obs_error_kind = variant == 1 ? ObsErrorKind::kCovariance : ObsErrorKind::kVariances;
          p.obs_error = view(variant == 1 ? a.cov : a.var);
          p.has_perturbations = method == Method::kStochastic && variant != 2;
          p.perturbations = view(a.pert);
          p.seed = 1;
          // Twice each: the batched routines run too.
          request->problems.push_back(p);
          request->problems.push_back(p);
        }
      }
    }
    Problem letkf = request->problems.front();  // an ETKF problem of variances
    letkf.method = Method::kLetkf;
    letkf.localization.dims = 1;
    letkf.localization.state_coords = view(a.state_coords);
    letkf.localization.obs_coords = view(a.obs_coords);
    letkf.localization.radius = 2;
    request->problems.push_back(letkf);
    Batch batch;
    batch.dtype = dtype;
    batch.requests.push_back(request);
    for (StreamSlot* slot : slots) {
      if (!status.ok()) break;
      for (bool unbatched : {false, true}) {
        EnqueueOptions options;
        options.force_unbatched = unbatched;
        status = EnqueueAssimilate(device, *slot, batch, &options).status();
        const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
        if (status.ok() && err != cudaSuccess) {
          status = CudaErrorStatus(err, "assimilate warm-up", __FILE__, __LINE__);
        }
        if (!status.ok()) break;
      }
    }
  }
  for (StreamSlot* slot : slots) device.ReleaseSlot(slot);
  return status;
}

}  // namespace gpucompute::assimilate
