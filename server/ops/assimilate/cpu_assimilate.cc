// CPU reference of the Assimilate op (see cpu_assimilate.h and, for the algebra, assimilate.h).
#include "server/ops/assimilate/cpu_assimilate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "math/philox.h"
#include "server/ops/assimilate/cpu_letkf.h"
#include "server/ops/assimilate/cpu_linalg.h"

namespace gpucompute::assimilate {
namespace {

std::string ProblemField(int64_t index, absl::string_view field) {
  return absl::StrCat("problems[", index, "].", field);
}

template <typename T>
class Analysis final : public CpuAnalysis {
 public:
  Analysis(const Problem& p, int64_t index, ElementType dtype, Form form)
      : CpuAnalysis(form),
        p_(p),
        index_(index),
        dtype_(dtype),
        analysis_(static_cast<size_t>(p.n * p.N)),
        row_variance_(static_cast<size_t>(p.n)) {}

  absl::Status ComputeTransform() override;
  void ApplyRows(int64_t begin, int64_t end) override;
  ProblemResult Finish() override;
  std::vector<double> TransformMatrix() const override {
    return std::vector<double>(t_.begin(), t_.end());
  }

 private:
  // Whitens the rows of the m x cols matrix `b` in place: L^-1 b (full R) or b_i / sqrt(r_i).
  void Whiten(T* b, int64_t cols) const;
  absl::Status EnsembleSpace(std::vector<T>& yw, std::vector<T>& dw, std::vector<T>* pert);
  absl::Status ObservationSpace(std::vector<T>& yw, std::vector<T>& dw, std::vector<T>* pert);
  absl::Status NotPositiveDefinite(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        ProblemField(index_, "hx"), ": the ", what, " is not numerically positive definite in ",
        ElementName(dtype_), " (ensemble anomalies far larger than the observation errors?)",
        dtype_ == ElementType::kFloat32 ? "; try float64" : ""));
  }

  const Problem& p_;
  const int64_t index_;
  const ElementType dtype_;
  std::vector<T> chol_r_;              // full R: its lower Cholesky factor (m x m)
  std::vector<T> inv_sqrt_r_;          // variances: 1 / sqrt(r_i)
  std::vector<T> t_;                   // N x N transform
  std::vector<double> innovation_;     // m
  std::vector<T> analysis_;            // n x N
  std::vector<double> row_variance_;   // n: the analysis sample variance of each row
};

template <typename T>
void Analysis<T>::Whiten(T* b, int64_t cols) const {
  const int64_t m = p_.m;
  if (p_.obs_error_kind == ObsErrorKind::kCovariance) {
    La<T>::Trsm(static_cast<int>(m), static_cast<int>(cols), chol_r_.data(), static_cast<int>(m), b,
                static_cast<int>(cols));
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    const T s = inv_sqrt_r_[i];
    for (int64_t j = 0; j < cols; ++j) b[i * cols + j] *= s;
  }
}

template <typename T>
absl::Status Analysis<T>::ComputeTransform() {
  const int64_t m = p_.m, N = p_.N;
  const T lambda = static_cast<T>(p_.inflation);

  // R: Cholesky factor (whitening once) or inverse standard deviations.
  if (p_.obs_error_kind == ObsErrorKind::kCovariance) {
    chol_r_.resize(static_cast<size_t>(m * m));
    Convert(p_.obs_error, chol_r_.data());
    const int info = La<T>::Potrf(static_cast<int>(m), chol_r_.data(), static_cast<int>(m));
    if (info != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          ProblemField(index_, "obs_error"), ": the covariance R is not positive definite (",
          ElementName(dtype_), " Cholesky factorisation failed at leading minor ", info, " of ", m, ")"));
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = i + 1; j < m; ++j) chol_r_[i * m + j] = 0;  // TRSM reads only the lower part
    }
  } else {
    inv_sqrt_r_.resize(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) inv_sqrt_r_[i] = static_cast<T>(1.0 / std::sqrt(p_.obs_error.at(i)));
  }

  // Y = lambda (HX - ybar 1^T); d = y - ybar.
  std::vector<T> yw(static_cast<size_t>(m * N));
  Convert(p_.hx, yw.data());
  std::vector<T> dw(static_cast<size_t>(m));
  innovation_.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    T* row = yw.data() + i * N;
    double mean = 0;
    for (int64_t j = 0; j < N; ++j) mean += row[j];
    mean /= static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) row[j] = lambda * static_cast<T>(row[j] - mean);
    innovation_[i] = p_.y.at(i) - mean;
    dw[i] = static_cast<T>(innovation_[i]);
  }
  Whiten(yw.data(), N);
  Whiten(dw.data(), 1);

  // Stochastic: whitened perturbations Ew (m x N).
  std::vector<T> pert;
  if (p_.method == Method::kStochastic) {
    pert.resize(static_cast<size_t>(m * N));
    if (p_.has_perturbations) {
      Convert(p_.perturbations, pert.data());
      Whiten(pert.data(), N);
    } else {
      const std::vector<double> z = DrawWhitenedPerturbations(p_.seed, index_, m, N);
      for (size_t i = 0; i < z.size(); ++i) pert[i] = static_cast<T>(z[i]);
    }
  }
  std::vector<T>* pert_ptr = p_.method == Method::kStochastic ? &pert : nullptr;
  return form_ == Form::kObservationSpace ? ObservationSpace(yw, dw, pert_ptr)
                                          : EnsembleSpace(yw, dw, pert_ptr);
}

