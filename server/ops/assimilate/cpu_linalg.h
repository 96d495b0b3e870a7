// Row-major BLAS/LAPACK (CBLAS, LAPACKE: OpenBLAS) for float and double under one name, and
// the per-row end of every CPU analysis: the internals of the assimilate op's CPU reference.
#pragma once

#include <cblas.h>
#include <lapacke.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/ops/assimilate/assimilate.h"

namespace gpucompute::assimilate {

// Row-major BLAS/LAPACK for float and double under one name.
template <typename T>
struct La;

template <>
struct La<double> {
  static void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
                   const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  static void Gemv(CBLAS_TRANSPOSE t, int m, int n, double alpha, const double* a, int lda,
                   const double* x, double beta, double* y) {
    cblas_dgemv(CblasRowMajor, t, m, n, alpha, a, lda, x, 1, beta, y, 1);
  }
  static void Syrk(CBLAS_UPLO uplo, CBLAS_TRANSPOSE t, int n, int k, double alpha, const double* a,
                   int lda, double beta, double* c, int ldc) {
    cblas_dsyrk(CblasRowMajor, uplo, t, n, k, alpha, a, lda, beta, c, ldc);
  }
  static void Trsm(int m, int n, const double* l, int ldl, double* b, int ldb) {
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, m, n, 1.0, l, ldl,
                b, ldb);
  }
  static int Potrf(int n, double* a, int lda) {
    return LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', n, a, lda);
  }
  static int Potrs(int n, int nrhs, const double* a, int lda, double* b, int ldb) {
    return LAPACKE_dpotrs(LAPACK_ROW_MAJOR, 'L', n, nrhs, a, lda, b, ldb);
  }
  static int Syevd(int n, double* a, int lda, double* w) {
    return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, a, lda, w);
  }
};

template <>
struct La<float> {
  static void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  static void Gemv(CBLAS_TRANSPOSE t, int m, int n, float alpha, const float* a, int lda,
                   const float* x, float beta, float* y) {
    cblas_sgemv(CblasRowMajor, t, m, n, alpha, a, lda, x, 1, beta, y, 1);
  }
  static void Syrk(CBLAS_UPLO uplo, CBLAS_TRANSPOSE t, int n, int k, float alpha, const float* a,
                   int lda, float beta, float* c, int ldc) {
    cblas_ssyrk(CblasRowMajor, uplo, t, n, k, alpha, a, lda, beta, c, ldc);
  }
  static void Trsm(int m, int n, const float* l, int ldl, float* b, int ldb) {
    cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, m, n, 1.0f, l, ldl,
                b, ldb);
  }
  static int Potrf(int n, float* a, int lda) { return LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'L', n, a, lda); }
  static int Potrs(int n, int nrhs, const float* a, int lda, float* b, int ldb) {
    return LAPACKE_spotrs(LAPACK_ROW_MAJOR, 'L', n, nrhs, a, lda, b, ldb);
  }
  static int Syevd(int n, float* a, int lda, float* w) {
    return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, a, lda, w);
  }
};

template <typename T>
void Convert(const ArrayView& a, T* out) {
  if constexpr (std::is_same_v<T, double>) {
    ToDouble(a.dtype, a.bytes.data(), a.size(), out);
  } else {
    ToFloat(a.dtype, a.bytes.data(), a.size(), out);
  }
}

// Copies the lower triangle of a row-major symmetric n x n matrix into its upper triangle.
template <typename T>
void SymmetrizeFromLower(int64_t n, T* a) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = a[j * n + i];
  }
}

// W = V diag(scale(lambda_k)) V^T of the symmetric N x N `a` (row-major, lower triangle read),
// which is left holding the eigenvectors V in its columns; the eigenvalues go to `eig`
// (ascending), `vf` is scratch. False when SYEVD fails.
template <typename T, typename F>
bool SymmetricFunction(int N, std::vector<T>& a, F scale, std::vector<T>* w, std::vector<T>* eig,
                       std::vector<T>* vf) {
  eig->resize(static_cast<size_t>(N));
  if (La<T>::Syevd(N, a.data(), N, eig->data()) != 0) return false;
  vf->resize(a.size());
  for (int i = 0; i < N; ++i) {
    for (int k = 0; k < N; ++k) (*vf)[i * N + k] = a[i * N + k] * scale((*eig)[k]);
  }
  w->assign(static_cast<size_t>(N) * N, T(0));
  La<T>::Gemm(CblasNoTrans, CblasTrans, N, N, N, T(1), vf->data(), N, a.data(), N, T(0), w->data(), N);
  return true;
}

