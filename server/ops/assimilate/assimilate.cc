// Assimilate semantics: validation and the cost model (see assimilate.h).
#include "server/ops/assimilate/assimilate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/non_finite.h"

namespace gpucompute::assimilate {
namespace {

std::string Field(int64_t index, absl::string_view field) {
  return absl::StrCat("problems[", index, "].", field);
}

absl::Status CheckSize(const ArrayView& a, int64_t expected, int64_t index, absl::string_view field) {
  if (a.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(Field(index, field), ": holds ", a.size(),
                                                   " values but ", expected, " are needed"));
  }
  return absl::OkStatus();
}

// First non-finite value of `a`, or -1.
int64_t FirstNonFinite(const ArrayView& a) {
  if (a.known_finite) return -1;
  return gpucompute::FirstNonFinite(a.dtype, a.bytes);
}

absl::Status CheckFinite(const ArrayView& a, int64_t cols, int64_t index, absl::string_view field) {
  const int64_t bad = FirstNonFinite(a);
  if (bad < 0) return absl::OkStatus();
  const std::string where = cols > 0 ? absl::StrCat("[", bad / cols, ", ", bad % cols, "]")
                                     : absl::StrCat("[", bad, "]");
  return absl::InvalidArgumentError(absl::StrCat(Field(index, field), ": values must be finite (",
                                                 field, where, " is ", a.at(bad), ")"));
}

}  // namespace

const char* MethodName(Method m) {
  return m == Method::kEtkf ? "etkf" : m == Method::kLetkf ? "letkf" : "enkf";
}

const char* RelaxationName(Relaxation r) {
  switch (r) {
    case Relaxation::kNone: return "none";
    case Relaxation::kRtpp: return "rtpp";
    case Relaxation::kRtps: return "rtps";
  }
  return "unknown";
}

const char* FormName(Form f) {
  switch (f) {
    case Form::kAuto: return "auto";
    case Form::kObservationSpace: return "observation_space";
    case Form::kEnsembleSpace: return "ensemble_space";
  }
  return "unknown";
}

