// `gpucompute assimilate`: one ensemble Kalman analysis from .npy files.
//
//   gpucompute assimilate --x X.npy --hx HX.npy --y y.npy --obs-error r.npy -o Xa.npy
//     [--method etkf|enkf|letkf] [--perturbations E.npy | --seed S] [--inflation 1.02]
//     [--state-coords S.npy --obs-coords O.npy --radius R --taper T --metric M --domain L,...]
//     [--rtpp A | --rtps A] [--form auto|observation_space|ensemble_space] [--dtype float32]
//
// X is [n, N] (state x members), HX [m, N], y [m]; the obs error is a 1-D file of m variances
// or a 2-D m x m covariance. Arrays travel in their files' dtype (float16 as float32). The
// analysis ([n, N], the compute dtype) goes to --output; a summary (form, spread, innovation
// norm, timings) to stderr.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"
#include "client/cli/npy.h"
#include "client/cpp/assimilation_request.h"

namespace gpucompute::cli {
namespace {

absl::StatusOr<NpyArray> Read(const std::string& path, size_t rank, absl::string_view flag) {
  absl::StatusOr<NpyArray> a = ReadNpyFile(path);
  if (!a.ok()) return absl::Status(a.status().code(), absl::StrCat(flag, ": ", a.status().message()));
  if (rank != 0 && a->shape.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is ", a->shape.size(),
                                                   "-D; expected ", rank, "-D"));
  }
  return a;
}

}  // namespace

int RunAssimilate(const GlobalOptions& global, const AssimilateOptions& options) {
  auto x = Read(options.x, 2, "--x");
  if (!x.ok()) return Fail("assimilate", x.status());
  auto hx = Read(options.hx, 2, "--hx");
  if (!hx.ok()) return Fail("assimilate", hx.status());
  auto y = Read(options.y, 1, "--y");
  if (!y.ok()) return Fail("assimilate", y.status());
  auto r = Read(options.obs_error, 0, "--obs-error");
  if (!r.ok()) return Fail("assimilate", r.status());
  if (r->shape.size() != 1 && r->shape.size() != 2) {
    return Fail("assimilate", absl::InvalidArgumentError(
                                  "--obs-error: expected 1-D variances or a 2-D covariance"));
  }
  client::AssimilationProblem p;
  p.n = x->shape[0];
  p.members = x->shape[1];
  p.m = hx->shape[0];
  p.x = std::move(x->data);
  p.hx = std::move(hx->data);
  p.y = std::move(y->data);
  p.full_covariance = r->shape.size() == 2;
  p.obs_error = std::move(r->data);
  auto method = client::ParseAssimilationMethod(options.method);
  if (!method.ok()) return Fail("--method", method.status());
  p.method = *method;
  if (!options.perturbations.empty()) {
    auto e = Read(options.perturbations, 2, "--perturbations");
    if (!e.ok()) return Fail("assimilate", e.status());
    p.perturbations = std::move(e->data);
  } else if (p.method == v1::ASSIMILATION_METHOD_ENKF) {
    p.seed = options.seed.has_value() ? *options.seed : std::random_device{}();
  }
  p.inflation = options.inflation;
  if (options.rtpp) {
    p.relaxation = v1::RELAXATION_RTPP;
    p.relaxation_factor = *options.rtpp;
  } else if (options.rtps) {
    p.relaxation = v1::RELAXATION_RTPS;
    p.relaxation_factor = *options.rtps;
  }
  auto form = client::ParseAnalysisForm(options.form);
  if (!form.ok()) return Fail("--form", form.status());
  p.form = *form;
  if (p.method == v1::ASSIMILATION_METHOD_LETKF) {
    if (options.state_coords.empty() || options.obs_coords.empty()) {
      return Fail("assimilate", absl::InvalidArgumentError(
                                    "--method letkf needs --state-coords and --obs-coords (and --radius)"));
    }
    auto state = Read(options.state_coords, 0, "--state-coords");
    if (!state.ok()) return Fail("assimilate", state.status());
    auto obs = Read(options.obs_coords, 0, "--obs-coords");
    if (!obs.ok()) return Fail("assimilate", obs.status());
    p.dims = state->shape.size() == 2 ? state->shape[1] : 1;
    p.state_coords = std::move(state->data);
    p.obs_coords = std::move(obs->data);
    p.radius = options.radius;
    p.domain = options.domain;
    p.earth_radius = options.earth_radius;
    auto taper = client::ParseLocalizationTaper(options.taper);
    if (!taper.ok()) return Fail("--taper", taper.status());
    p.taper = *taper;
    auto metric = client::ParseLocalizationMetric(options.metric);
    if (!metric.ok()) return Fail("--metric", metric.status());
    p.metric = *metric;
  }
  // Sent in float64 unless every input file is narrower.
  const bool narrow = x->item_size < 8 && hx->item_size < 8;
  auto problem = client::MakeAssimilationProblem(p, narrow ? v1::FLOAT32 : v1::FLOAT64);
  if (!problem.ok()) return Fail("assimilate", problem.status());
  v1::AssimilateRequest request;
  *request.add_problems() = *std::move(problem);
  request.set_dtype(options.dtype == "float32" ? v1::FLOAT32 : v1::FLOAT64);

  auto connected = ConnectFromFlags(global);
  if (!connected.ok()) return Fail(global.target, connected.status());
  absl::StatusOr<client::AssimilateResult> result = (*connected)->Assimilate(std::move(request));
  if (!result.ok()) return Fail("Assimilate", result.status());
  if (result->response.results_size() != 1) {
    return Fail("Assimilate", absl::InternalError("expected one result"));
  }
  auto analysis = client::DecodeAnalysis(result->response.results(0));
  if (!analysis.ok()) return Fail("Assimilate", analysis.status());
  double innovation = 0;
  for (double d : analysis->innovation_mean) innovation += d * d;
  std::fprintf(stderr,
               "assimilate %s: n %lld, m %lld, N %lld, %s form; |innovation mean| %.6g, analysis "
               "spread %.6g; round trip %s; server %s\n",
               options.method.c_str(), static_cast<long long>(p.n), static_cast<long long>(p.m),
               static_cast<long long>(p.members),
               std::string(client::AnalysisFormName(analysis->form)).c_str(), std::sqrt(innovation),
               analysis->spread, FormatMs(result->latency).c_str(),
               FormatTimings(result->timings).c_str());
  const std::string bytes = EncodeNpy({analysis->n, analysis->members}, analysis->ensemble,
                                      options.dtype == "float32" ? 4 : 8);
  std::ofstream out(options.output, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return Fail("--output", absl::UnavailableError(absl::StrCat("cannot write ", options.output)));
  return 0;
}

}  // namespace gpucompute::cli
