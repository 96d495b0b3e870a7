// PeriodogramRequest decoding and validation (see periodogram_decode.h).
#include "server/service/periodogram_decode.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "server/ops/periodogram/false_alarm.h"
#include "server/ops/periodogram/nufft.h"
#include "server/service/tensor_codec.h"
#include "math/lombscargle_harmonic.cuh"

namespace gpucompute {
namespace {

using periodogram::Grid;

absl::Status CheckPositiveFinite(double v, const std::string& field) {
  if (!std::isfinite(v) || !(v > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be finite and > 0 (got ", v, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Grid> DecodeGrid(const v1::FrequencyGrid* spec, const std::vector<double>& t,
                                const std::string& field, const ServiceLimits& limits,
                                TensorResolver& resolver, DecodeBudget& budget) {
  Grid grid;
  if (spec == nullptr || spec->kind_case() == v1::FrequencyGrid::KIND_NOT_SET ||
      spec->kind_case() == v1::FrequencyGrid::kAuto) {
    periodogram::AutoGridParams params;
    if (spec != nullptr && spec->has_auto_()) {
      const auto& a = spec->auto_();
      const std::string f = field + ".auto";
      if (a.has_samples_per_peak()) {
        RETURN_IF_ERROR(CheckPositiveFinite(a.samples_per_peak(), f + ".samples_per_peak"));
        params.samples_per_peak = a.samples_per_peak();
      }
      if (a.has_nyquist_factor()) {
        RETURN_IF_ERROR(CheckPositiveFinite(a.nyquist_factor(), f + ".nyquist_factor"));
        params.nyquist_factor = a.nyquist_factor();
      }
      if (a.has_minimum_frequency()) {
        RETURN_IF_ERROR(CheckPositiveFinite(a.minimum_frequency(), f + ".minimum_frequency"));
        params.minimum_frequency = a.minimum_frequency();
      }
      if (a.has_maximum_frequency()) {
        RETURN_IF_ERROR(CheckPositiveFinite(a.maximum_frequency(), f + ".maximum_frequency"));
        params.maximum_frequency = a.maximum_frequency();
      }
    }
    auto uniform = periodogram::AutoFrequency(t, params);
    if (!uniform.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".auto: ", uniform.status().message()));
    }
    if (uniform->n > limits.max_frequencies_per_series) {
      return absl::ResourceExhaustedError(absl::StrCat(
          field, ".auto: the automatic grid has ", uniform->n,
          " frequencies, over the limit of ", limits.max_frequencies_per_series,
          " per series (set maximum_frequency or samples_per_peak)"));
    }
    grid.uniform = *uniform;
  } else if (spec->kind_case() == v1::FrequencyGrid::kUniform) {
    const auto& u = spec->uniform();
    RETURN_IF_ERROR(CheckPositiveFinite(u.f0(), field + ".uniform.f0"));
    RETURN_IF_ERROR(CheckPositiveFinite(u.df(), field + ".uniform.df"));
    if (u.n() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".uniform.n: must be >= 1 (got ", u.n(), ")"));
    }
    if (u.n() > limits.max_frequencies_per_series) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, ".uniform.n: ", u.n(), " frequencies is over the limit of ",
                       limits.max_frequencies_per_series, " per series"));
    }
    RETURN_IF_ERROR(CheckPositiveFinite(u.f0() + static_cast<double>(u.n() - 1) * u.df(),
                                        field + ".uniform (last frequency)"));
    grid.uniform = periodogram::UniformGrid{u.f0(), u.df(), u.n()};
  } else {
    const std::string f = field + ".explicit_frequencies";
    ASSIGN_OR_RETURN(grid.explicit_frequencies,
                     DecodeVector(resolver, spec->explicit_frequencies(), f, /*require_finite=*/false,
                                  &budget));
    if (grid.explicit_frequencies.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": at least one frequency is required"));
    }
    if (static_cast<int64_t>(grid.explicit_frequencies.size()) > limits.max_frequencies_per_series) {
      return absl::ResourceExhaustedError(
          absl::StrCat(f, ": ", grid.explicit_frequencies.size(),
                       " frequencies is over the limit of ", limits.max_frequencies_per_series,
                       " per series"));
    }
    for (size_t k = 0; k < grid.explicit_frequencies.size(); ++k) {
      const double v = grid.explicit_frequencies[k];
      if (!std::isfinite(v) || !(v > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            f, ": frequencies must be finite and > 0 (index ", k, " is ", v, ")"));
      }
    }
  }
  return grid;
}