double ArrayView::at(int64_t i) const {
  if (dtype == ElementType::kFloat64) {
    double v;
    std::memcpy(&v, bytes.data() + 8 * i, 8);
    return v;
  }
  if (dtype == ElementType::kFloat32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  double v = 0;
  ToDouble(dtype, bytes.data() + i * ElementSize(dtype), 1, &v);
  return v;
}

int64_t Batch::problems() const {
  int64_t n = 0;
  for (const auto& r : requests) n += static_cast<int64_t>(r->problems.size());
  return n;
}

namespace {

// The LETKF's localisation: diagonal R, coordinates of n and m points of d values, a known
// metric with its parameters, a positive finite radius.
absl::Status ValidateLocalizationShapes(const Problem& p, int64_t index) {
  const Localization& l = p.localization;
  if (p.obs_error_kind != ObsErrorKind::kVariances) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field(index, "obs_error"), ": the LETKF takes observation error variances (a diagonal R); "
        "a full covariance cannot be localised observation by observation"));
  }
  if (l.dims < 1) {
    return absl::InvalidArgumentError(absl::StrCat(Field(index, "localization.state_coords"),
                                                   ": is required for the LETKF ([n, d], d >= 1)"));
  }
  if (auto s = CheckSize(l.state_coords, p.n * l.dims, index, "localization.state_coords"); !s.ok()) return s;
  if (auto s = CheckSize(l.obs_coords, p.m * l.dims, index, "localization.obs_coords"); !s.ok()) return s;
  if (!(std::isfinite(l.radius) && l.radius > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(Field(index, "localization.radius"),
                                                   ": must be finite and > 0 (got ", l.radius, ")"));
  }
  if (l.metric == localization::Metric::kPeriodic) {
    if (static_cast<int64_t>(l.domain.size()) != l.dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field(index, "localization.domain"), ": the periodic metric needs the domain's length along "
          "each of the ", l.dims, " axes (got ", l.domain.size(), " values)"));
    }
    for (size_t k = 0; k < l.domain.size(); ++k) {
      if (!(std::isfinite(l.domain[k]) && l.domain[k] > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(Field(index, "localization.domain"), "[", k,
                                                       "]: must be finite and > 0 (got ", l.domain[k], ")"));
      }
    }
  }
  if (l.metric == localization::Metric::kGreatCircle) {
    if (l.dims != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field(index, "localization.state_coords"), ": the great-circle metric takes (longitude, "
          "latitude) in degrees, d = 2 (got d = ", l.dims, ")"));
    }
    if (!(std::isfinite(l.sphere_radius) && l.sphere_radius > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(Field(index, "localization.earth_radius"),
                                                     ": must be finite and > 0 for the great-circle "
                                                     "metric (got ", l.sphere_radius, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateShapes(const Problem& p, int64_t index, const Limits& limits) {
  if (p.N < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field(index, "x.shape[1]"), ": the ensemble needs at least 2 members (got ", p.N, ")"));
  }
  if (p.N > limits.max_members) {
    return absl::ResourceExhaustedError(absl::StrCat(Field(index, "x.shape[1]"), ": ", p.N,
                                                     " members; the limit is ", limits.max_members,
                                                     " (--assimilate_max_members)"));
  }
  if (p.n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Field(index, "x.shape[0]"), ": the state needs at least 1 variable"));
  }
  if (p.m < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Field(index, "hx.shape[0]"), ": at least 1 observation is needed"));
  }
  if (p.obs_error_kind == ObsErrorKind::kCovariance && p.m > limits.max_covariance_obs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        Field(index, "obs_error"), ": a full ", p.m, " x ", p.m, " covariance is over the limit of ",
        limits.max_covariance_obs, " observations (--assimilate_max_covariance_obs); send variances"));
  }
  if (p.form == Form::kObservationSpace && p.m > limits.max_covariance_obs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        Field(index, "form"), ": the observation-space form needs an m x m matrix and m = ", p.m,
        " is over the limit of ", limits.max_covariance_obs, " (--assimilate_max_covariance_obs)"));
  }
  if (auto s = CheckSize(p.x, p.n * p.N, index, "x"); !s.ok()) return s;
  if (auto s = CheckSize(p.hx, p.m * p.N, index, "hx"); !s.ok()) return s;
  if (auto s = CheckSize(p.y, p.m, index, "y"); !s.ok()) return s;
  const int64_t r_size = p.obs_error_kind == ObsErrorKind::kCovariance ? p.m * p.m : p.m;
  if (auto s = CheckSize(p.obs_error, r_size, index, "obs_error"); !s.ok()) return s;
  if (p.has_perturbations) {
    if (p.method != Method::kStochastic) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field(index, "perturbations"), ": only the stochastic EnKF uses perturbations (method is etkf)"));
    }
    if (auto s = CheckSize(p.perturbations, p.m * p.N, index, "perturbations"); !s.ok()) return s;
  }
  if (p.method == Method::kLetkf) {
    if (auto s = ValidateLocalizationShapes(p, index); !s.ok()) return s;
  }
  if (!std::isfinite(p.inflation) || p.inflation <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(Field(index, "inflation"),
                                                   ": must be finite and > 0 (got ", p.inflation, ")"));
  }
  if (p.relaxation != Relaxation::kNone &&
      !(p.relaxation_factor >= 0 && p.relaxation_factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(Field(index, "relaxation_factor"),
                                                   ": must be in [0, 1] (got ", p.relaxation_factor, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateValues(const Problem& p, int64_t index) {
  if (p.method == Method::kLetkf) {
    const Localization& l = p.localization;
    if (auto s = CheckFinite(l.state_coords, l.dims, index, "localization.state_coords"); !s.ok()) return s;
    if (auto s = CheckFinite(l.obs_coords, l.dims, index, "localization.obs_coords"); !s.ok()) return s;
  }
  if (auto s = CheckFinite(p.x, p.N, index, "x"); !s.ok()) return s;
  if (auto s = CheckFinite(p.hx, p.N, index, "hx"); !s.ok()) return s;
  if (auto s = CheckFinite(p.y, 0, index, "y"); !s.ok()) return s;
  if (p.has_perturbations) {
    if (auto s = CheckFinite(p.perturbations, p.N, index, "perturbations"); !s.ok()) return s;
  }
  const int64_t m = p.m;
  if (p.obs_error_kind == ObsErrorKind::kVariances) {
    for (int64_t i = 0; i < m; ++i) {
      const double v = p.obs_error.at(i);
      if (!(std::isfinite(v) && v > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(Field(index, "obs_error"),
                                                       ": variances must be finite and > 0 (obs_error[",
                                                       i, "] is ", v, ")"));
      }
    }
    return absl::OkStatus();
  }
  if (auto s = CheckFinite(p.obs_error, m, index, "obs_error"); !s.ok()) return s;
  for (int64_t i = 0; i < m; ++i) {
    const double d = p.obs_error.at(i * m + i);
    if (!(d > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field(index, "obs_error"), ": a covariance needs a positive diagonal (obs_error[", i, ", ", i,
          "] is ", d, "); it is not positive definite"));
    }
  }
  // Symmetric to 1e-12 of the diagonal scale (float32 inputs: 1e-6).
  const double tol = p.obs_error.dtype == ElementType::kFloat64 ? 1e-12 : 1e-6;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = i + 1; j < m; ++j) {
      const double a = p.obs_error.at(i * m + j), b = p.obs_error.at(j * m + i);
      const double scale = std::sqrt(p.obs_error.at(i * m + i) * p.obs_error.at(j * m + j));
      if (std::abs(a - b) > tol * scale) {
        return absl::InvalidArgumentError(absl::StrCat(
            Field(index, "obs_error"), ": the covariance must be symmetric (obs_error[", i, ", ", j,
            "] is ", a, " but obs_error[", j, ", ", i, "] is ", b, ")"));
      }
    }
  }
  return absl::OkStatus();
}

