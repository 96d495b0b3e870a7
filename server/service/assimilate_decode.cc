// Assimilate request decoding (see assimilate_decode.h).
#include "server/service/assimilate_decode.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {
namespace {

// A float tensor of rank `rank`, resolved (dtype, shape, byte count checked) and viewed.
struct Viewed {
  assimilate::ArrayView array;
  std::vector<int64_t> shape;
};

absl::StatusOr<Viewed> View(TensorResolver& resolver, const v1::Tensor& t, bool present,
                            const std::string& field, int rank) {
  if (!present) return absl::InvalidArgumentError(absl::StrCat(field, ": is required"));
  ASSIGN_OR_RETURN(TensorView view, resolver.Resolve(t, field));
  ASSIGN_OR_RETURN(const ElementType dtype, FloatElementType(view.dtype, field + ".dtype"));
  if (view.rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".shape: must have ", rank, " dimension",
                                                   rank == 1 ? "" : "s", " (got [",
                                                   absl::StrJoin(view.shape, ", "), "])"));
  }
  return Viewed{assimilate::ArrayView{dtype, view.bytes, view.known_finite}, std::move(view.shape)};
}

absl::Status ShapeMismatch(const std::string& field, int dim, int64_t got, absl::string_view what,
                           int64_t want) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ".shape[", dim, "] is ", got, " but ", what, " ", want));
}

// The LETKF's `localization`: coordinates of the n state variables and m observations (d
// each), metric and its parameters, radius and taper. Values are checked in ValidateValues.
absl::Status DecodeLocalization(const v1::AssimilationProblem& in, const std::string& prefix, int64_t n,
                                int64_t m, TensorResolver& resolver, assimilate::Localization* out) {
  if (!in.has_localization()) {
    return absl::InvalidArgumentError(prefix + "localization: is required for the LETKF (coordinates, radius)");
  }
  const v1::Localization& l = in.localization();
  const std::string field = prefix + "localization.";
  ASSIGN_OR_RETURN(const Viewed state, View(resolver, l.state_coords(), l.has_state_coords(),
                                            field + "state_coords", 2));
  if (state.shape[0] != n) return ShapeMismatch(field + "state_coords", 0, state.shape[0], "x.shape[0] (state) is", n);
  ASSIGN_OR_RETURN(const Viewed obs, View(resolver, l.obs_coords(), l.has_obs_coords(), field + "obs_coords", 2));
  if (obs.shape[0] != m) {
    return ShapeMismatch(field + "obs_coords", 0, obs.shape[0], "hx.shape[0] (observations) is", m);
  }
  if (obs.shape[1] != state.shape[1]) {
    return ShapeMismatch(field + "obs_coords", 1, obs.shape[1], "state_coords.shape[1] (d) is", state.shape[1]);
  }
  out->dims = state.shape[1];
  out->state_coords = state.array;
  out->obs_coords = obs.array;
  switch (l.metric()) {
    case v1::LOCALIZATION_METRIC_EUCLIDEAN: out->metric = localization::Metric::kEuclidean; break;
    case v1::LOCALIZATION_METRIC_PERIODIC: out->metric = localization::Metric::kPeriodic; break;
    case v1::LOCALIZATION_METRIC_GREAT_CIRCLE: out->metric = localization::Metric::kGreatCircle; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(field, "metric: unknown value ", l.metric(),
                                                     " (euclidean, periodic or great_circle)"));
  }
  switch (l.taper()) {
    case v1::LOCALIZATION_TAPER_GASPARI_COHN: out->taper = localization::Taper::kGaspariCohn; break;
    case v1::LOCALIZATION_TAPER_GAUSSIAN: out->taper = localization::Taper::kGaussian; break;
    case v1::LOCALIZATION_TAPER_STEP: out->taper = localization::Taper::kStep; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(field, "taper: unknown value ", l.taper(),
                                                     " (gaspari_cohn, gaussian or step)"));
  }
  out->domain.assign(l.domain().begin(), l.domain().end());
  out->sphere_radius = l.earth_radius();
  out->radius = l.radius();
  return absl::OkStatus();
}

