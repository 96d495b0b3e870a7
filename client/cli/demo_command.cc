// `gpucompute demo`: every operation of the server on generated data with known answers.
//
// Periodograms: 8 unevenly sampled noisy sinusoids of 100 to 2,000 samples with known
// frequencies go out in one batched request per dtype (float64, float32) on automatic grids,
// then a burst of concurrent single-series requests exercises the server's dynamic batching. A
// peak counts as found when it lies within one grid step of the injected frequency.
//
// Dense models: a random two-layer model (256 -> 512 with LayerNorm (gamma, beta) and
// gelu_tanh, then 512 -> 128 without activation) is loaded in bfloat16 and in float32, a few
// random row counts go through each concurrently, and each result is compared with a float64
// reference computed here: relative l2 error within 1e-2 (bfloat16) or 1e-5 (float32, no
// TF32). The models are listed and unloaded again.
//
// Assimilation: 64 scalar problems (n = m = 1, so the Kalman update has a closed form) by ETKF
// and by the stochastic EnKF with given perturbations, checked to 1e-10 against that formula;
// then a Lorenz-96-sized problem (n = m = 40, N = 20, full R) in both algebraic forms and in
// float32 (agreement 1e-10 and 1e-4); then 1,000 such problems in one request, timed.
//
// Exit code 0 only if every check passes and every call succeeds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"
#include "client/cpp/assimilation_request.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/tensor_util.h"

namespace gpucompute::cli {
namespace {

struct DemoSeries {
  std::vector<double> t, y, dy;
  double f_injected = 0;
};

// A sinusoid of amplitude 1 at `f`, sampled at `n` uniformly random times over `baseline`
// (starting at `t0`), plus Gaussian noise; heteroscedastic errors dy when `with_dy`.
DemoSeries MakeSeries(std::mt19937_64& rng, int n, double baseline, double t0, double f,
                      bool with_dy) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  DemoSeries s;
  s.f_injected = f;
  s.t.resize(n);
  for (double& t : s.t) t = t0 + baseline * unit(rng);
  std::sort(s.t.begin(), s.t.end());
  const double phase = 2 * std::numbers::pi * unit(rng);
  s.y.resize(n);
  if (with_dy) s.dy.resize(n);
  for (int i = 0; i < n; ++i) {
    const double sigma = with_dy ? 0.4 + 0.4 * unit(rng) : 0.6;
    if (with_dy) s.dy[i] = sigma;
    s.y[i] = 3.0 + std::sin(2 * std::numbers::pi * f * s.t[i] + phase) + sigma * normal(rng);
  }
  return s;
}

struct PeakCheck {
  double peak = 0;
  double rel_error = 0;
  bool ok = false;
};

PeakCheck CheckPeak(const v1::SeriesResult& result, double f_injected) {
  PeakCheck c;
  c.peak = result.peak_frequency();
  c.rel_error = std::abs(c.peak - f_injected) / f_injected;
  const double df = result.has_grid() ? result.grid().df() : 0;
  c.ok = df > 0 && std::abs(c.peak - f_injected) <= df * (1 + 1e-9);
  return c;
}

absl::StatusOr<v1::PeriodogramRequest> BuildRequest(const std::vector<DemoSeries>& series,
                                                    v1::DType dtype) {
  client::PeriodogramRequestBuilder builder;
  for (const DemoSeries& s : series) builder.AddSeries(s.t, s.y, s.dy);
  builder.SetGrid(client::AutoGrid()).SetDType(dtype);
  return builder.Build();
}

std::string DescribeBackend(const v1::ServerInfoResponse& info) {
  std::string devices;
  if (info.devices_size() == 0) {
    devices = "no GPU";
  } else {
    devices = absl::StrCat(info.devices_size(), " x ", info.devices(0).name());
  }
  return absl::StrCat("backend ", info.backend(), " (", devices, "), version ", info.version());
}

// A layer of random weights ~ N(0, 1/in_features), biases ~ N(0, 0.1^2).
client::DenseLayer RandomLayer(std::mt19937_64& rng, int64_t in, int64_t out, bool layernorm,
                               v1::Activation activation) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  client::DenseLayer layer;
  layer.in_features = in;
  layer.out_features = out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(in));
  layer.weight.resize(in * out);
  for (float& w : layer.weight) w = scale * normal(rng);
  layer.bias.resize(out);
  for (float& b : layer.bias) b = 0.1f * normal(rng);
  layer.layernorm = layernorm;
  if (layernorm) {
    layer.gamma.resize(in);
    layer.beta.resize(in);
    for (float& g : layer.gamma) g = 1.0f + 0.1f * normal(rng);
    for (float& b : layer.beta) b = 0.1f * normal(rng);
  }
  layer.activation = activation;
  return layer;
}