Cost AnalysisCost(const Problem& p, const Limits& limits) {
  const double m = static_cast<double>(p.m), N = static_cast<double>(p.N);
  // Whitening (Cholesky of a full R and the triangular solves) is the same for both forms and
  // left out, as is the n x N x N update.
  const double eig = 9 * N * N * N;  // SYEVD with vectors, a common rough count
  Cost c;
  if (p.method == Method::kEtkf) {
    // ens: SYRK (m N^2) + G^-1 Yw^T dw (N^3/3 + 2 m N) + SYEVD.
    c.ensemble_space = m * N * N + N * N * N / 3 + eig;
    // obs: SYRK (m^2 N) + POTRF (m^3/3) + POTRS with N+1 columns (2 m^2 (N+1)) + Yw^T Z
    // (2 m N^2) + SYEVD.
    c.observation_space = m * m * N + m * m * m / 3 + 2 * m * m * (N + 1) + 2 * m * N * N + eig;
  } else {
    // ens: SYRK (m N^2) + Yw^T Dw (2 m N^2) + POTRF/POTRS (N^3/3 + 2 N^3).
    c.ensemble_space = 3 * m * N * N + N * N * N / 3 + 2 * N * N * N;
    // obs: SYRK (m^2 N) + POTRF (m^3/3) + POTRS (2 m^2 N) + Yw^T Z (2 m N^2).
    c.observation_space = m * m * N + m * m * m / 3 + 2 * m * m * N + 2 * m * N * N;
  }
  if (p.m > limits.max_covariance_obs) c.observation_space = std::numeric_limits<double>::infinity();
  return c;
}

Form ChooseForm(const Problem& p, const Limits& limits) {
  if (p.method == Method::kLetkf) return Form::kEnsembleSpace;  // a local ETKF per variable
  if (p.form != Form::kAuto) return p.form;
  const Cost c = AnalysisCost(p, limits);
  return c.observation_space < c.ensemble_space ? Form::kObservationSpace : Form::kEnsembleSpace;
}

double ProblemFlops(const Problem& p) {
  const double n = static_cast<double>(p.n), m = static_cast<double>(p.m), N = static_cast<double>(p.N);
  if (p.method == Method::kLetkf) {
    // Per variable: its local products (~100 observations, a rough guess), SYEVD, the transform.
    return n * (std::min(m, 100.0) * N * N + 9 * N * N * N + 4 * N * N);
  }
  Limits unlimited;
  unlimited.max_covariance_obs = std::numeric_limits<int64_t>::max();
  const Cost c = AnalysisCost(p, unlimited);
  double whiten = 0;
  if (p.obs_error_kind == ObsErrorKind::kCovariance) whiten = m * m * m / 3 + m * m * (2 * N + 1);
  return 2 * n * N * N + whiten + std::min(c.observation_space, c.ensemble_space);
}

}  // namespace gpucompute::assimilate
