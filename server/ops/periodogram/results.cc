// What a periodogram request asks for beyond the power: top-k peaks, false-alarm
// probabilities and best-fit models (see periodogram.h: TopPeaks, FinishResults).
#include <algorithm>
#include <cmath>

#include "server/common/parallel_for.h"
#include "server/ops/periodogram/false_alarm.h"
#include "server/ops/periodogram/model.h"
#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {
namespace {

template <typename T>
std::vector<Peak> TopPeaksTyped(const T* power, const Grid& grid, int k) {
  const int64_t n = grid.size();
  std::vector<Peak> maxima;
  // Neighbours that are NaN do not count; a plateau reports its first index.
  int64_t prev = -1;  // the last non-NaN index before i
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(power[i])) continue;
    int64_t next = i + 1;
    while (next < n && std::isnan(power[next])) ++next;
    const bool left_ok = prev < 0 || power[i] > power[prev];
    const bool right_ok = next >= n || power[i] >= power[next];
    if (left_ok && right_ok) {
      maxima.push_back(Peak{i, grid.frequency(i), static_cast<double>(power[i]), 0});
    }
    prev = i;
  }
  auto higher = [](const Peak& a, const Peak& b) {
    return a.power > b.power || (a.power == b.power && a.index < b.index);
  };
  const size_t keep = std::min(maxima.size(), static_cast<size_t>(k));
  std::partial_sort(maxima.begin(), maxima.begin() + keep, maxima.end(), higher);
  maxima.resize(keep);
  return maxima;
}

}  // namespace

std::vector<Peak> TopPeaks(ComputeType dtype, const std::string& power, const Grid& grid, int k) {
  if (dtype == ComputeType::kFloat32) {
    return TopPeaksTyped(reinterpret_cast<const float*>(power.data()), grid, k);
  }
  return TopPeaksTyped(reinterpret_cast<const double*>(power.data()), grid, k);
}

namespace {

// Series i's top-k peaks, false-alarm values and model; `maxima`: its bootstrap maxima, sorted.
void FinishSeries(const Request& request, const std::vector<double>& maxima, SeriesPower* result,
                  int64_t i) {
  const SeriesSpec& s = request.series[i];
  SeriesPower& r = *result;
  if (request.top_k > 0) r.peaks = TopPeaks(request.dtype, r.power, s.grid, request.top_k);
  if (request.false_alarm) {
    const FalseAlarmSpec& spec = *request.false_alarm;
    const NullHypothesis null = MakeNullHypothesis(s);
    auto fap = [&](double z) { return FalseAlarmProbability(spec.method, z, null, maxima); };
    FalseAlarmResult f;
    f.peak_probability = fap(r.peak_power);
    for (double z : spec.powers) f.probabilities.push_back(fap(z));
    for (double p : spec.probabilities) {
      f.levels.push_back(FalseAlarmLevel(spec.method, p, null, maxima));
    }
    for (Peak& peak : r.peaks) peak.false_alarm_probability = fap(peak.power);
    r.false_alarm = std::move(f);
  }
  if (s.model) {
    const double f = s.model->frequency.value_or(r.peak_frequency);
    r.model = FitModel(s, f, s.model->t);
  }
}

}  // namespace

void FinishResults(const Request& request, std::vector<SeriesPower>* results) {
  const int64_t user = request.user_series;
  // Bootstrap maxima per caller's series, sorted (Astropy sorts them too).
  std::vector<std::vector<double>> maxima(static_cast<size_t>(user));
  for (size_t i = static_cast<size_t>(user); i < results->size(); ++i) {
    maxima[request.series[i].bootstrap_of].push_back((*results)[i].peak_power);
  }
  for (auto& m : maxima) std::sort(m.begin(), m.end());
  // Series by series on several threads: a survey's top-k scans read every power value (2,000
  // series of 6,600 frequencies: 13 M), tens of ms on one thread.
  int64_t powers = 0;
  for (int64_t i = 0; i < user; ++i) powers += request.series[i].grid.size();
  ParallelFor(user, powers, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) FinishSeries(request, maxima[i], &(*results)[i], i);
  }, /*min_cost_per_thread=*/int64_t{1} << 20);
  results->resize(static_cast<size_t>(user));
}

}  // namespace gpucompute::periodogram
