// What a periodogram request asks for beyond the power: top-k peaks, false-alarm
// probabilities and best-fit models (see periodogram.h: TopPeaks, FinishResults).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/parallel_for.h"
#include "server/ops/periodogram/false_alarm.h"
#include "server/ops/periodogram/model.h"
#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {
namespace {

// The k highest local maxima in one pass, kept in a heap of at most k whose top is the lowest
// kept (a survey's noisy power has a local maximum every few frequencies: collecting them all
// would allocate and sort millions).
template <typename T>
std::vector<Peak> TopPeaksTyped(const T* power, const Grid& grid, int k) {
  const int64_t n = grid.size();
  std::vector<Peak> kept;
  if (k <= 0) return kept;
  kept.reserve(static_cast<size_t>(std::min<int64_t>(k, n)));
  auto higher = [](const Peak& a, const Peak& b) {
    return a.power > b.power || (a.power == b.power && a.index < b.index);
  };
  // Only a value above the lowest kept can enter (once k are kept; a later equal one loses
  // the tie): a comparison per value, the neighbours looked at for those few. NaN never
  // passes, and a neighbour that is NaN does not count (the nearest non-NaN one does); a
  // plateau reports its first index.
  bool full = false;
  double threshold = 0;  // the lowest kept power, once full
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(power[i]);
    if (full ? !(v > threshold) : std::isnan(v)) continue;
    int64_t left = i - 1, right = i + 1;
    while (left >= 0 && std::isnan(power[left])) --left;
    while (right < n && std::isnan(power[right])) ++right;
    if ((left >= 0 && !(v > power[left])) || (right < n && !(v >= power[right]))) continue;
    const Peak candidate{i, 0, v, 0};
    if (kept.size() < static_cast<size_t>(k)) {
      kept.push_back(candidate);
      std::push_heap(kept.begin(), kept.end(), higher);
    } else {
      std::pop_heap(kept.begin(), kept.end(), higher);
      kept.back() = candidate;
      std::push_heap(kept.begin(), kept.end(), higher);
    }
    full = kept.size() == static_cast<size_t>(k);
    if (full) threshold = kept.front().power;
  }
  std::sort_heap(kept.begin(), kept.end(), higher);  // highest first
  for (Peak& peak : kept) peak.frequency = grid.frequency(peak.index);
  return kept;
}

}  // namespace

std::vector<Peak> TopPeaks(ElementType dtype, const std::string& power, const Grid& grid, int k) {
  if (dtype == ElementType::kFloat32) {
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
  // Without power (discarded, never copied back) the backend found the peaks.
  if (request.top_k > 0 && !r.power.empty()) {
    r.peaks = TopPeaks(request.dtype, r.power, s.grid, request.top_k);
  }
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

absl::StatusOr<std::vector<std::vector<SeriesPower>>> SplitByRequest(const Batch& batch,
                                                                     std::vector<SeriesPower> all) {
  if (static_cast<int64_t>(all.size()) != batch.series_count()) {
    return absl::InternalError(absl::StrCat("periodogram batch: ", all.size(), " results for ",
                                            batch.series_count(), " series"));
  }
  std::vector<std::vector<SeriesPower>> per_request;
  per_request.reserve(batch.requests.size());
  size_t next = 0;
  for (const auto& r : batch.requests) {
    std::vector<SeriesPower> mine;
    mine.reserve(r->series.size());
    for (size_t i = 0; i < r->series.size(); ++i) mine.push_back(std::move(all[next + i]));
    next += r->series.size();
    per_request.push_back(std::move(mine));
  }
  return per_request;
}

}  // namespace gpucompute::periodogram
