// Assimilate problems from host vectors (see assimilation_request.h).
#include "client/cpp/assimilation_request.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/tensor_util.h"
#include "common/status_macros.h"

namespace gpucompute::client {
namespace {

absl::StatusOr<v1::Tensor> Encode(const std::vector<double>& values, std::vector<int64_t> shape,
                                  v1::DType wire, absl::string_view field) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (static_cast<int64_t>(values.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", values.size(), " values for shape [",
                                                   absl::StrJoin(shape, ", "), "]"));
  }
  if (wire == v1::FLOAT64) return MakeTensor(absl::Span<const double>(values), shape);
  const std::vector<float> narrowed(values.begin(), values.end());
  return MakeTensor(absl::Span<const float>(narrowed), shape, wire);
}

}  // namespace

absl::StatusOr<v1::AssimilationMethod> ParseAssimilationMethod(absl::string_view name) {
  if (name == "etkf") return v1::ASSIMILATION_METHOD_ETKF;
  if (name == "enkf") return v1::ASSIMILATION_METHOD_ENKF;
  if (name == "letkf") return v1::ASSIMILATION_METHOD_LETKF;
  return absl::InvalidArgumentError(absl::StrCat("method '", name, "': expected etkf, enkf or letkf"));
}

absl::StatusOr<v1::LocalizationTaper> ParseLocalizationTaper(absl::string_view name) {
  if (name == "gaspari_cohn") return v1::LOCALIZATION_TAPER_GASPARI_COHN;
  if (name == "gaussian") return v1::LOCALIZATION_TAPER_GAUSSIAN;
  if (name == "step") return v1::LOCALIZATION_TAPER_STEP;
  return absl::InvalidArgumentError(
      absl::StrCat("taper '", name, "': expected gaspari_cohn, gaussian or step"));
}

absl::StatusOr<v1::LocalizationMetric> ParseLocalizationMetric(absl::string_view name) {
  if (name == "euclidean") return v1::LOCALIZATION_METRIC_EUCLIDEAN;
  if (name == "periodic") return v1::LOCALIZATION_METRIC_PERIODIC;
  if (name == "great_circle") return v1::LOCALIZATION_METRIC_GREAT_CIRCLE;
  return absl::InvalidArgumentError(
      absl::StrCat("metric '", name, "': expected euclidean, periodic or great_circle"));
}

absl::StatusOr<v1::AnalysisForm> ParseAnalysisForm(absl::string_view name) {
  if (name == "auto") return v1::ANALYSIS_FORM_AUTO;
  if (name == "observation_space") return v1::ANALYSIS_FORM_OBSERVATION_SPACE;
  if (name == "ensemble_space") return v1::ANALYSIS_FORM_ENSEMBLE_SPACE;
  return absl::InvalidArgumentError(
      absl::StrCat("form '", name, "': expected auto, observation_space or ensemble_space"));
}

absl::string_view AnalysisFormName(v1::AnalysisForm form) {
  switch (form) {
    case v1::ANALYSIS_FORM_OBSERVATION_SPACE: return "observation_space";
    case v1::ANALYSIS_FORM_ENSEMBLE_SPACE: return "ensemble_space";
    default: return "auto";
  }
}

absl::StatusOr<v1::AssimilationProblem> MakeAssimilationProblem(const AssimilationProblem& p,
                                                                v1::DType wire) {
  if (wire != v1::FLOAT64 && wire != v1::FLOAT32) {
    return absl::InvalidArgumentError("wire dtype must be FLOAT64 or FLOAT32");
  }
  v1::AssimilationProblem out;
  ASSIGN_OR_RETURN(*out.mutable_x(), Encode(p.x, {p.n, p.members}, wire, "x"));
  ASSIGN_OR_RETURN(*out.mutable_hx(), Encode(p.hx, {p.m, p.members}, wire, "hx"));
  ASSIGN_OR_RETURN(*out.mutable_y(), Encode(p.y, {p.m}, wire, "y"));
  if (p.full_covariance) {
    ASSIGN_OR_RETURN(*out.mutable_obs_error_covariance(),
                     Encode(p.obs_error, {p.m, p.m}, wire, "obs_error"));
  } else {
    ASSIGN_OR_RETURN(*out.mutable_obs_error_variance(), Encode(p.obs_error, {p.m}, wire, "obs_error"));
  }
  out.set_method(p.method);
  if (!p.perturbations.empty()) {
    ASSIGN_OR_RETURN(*out.mutable_perturbations(),
                     Encode(p.perturbations, {p.m, p.members}, wire, "perturbations"));
  } else if (p.seed.has_value()) {
    out.set_seed(*p.seed);
  }
  out.set_inflation(p.inflation);
  out.set_relaxation(p.relaxation);
  out.set_relaxation_factor(p.relaxation_factor);
  out.set_form(p.form);
  if (p.method == v1::ASSIMILATION_METHOD_LETKF) {
    v1::Localization& l = *out.mutable_localization();
    ASSIGN_OR_RETURN(*l.mutable_state_coords(), Encode(p.state_coords, {p.n, p.dims}, v1::FLOAT64, "state_coords"));
    ASSIGN_OR_RETURN(*l.mutable_obs_coords(), Encode(p.obs_coords, {p.m, p.dims}, v1::FLOAT64, "obs_coords"));
    l.set_radius(p.radius);
    l.set_taper(p.taper);
    l.set_metric(p.metric);
    for (double v : p.domain) l.add_domain(v);
    l.set_earth_radius(p.earth_radius);
  }
  return out;
}

absl::StatusOr<Analysis> DecodeAnalysis(const v1::AssimilationResult& result) {
  if (result.analysis().shape_size() != 2) {
    return absl::InvalidArgumentError("analysis: expected a 2-D tensor");
  }
  Analysis a;
  a.n = result.analysis().shape(0);
  a.members = result.analysis().shape(1);
  ASSIGN_OR_RETURN(a.ensemble, TensorToDoubles(result.analysis()));
  ASSIGN_OR_RETURN(a.innovation_mean, TensorToDoubles(result.innovation_mean()));
  a.spread = result.analysis_spread();
  a.form = result.form();
  return a;
}

}  // namespace gpucompute::client
