// PeriodogramRequestBuilder and the grid/result helpers.
#include "client/cpp/periodogram_request_builder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/tensor_util.h"
#include "common/status_macros.h"

namespace gpucompute::client {

v1::FrequencyGrid UniformGrid(double f0, double df, int64_t n) {
  v1::FrequencyGrid grid;
  v1::UniformGrid* uniform = grid.mutable_uniform();
  uniform->set_f0(f0);
  uniform->set_df(df);
  uniform->set_n(n);
  return grid;
}

absl::StatusOr<v1::FrequencyGrid> RangeGrid(double fmin, double fmax, int64_t n) {
  if (!std::isfinite(fmin) || !std::isfinite(fmax) || fmin <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("frequency range [", fmin, ", ", fmax, "] must be finite and positive"));
  }
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("need n >= 1 frequencies, got ", n));
  if (n == 1) return UniformGrid(fmin, fmax > fmin ? fmax - fmin : 1.0, 1);
  if (!(fmax > fmin)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fmax (", fmax, ") must exceed fmin (", fmin, ")"));
  }
  return UniformGrid(fmin, (fmax - fmin) / static_cast<double>(n - 1), n);
}

v1::FrequencyGrid ExplicitGrid(absl::Span<const double> frequencies) {
  v1::FrequencyGrid grid;
  *grid.mutable_explicit_frequencies() = MakeTensor(frequencies);
  return grid;
}

v1::FrequencyGrid AutoGrid(const AutoGridOptions& options) {
  v1::FrequencyGrid grid;
  v1::AutoGrid* a = grid.mutable_auto_();
  if (options.samples_per_peak) a->set_samples_per_peak(*options.samples_per_peak);
  if (options.nyquist_factor) a->set_nyquist_factor(*options.nyquist_factor);
  if (options.minimum_frequency) a->set_minimum_frequency(*options.minimum_frequency);
  if (options.maximum_frequency) a->set_maximum_frequency(*options.maximum_frequency);
  return grid;
}

absl::StatusOr<v1::Normalization> ParseNormalization(absl::string_view name) {
  if (name == "standard") return v1::NORMALIZATION_STANDARD;
  if (name == "model") return v1::NORMALIZATION_MODEL;
  if (name == "log") return v1::NORMALIZATION_LOG;
  if (name == "psd") return v1::NORMALIZATION_PSD;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown normalization '", name, "' (standard, model, log or psd)"));
}

absl::string_view NormalizationName(v1::Normalization normalization) {
  switch (normalization) {
    case v1::NORMALIZATION_STANDARD: return "standard";
    case v1::NORMALIZATION_MODEL: return "model";
    case v1::NORMALIZATION_LOG: return "log";
    case v1::NORMALIZATION_PSD: return "psd";
    default: return "unknown";
  }
}

absl::StatusOr<v1::DType> ParseComputeDType(absl::string_view name) {
  if (name == "float64" || name == "f8" || name == "double") return v1::FLOAT64;
  if (name == "float32" || name == "f4" || name == "float") return v1::FLOAT32;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "' (float32 or float64)"));
}

absl::StatusOr<std::vector<double>> ResultFrequencies(const v1::SeriesResult& result,
                                                      int64_t power_size,
                                                      absl::Span<const double> explicit_frequencies) {
  std::vector<double> frequencies;
  if (result.has_grid()) {
    const v1::UniformGrid& g = result.grid();
    if (g.n() != power_size) {
      return absl::InvalidArgumentError(absl::StrCat("result grid has ", g.n(),
                                                     " frequencies but power has ", power_size));
    }
    frequencies.resize(static_cast<size_t>(g.n()));
    for (int64_t k = 0; k < g.n(); ++k) frequencies[k] = g.f0() + static_cast<double>(k) * g.df();
    return frequencies;
  }
  if (static_cast<int64_t>(explicit_frequencies.size()) != power_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("result has no grid and the explicit frequency list has ",
                     explicit_frequencies.size(), " values for ", power_size, " powers"));
  }
  return std::vector<double>(explicit_frequencies.begin(), explicit_frequencies.end());
}