absl::StatusOr<assimilate::Problem> DecodeProblem(const v1::AssimilationProblem& in, int64_t index,
                                                  const assimilate::Limits& limits,
                                                  TensorResolver& resolver) {
  const std::string prefix = absl::StrCat("problems[", index, "].");
  assimilate::Problem p;
  ASSIGN_OR_RETURN(const Viewed x, View(resolver, in.x(), in.has_x(), prefix + "x", 2));
  p.x = x.array;
  p.n = x.shape[0];
  p.N = x.shape[1];
  ASSIGN_OR_RETURN(const Viewed hx, View(resolver, in.hx(), in.has_hx(), prefix + "hx", 2));
  p.hx = hx.array;
  p.m = hx.shape[0];
  if (hx.shape[1] != p.N) {
    return ShapeMismatch(prefix + "hx", 1, hx.shape[1], "x.shape[1] (members) is", p.N);
  }
  ASSIGN_OR_RETURN(const Viewed y, View(resolver, in.y(), in.has_y(), prefix + "y", 1));
  p.y = y.array;
  if (y.shape[0] != p.m) {
    return ShapeMismatch(prefix + "y", 0, y.shape[0], "hx.shape[0] (observations) is", p.m);
  }
  switch (in.obs_error_case()) {
    case v1::AssimilationProblem::kObsErrorVariance: {
      p.obs_error_kind = assimilate::ObsErrorKind::kVariances;
      ASSIGN_OR_RETURN(const Viewed r, View(resolver, in.obs_error_variance(), true,
                                            prefix + "obs_error_variance", 1));
      p.obs_error = r.array;
      if (r.shape[0] != p.m) {
        return ShapeMismatch(prefix + "obs_error_variance", 0, r.shape[0],
                             "hx.shape[0] (observations) is", p.m);
      }
      break;
    }
    case v1::AssimilationProblem::kObsErrorCovariance: {
      p.obs_error_kind = assimilate::ObsErrorKind::kCovariance;
      ASSIGN_OR_RETURN(const Viewed r, View(resolver, in.obs_error_covariance(), true,
                                            prefix + "obs_error_covariance", 2));
      p.obs_error = r.array;
      for (int d = 0; d < 2; ++d) {
        if (r.shape[d] != p.m) {
          return ShapeMismatch(prefix + "obs_error_covariance", d, r.shape[d],
                               "hx.shape[0] (observations) is", p.m);
        }
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(
          prefix + "obs_error: one of obs_error_variance (m) or obs_error_covariance (m x m) is required");
  }
  switch (in.method()) {
    case v1::ASSIMILATION_METHOD_ETKF: p.method = assimilate::Method::kEtkf; break;
    case v1::ASSIMILATION_METHOD_ENKF: p.method = assimilate::Method::kStochastic; break;
    case v1::ASSIMILATION_METHOD_LETKF: p.method = assimilate::Method::kLetkf; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(prefix, "method: unknown value ", in.method()));
  }
  if (in.perturbation_source_case() == v1::AssimilationProblem::kPerturbations) {
    if (p.method != assimilate::Method::kStochastic) {
      return absl::InvalidArgumentError(
          prefix + "perturbations: only the stochastic EnKF (method ENKF) uses perturbations");
    }
    p.has_perturbations = true;
    ASSIGN_OR_RETURN(const Viewed e, View(resolver, in.perturbations(), true,
                                          prefix + "perturbations", 2));
    p.perturbations = e.array;
    if (e.shape[0] != p.m) {
      return ShapeMismatch(prefix + "perturbations", 0, e.shape[0],
                           "hx.shape[0] (observations) is", p.m);
    }
    if (e.shape[1] != p.N) {
      return ShapeMismatch(prefix + "perturbations", 1, e.shape[1], "x.shape[1] (members) is", p.N);
    }
  } else if (in.perturbation_source_case() == v1::AssimilationProblem::kSeed) {
    p.seed = in.seed();
  } else if (p.method == assimilate::Method::kStochastic) {
    return absl::InvalidArgumentError(
        prefix + "perturbation_source: the stochastic EnKF needs perturbations (m x N) or a seed");
  }
  if (p.method == assimilate::Method::kLetkf) {
    RETURN_IF_ERROR(DecodeLocalization(in, prefix, p.n, p.m, resolver, &p.localization));
    p.localization.max_candidates = limits.max_letkf_candidates;
  } else if (in.has_localization()) {
    return absl::InvalidArgumentError(prefix + "localization: only the LETKF (method LETKF) is localised");
  }
  p.inflation = in.has_inflation() ? in.inflation() : 1.0;
  switch (in.relaxation()) {
    case v1::RELAXATION_NONE: p.relaxation = assimilate::Relaxation::kNone; break;
    case v1::RELAXATION_RTPP: p.relaxation = assimilate::Relaxation::kRtpp; break;
    case v1::RELAXATION_RTPS: p.relaxation = assimilate::Relaxation::kRtps; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(prefix, "relaxation: unknown value ", in.relaxation()));
  }
  p.relaxation_factor = in.relaxation_factor();
  switch (in.form()) {
    case v1::ANALYSIS_FORM_AUTO: p.form = assimilate::Form::kAuto; break;
    case v1::ANALYSIS_FORM_OBSERVATION_SPACE: p.form = assimilate::Form::kObservationSpace; break;
    case v1::ANALYSIS_FORM_ENSEMBLE_SPACE: p.form = assimilate::Form::kEnsembleSpace; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(prefix, "form: unknown value ", in.form()));
  }
  RETURN_IF_ERROR(assimilate::ValidateShapes(p, index, limits));
  RETURN_IF_ERROR(assimilate::ValidateValues(p, index));
  p.form = assimilate::ChooseForm(p, limits);
  return p;
}

}  // namespace