absl::StatusOr<periodogram::ModelSpec> DecodeModelSpec(const v1::ModelSpec& spec,
                                                       const std::string& field,
                                                       const ServiceLimits& limits,
                                                       TensorResolver& resolver,
                                                       DecodeBudget& budget) {
  periodogram::ModelSpec out;
  if (spec.has_frequency()) {
    RETURN_IF_ERROR(CheckPositiveFinite(spec.frequency(), field + ".frequency"));
    out.frequency = spec.frequency();
  }
  if (spec.has_t()) {
    ASSIGN_OR_RETURN(out.t, DecodeVector(resolver, spec.t(), field + ".t", true, &budget));
    if (static_cast<int64_t>(out.t.size()) > limits.max_samples_per_series) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, ".t: ", out.t.size(), " times is over the limit of ",
                       limits.max_samples_per_series, " per series"));
    }
  }
  return out;
}

// The request's false-alarm options, checked; n_bootstraps defaults to Astropy's 1000.
absl::StatusOr<periodogram::FalseAlarmSpec> DecodeFalseAlarm(const v1::FalseAlarmSpec& spec) {
  constexpr int kMaxValues = 1024;
  periodogram::FalseAlarmSpec out;
  if (!v1::FalseAlarmMethod_IsValid(spec.method())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "false_alarm.method: unknown value ", spec.method(),
        " (baluev, davies, naive or bootstrap)"));
  }
  out.method = static_cast<periodogram::FalseAlarmMethod>(spec.method());
  if (spec.probabilities_size() > kMaxValues || spec.powers_size() > kMaxValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        "false_alarm: at most ", kMaxValues, " probabilities and ", kMaxValues, " powers"));
  }
  out.probabilities.assign(spec.probabilities().begin(), spec.probabilities().end());
  out.powers.assign(spec.powers().begin(), spec.powers().end());
  if (spec.n_bootstraps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("false_alarm.n_bootstraps: must be >= 0 (got ", spec.n_bootstraps(), ")"));
  }
  out.n_bootstraps = spec.n_bootstraps() == 0 ? 1000 : spec.n_bootstraps();
  out.seed = spec.seed();
  return out;
}

// Checks the bootstrap's size against the limits, then appends the resampled series.
// Adds to the budget's leases the powers (`power_bytes`, wherever they go, held while they are
// computed) and the bootstrap's resampled series with their powers.
absl::Status LeaseOutputsAndResamplings(const periodogram::Request& out, int64_t power_bytes,
                                        DecodeBudget* budget) {
  if (budget->shared == nullptr) return absl::OkStatus();
  const int64_t elem = ElementSize(out.dtype);
  int64_t bytes = power_bytes;
  for (size_t i = static_cast<size_t>(out.user_series); i < out.series.size(); ++i) {
    const periodogram::SeriesSpec& s = out.series[i];
    bytes += 2 * 8 * static_cast<int64_t>(s.t.size() + s.y.size() + s.dy.size()) + s.grid.size() * elem;
  }
  ASSIGN_OR_RETURN(MemoryLease lease,
                   budget->shared->Acquire(bytes, "the periodogram's outputs", budget->caller));
  budget->leases.push_back(std::move(lease));
  return absl::OkStatus();
}

