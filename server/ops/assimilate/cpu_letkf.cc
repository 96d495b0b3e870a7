// The CPU reference of the LETKF (see cpu_letkf.h).
#include "server/ops/assimilate/cpu_letkf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "math/letkf_cells.h"
#include "math/localization.h"
#include "server/ops/assimilate/cpu_linalg.h"
#include "server/ops/assimilate/letkf_geometry.h"

namespace gpucompute::assimilate {
namespace {

template <typename T>
class LetkfAnalysis final : public CpuAnalysis {
 public:
  LetkfAnalysis(const Problem& p, int64_t index)
      : CpuAnalysis(Form::kEnsembleSpace), p_(p), index_(index),
        analysis_(static_cast<size_t>(p.n * p.N)), row_variance_(static_cast<size_t>(p.n)) {}

  absl::Status ComputeTransform() override;
  void ApplyRows(int64_t begin, int64_t end) override;
  ProblemResult Finish() override;
  std::vector<double> TransformMatrix() const override { return {}; }  // one per row

 private:
  // One thread's buffers for its rows' local analyses (reused from row to row).
  struct Scratch {
    std::vector<T> yl, dl, g, b, t;
    EtkfScratch<T> etkf;
  };
  // The transform T (N x N, into s->t) of the variable at `point` from its local observations;
  // the identity when there is none (or, which G >= (N-1) I rules out for finite inputs, when
  // the local G is not numerically positive definite).
  void LocalTransform(const double* point, Scratch* s) const;