// Loads the demo model in bfloat16 and float32, runs random row counts through both, compares
// with the float64 reference, lists and unloads. Returns whether everything passed.
bool RunDenseDemo(client::Client& client, std::mt19937_64& rng) {
  constexpr int64_t kIn = 256, kHidden = 512, kOut = 128;
  std::vector<client::DenseLayer> layers = {
      RandomLayer(rng, kIn, kHidden, /*layernorm=*/true, v1::ACTIVATION_GELU_TANH),
      RandomLayer(rng, kHidden, kOut, /*layernorm=*/false, v1::ACTIVATION_NONE)};
  std::uniform_int_distribution<int64_t> row_count(2, 300);
  const int64_t kRows[] = {1, row_count(rng), row_count(rng), row_count(rng)};
  std::printf("dense: 2 layers, %lld -> %lld (LayerNorm with gamma/beta, gelu_tanh) -> %lld, "
              "rows %lld, %lld, %lld, %lld, concurrently; float64 reference here\n",
              static_cast<long long>(kIn), static_cast<long long>(kHidden),
              static_cast<long long>(kOut), static_cast<long long>(kRows[0]),
              static_cast<long long>(kRows[1]), static_cast<long long>(kRows[2]),
              static_cast<long long>(kRows[3]));

  // Inputs and references, shared by both dtypes.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<double>> references;
  for (int64_t rows : kRows) {
    std::vector<float> x(rows * kIn);
    for (float& v : x) v = normal(rng);
    std::vector<double> xd(x.begin(), x.end());
    absl::StatusOr<std::vector<double>> ref = client::DenseReference(layers, xd, rows);
    if (!ref.ok()) {
      Fail("dense reference", ref.status());
      return false;
    }
    inputs.push_back(std::move(x));
    references.push_back(*std::move(ref));
  }

  struct Variant {
    v1::DType dtype;
    double tolerance;
  };
  const Variant kVariants[] = {{v1::BFLOAT16, 1e-2}, {v1::FLOAT32, 1e-5}};
  bool all_ok = true;
  std::vector<std::string> loaded;
  for (const Variant& variant : kVariants) {
    const std::string dtype_name = client::DTypeName(variant.dtype);
    const std::string name = absl::StrFormat("gpucompute-demo-%d-%s", getpid(), dtype_name);
    client::ModelBuilder builder(name);
    builder.SetDType(variant.dtype);
    for (const client::DenseLayer& layer : layers) builder.AddLayer(layer);
    absl::StatusOr<client::ModelUpload> upload = builder.Build();
    if (!upload.ok()) {
      Fail("building the model", upload.status());
      return false;
    }
    absl::StatusOr<client::LoadModelResult> load = client.LoadModel(*std::move(upload));
    if (!load.ok()) {
      Fail(absl::StrCat("LoadModel ", name), load.status());
      all_ok = false;
      continue;
    }
    loaded.push_back(name);

    std::vector<std::future<absl::StatusOr<client::DenseResult>>> calls;
    for (size_t i = 0; i < inputs.size(); ++i) {
      absl::StatusOr<v1::DenseRequest> request =
          client::MakeDenseRequest(name, inputs[i], kRows[i], kIn);
      if (!request.ok()) {
        Fail("building the request", request.status());
        return false;
      }
      calls.push_back(client.DenseAsync(*std::move(request)));
    }
    // One line per dtype: the relative l2 error of each row count.
    bool variant_ok = true;
    int64_t largest_batch = 0;
    std::string errors;
    for (size_t i = 0; i < calls.size(); ++i) {
      absl::StatusOr<client::DenseResult> r = calls[i].get();
      absl::StatusOr<client::DenseOutput> y =
          r.ok() ? client::DecodeDenseOutput(r->response)
                 : absl::StatusOr<client::DenseOutput>(r.status());
      double error = std::numeric_limits<double>::quiet_NaN();
      if (!y.ok()) {
        Fail(absl::StrCat("Dense ", name, " of ", kRows[i], " rows"), y.status());
      } else if (y->rows != kRows[i] || y->cols != kOut || y->dtype != variant.dtype) {
        std::fprintf(stderr, "gpucompute: Dense returned %lld x %lld %s, expected %lld x %lld %s\n",
                     static_cast<long long>(y->rows), static_cast<long long>(y->cols),
                     client::DTypeName(y->dtype), static_cast<long long>(kRows[i]),
                     static_cast<long long>(kOut), dtype_name.c_str());
      } else {
        const std::vector<double> yd(y->values.begin(), y->values.end());
        error = client::RelativeL2Error(yd, references[i]);
        largest_batch = std::max(largest_batch, r->timings.batch_requests.value_or(0));
      }
      variant_ok &= error <= variant.tolerance;  // false for NaN
      absl::StrAppend(&errors, i > 0 ? ", " : "", kRows[i], ": ", absl::StrFormat("%.1e", error));
    }
    all_ok &= variant_ok;
    std::printf("  %-8s loaded in %s (%s resident); rel. l2 error by rows %s (tolerance %.0e) "
                "%s; largest batch %lld\n",
                dtype_name.c_str(), FormatMs(load->latency).c_str(),
                FormatBytes(load->info.device_bytes()).c_str(), errors.c_str(), variant.tolerance,
                variant_ok ? "PASS" : "FAIL", static_cast<long long>(largest_batch));
  }

  size_t listed_count = 0;
  absl::StatusOr<client::ListModelsResult> list = client.ListModels();
  if (!list.ok()) {
    Fail("ListModels", list.status());
    all_ok = false;
  } else {
    for (const std::string& name : loaded) {
      bool listed = false;
      for (const v1::ModelInfo& m : list->response.models()) listed |= m.name() == name;
      if (!listed) std::fprintf(stderr, "gpucompute: ListModels does not list %s\n", name.c_str());
      all_ok &= listed;
      listed_count += listed;
    }
  }
  for (const std::string& name : loaded) {
    absl::StatusOr<client::UnloadModelResult> unload = client.UnloadModel(name);
    if (!unload.ok()) {
      Fail(absl::StrCat("UnloadModel ", name), unload.status());
      all_ok = false;
    }
  }
  std::printf("  ListModels listed %zu of the %zu loaded; unloaded them\n", listed_count,
              loaded.size());
  return all_ok;
}

