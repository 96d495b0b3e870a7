// Periodogram semantics shared by every backend: grids, host preparation, peaks.
#include "server/ops/periodogram/periodogram.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpucompute::periodogram {

const char* ComputeTypeName(ComputeType t) {
  return t == ComputeType::kFloat32 ? "float32" : "float64";
}

const char* MethodName(Method m) { return m == Method::kFast ? "fast" : "direct"; }

absl::StatusOr<UniformGrid> AutoFrequency(const std::vector<double>& t,
                                          const AutoGridParams& params) {
  if (t.empty()) return absl::InvalidArgumentError("autofrequency needs at least one sample");
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  const double baseline = *hi - *lo;
  if (!(baseline > 0)) {
    return absl::InvalidArgumentError(
        "automatic frequency grid needs a baseline > 0 (at least two distinct times)");
  }
  UniformGrid grid;
  grid.df = 1.0 / baseline / params.samples_per_peak;
  if (!std::isfinite(grid.df) || !(grid.df > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "automatic frequency grid step 1 / (baseline * samples_per_peak) is not a finite "
        "positive number (baseline ", baseline, ", samples_per_peak ", params.samples_per_peak, ")"));
  }
  grid.f0 = params.minimum_frequency.value_or(0.5 * grid.df);
  const double f_max = params.maximum_frequency.value_or(
      params.nyquist_factor * (0.5 * static_cast<double>(t.size()) / baseline));
  // Astropy: Nf = 1 + int(np.round((f_max - f_min) / df)); np.round rounds half to even, as
  // nearbyint does in the default rounding mode.
  const double steps = std::nearbyint((f_max - grid.f0) / grid.df);
  if (!std::isfinite(steps) || steps < 0 || steps > 1e15) {
    return absl::InvalidArgumentError(absl::StrCat(
        "automatic frequency grid is empty or unbounded: minimum ", grid.f0, ", maximum ", f_max,
        ", step ", grid.df));
  }
  grid.n = 1 + static_cast<int64_t>(steps);
  return grid;
}

int64_t Request::pairs() const {
  int64_t total = 0;
  for (const auto& s : series) total += static_cast<int64_t>(s.t.size()) * s.grid.size();
  return total;
}

int64_t Batch::series_count() const {
  int64_t total = 0;
  for (const auto& r : requests) total += static_cast<int64_t>(r->series.size());
  return total;
}

SeriesMoments ComputeMoments(const SeriesSpec& series) {
  SeriesMoments m;
  const size_t n = series.t.size();
  if (n == 0) return m;
  // Time origin: the sample nearest the middle of the span. |t| stays at most about half the
  // baseline, and at frequencies where the phases cluster (low frequencies, or aliases of a
  // regular cadence) they cluster near 0, which the float32 kernel's shifted sums rely on.
  const auto [lo, hi] = std::minmax_element(series.t.begin(), series.t.end());
  const double t_mid = 0.5 * (*lo + *hi);
  m.t_ref = series.t[0];
  for (double t : series.t) {
    if (std::abs(t - t_mid) < std::abs(m.t_ref - t_mid)) m.t_ref = t;
  }
  m.t_absmax = std::max(*hi - m.t_ref, m.t_ref - *lo);
  double wy_sum = 0;
  if (series.dy.empty()) {
    m.inv_var_sum = static_cast<double>(n);
    for (double y : series.y) wy_sum += y;
  } else {
    for (size_t i = 0; i < n; ++i) {
      const double w = 1.0 / (series.dy[i] * series.dy[i]);
      m.inv_var_sum += w;
      wy_sum += w * series.y[i];
    }
  }
  if (series.fit_mean || series.center_data) m.y_mean = wy_sum / m.inv_var_sum;
  double yy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = series.dy.empty() ? 1.0 : 1.0 / (series.dy[i] * series.dy[i]);
    const double y = series.y[i] - m.y_mean;
    yy += w * y * y;
  }
  m.yy = yy / m.inv_var_sum;
  return m;
}

template <typename T>
void WritePrepared(const SeriesSpec& series, const SeriesMoments& m, double* t, T* w, T* wy) {
  const size_t n = series.t.size();
  const double inv = 1.0 / m.inv_var_sum;
  for (size_t i = 0; i < n; ++i) {
    const double wi = series.dy.empty() ? inv : inv / (series.dy[i] * series.dy[i]);
    t[i] = series.t[i] - m.t_ref;
    w[i] = static_cast<T>(wi);
    wy[i] = static_cast<T>(wi * (series.y[i] - m.y_mean));
  }
}

template void WritePrepared<float>(const SeriesSpec&, const SeriesMoments&, double*, float*, float*);
template void WritePrepared<double>(const SeriesSpec&, const SeriesMoments&, double*, double*,
                                    double*);

std::vector<const SeriesSpec*> Batch::all_series() const {
  std::vector<const SeriesSpec*> out;
  out.reserve(static_cast<size_t>(series_count()));
  for (const auto& r : requests)
    for (const auto& s : r->series) out.push_back(&s);
  return out;
}

PreparedSeries Prepare(const SeriesSpec& series) {
  const SeriesMoments m = ComputeMoments(series);
  PreparedSeries p;
  const size_t n = series.t.size();
  p.t.resize(n);
  p.w.resize(n);
  p.wy.resize(n);
  WritePrepared<double>(series, m, p.t.data(), p.w.data(), p.wy.data());
  p.yy = m.yy;
  p.psd_scale = 0.5 * m.inv_var_sum;
  return p;
}

template <typename T>
void FindPeak(const T* power, const Grid& grid, SeriesPower* out) {
  const int64_t n = grid.size();
  int64_t best = -1;
  for (int64_t k = 0; k < n; ++k) {
    if (std::isnan(power[k])) continue;
    if (best < 0 || power[k] > power[best]) best = k;
  }
  out->peak_index = best < 0 ? 0 : best;
  out->peak_frequency = n > 0 ? grid.frequency(out->peak_index) : 0;
  out->peak_power = best < 0 ? std::nan("") : static_cast<double>(power[best]);
}

template void FindPeak<float>(const float*, const Grid&, SeriesPower*);
template void FindPeak<double>(const double*, const Grid&, SeriesPower*);

void FindPeak(ComputeType dtype, const Grid& grid, SeriesPower* out) {
  if (dtype == ComputeType::kFloat32) {
    FindPeak(reinterpret_cast<const float*>(out->power.data()), grid, out);
  } else {
    FindPeak(reinterpret_cast<const double*>(out->power.data()), grid, out);
  }
}

}  // namespace gpucompute::periodogram