  const Problem& p_;
  const int64_t index_;  // in its request, for errors
  localization::LetkfGeometry geometry_;
  LetkfBins bins_;                   // the observations sorted by cell
  std::vector<double> state_coords_; // n x d
  std::vector<double> obs_coords_;   // m x d
  std::vector<T> yw_;                // m x N: whitened, inflated HX anomalies
  std::vector<T> dw_;                // m: whitened innovations
  std::vector<double> innovation_;   // m: y - mean(HX)
  std::vector<T> analysis_;          // n x N
  std::vector<double> row_variance_; // n
};

template <typename T>
absl::Status LetkfAnalysis<T>::ComputeTransform() {
  const int64_t m = p_.m, N = p_.N, d = p_.localization.dims;
  const Localization& l = p_.localization;
  // The bins, and the limit on the search's cost checked before any other work.
  obs_coords_.resize(static_cast<size_t>(m * d));
  ToDouble(l.obs_coords.dtype, l.obs_coords.bytes.data(), m * d, obs_coords_.data());
  geometry_ = MakeLetkfGeometry(p_);
  bins_ = BinObservations(geometry_, obs_coords_.data(), m);
  state_coords_.resize(static_cast<size_t>(p_.n * d));
  ToDouble(l.state_coords.dtype, l.state_coords.bytes.data(), p_.n * d, state_coords_.data());
  const int64_t candidates = CandidatePairs(geometry_, bins_, state_coords_.data(), p_.n);
  if (candidates > l.max_candidates) return TooManyCandidates(index_, candidates, l.max_candidates);
  const T lambda = static_cast<T>(p_.inflation);
  yw_.resize(static_cast<size_t>(m * N));
  Convert(p_.hx, yw_.data());
  std::vector<double> y(static_cast<size_t>(m));
  ToDouble(p_.y.dtype, p_.y.bytes.data(), m, y.data());
  innovation_.resize(static_cast<size_t>(m));
  dw_.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    T* row = yw_.data() + i * N;
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += row[j];
    const double ybar = s / static_cast<double>(N);
    const double w = 1.0 / std::sqrt(p_.obs_error.at(i));
    for (int64_t j = 0; j < N; ++j) row[j] = static_cast<T>(w * lambda * (row[j] - ybar));
    innovation_[i] = y[i] - ybar;
    dw_[i] = static_cast<T>(w * innovation_[i]);
  }
  return absl::OkStatus();
}

template <typename T>
void LetkfAnalysis<T>::LocalTransform(const double* point, Scratch* s) const {
  const Localization& l = p_.localization;
  const int N = static_cast<int>(p_.N);
  const int d = static_cast<int>(l.dims);
  const localization::Neighbourhood around(geometry_, point);
  s->yl.clear();  // the local rows, tapered
  s->dl.clear();
  for (int r = 0; r < around.runs; ++r) {  // runs of consecutive cells, in the kernels' order
    int first = 0, length = 0;
    around.Run(geometry_, r, &first, &length);
    for (int k = bins_.cell_start[first]; k < bins_.cell_start[first + length]; ++k) {
      const int64_t j = bins_.sorted[static_cast<size_t>(k)];
      const double dist = localization::Distance(l.metric, point, obs_coords_.data() + j * d, d,
                                                 l.domain.data(), l.sphere_radius);
      const double c = localization::TaperCoefficient(l.taper, dist, l.radius);
      if (!(c > localization::kMinCoefficient)) continue;
      const T w = static_cast<T>(std::sqrt(c));
      const T* row = yw_.data() + j * N;
      for (int q = 0; q < N; ++q) s->yl.push_back(w * row[q]);
      s->dl.push_back(w * dw_[j]);
    }
  }
  const int k = static_cast<int>(s->dl.size());
  if (k > 0) {
    std::vector<T>& g = s->g;
    g.assign(static_cast<size_t>(N) * N, T(0));
    s->b.resize(static_cast<size_t>(N));
    La<T>::Syrk(CblasLower, CblasTrans, N, k, T(1), s->yl.data(), N, T(0), g.data(), N);
    for (int q = 0; q < N; ++q) g[q * N + q] += static_cast<T>(N - 1);
    La<T>::Gemv(CblasTrans, k, N, T(1), s->yl.data(), N, s->dl.data(), T(0), s->b.data());
    if (EtkfTransform(N, g, s->b, &s->etkf, &s->t)) return;
  }
  s->t.assign(static_cast<size_t>(N) * N, T(0));
  for (int q = 0; q < N; ++q) s->t[q * N + q] = T(1);
}

template <typename T>
void LetkfAnalysis<T>::ApplyRows(int64_t begin, int64_t end) {
  const int64_t N = p_.N, d = p_.localization.dims;
  const T lambda = static_cast<T>(p_.inflation);
  std::vector<T> a(static_cast<size_t>(N));
  Scratch scratch;
  const size_t x_es = ElementSize(p_.x.dtype);
  for (int64_t i = begin; i < end; ++i) {
    ArrayView row{p_.x.dtype, p_.x.bytes.substr(static_cast<size_t>(i * N) * x_es, static_cast<size_t>(N) * x_es)};
    Convert(row, a.data());
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += a[j];
    const double mean = s / static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) a[j] = lambda * static_cast<T>(a[j] - mean);
    LocalTransform(state_coords_.data() + i * d, &scratch);
    T* xa = analysis_.data() + i * N;
    La<T>::Gemv(CblasTrans, static_cast<int>(N), static_cast<int>(N), T(1), scratch.t.data(), static_cast<int>(N),
                a.data(), T(0), xa);
    row_variance_[i] = FinishAnalysisRow(p_, xa, a.data(), mean);
  }
}

template <typename T>
ProblemResult LetkfAnalysis<T>::Finish() {
  return MakeProblemResult(form_, std::move(innovation_), row_variance_, std::move(analysis_));
}

}  // namespace

std::unique_ptr<CpuAnalysis> CreateLetkfAnalysis(const Problem& problem, int64_t index, ElementType dtype) {
  if (dtype == ElementType::kFloat32) return std::make_unique<LetkfAnalysis<float>>(problem, index);
  return std::make_unique<LetkfAnalysis<double>>(problem, index);
}

}  // namespace gpucompute::assimilate