absl::StatusOr<DecodedSeriesResult> DecodeSeriesResult(
    const v1::SeriesResult& result, absl::Span<const double> explicit_frequencies) {
  DecodedSeriesResult out;
  const v1::Tensor& power = result.power();
  int64_t count = 0;
  if (power.payload_case() == v1::Tensor::PAYLOAD_NOT_SET && power.shape_size() == 1) {
    count = power.shape(0);  // discarded: the shape says how many there were
  } else {
    ASSIGN_OR_RETURN(out.power, TensorToDoubles(power));
    count = static_cast<int64_t>(out.power.size());
  }
  ASSIGN_OR_RETURN(out.frequency, ResultFrequencies(result, count, explicit_frequencies));
  out.peak_frequency = result.peak_frequency();
  out.peak_power = result.peak_power();
  out.peak_index = result.peak_index();
  return out;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::AddSeries(absl::Span<const double> t,
                                                                absl::Span<const double> y,
                                                                absl::Span<const double> dy) {
  series_.push_back(SeriesData{std::vector<double>(t.begin(), t.end()),
                               std::vector<double>(y.begin(), y.end()),
                               std::vector<double>(dy.begin(), dy.end()), std::nullopt});
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::AddSeries(absl::Span<const double> t,
                                                                absl::Span<const double> y,
                                                                absl::Span<const double> dy,
                                                                const v1::FrequencyGrid& grid) {
  AddSeries(t, y, dy);
  series_.back().grid = grid;
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::SetGrid(const v1::FrequencyGrid& grid) {
  grid_ = grid;
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::SetNormalization(
    v1::Normalization normalization) {
  normalization_ = normalization;
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::SetDType(v1::DType dtype) {
  dtype_ = dtype;
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::SetFitMean(bool fit_mean) {
  fit_mean_ = fit_mean;
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::SetCenterData(bool center_data) {
  center_data_ = center_data;
  return *this;
}

PeriodogramRequestBuilder& PeriodogramRequestBuilder::SetSeriesDType(v1::DType dtype) {
  series_dtype_ = dtype;
  return *this;
}

bool PeriodogramRequestBuilder::Packable() const {
  if (series_.size() < 2) return false;
  const bool with_dy = !series_[0].dy.empty();
  return std::all_of(series_.begin(), series_.end(), [&](const SeriesData& s) {
    return !s.grid && s.dy.empty() != with_dy;
  });
}

absl::StatusOr<v1::PackedSeries> PeriodogramRequestBuilder::Packed() const {
  std::vector<double> t, y, dy;
  v1::PackedSeries packed;
  for (const SeriesData& s : series_) {
    t.insert(t.end(), s.t.begin(), s.t.end());
    y.insert(y.end(), s.y.begin(), s.y.end());
    dy.insert(dy.end(), s.dy.begin(), s.dy.end());
    packed.add_lengths(static_cast<int64_t>(s.t.size()));
  }
  ASSIGN_OR_RETURN(*packed.mutable_t(), MakeTensor(t, series_dtype_));
  ASSIGN_OR_RETURN(*packed.mutable_y(), MakeTensor(y, series_dtype_));
  if (!dy.empty()) {
    ASSIGN_OR_RETURN(*packed.mutable_dy(), MakeTensor(dy, series_dtype_));
  }
  return packed;
}

absl::StatusOr<v1::PeriodogramRequest> PeriodogramRequestBuilder::Build() const {
  if (dtype_ != v1::FLOAT64 && dtype_ != v1::FLOAT32) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype must be float32 or float64, not ", DTypeName(dtype_)));
  }
  v1::PeriodogramRequest request;
  for (size_t i = 0; i < series_.size(); ++i) {
    const SeriesData& s = series_[i];
    if (s.t.size() != s.y.size()) {
      return absl::InvalidArgumentError(absl::StrCat("series[", i, "]: t has ", s.t.size(),
                                                     " values but y has ", s.y.size()));
    }
    if (!s.dy.empty() && s.dy.size() != s.t.size()) {
      return absl::InvalidArgumentError(absl::StrCat("series[", i, "]: dy has ", s.dy.size(),
                                                     " values but t has ", s.t.size()));
    }
  }
  if (Packable()) {
    ASSIGN_OR_RETURN(*request.mutable_packed_series(), Packed());
  }
  for (size_t i = 0; i < series_.size() && !request.has_packed_series(); ++i) {
    const SeriesData& s = series_[i];
    v1::Series* series = request.add_series();
    ASSIGN_OR_RETURN(*series->mutable_t(), MakeTensor(s.t, series_dtype_));
    ASSIGN_OR_RETURN(*series->mutable_y(), MakeTensor(s.y, series_dtype_));
    if (!s.dy.empty()) {
      ASSIGN_OR_RETURN(*series->mutable_dy(), MakeTensor(s.dy, series_dtype_));
    }
    if (s.grid) *series->mutable_frequency() = *s.grid;
  }
  if (grid_) *request.mutable_frequency() = *grid_;
  if (fit_mean_) request.set_fit_mean(*fit_mean_);
  if (center_data_) request.set_center_data(*center_data_);
  request.set_normalization(normalization_);
  request.set_dtype(dtype_);
  return request;
}

}  // namespace gpucompute::client
