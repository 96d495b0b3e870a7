// PeriodogramRequestBuilder: assembles a gpucompute.v1.PeriodogramRequest from host vectors,
// and helpers for frequency grids and for reading results back.
//
//   PeriodogramRequestBuilder builder;
//   builder.AddSeries(t, y).AddSeries(t2, y2, dy2)
//          .SetGrid(AutoGrid({.samples_per_peak = 10}))
//          .SetDType(v1::FLOAT32);
//   ASSIGN_OR_RETURN(v1::PeriodogramRequest request, builder.Build());
//
// Units: frequencies are in cycles per unit of t. Series data is sent as float64 by default
// (lossless; the request's dtype selects the compute and output precision on the server).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::client {

// Astropy's LombScargle.autofrequency parameters; unset fields take the server's defaults
// (samples_per_peak 5, nyquist_factor 5, minimum df/2, maximum from the Nyquist factor).
struct AutoGridOptions {
  std::optional<double> samples_per_peak;
  std::optional<double> nyquist_factor;
  std::optional<double> minimum_frequency;
  std::optional<double> maximum_frequency;
};

// f_k = f0 + k * df, k = 0 .. n-1.
v1::FrequencyGrid UniformGrid(double f0, double df, int64_t n);
// n frequencies evenly spaced from fmin to fmax inclusive (n >= 2; n == 1 yields just fmin).
// INVALID_ARGUMENT unless 0 < fmin, fmin <= fmax, n >= 1, all finite (and fmin < fmax if n > 1).
absl::StatusOr<v1::FrequencyGrid> RangeGrid(double fmin, double fmax, int64_t n);
// An explicit list, sent as a 1-D float64 tensor.
v1::FrequencyGrid ExplicitGrid(absl::Span<const double> frequencies);
v1::FrequencyGrid AutoGrid(const AutoGridOptions& options = {});

// Normalization / DType names as the CLI spells them ("standard", "model", "log", "psd";
// "float32", "float64"). INVALID_ARGUMENT for anything else.
absl::StatusOr<v1::Normalization> ParseNormalization(absl::string_view name);
absl::string_view NormalizationName(v1::Normalization normalization);
absl::StatusOr<v1::DType> ParseComputeDType(absl::string_view name);

// The frequencies a result's power values belong to: from `result.grid` when set (uniform or
// automatic grids), else `explicit_frequencies` (the list the request sent). INVALID_ARGUMENT
// when neither describes the result, or their size differs from `power_size`.
absl::StatusOr<std::vector<double>> ResultFrequencies(
    const v1::SeriesResult& result, int64_t power_size,
    absl::Span<const double> explicit_frequencies = {});

// Everything of one series result, decoded: frequency[i] belongs to power[i].
// A result whose power was discarded (OutputPlacement.discard) has frequencies and an empty
// power.
struct DecodedSeriesResult {
  std::vector<double> frequency;
  std::vector<double> power;
  double peak_frequency = 0;
  double peak_power = 0;
  int64_t peak_index = 0;
};
absl::StatusOr<DecodedSeriesResult> DecodeSeriesResult(
    const v1::SeriesResult& result, absl::Span<const double> explicit_frequencies = {});

class PeriodogramRequestBuilder {
 public:
  // Adds one series; `dy` empty means no measurement errors. Sizes are checked by Build().
  PeriodogramRequestBuilder& AddSeries(absl::Span<const double> t, absl::Span<const double> y,
                                       absl::Span<const double> dy = {});
  // As above, with a per-series grid that overrides the request's.
  PeriodogramRequestBuilder& AddSeries(absl::Span<const double> t, absl::Span<const double> y,
                                       absl::Span<const double> dy,
                                       const v1::FrequencyGrid& grid);

  // The request-wide grid; without one the server uses AutoGrid defaults per series.
  PeriodogramRequestBuilder& SetGrid(const v1::FrequencyGrid& grid);
  PeriodogramRequestBuilder& SetNormalization(v1::Normalization normalization);
  // Compute and output precision: FLOAT64 (default) or FLOAT32.
  PeriodogramRequestBuilder& SetDType(v1::DType dtype);
  PeriodogramRequestBuilder& SetFitMean(bool fit_mean);
  PeriodogramRequestBuilder& SetCenterData(bool center_data);
  // The dtype t, y and dy travel in: FLOAT64 (default) or FLOAT32 (halves the bytes; rounds).
  PeriodogramRequestBuilder& SetSeriesDType(v1::DType dtype);

  int series_count() const { return static_cast<int>(series_.size()); }

  // INVALID_ARGUMENT (naming the series) when t and y differ in length, dy is neither empty
  // nor as long as t, or a dtype is not float32/float64. The server checks everything else.
  // Two or more series without grids of their own, all or none with dy, go packed
  // (PeriodogramRequest.packed_series: three tensors, not a message per series); the results
  // and the server's errors are the same, series numbered as added.
  absl::StatusOr<v1::PeriodogramRequest> Build() const;

 private:
  bool Packable() const;
  absl::StatusOr<v1::PackedSeries> Packed() const;

  struct SeriesData {
    std::vector<double> t, y, dy;
    std::optional<v1::FrequencyGrid> grid;
  };
  std::vector<SeriesData> series_;
  std::optional<v1::FrequencyGrid> grid_;
  v1::Normalization normalization_ = v1::NORMALIZATION_STANDARD;
  v1::DType dtype_ = v1::FLOAT64;
  v1::DType series_dtype_ = v1::FLOAT64;
  std::optional<bool> fit_mean_;
  std::optional<bool> center_data_;
};

}  // namespace gpucompute::client
