// EncodePeriodogramColumns (see periodogram_columns.h).
#include "server/service/periodogram_columns.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

namespace gpucompute {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An inline tensor of `shape` holding `values` (row-major, little-endian as on the wire).
template <typename T>
void SetColumn(v1::DType dtype, std::initializer_list<int64_t> shape, const std::vector<T>& values,
               v1::Tensor* out) {
  out->set_dtype(dtype);
  for (int64_t d : shape) out->add_shape(d);
  out->set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

}  // namespace

void EncodePeriodogramColumns(const periodogram::Request& request,
                              const std::vector<periodogram::SeriesPower>& results,
                              v1::PeriodogramColumns* out) {
  const int64_t n = static_cast<int64_t>(results.size());
  const int64_t k = request.top_k;
  std::vector<double> peak_frequency(n), peak_power(n), grid(3 * n, kNaN);
  std::vector<int64_t> peak_index(n);
  std::vector<int32_t> method(n);
  std::vector<double> peaks_frequency(n * k, kNaN), peaks_power(n * k, kNaN), peaks_fap(n * k, kNaN);
  std::vector<int64_t> peaks_index(n * k, -1);
  for (int64_t i = 0; i < n; ++i) {
    const periodogram::SeriesPower& p = results[i];
    const periodogram::SeriesSpec& s = request.series[i];
    peak_frequency[i] = p.peak_frequency;
    peak_power[i] = p.peak_power;
    peak_index[i] = p.peak_index;
    method[i] = s.method == periodogram::Method::kFast ? v1::PERIODOGRAM_METHOD_FAST
                                                       : v1::PERIODOGRAM_METHOD_DIRECT;
    if (s.grid.uniform) {
      grid[3 * i] = s.grid.uniform->f0;
      grid[3 * i + 1] = s.grid.uniform->df;
      grid[3 * i + 2] = static_cast<double>(s.grid.uniform->n);
    }
    for (size_t j = 0; j < p.peaks.size() && static_cast<int64_t>(j) < k; ++j) {
      const periodogram::Peak& peak = p.peaks[j];
      peaks_frequency[i * k + j] = peak.frequency;
      peaks_power[i * k + j] = peak.power;
      peaks_index[i * k + j] = peak.index;
      peaks_fap[i * k + j] = peak.false_alarm_probability;
    }
  }
  SetColumn(v1::FLOAT64, {n}, peak_frequency, out->mutable_peak_frequency());
  SetColumn(v1::FLOAT64, {n}, peak_power, out->mutable_peak_power());
  SetColumn(v1::INT64, {n}, peak_index, out->mutable_peak_index());
  SetColumn(v1::INT32, {n}, method, out->mutable_method());
  SetColumn(v1::FLOAT64, {n, 3}, grid, out->mutable_grid());
  if (k > 0) {
    SetColumn(v1::FLOAT64, {n, k}, peaks_frequency, out->mutable_peaks_frequency());
    SetColumn(v1::FLOAT64, {n, k}, peaks_power, out->mutable_peaks_power());
    SetColumn(v1::INT64, {n, k}, peaks_index, out->mutable_peaks_index());
    SetColumn(v1::FLOAT64, {n, k}, peaks_fap, out->mutable_peaks_false_alarm_probability());
  }
  if (!request.false_alarm) return;
  const int64_t powers = static_cast<int64_t>(request.false_alarm->powers.size());
  const int64_t levels = static_cast<int64_t>(request.false_alarm->probabilities.size());
  std::vector<double> peak_probability(n), probabilities(n * powers), level_values(n * levels);
  for (int64_t i = 0; i < n; ++i) {
    if (!results[i].false_alarm) continue;
    const periodogram::FalseAlarmResult& f = *results[i].false_alarm;
    peak_probability[i] = f.peak_probability;
    for (int64_t j = 0; j < powers; ++j) probabilities[i * powers + j] = f.probabilities[j];
    for (int64_t j = 0; j < levels; ++j) level_values[i * levels + j] = f.levels[j];
  }
  SetColumn(v1::FLOAT64, {n}, peak_probability, out->mutable_false_alarm_peak_probability());
  SetColumn(v1::FLOAT64, {n, powers}, probabilities, out->mutable_false_alarm_probabilities());
  SetColumn(v1::FLOAT64, {n, levels}, level_values, out->mutable_false_alarm_levels());
}

}  // namespace gpucompute
