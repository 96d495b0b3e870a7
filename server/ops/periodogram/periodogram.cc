// Periodogram semantics shared by every backend: grids, host preparation, peaks.
#include "server/ops/periodogram/periodogram.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpucompute::periodogram {

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

namespace {

// The host passes over a series' samples run once per series on the thread that launches its
// batch (a GPU's poller), so they are written for throughput: sums and extrema in four
// independent partial results (one chain of dependent additions runs at its latency, ~4 cycles
// a sample), and the inverse variances 1 / dy^2 computed a block at a time in a loop the
// compiler vectorises (a division per sample inside the sums ran at the divider's pace).
constexpr size_t kBlock = 256;

// The sum over j < count of term(j), as four interleaved partial sums.
template <typename Term>
double Sum4(size_t count, Term term) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t j = 0;
  for (; j + 4 <= count; j += 4) {
    s0 += term(j);
    s1 += term(j + 1);
    s2 += term(j + 2);
    s3 += term(j + 3);
  }
  for (; j < count; ++j) s0 += term(j);
  return (s0 + s1) + (s2 + s3);
}

// Calls visit(first, w, count) for consecutive blocks of samples, with w the block's weights
// 1 / dy^2 (null without dy: every weight 1).
template <typename Visit>
void ForEachWeightBlock(const SeriesSpec& series, Visit visit) {
  const size_t n = series.t.size();
  double w[kBlock];
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t count = std::min(kBlock, n - first);
    if (series.dy.empty()) {
      visit(first, static_cast<const double*>(nullptr), count);
      continue;
    }
    const double* dy = series.dy.data() + first;
    for (size_t j = 0; j < count; ++j) w[j] = 1.0 / (dy[j] * dy[j]);
    visit(first, static_cast<const double*>(w), count);
  }
}

// The least and greatest of `t` (not empty), four partial extrema at a time.
std::pair<double, double> Extent(const std::vector<double>& t) {
  double lo0 = t[0], lo1 = t[0], lo2 = t[0], lo3 = t[0];
  double hi0 = t[0], hi1 = t[0], hi2 = t[0], hi3 = t[0];
  size_t i = 0;
  for (; i + 4 <= t.size(); i += 4) {
    lo0 = std::min(lo0, t[i]);
    lo1 = std::min(lo1, t[i + 1]);
    lo2 = std::min(lo2, t[i + 2]);
    lo3 = std::min(lo3, t[i + 3]);
    hi0 = std::max(hi0, t[i]);
    hi1 = std::max(hi1, t[i + 1]);
    hi2 = std::max(hi2, t[i + 2]);
    hi3 = std::max(hi3, t[i + 3]);
  }
  for (; i < t.size(); ++i) {
    lo0 = std::min(lo0, t[i]);
    hi0 = std::max(hi0, t[i]);
  }
  return {std::min(std::min(lo0, lo1), std::min(lo2, lo3)), std::max(std::max(hi0, hi1), std::max(hi2, hi3))};
}

// The sample of `t` nearest `mid`, the first of equals: four lanes, each the first nearest of
// its samples (i, i + 4, ...), then the nearest lane, the lowest index among equals.
double NearestSample(const std::vector<double>& t, double mid) {
  struct Lane {
    double distance;
    size_t index;
    void Keep(double d, size_t i) {
      const bool nearer = d < distance;
      distance = nearer ? d : distance;
      index = nearer ? i : index;
    }
  };
  const double d0 = std::abs(t[0] - mid);
  Lane l0{d0, 0}, l1{d0, 0}, l2{d0, 0}, l3{d0, 0};
  size_t i = 0;
  for (; i + 4 <= t.size(); i += 4) {
    l0.Keep(std::abs(t[i] - mid), i);
    l1.Keep(std::abs(t[i + 1] - mid), i + 1);
    l2.Keep(std::abs(t[i + 2] - mid), i + 2);
    l3.Keep(std::abs(t[i + 3] - mid), i + 3);
  }
  for (; i < t.size(); ++i) l0.Keep(std::abs(t[i] - mid), i);
  Lane best = l0;
  for (const Lane& l : {l1, l2, l3}) {
    if (l.distance < best.distance || (l.distance == best.distance && l.index < best.index)) best = l;
  }
  return t[best.index];
}

}  // namespace

SeriesMoments MomentsOf(const SeriesSpec& series) {
  return series.moments ? *series.moments : ComputeMoments(series);
}

SeriesMoments ComputeMoments(const SeriesSpec& series) {
  SeriesMoments m;
  const size_t n = series.t.size();
  if (n == 0) return m;
  // Time origin: the sample nearest the middle of the span. |t| stays at most about half the
  // baseline, and at frequencies where the phases cluster (low frequencies, or aliases of a
  // regular cadence) they cluster near 0, which the float32 kernel's shifted sums rely on.
  const auto [t_min, t_max] = Extent(series.t);
  m.t_ref = NearestSample(series.t, 0.5 * (t_min + t_max));
  m.t_absmax = std::max(t_max - m.t_ref, m.t_ref - t_min);
  // Weighted sums: sum w, sum w y, then sum w (y - mean)^2.
  const double* y = series.y.data();
  double w_sum = 0, wy_sum = 0;
  ForEachWeightBlock(series, [&](size_t first, const double* w, size_t count) {
    const double* yb = y + first;
    if (w == nullptr) {
      wy_sum += Sum4(count, [&](size_t j) { return yb[j]; });
    } else {
      w_sum += Sum4(count, [&](size_t j) { return w[j]; });
      wy_sum += Sum4(count, [&](size_t j) { return w[j] * yb[j]; });
    }
  });
  m.inv_var_sum = series.dy.empty() ? static_cast<double>(n) : w_sum;
  if (series.fit_mean || series.center_data) m.y_mean = wy_sum / m.inv_var_sum;
  double yy = 0;
  ForEachWeightBlock(series, [&](size_t first, const double* w, size_t count) {
    const double* yb = y + first;
    const double mean = m.y_mean;
    if (w == nullptr) {
      yy += Sum4(count, [&](size_t j) { return (yb[j] - mean) * (yb[j] - mean); });
    } else {
      yy += Sum4(count, [&](size_t j) { return w[j] * (yb[j] - mean) * (yb[j] - mean); });
    }
  });
  m.yy = yy / m.inv_var_sum;
  return m;
}

template <typename T>
void WritePrepared(const SeriesSpec& series, const SeriesMoments& m, double* t, T* w, T* wy) {
  const size_t n = series.t.size();
  const double inv = 1.0 / m.inv_var_sum;
  for (size_t i = 0; i < n; ++i) {  // vectorised: no sums here
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
  const SeriesMoments m = MomentsOf(series);
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

void FindPeak(ElementType dtype, const Grid& grid, SeriesPower* out) {
  if (dtype == ElementType::kFloat32) {
    FindPeak(reinterpret_cast<const float*>(out->power.data()), grid, out);
  } else {
    FindPeak(reinterpret_cast<const double*>(out->power.data()), grid, out);
  }
}

}  // namespace gpucompute::periodogram
