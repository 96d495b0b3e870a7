// `gpucompute periodogram FILE...`: one batched Periodogram call over every file.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"
#include "client/cli/series_file.h"
#include "client/cpp/periodogram_request_builder.h"
#include "nlohmann/json.hpp"

namespace gpucompute::cli {
namespace {

using client::DecodedSeriesResult;

void WriteCsv(const std::vector<DecodedSeriesResult>& results, bool float32, bool no_power,
              std::ostream& out) {
  if (no_power) {
    out << "series,peak_frequency,peak_power\n";
    for (size_t s = 0; s < results.size(); ++s) {
      out << absl::StrCat(s, ",", FormatShortest(results[s].peak_frequency), ",",
                          FormatShortest(results[s].peak_power), "\n");
    }
    return;
  }
  out << "series,frequency,power\n";
  std::string line;
  for (size_t s = 0; s < results.size(); ++s) {
    const DecodedSeriesResult& r = results[s];
    for (size_t k = 0; k < r.power.size(); ++k) {
      line = absl::StrCat(s, ",", FormatShortest(r.frequency[k]), ",",
                          float32 ? FormatShortest(static_cast<float>(r.power[k]))
                                  : FormatShortest(r.power[k]),
                          "\n");
      out << line;
    }
  }
}

void WriteJson(const std::vector<SeriesData>& inputs,
               const std::vector<DecodedSeriesResult>& results,
               const std::vector<nlohmann::json>& analyses, std::ostream& out) {
  nlohmann::json series = nlohmann::json::array();
  for (size_t s = 0; s < results.size(); ++s) {
    const DecodedSeriesResult& r = results[s];
    nlohmann::json item = {{"file", inputs[s].name},
                           {"n_samples", inputs[s].t.size()},
                           {"peak_frequency", r.peak_frequency},
                           {"peak_power", r.peak_power}};
    if (!r.power.empty() || r.frequency.empty()) {
      item["frequency"] = r.frequency;
      item["power"] = r.power;
    }
    item.update(analyses[s]);
    series.push_back(std::move(item));
  }
  out << nlohmann::json{{"series", std::move(series)}}.dump() << "\n";
}

// Method, nterms, top-k, false alarm and models: request fields the builder leaves alone.
void SetAnalysisOptions(const PeriodogramOptions& options, v1::PeriodogramRequest* request) {
  request->set_method(options.method == "fast"     ? v1::PERIODOGRAM_METHOD_FAST
                      : options.method == "direct" ? v1::PERIODOGRAM_METHOD_DIRECT
                                                   : v1::PERIODOGRAM_METHOD_AUTO);
  request->set_nterms(options.nterms);
  request->set_top_k(options.top_k);
  request->set_model_parameters(options.model);
  if (options.no_power) request->mutable_output_placement()->set_discard(true);
  if (!options.false_alarm.empty() || !options.false_alarm_levels.empty()) {
    v1::FalseAlarmSpec* fa = request->mutable_false_alarm();
    const std::string& m = options.false_alarm;
    fa->set_method(m == "davies"      ? v1::FALSE_ALARM_METHOD_DAVIES
                   : m == "naive"     ? v1::FALSE_ALARM_METHOD_NAIVE
                   : m == "bootstrap" ? v1::FALSE_ALARM_METHOD_BOOTSTRAP
                                      : v1::FALSE_ALARM_METHOD_BALUEV);
    fa->mutable_probabilities()->Add(options.false_alarm_levels.begin(),
                                     options.false_alarm_levels.end());
    fa->set_n_bootstraps(options.bootstraps);
    fa->set_seed(options.seed);
  }
}

// What the analysis options added to a result, for the JSON output and stderr.
nlohmann::json AnalysisJson(const v1::SeriesResult& r) {
  nlohmann::json out = nlohmann::json::object();
  out["method"] = r.method() == v1::PERIODOGRAM_METHOD_FAST ? "fast" : "direct";
  if (r.peaks_size() > 0) {
    nlohmann::json peaks = nlohmann::json::array();
    for (const v1::PeriodogramPeak& p : r.peaks()) {
      nlohmann::json peak = {{"frequency", p.frequency()}, {"power", p.power()}, {"index", p.index()}};
      if (r.has_false_alarm()) peak["false_alarm_probability"] = p.false_alarm_probability();
      peaks.push_back(std::move(peak));
    }
    out["peaks"] = std::move(peaks);
  }
  if (r.has_false_alarm()) {
    out["false_alarm_probability"] = r.false_alarm().peak_probability();
    out["false_alarm_levels"] = std::vector<double>(r.false_alarm().levels().begin(),
                                                    r.false_alarm().levels().end());
  }
  if (r.has_model()) {
    out["model"] = {{"frequency", r.model().frequency()},
                    {"parameters", std::vector<double>(r.model().parameters().begin(),
                                                       r.model().parameters().end())},
                    {"offset", r.model().offset()}};
  }
  return out;
}

}  // namespace

int RunPeriodogram(const GlobalOptions& global, const PeriodogramOptions& options) {
  // Inputs.
  std::vector<SeriesData> inputs;
  for (const std::string& file : options.files) {
    const DyColumn dy = options.dy_column ? DyColumn::kRequired
                        : options.ignore_dy ? DyColumn::kIgnore
                                            : DyColumn::kIfPresent;
    absl::StatusOr<SeriesData> series = ReadSeriesFile(file, dy);
    if (!series.ok()) return Fail("reading input", series.status());
    inputs.push_back(*std::move(series));
  }

  // Request.
  client::PeriodogramRequestBuilder builder;
  for (const SeriesData& s : inputs) builder.AddSeries(s.t, s.y, s.dy);
  std::vector<double> explicit_frequencies;
  if (options.nf) {
    absl::StatusOr<v1::FrequencyGrid> grid = client::RangeGrid(*options.fmin, *options.fmax, *options.nf);
    if (!grid.ok()) return Fail("--fmin/--fmax/--nf", grid.status());
    builder.SetGrid(*grid);
  } else if (!options.frequencies_file.empty()) {
    absl::StatusOr<std::vector<double>> f = ReadFrequencyFile(options.frequencies_file);
    if (!f.ok()) return Fail("--frequencies", f.status());
    explicit_frequencies = *std::move(f);
    builder.SetGrid(client::ExplicitGrid(explicit_frequencies));
  } else {
    builder.SetGrid(client::AutoGrid({.samples_per_peak = options.samples_per_peak,
                                      .nyquist_factor = options.nyquist_factor,
                                      .minimum_frequency = options.minimum_frequency,
                                      .maximum_frequency = options.maximum_frequency}));
  }
  absl::StatusOr<v1::Normalization> normalization = client::ParseNormalization(options.normalization);
  if (!normalization.ok()) return Fail("--normalization", normalization.status());
  absl::StatusOr<v1::DType> dtype = client::ParseComputeDType(options.dtype);
  if (!dtype.ok()) return Fail("--dtype", dtype.status());
  builder.SetNormalization(*normalization).SetDType(*dtype);
  if (options.no_fit_mean) builder.SetFitMean(false);
  if (options.no_center_data) builder.SetCenterData(false);
  absl::StatusOr<v1::PeriodogramRequest> request = builder.Build();
  if (!request.ok()) return Fail("building the request", request.status());
  SetAnalysisOptions(options, &*request);

  // Call.
  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectFromFlags(global);
  if (!client.ok()) return Fail(global.target, client.status());
  absl::StatusOr<client::PeriodogramResult> result = (*client)->Periodogram(*std::move(request));
  if (!result.ok()) return Fail("Periodogram", result.status());
  const v1::PeriodogramResponse& response = result->response;
  if (response.results_size() != static_cast<int>(inputs.size())) {
    return Fail("Periodogram", absl::InternalError(absl::StrCat(
                                   "server returned ", response.results_size(), " results for ",
                                   inputs.size(), " series")));
  }
  std::vector<DecodedSeriesResult> decoded;
  for (int s = 0; s < response.results_size(); ++s) {
    absl::StatusOr<DecodedSeriesResult> r =
        client::DecodeSeriesResult(response.results(s), explicit_frequencies);
    if (!r.ok()) return Fail(absl::StrCat("result ", s), r.status());
    decoded.push_back(*std::move(r));
  }

  // Peaks to stderr, data to stdout or --output.
  std::vector<nlohmann::json> analyses;
  for (size_t s = 0; s < decoded.size(); ++s) {
    std::fprintf(stderr, "series %zu (%s): %zu samples, %zu frequencies, peak at f = %s (power %s)\n",
                 s, inputs[s].name.c_str(), inputs[s].t.size(), decoded[s].frequency.size(),
                 FormatShortest(decoded[s].peak_frequency).c_str(),
                 FormatShortest(decoded[s].peak_power).c_str());
    analyses.push_back(AnalysisJson(response.results(static_cast<int>(s))));
    if (analyses.back().size() > 1) std::fprintf(stderr, "  %s\n", analyses.back().dump().c_str());
  }
  std::fprintf(stderr, "server: %s; round trip %s\n", FormatTimings(result->timings).c_str(),
               FormatMs(result->latency).c_str());

  std::string format = options.format;
  if (format.empty()) format = absl::EndsWithIgnoreCase(options.output, ".json") ? "json" : "csv";
  std::ofstream file;
  if (!options.output.empty()) {
    file.open(options.output, std::ios::binary | std::ios::trunc);
    if (!file) return Fail("--output", absl::PermissionDeniedError("cannot write " + options.output));
  }
  std::ostream& out = options.output.empty() ? std::cout : file;
  if (format == "json") {
    WriteJson(inputs, decoded, analyses, out);
  } else {
    WriteCsv(decoded, *dtype == v1::FLOAT32, options.no_power, out);
  }
  out.flush();
  if (!out) return Fail("writing output", absl::DataLossError("write failed"));
  return 0;
}

}  // namespace gpucompute::cli
