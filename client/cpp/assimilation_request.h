// Building Assimilate problems from host vectors and decoding their results.
//
//   client::AssimilationProblem p;
//   p.n = 40; p.m = 40; p.members = 20;
//   p.x = X; p.hx = HX; p.y = y;            // row-major [n, N], [m, N], [m]
//   p.obs_error = r;                        // m variances, or m*m values with full_covariance
//   p.method = v1::ASSIMILATION_METHOD_ENKF; p.seed = 7;
//   // or the LETKF: p.method = v1::ASSIMILATION_METHOD_LETKF; p.dims = 1;
//   //   p.state_coords = grid; p.obs_coords = where; p.radius = 4;
//   v1::AssimilateRequest request;
//   ASSIGN_OR_RETURN(*request.add_problems(), client::MakeAssimilationProblem(p));
//   ASSIGN_OR_RETURN(auto result, client.Assimilate(std::move(request)));
//   ASSIGN_OR_RETURN(client::Analysis a, client::DecodeAnalysis(result.response.results(0)));
//
// Only sizes are checked here; the server checks everything else and names the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::client {

struct AssimilationProblem {
  int64_t n = 0, m = 0, members = 0;
  std::vector<double> x;          // n * members, row-major [n, N]
  std::vector<double> hx;         // m * members, row-major [m, N]
  std::vector<double> y;          // m
  std::vector<double> obs_error;  // m variances, or m * m covariance when full_covariance
  bool full_covariance = false;
  v1::AssimilationMethod method = v1::ASSIMILATION_METHOD_ETKF;
  std::vector<double> perturbations;  // ENKF: m * members, used as given; or empty and a seed
  std::optional<uint64_t> seed;
  double inflation = 1.0;
  v1::Relaxation relaxation = v1::RELAXATION_NONE;
  double relaxation_factor = 0;
  v1::AnalysisForm form = v1::ANALYSIS_FORM_AUTO;
  // LETKF (v1::ASSIMILATION_METHOD_LETKF): where the state variables and observations lie and
  // how far an observation reaches (compute.proto's Localization; docs/python.md).
  int64_t dims = 0;                   // d
  std::vector<double> state_coords;   // n * dims, row-major [n, d]
  std::vector<double> obs_coords;     // m * dims, row-major [m, d]
  double radius = 0;                  // DAPPER's loc_rad
  v1::LocalizationTaper taper = v1::LOCALIZATION_TAPER_GASPARI_COHN;
  v1::LocalizationMetric metric = v1::LOCALIZATION_METRIC_EUCLIDEAN;
  std::vector<double> domain;         // periodic: each axis's length
  double earth_radius = 0;            // great circle
};

// "etkf" | "enkf" | "letkf"; "auto" | "observation_space" | "ensemble_space";
// "gaspari_cohn" | "gaussian" | "step"; "euclidean" | "periodic" | "great_circle".
absl::StatusOr<v1::AssimilationMethod> ParseAssimilationMethod(absl::string_view name);
absl::StatusOr<v1::LocalizationTaper> ParseLocalizationTaper(absl::string_view name);
absl::StatusOr<v1::LocalizationMetric> ParseLocalizationMetric(absl::string_view name);
absl::StatusOr<v1::AnalysisForm> ParseAnalysisForm(absl::string_view name);
absl::string_view AnalysisFormName(v1::AnalysisForm form);

// The message for `p`, its arrays sent as `wire` (FLOAT64, or FLOAT32 to halve the bytes).
// INVALID_ARGUMENT when an array's size does not match n, m and members.
absl::StatusOr<v1::AssimilationProblem> MakeAssimilationProblem(const AssimilationProblem& p,
                                                                v1::DType wire = v1::FLOAT64);

// One result, widened to double.
struct Analysis {
  int64_t n = 0, members = 0;
  std::vector<double> ensemble;         // n * members, row-major
  std::vector<double> innovation_mean;  // m
  double spread = 0;
  v1::AnalysisForm form = v1::ANALYSIS_FORM_AUTO;
};
absl::StatusOr<Analysis> DecodeAnalysis(const v1::AssimilationResult& result);

}  // namespace gpucompute::client