// Buffers of EtkfTransform, reusable from one problem (or local analysis) to the next.
template <typename T>
struct EtkfScratch {
  std::vector<T> eig, c, wbar, vf;
};

// The ETKF's ensemble-space transform (assimilate.h) from G = (N-1) I + Yw^T Yw (`g`, lower
// triangle read, destroyed) and b = Yw^T dw: T = [(N-1) G^-1]^(1/2) + (G^-1 b) 1^T, with
// G = V diag(eig) V^T, W = V diag(sqrt((N-1)/eig)) V^T, wbar = V diag(1/eig) V^T b. False when
// G is not numerically positive definite.
template <typename T>
bool EtkfTransform(int N, std::vector<T>& g, const std::vector<T>& b, EtkfScratch<T>* s, std::vector<T>* t) {
  const T n1 = static_cast<T>(N - 1);
  if (!SymmetricFunction(N, g, [n1](T ev) { return std::sqrt(n1 / ev); }, t, &s->eig, &s->vf)) return false;
  if (s->eig.front() <= 0) return false;
  s->c.resize(static_cast<size_t>(N));
  s->wbar.resize(static_cast<size_t>(N));
  La<T>::Gemv(CblasTrans, N, N, T(1), g.data(), N, b.data(), T(0), s->c.data());
  for (int k = 0; k < N; ++k) s->c[k] /= s->eig[k];
  La<T>::Gemv(CblasNoTrans, N, N, T(1), g.data(), N, s->c.data(), T(0), s->wbar.data());
  for (int j = 0; j < N; ++j) {
    for (int k = 0; k < N; ++k) (*t)[j * N + k] += s->wbar[j];
  }
  return true;
}

// The end of one analysis row (assimilate.h): `xa` holds the analysis anomalies of the row
// relative to the forecast mean `mean` (N values) and `af` its inflated forecast anomalies.
// Applies the problem's relaxation, adds the mean back, and returns the row's analysis
// sample variance (N - 1 normalisation).
template <typename T>
double FinishAnalysisRow(const Problem& p, T* xa, const T* af, double mean) {
  const int64_t N = p.N;
  const double alpha = p.relaxation_factor;
  double s = 0;
  for (int64_t j = 0; j < N; ++j) s += xa[j];
  const double amean = s / static_cast<double>(N);  // analysis mean - forecast mean
  if (p.relaxation == Relaxation::kRtpp) {
    for (int64_t j = 0; j < N; ++j) xa[j] = static_cast<T>(amean + (1 - alpha) * (xa[j] - amean) + alpha * af[j]);
  } else if (p.relaxation == Relaxation::kRtps) {
    double va = 0, vf = 0;
    for (int64_t j = 0; j < N; ++j) {
      va += (xa[j] - amean) * (xa[j] - amean);
      vf += static_cast<double>(af[j]) * af[j];
    }
    if (va > 0) {
      const double factor = 1 - alpha + alpha * std::sqrt(vf / va);
      for (int64_t j = 0; j < N; ++j) xa[j] = static_cast<T>(amean + factor * (xa[j] - amean));
    }
  }
  s = 0;
  for (int64_t j = 0; j < N; ++j) s += xa[j];
  const double m2 = s / static_cast<double>(N);
  double var = 0;
  for (int64_t j = 0; j < N; ++j) var += (xa[j] - m2) * (xa[j] - m2);
  const T base = static_cast<T>(mean);
  for (int64_t j = 0; j < N; ++j) xa[j] += base;
  return var / static_cast<double>(N - 1);
}

// A problem's result from its parts: the analysis (moved out as raw bytes of T), the row
// variances (their mean gives the spread), the innovation mean and the form.
template <typename T>
ProblemResult MakeProblemResult(Form form, std::vector<double> innovation_mean,
                                const std::vector<double>& row_variance, std::vector<T> analysis) {
  ProblemResult r;
  r.form = form;
  r.innovation_mean = std::move(innovation_mean);
  double total = 0;
  for (double v : row_variance) total += v;
  r.analysis_spread = std::sqrt(total / static_cast<double>(row_variance.size()));
  r.analysis.resize(analysis.size() * sizeof(T));
  std::memcpy(r.analysis.data(), analysis.data(), r.analysis.size());
  return r;
}

}  // namespace gpucompute::assimilate