// ||a - b|| / ||b||, NaN when sizes differ.
double RelErr(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::quiet_NaN();
  return client::RelativeL2Error(a, b);
}

// The assimilation section (see the file comment). Returns whether everything passed.
bool RunAssimilateDemo(client::Client& client, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.5, 1.5);
  bool all_ok = true;

  // 1. Scalar problems: K = s2 / (s2 + r) with s2 the inflated sample variance.
  const int kScalar = 64;
  v1::AssimilateRequest scalar;
  std::vector<std::vector<double>> want;
  for (int i = 0; i < kScalar; ++i) {
    client::AssimilationProblem p;
    p.n = p.m = 1;
    p.members = 2 + i % 29;
    const double inflation = 1 + 0.1 * (i % 3);
    p.inflation = inflation;
    for (int64_t j = 0; j < p.members; ++j) p.x.push_back(2 + normal(rng));
    p.hx = p.x;
    p.y = {normal(rng)};
    p.obs_error = {unit(rng)};
    double mean = 0, s2 = 0;
    for (double v : p.x) mean += v / p.members;
    for (double v : p.x) s2 += inflation * inflation * (v - mean) * (v - mean) / (p.members - 1);
    const double k = s2 / (s2 + p.obs_error[0]);
    std::vector<double> w(p.members);
    if (i % 2 == 0) {  // ETKF: mean + K (y - mean), anomalies scaled by sqrt(1 - K)
      for (int64_t j = 0; j < p.members; ++j) {
        w[j] = mean + k * (p.y[0] - mean) + std::sqrt(1 - k) * inflation * (p.x[j] - mean);
      }
    } else {  // EnKF: each inflated member moves by K (y + e_j - x_j)
      p.method = v1::ASSIMILATION_METHOD_ENKF;
      for (int64_t j = 0; j < p.members; ++j) {
        p.perturbations.push_back(std::sqrt(p.obs_error[0]) * normal(rng));
        const double xj = mean + inflation * (p.x[j] - mean);
        w[j] = xj + k * (p.y[0] + p.perturbations[j] - xj);
      }
    }
    auto msg = client::MakeAssimilationProblem(p);
    if (!msg.ok()) return Fail("building the problem", msg.status()) == 0;
    *scalar.add_problems() = *std::move(msg);
    want.push_back(std::move(w));
  }
  auto scalar_result = client.Assimilate(std::move(scalar));
  double worst = 0;
  if (!scalar_result.ok()) {
    Fail("Assimilate (scalar problems)", scalar_result.status());
    all_ok = false;
    worst = std::numeric_limits<double>::quiet_NaN();
  } else {
    for (int i = 0; i < kScalar && i < scalar_result->response.results_size(); ++i) {
      auto a = client::DecodeAnalysis(scalar_result->response.results(i));
      const double e = a.ok() ? RelErr(a->ensemble, want[i]) : std::numeric_limits<double>::quiet_NaN();
      worst = std::isnan(e) || e > worst ? e : worst;
    }
    if (scalar_result->response.results_size() != kScalar) worst = std::numeric_limits<double>::quiet_NaN();
  }
  const bool scalar_ok = worst <= 1e-10;
  all_ok &= scalar_ok;
  std::printf("assimilate: %d scalar problems (ETKF and EnKF, N = 2..30) against the closed-form "
              "Kalman update: worst rel. error %.1e (tolerance 1e-10) %s\n",
              kScalar, worst, scalar_ok ? "PASS" : "FAIL");

  // 2. n = m = 40, N = 20, full R: both forms and float32.
  client::AssimilationProblem p;
  p.n = p.m = 40;
  p.members = 20;
  for (int64_t i = 0; i < p.n; ++i) {
    const double mu = 8 * normal(rng);
    for (int64_t j = 0; j < p.members; ++j) p.x.push_back(mu + normal(rng));
  }
  p.hx = p.x;  // H = I
  for (int64_t i = 0; i < p.m; ++i) p.y.push_back(p.x[i * p.members] + normal(rng));
  p.full_covariance = true;
  p.obs_error.assign(p.m * p.m, 0.0);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.m; ++j) p.obs_error[i * p.m + j] = std::pow(0.5, std::abs(i - j));
  }
  p.inflation = 1.02;
  std::vector<double> results[3];
  const v1::AnalysisForm forms[3] = {v1::ANALYSIS_FORM_OBSERVATION_SPACE,
                                     v1::ANALYSIS_FORM_ENSEMBLE_SPACE, v1::ANALYSIS_FORM_AUTO};
  for (int k = 0; k < 3; ++k) {
    p.form = forms[k];
    v1::AssimilateRequest request;
    auto msg = client::MakeAssimilationProblem(p);
    if (!msg.ok()) return Fail("building the problem", msg.status()) == 0;
    *request.add_problems() = *std::move(msg);
    if (k == 2) request.set_dtype(v1::FLOAT32);
    auto r = client.Assimilate(std::move(request));
    auto a = r.ok() ? client::DecodeAnalysis(r->response.results(0)) : absl::StatusOr<client::Analysis>(r.status());
    if (!a.ok()) {
      Fail("Assimilate (n = m = 40)", a.status());
      all_ok = false;
      continue;
    }
    results[k] = a->ensemble;
  }
  const double forms_err = RelErr(results[0], results[1]);
  const double f32_err = RelErr(results[2], results[1]);
  const bool forms_ok = forms_err <= 1e-10 && f32_err <= 1e-4;
  all_ok &= forms_ok;
  std::printf("  ETKF n = m = 40, N = 20, full R: observation vs ensemble space %.1e (1e-10), "
              "float32 vs float64 %.1e (1e-4) %s\n",
              forms_err, f32_err, forms_ok ? "PASS" : "FAIL");

  // 3. 1,000 such problems (stochastic, server-drawn perturbations) in one request.
  v1::AssimilateRequest many;
  p.form = v1::ANALYSIS_FORM_AUTO;
  p.method = v1::ASSIMILATION_METHOD_ENKF;
  p.full_covariance = false;
  p.obs_error.assign(p.m, 1.0);
  p.seed = 12345;
  auto msg = client::MakeAssimilationProblem(p);
  if (!msg.ok()) return Fail("building the problem", msg.status()) == 0;
  for (int i = 0; i < 1000; ++i) *many.add_problems() = *msg;
  auto r = client.Assimilate(std::move(many));
  if (!r.ok() || r->response.results_size() != 1000) {
    Fail("Assimilate (1,000 problems)", r.ok() ? absl::InternalError("wrong result count") : r.status());
    return false;
  }
  std::printf("  1,000 stochastic EnKF problems (n = m = 40, N = 20) in one request: round trip "
              "%s; server %s\n",
              FormatMs(r->latency).c_str(), FormatTimings(r->timings).c_str());
  return all_ok;
}

}  // namespace