absl::Status AddBootstrapSeries(periodogram::Request* out, const ServiceLimits& limits,
                                int64_t* pairs) {
  const int64_t n_boot = out->false_alarm->n_bootstraps;
  int64_t samples = 0, boot_pairs = 0;
  for (int64_t i = 0; i < out->user_series; ++i) {
    const periodogram::SeriesSpec& s = out->series[i];
    auto grid = periodogram::BootstrapGrid(s);
    if (!grid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "false_alarm: series[", i, "] has no bootstrap grid: ", grid.status().message()));
    }
    if (grid->n > limits.max_frequencies_per_series) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "false_alarm: series[", i, "]'s bootstrap grid has ", grid->n,
          " frequencies, over the limit of ", limits.max_frequencies_per_series, " per series"));
    }
    samples += static_cast<int64_t>(s.t.size());
    boot_pairs += static_cast<int64_t>(s.t.size()) * grid->n;
  }
  // Division, not multiplication: n_boot may be as large as the client likes.
  if (samples > 0 && n_boot > limits.max_bootstrap_samples / samples) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "false_alarm.n_bootstraps: ", n_boot, " resamplings of ", samples,
        " samples is over the limit of ", limits.max_bootstrap_samples,
        " resampled samples per request (--max_bootstrap_samples)"));
  }
  if (boot_pairs > 0 && n_boot > (limits.max_pairs_per_request - *pairs) / boot_pairs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "false_alarm.n_bootstraps: ", n_boot, " bootstrap periodograms of ", boot_pairs,
        " sample-frequency pairs each take the request over the limit of ",
        limits.max_pairs_per_request, " pairs"));
  }
  *pairs += n_boot * boot_pairs;
  const ElementType dtype = out->dtype;
  periodogram::AppendBootstrapSeries(
      out, [dtype](const periodogram::SeriesSpec& s) { return periodogram::AutoMethod(s, dtype); });
  return absl::OkStatus();
}


// What every series of one request shares, and what its series add up to.
struct SeriesContext {
  const v1::PeriodogramRequest& request;
  const ServiceLimits& limits;
  TensorResolver& resolver;
  DecodeBudget& budget;
  bool fit_mean = true;
  bool center_data = true;
  periodogram::Normalization normalization = periodogram::Normalization::kStandard;
  int nterms = 1;
  ElementType dtype = ElementType::kFloat64;
  int64_t pairs = 0;
  int64_t output_bytes = 0;  // inline in the response
  int64_t power_bytes = 0;   // wherever placed
};

// A series' decoded samples against the per-series rules: at least 2 and at most the limit,
// y (and dy) as long as t, dy finite and > 0.
absl::Status CheckSamples(const periodogram::SeriesSpec& s, bool has_dy, const std::string& field,
                          const ServiceLimits& limits) {
  if (static_cast<int64_t>(s.t.size()) > limits.max_samples_per_series) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, ".t: ", s.t.size(), " samples is over the limit of ",
                     limits.max_samples_per_series, " per series"));
  }
  if (s.t.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".t: a series needs at least 2 samples (got ", s.t.size(), ")"));
  }
  if (s.y.size() != s.t.size()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".y: length ", s.y.size(),
                                                   " differs from t's length ", s.t.size()));
  }
  if (!has_dy) return absl::OkStatus();
  if (s.dy.size() != s.t.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".dy: length ", s.dy.size(), " differs from t's length ", s.t.size()));
  }
  for (size_t k = 0; k < s.dy.size(); ++k) {
    if (!std::isfinite(s.dy[k]) || !(s.dy[k] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".dy: values must be finite and > 0 (index ", k, " is ", s.dy[k], ")"));
    }
  }
  return absl::OkStatus();
}