template <typename T>
absl::Status Analysis<T>::EnsembleSpace(std::vector<T>& yw, std::vector<T>& dw, std::vector<T>* pert) {
  const int m = static_cast<int>(p_.m), N = static_cast<int>(p_.N);
  const T n1 = static_cast<T>(N - 1);
  // G = (N-1) I + Yw^T Yw (lower triangle from SYRK, then mirrored).
  std::vector<T> g(static_cast<size_t>(N) * N, T(0));
  La<T>::Syrk(CblasLower, CblasTrans, N, m, T(1), yw.data(), N, T(0), g.data(), N);
  for (int k = 0; k < N; ++k) g[k * N + k] += n1;
  SymmetrizeFromLower<T>(N, g.data());

  if (p_.method == Method::kEtkf) {
    std::vector<T> b(static_cast<size_t>(N));
    La<T>::Gemv(CblasTrans, m, N, T(1), yw.data(), N, dw.data(), T(0), b.data());
    EtkfScratch<T> scratch;
    if (!EtkfTransform(N, g, b, &scratch, &t_)) {
      return NotPositiveDefinite("ensemble-space matrix (N-1) I + Yw^T Yw");
    }
    return absl::OkStatus();
  }

  // Stochastic: Dw = dw 1^T + Ew - Yw; T = I + G^-1 Yw^T Dw.
  std::vector<T>& dmat = *pert;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < N; ++j) dmat[i * N + j] += dw[i] - yw[i * N + j];
  }
  std::vector<T> b(static_cast<size_t>(N) * N);
  La<T>::Gemm(CblasTrans, CblasNoTrans, N, N, m, T(1), yw.data(), N, dmat.data(), N, T(0), b.data(), N);
  if (La<T>::Potrf(N, g.data(), N) != 0) {
    return NotPositiveDefinite("ensemble-space matrix (N-1) I + Yw^T Yw");
  }
  La<T>::Potrs(N, N, g.data(), N, b.data(), N);
  for (int k = 0; k < N; ++k) b[k * N + k] += T(1);
  t_ = std::move(b);
  return absl::OkStatus();
}

template <typename T>
absl::Status Analysis<T>::ObservationSpace(std::vector<T>& yw, std::vector<T>& dw, std::vector<T>* pert) {
  const int m = static_cast<int>(p_.m), N = static_cast<int>(p_.N);
  const T n1 = static_cast<T>(N - 1);
  // S = Yw Yw^T + (N-1) I (m x m), Cholesky.
  std::vector<T> s(static_cast<size_t>(m) * m, T(0));
  La<T>::Syrk(CblasLower, CblasNoTrans, m, N, T(1), yw.data(), N, T(0), s.data(), m);
  for (int i = 0; i < m; ++i) s[i * m + i] += n1;
  if (La<T>::Potrf(m, s.data(), m) != 0) {
    return NotPositiveDefinite("innovation covariance Yw Yw^T + (N-1) I");
  }

  if (p_.method == Method::kEtkf) {
    // [Z | z] = S^-1 [Yw | dw]; wbar = Yw^T z; M = I - Yw^T Z; W = M^(1/2).
    const int cols = N + 1;
    std::vector<T> rhs(static_cast<size_t>(m) * cols);
    for (int i = 0; i < m; ++i) {
      std::memcpy(rhs.data() + i * cols, yw.data() + i * N, sizeof(T) * N);
      rhs[i * cols + N] = dw[i];
    }
    La<T>::Potrs(m, cols, s.data(), m, rhs.data(), cols);
    std::vector<T> wbar(static_cast<size_t>(N));
    std::vector<T> z(static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) z[i] = rhs[i * cols + N];
    La<T>::Gemv(CblasTrans, m, N, T(1), yw.data(), N, z.data(), T(0), wbar.data());
    std::vector<T> mmat(static_cast<size_t>(N) * N);
    La<T>::Gemm(CblasTrans, CblasNoTrans, N, N, m, T(-1), yw.data(), N, rhs.data(), cols, T(0),
                mmat.data(), N);
    for (int k = 0; k < N; ++k) mmat[k * N + k] += T(1);
    // Symmetrise (the product is symmetric only up to rounding).
    for (int i = 0; i < N; ++i) {
      for (int j = i + 1; j < N; ++j) {
        const T avg = (mmat[i * N + j] + mmat[j * N + i]) / T(2);
        mmat[i * N + j] = mmat[j * N + i] = avg;
      }
    }
    std::vector<T> eig, w, vf;
    if (!SymmetricFunction(N, mmat, [](T ev) { return std::sqrt(std::max(ev, T(0))); }, &w, &eig, &vf)) {
      return NotPositiveDefinite("matrix I - Yw^T S^-1 Yw");
    }
    t_ = std::move(w);
    for (int j = 0; j < N; ++j) {
      for (int k = 0; k < N; ++k) t_[j * N + k] += wbar[j];
    }
    return absl::OkStatus();
  }

  // Stochastic: Dw = dw 1^T + Ew - Yw; T = I + Yw^T S^-1 Dw.
  std::vector<T>& dmat = *pert;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < N; ++j) dmat[i * N + j] += dw[i] - yw[i * N + j];
  }
  La<T>::Potrs(m, N, s.data(), m, dmat.data(), N);
  std::vector<T> t(static_cast<size_t>(N) * N);
  La<T>::Gemm(CblasTrans, CblasNoTrans, N, N, m, T(1), yw.data(), N, dmat.data(), N, T(0), t.data(), N);
  for (int k = 0; k < N; ++k) t[k * N + k] += T(1);
  t_ = std::move(t);
  return absl::OkStatus();
}