absl::StatusOr<assimilate::Request> DecodeAssimilateRequest(const v1::AssimilateRequest& request,
                                                            const ServiceLimits& limits,
                                                            TensorResolver* resolver) {
  TensorResolver inline_only;
  assimilate::Request out;
  switch (request.dtype()) {
    case v1::DTYPE_UNSPECIFIED:
    case v1::FLOAT64: out.dtype = ElementType::kFloat64; break;
    case v1::FLOAT32: out.dtype = ElementType::kFloat32; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("dtype: must be float64 (default) or float32 (got ",
                                                     DTypeName(request.dtype()), ")"));
  }
  const int64_t count = request.problems_size();
  if (count > limits.assimilate.max_problems_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "problems: ", count, " problems; the limit is ", limits.assimilate.max_problems_per_request,
        " per request (--assimilate_max_problems)"));
  }
  out.problems.reserve(static_cast<size_t>(count));
  int64_t response_bytes = 0, analysis_bytes = 0;
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(assimilate::Problem p,
                     DecodeProblem(request.problems(static_cast<int>(i)), i, limits.assimilate,
                                   resolver != nullptr ? *resolver : inline_only));
    const v1::OutputPlacement& placement = request.output_placement();
    response_bytes += InlineOutputBytes(placement, p.n * p.N * ElementSize(out.dtype)) +
                      InlineOutputBytes(placement, p.m * 8) + 64;
    if (response_bytes > limits.max_response_bytes - 4096) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "problems: the analyses of problems[0..", i, "] already take ", response_bytes,
          " bytes; responses are limited to ", limits.max_response_bytes, " bytes"));
    }
    analysis_bytes += p.n * p.N * ElementSize(out.dtype) + p.m * 8;
    out.problems.push_back(std::move(p));
  }
  if (resolver != nullptr) {
    RETURN_IF_ERROR(CheckOutputBytes(resolver->context(), request.output_placement(), analysis_bytes));
  }
  return out;
}

}  // namespace gpucompute