// Completes a series whose samples are decoded and checked: its grid (its own, else the
// request's), the request's options, its method and model; adds its pairs and output bytes.
absl::Status FinishSeries(SeriesContext& c, periodogram::SeriesSpec& s, const std::string& field,
                          const v1::FrequencyGrid* own_grid, const v1::ModelSpec* own_model) {
  const v1::PeriodogramRequest& request = c.request;
  const v1::FrequencyGrid* spec = own_grid != nullptr         ? own_grid
                                  : request.has_frequency() ? &request.frequency()
                                                            : nullptr;
  const std::string grid_field = own_grid != nullptr ? field + ".frequency" : "frequency";
  ASSIGN_OR_RETURN(s.grid, DecodeGrid(spec, s.t, grid_field, c.limits, c.resolver, c.budget));
  s.fit_mean = c.fit_mean;
  s.center_data = c.center_data;
  s.normalization = c.normalization;
  s.nterms = c.nterms;
  switch (request.method()) {
    case v1::PERIODOGRAM_METHOD_DIRECT: s.method = periodogram::Method::kDirect; break;
    case v1::PERIODOGRAM_METHOD_FAST:
      if (!s.grid.uniform) {
        return absl::InvalidArgumentError(absl::StrCat(
            "method: fast needs a uniform or automatic grid (", grid_field,
            " lists explicit frequencies)"));
      }
      s.method = periodogram::Method::kFast;
      break;
    default: s.method = periodogram::AutoMethod(s, c.dtype); break;
  }
  if (own_model != nullptr || request.model_parameters()) {
    ASSIGN_OR_RETURN(s.model, DecodeModelSpec(own_model != nullptr ? *own_model
                                                                    : v1::ModelSpec::default_instance(),
                                              field + ".model", c.limits, c.resolver, c.budget));
    c.output_bytes += static_cast<int64_t>(s.model->t.size()) * 8 + 16 * (2 * c.nterms + 1);
  }
  const int64_t power_bytes = s.grid.size() * ElementSize(c.dtype);
  c.pairs += static_cast<int64_t>(s.t.size()) * s.grid.size();
  c.output_bytes += InlineOutputBytes(request.output_placement(), power_bytes);
  c.power_bytes += power_bytes;
  s.moments = periodogram::ComputeMoments(s);  // here, not on the thread that launches the batch
  return absl::OkStatus();
}

// The first NaN or infinity of a packed array (whose lengths are checked), named as the
// series and the index within it where it falls, as a Series' array would be.
absl::Status CheckPackedFinite(const TensorView& view, const v1::PackedSeries& packed, int first,
                               const char* array) {
  const int64_t k = FirstNonFinite(view);
  if (k < 0) return absl::OkStatus();
  int64_t begin = 0;
  int j = 0;
  while (begin + packed.lengths(j) <= k) begin += packed.lengths(j++);
  return NonFiniteError(absl::StrCat("series[", first + j, "].", array), view, k, k - begin);
}