int RunDemo(const GlobalOptions& global, const DemoOptions& options) {
  absl::StatusOr<std::unique_ptr<client::Client>> connected = ConnectFromFlags(global);
  if (!connected.ok()) return Fail(global.target, connected.status());
  client::Client& client = **connected;

  absl::StatusOr<client::ServerInfoResult> info_before = client.ServerInfo();
  if (!info_before.ok()) return Fail("ServerInfo", info_before.status());
  std::printf("gpucompute demo: %s, %s\n", global.target.c_str(),
              DescribeBackend(info_before->info).c_str());

  // ------------------------------------------------------------ batched periodograms
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int kLengths[] = {100, 180, 300, 450, 700, 1000, 1500, 2000};
  std::vector<DemoSeries> series;
  for (int i = 0; i < 8; ++i) {
    const double baseline = 20.0 + 15.0 * i;  // days, say
    const double f = 0.35 + 0.45 * i + 0.1 * unit(rng);
    series.push_back(MakeSeries(rng, kLengths[i], baseline, 5000.0, f, i % 2 == 0));
  }
  std::printf("periodogram: 8 noisy sinusoids, 100-2000 uneven samples, auto grid, one batched "
              "request per dtype\n");

  bool all_ok = true;
  int peaks_found = 0, peaks_total = 0;
  const v1::DType kDTypes[] = {v1::FLOAT64, v1::FLOAT32};
  std::vector<std::future<absl::StatusOr<client::PeriodogramResult>>> calls;
  for (v1::DType dtype : kDTypes) {
    absl::StatusOr<v1::PeriodogramRequest> request = BuildRequest(series, dtype);
    if (!request.ok()) return Fail("building the request", request.status());
    calls.push_back(client.PeriodogramAsync(*std::move(request)));
  }
  absl::StatusOr<client::PeriodogramResult> results[2];
  for (int d = 0; d < 2; ++d) {
    results[d] = calls[d].get();
    if (!results[d].ok()) {
      Fail(absl::StrCat("Periodogram ", d == 0 ? "float64" : "float32"), results[d].status());
      all_ok = false;
    } else if (results[d]->response.results_size() != 8) {
      std::fprintf(stderr, "gpucompute: Periodogram returned %d results for 8 series\n",
                   results[d]->response.results_size());
      all_ok = false;
      results[d] = absl::InternalError("wrong result count");
    }
  }
  std::printf("  #     n  f_injected | float64: f_peak   rel_err      | float32: f_peak   rel_err\n");
  for (int i = 0; i < 8; ++i) {
    std::string line = absl::StrFormat("  %d  %4d  %10.6f ", i, kLengths[i], series[i].f_injected);
    for (int d = 0; d < 2; ++d) {
      if (!results[d].ok()) {
        line += "|  (call failed)                 ";
        continue;
      }
      const PeakCheck c = CheckPeak(results[d]->response.results(i), series[i].f_injected);
      ++peaks_total;
      peaks_found += c.ok;
      all_ok &= c.ok;
      line += absl::StrFormat("|  %14.6f  %8.1e  %-4s", c.peak, c.rel_error, c.ok ? "OK" : "MISS");
      if (d == 0) line += " ";
    }
    absl::StripTrailingAsciiWhitespace(&line);
    std::printf("%s\n", line.c_str());
  }
  for (int d = 0; d < 2; ++d) {
    if (!results[d].ok()) continue;
    int64_t frequencies = 0;
    for (const v1::SeriesResult& r : results[d]->response.results()) frequencies += r.grid().n();
    std::printf("  %s: %lld frequencies, %s round trip; server %s\n",
                d == 0 ? "float64" : "float32", static_cast<long long>(frequencies),
                FormatMs(results[d]->latency).c_str(),
                FormatTimings(results[d]->timings).c_str());
  }

  // ------------------------------------------------------------ concurrency burst
  std::vector<DemoSeries> burst_series;
  std::vector<std::future<absl::StatusOr<client::PeriodogramResult>>> burst;
  for (int i = 0; i < options.burst; ++i) {
    burst_series.push_back(MakeSeries(rng, 300, 40.0, 5000.0, 0.5 + 2.5 * unit(rng), false));
  }
  const absl::Time burst_start = absl::Now();
  for (const DemoSeries& s : burst_series) {
    absl::StatusOr<v1::PeriodogramRequest> request = BuildRequest({s}, v1::FLOAT64);
    if (!request.ok()) return Fail("building the request", request.status());
    burst.push_back(client.PeriodogramAsync(*std::move(request)));
  }
  int burst_ok = 0, burst_failed_calls = 0;
  int64_t largest_seen = 0;
  absl::Status first_error;
  for (int i = 0; i < options.burst; ++i) {
    absl::StatusOr<client::PeriodogramResult> r = burst[i].get();
    if (!r.ok() || r->response.results_size() != 1) {
      ++burst_failed_calls;
      if (first_error.ok()) first_error = r.ok() ? absl::InternalError("wrong result count") : r.status();
      continue;
    }
    largest_seen = std::max(largest_seen, r->timings.batch_requests.value_or(0));
    burst_ok += CheckPeak(r->response.results(0), burst_series[i].f_injected).ok;
  }
  const absl::Duration burst_wall = absl::Now() - burst_start;
  peaks_total += options.burst;
  peaks_found += burst_ok;
  all_ok &= burst_ok == options.burst;
  std::printf("burst: %d concurrent requests, %d/%d peaks OK, %s wall, largest batch seen %lld\n",
              options.burst, burst_ok, options.burst, FormatMs(burst_wall).c_str(),
              static_cast<long long>(largest_seen));
  if (burst_failed_calls > 0) {
    Fail(absl::StrCat(burst_failed_calls, " burst calls failed; first"), first_error);
  }

  absl::StatusOr<client::ServerInfoResult> info_after = client.ServerInfo();
  if (!info_after.ok()) {
    Fail("ServerInfo", info_after.status());
    all_ok = false;
  } else {
    const v1::BatchingStats& a = info_after->info.periodogram_batching();
    const v1::BatchingStats& b = info_before->info.periodogram_batching();
    std::printf("server batching: +%lld requests in +%lld batches during the demo (largest ever "
                "%lld), %lld rejected, %lld expired\n",
                static_cast<long long>(a.requests() - b.requests()),
                static_cast<long long>(a.batches() - b.batches()),
                static_cast<long long>(a.largest_batch()),
                static_cast<long long>(a.rejected_queue_full()),
                static_cast<long long>(a.expired_before_dispatch()));
  }

  bool dense_ok = true;
  if (!options.skip_dense) dense_ok = RunDenseDemo(client, rng);
  bool assimilate_ok = true;
  if (!options.skip_assimilate) assimilate_ok = RunAssimilateDemo(client, rng);

  const bool pass = all_ok && dense_ok && assimilate_ok;
  std::printf("%s: %d/%d peaks found%s%s\n", pass ? "PASS" : "FAIL", peaks_found, peaks_total,
              options.skip_dense ? "" : (dense_ok ? ", dense models match" : ", dense FAILED"),
              options.skip_assimilate ? ""
                                      : (assimilate_ok ? ", analyses match" : ", assimilate FAILED"));
  return pass ? 0 : 1;
}

}  // namespace gpucompute::cli