template <typename T>
void Analysis<T>::ApplyRows(int64_t begin, int64_t end) {
  const int64_t N = p_.N;
  const int64_t rows = end - begin;
  if (rows <= 0) return;
  const T lambda = static_cast<T>(p_.inflation);
  // A = lambda (X - xbar 1^T) for these rows, converted from the request bytes.
  std::vector<T> a(static_cast<size_t>(rows * N));
  ArrayView slice{p_.x.dtype, p_.x.bytes.substr(static_cast<size_t>(begin * N * ElementSize(p_.x.dtype)),
                                                static_cast<size_t>(rows * N * ElementSize(p_.x.dtype)))};
  Convert(slice, a.data());
  std::vector<double> mean(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    T* row = a.data() + r * N;
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += row[j];
    mean[r] = s / static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) row[j] = lambda * static_cast<T>(row[j] - mean[r]);
  }
  // Analysis anomalies relative to xbar: A T (GEMM straight into the output rows).
  T* out = analysis_.data() + begin * N;
  La<T>::Gemm(CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(N), static_cast<int>(N),
              T(1), a.data(), static_cast<int>(N), t_.data(), static_cast<int>(N), T(0), out,
              static_cast<int>(N));
  for (int64_t r = 0; r < rows; ++r) {
    row_variance_[begin + r] = FinishAnalysisRow(p_, out + r * N, a.data() + r * N, mean[r]);
  }
}

template <typename T>
ProblemResult Analysis<T>::Finish() {
  return MakeProblemResult(form_, std::move(innovation_), row_variance_, std::move(analysis_));
}

}  // namespace

std::unique_ptr<CpuAnalysis> CpuAnalysis::Create(const Problem& problem, int64_t index,
                                                 ElementType dtype, const Limits& limits) {
  if (problem.method == Method::kLetkf) return CreateLetkfAnalysis(problem, index, dtype);
  const Form form = ChooseForm(problem, limits);
  std::unique_ptr<CpuAnalysis> out;
  if (dtype == ElementType::kFloat32) {
    auto a = std::make_unique<Analysis<float>>(problem, index, dtype, form);
    out = std::move(a);
  } else {
    auto a = std::make_unique<Analysis<double>>(problem, index, ElementType::kFloat64, form);
    out = std::move(a);
  }
  return out;
}

std::vector<double> DrawWhitenedPerturbations(uint64_t seed, int64_t index, int64_t m, int64_t N) {
  std::vector<double> z(static_cast<size_t>(m * N));
  const uint32_t problem = static_cast<uint32_t>(index);
  for (int64_t e = 0; e < m * N; e += 2) {
    double z0, z1;
    philox::NormalPair(seed, problem, static_cast<uint64_t>(e) >> 1, &z0, &z1);
    z[e] = z0;
    if (e + 1 < m * N) z[e + 1] = z1;
  }
  for (int64_t i = 0; i < m; ++i) {
    double* row = z.data() + i * N;
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += row[j];
    s /= static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) row[j] -= s;
  }
  return z;
}

absl::StatusOr<ProblemResult> CpuAnalyse(const Problem& problem, int64_t index, ElementType dtype,
                                         const Limits& limits) {
  auto a = CpuAnalysis::Create(problem, index, dtype, limits);
  if (absl::Status s = a->ComputeTransform(); !s.ok()) return s;
  a->ApplyRows(0, problem.n);
  return a->Finish();
}

std::vector<Output> CpuAnalyseBatch(const Batch& batch) {
  std::vector<Output> outputs(batch.requests.size());
  for (size_t r = 0; r < batch.requests.size(); ++r) {
    const Request& request = *batch.requests[r];
    for (size_t i = 0; i < request.problems.size() && outputs[r].status.ok(); ++i) {
      auto result = CpuAnalyse(request.problems[i], static_cast<int64_t>(i), batch.dtype);
      if (!result.ok()) {
        outputs[r].status = result.status();
        outputs[r].problems.clear();
      } else {
        outputs[r].problems.push_back(*std::move(result));
      }
    }
  }
  return outputs;
}

}  // namespace gpucompute::assimilate