// The packed series, after the request's `series` in `series`: the three tensors decoded once,
// split by `lengths`, each part checked and completed as a Series of its own and named as one
// (series[series_size + j]).
absl::Status DecodePackedSeries(SeriesContext& c, std::vector<periodogram::SeriesSpec>& series) {
  const v1::PackedSeries& packed = c.request.packed_series();
  if (!packed.has_t()) return absl::InvalidArgumentError("packed_series.t: missing");
  if (!packed.has_y()) return absl::InvalidArgumentError("packed_series.y: missing");
  // Views, decoded series by series straight into each series' vectors (one copy).
  ASSIGN_OR_RETURN(const TensorView t,
                   ResolveVector(c.resolver, packed.t(), "packed_series.t", &c.budget));
  ASSIGN_OR_RETURN(const TensorView y,
                   ResolveVector(c.resolver, packed.y(), "packed_series.y", &c.budget));
  if (y.count != t.count) {
    return absl::InvalidArgumentError(absl::StrCat("packed_series.y: length ", y.count,
                                                   " differs from t's length ", t.count));
  }
  TensorView dy;
  if (packed.has_dy()) {
    ASSIGN_OR_RETURN(dy, ResolveVector(c.resolver, packed.dy(), "packed_series.dy", &c.budget));
    if (dy.count != t.count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packed_series.dy: length ", dy.count, " differs from t's length ", t.count));
    }
  }
  int64_t end = 0;
  for (int j = 0; j < packed.lengths_size(); ++j) {
    const int64_t n = packed.lengths(j);
    if (n < 0 || n > t.count - end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packed_series.lengths[", j, "]: ", n, " samples from sample ", end,
          " do not fit in t's ", t.count));
    }
    end += n;
  }
  if (end != t.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packed_series.lengths: they add up to ", end, " samples, but t has ", t.count));
  }
  const int first = c.request.series_size();
  RETURN_IF_ERROR(CheckPackedFinite(t, packed, first, "t"));
  RETURN_IF_ERROR(CheckPackedFinite(y, packed, first, "y"));
  // The copies on several threads (a survey's million samples fault in fresh pages: ~10 ms
  // on one), then the checks in order, so that the first bad series is the one named.
  const int count = packed.lengths_size();
  std::vector<int64_t> begins(static_cast<size_t>(count) + 1, 0);
  for (int j = 0; j < count; ++j) begins[j + 1] = begins[j] + packed.lengths(j);
  ParallelFor(count, t.count * (packed.has_dy() ? 3 : 2), [&](int64_t from, int64_t to) {
    for (int64_t j = from; j < to; ++j) {
      periodogram::SeriesSpec& s = series[first + j];
      s.t = DecodeVectorRange(t, begins[j], begins[j + 1]);
      s.y = DecodeVectorRange(y, begins[j], begins[j + 1]);
      if (packed.has_dy()) s.dy = DecodeVectorRange(dy, begins[j], begins[j + 1]);
    }
  });
  for (int j = 0; j < count; ++j) {
    periodogram::SeriesSpec& s = series[first + j];
    const std::string field = absl::StrCat("series[", first + j, "]");
    RETURN_IF_ERROR(CheckSamples(s, packed.has_dy(), field, c.limits));
    RETURN_IF_ERROR(FinishSeries(c, s, field, nullptr, nullptr));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<periodogram::Request> DecodePeriodogramRequest(const v1::PeriodogramRequest& request,
                                                              const ServiceLimits& limits,
                                                              TensorResolver* resolver_or_null,
                                                              std::vector<MemoryLease>* leases) {
  TensorResolver inline_only;
  TensorResolver& resolver = resolver_or_null != nullptr ? *resolver_or_null : inline_only;
  // Twice the message limit: inline float32 data decodes to twice its bytes.
  DecodeBudget budget(limits.max_request_bytes > (INT64_MAX >> 1) ? INT64_MAX
                                                                  : 2 * limits.max_request_bytes,
                      resolver.context().memory, resolver.context().client);
  periodogram::Request out;
  switch (request.dtype()) {
    case v1::DTYPE_UNSPECIFIED:
    case v1::FLOAT64: out.dtype = ElementType::kFloat64; break;
    case v1::FLOAT32: out.dtype = ElementType::kFloat32; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype: must be float32 or float64 (got ", DTypeName(request.dtype()), ")"));
  }
  if (!v1::Normalization_IsValid(request.normalization())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "normalization: unknown value ", request.normalization(),
        " (standard, model, log or psd)"));
  }
  const int64_t series_count =
      request.series_size() + int64_t{request.packed_series().lengths_size()};
  if (series_count == 0) {
    return absl::InvalidArgumentError("series: at least one series is required");
  }
  if (series_count > limits.max_series_per_request) {
    return absl::ResourceExhaustedError(
        absl::StrCat("series: ", series_count, " series is over the limit of ",
                     limits.max_series_per_request, " per request"));
  }
  if (!v1::PeriodogramMethod_IsValid(request.method())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "method: unknown value ", request.method(), " (auto, direct or fast)"));
  }
  if (request.has_nterms() && request.nterms() == 0) {
    return absl::InvalidArgumentError(
        "nterms: 0 (Astropy's offset-only model, whose power is 0 at every frequency) is not "
        "supported; 1 .. 8 are");
  }
  const int nterms = request.has_nterms() ? request.nterms() : 1;
  if (nterms < 1 || nterms > gpucompute_kernels::kMaxHarmonicTerms) {
    return absl::InvalidArgumentError(absl::StrCat("nterms: must be 1 .. ",
                                                   gpucompute_kernels::kMaxHarmonicTerms,
                                                   " (got ", request.nterms(), ")"));
  }
  constexpr int kMaxTopK = 10000;
  if (request.top_k() < 0 || request.top_k() > kMaxTopK) {
    return absl::InvalidArgumentError(absl::StrCat("top_k: must be 0 .. ", kMaxTopK,
                                                   " (got ", request.top_k(), ")"));
  }
  out.top_k = request.top_k();
  if (request.has_false_alarm()) {
    ASSIGN_OR_RETURN(out.false_alarm, DecodeFalseAlarm(request.false_alarm()));
  }
  SeriesContext c{request, limits, resolver, budget};
  c.fit_mean = request.has_fit_mean() ? request.fit_mean() : true;
  c.center_data = request.has_center_data() ? request.center_data() : true;
  c.normalization = static_cast<periodogram::Normalization>(request.normalization());
  c.nterms = nterms;
  c.dtype = out.dtype;
  out.series.resize(series_count);
  for (int i = 0; i < request.series_size(); ++i) {
    const v1::Series& in = request.series(i);
    periodogram::SeriesSpec& s = out.series[i];
    const std::string field = absl::StrCat("series[", i, "]");
    if (!in.has_t()) return absl::InvalidArgumentError(field + ".t: missing");
    if (!in.has_y()) return absl::InvalidArgumentError(field + ".y: missing");
    ASSIGN_OR_RETURN(s.t, DecodeVector(resolver, in.t(), field + ".t", true, &budget));
    ASSIGN_OR_RETURN(s.y, DecodeVector(resolver, in.y(), field + ".y", true, &budget));
    if (in.has_dy()) {
      ASSIGN_OR_RETURN(s.dy, DecodeVector(resolver, in.dy(), field + ".dy",
                                          /*require_finite=*/false, &budget));
    }
    RETURN_IF_ERROR(CheckSamples(s, in.has_dy(), field, limits));
    RETURN_IF_ERROR(FinishSeries(c, s, field, in.has_frequency() ? &in.frequency() : nullptr,
                                 in.has_model() ? &in.model() : nullptr));
  }
  if (request.has_packed_series()) RETURN_IF_ERROR(DecodePackedSeries(c, out.series));
  int64_t pairs = c.pairs;
  int64_t output_bytes = c.output_bytes;
  const int64_t power_bytes = c.power_bytes;
  RETURN_IF_ERROR(CheckOutputBytes(resolver.context(), request.output_placement(), power_bytes));
  out.user_series = static_cast<int64_t>(out.series.size());
  if (DiscardsOutputs(request.output_placement())) {
    for (periodogram::SeriesSpec& s : out.series) s.power_discarded = true;
  }
  if (pairs > limits.max_pairs_per_request) {
    return absl::ResourceExhaustedError(
        absl::StrCat("series: ", pairs, " sample-frequency pairs is over the limit of ",
                     limits.max_pairs_per_request, " per request"));
  }
  if (out.false_alarm) {
    RETURN_IF_ERROR(periodogram::ValidateFalseAlarm(out));
    if (out.false_alarm->method == periodogram::FalseAlarmMethod::kBootstrap) {
      RETURN_IF_ERROR(AddBootstrapSeries(&out, limits, &pairs));
    }
  }
  RETURN_IF_ERROR(LeaseOutputsAndResamplings(out, power_bytes, &budget));
  if (leases != nullptr) *leases = std::move(budget.leases);
  // Power bytes plus the per-result fields (tensor header, grid, peak: < 128 bytes each; 48
  // per top-k peak; 16 per false-alarm value).
  output_bytes += (128 + 48 * static_cast<int64_t>(out.top_k)) * out.user_series;
  if (out.false_alarm) {
    output_bytes += 16 * out.user_series *
                    static_cast<int64_t>(out.false_alarm->probabilities.size() +
                                         out.false_alarm->powers.size());
  }
  if (output_bytes > limits.max_response_bytes - (int64_t{1} << 20)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("series: the response would hold ", output_bytes,
                     " bytes of power, over the limit of ", limits.max_response_bytes));
  }
  return out;
}

}  // namespace gpucompute
