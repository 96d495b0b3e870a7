// False-alarm probabilities (see false_alarm.h).
#include "server/ops/periodogram/false_alarm.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"

namespace gpucompute::periodogram {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Astropy's _gamma: sqrt(2 / N) * Gamma(N / 2) / Gamma((N - 1) / 2).
double GammaRatio(double n) {
  return std::sqrt(2.0 / n) * std::exp(std::lgamma(0.5 * n) - std::lgamma(0.5 * (n - 1)));
}

// Astropy's tau_davies (Baluev 2008, Table 1), with dH = 1 and dK = 3.
double TauDavies(double z, const NullHypothesis& null) {
  const double nh = static_cast<double>(null.n - 1);
  const double nk = static_cast<double>(null.n - 3);
  const double w = null.fmax * std::sqrt(4 * kPi * null.t_variance);
  switch (null.normalization) {
    case Normalization::kPsd: return w * std::exp(-z) * std::sqrt(z);
    case Normalization::kModel:
      return GammaRatio(nk) * w * std::pow(1 + z, -0.5 * nk) * std::sqrt(0.5 * nk * z);
    case Normalization::kLog:
      return GammaRatio(nk) * w * std::exp(-0.5 * z * (nk - 0.5)) * std::sqrt(nk * std::sinh(0.5 * z));
    case Normalization::kStandard:
    default:
      return GammaRatio(nh) * w * std::pow(1 - z, 0.5 * (nk - 1)) * std::sqrt(0.5 * nh * z);
  }
}

double FapAnalytic(FalseAlarmMethod method, double z, const NullHypothesis& null) {
  const double single = FapSingle(z, null.n, null.normalization);
  switch (method) {
    case FalseAlarmMethod::kNaive: {
      const double n_eff = null.fmax * null.baseline;
      return -std::expm1(n_eff * std::log1p(-single));
    }
    case FalseAlarmMethod::kDavies: return single + TauDavies(z, null);
    case FalseAlarmMethod::kBaluev:
    default: {
      const double tau = TauDavies(z, null);
      return -std::expm1(-tau) + single * std::exp(-tau);
    }
  }
}

double NaiveLevel(double p, const NullHypothesis& null) {
  const double n_eff = null.fmax * null.baseline;
  const double single = -std::expm1(std::log(1 - p) / n_eff);
  return InverseFapSingle(single, null.n, null.normalization);
}

// Solves FapAnalytic(z) = p near the naive level z0: expands a bracket around z0 (the
// probabilities fall as z grows), then bisects it to the last bit.
double SolveLevel(FalseAlarmMethod method, double p, const NullHypothesis& null) {
  const double z_max = null.normalization == Normalization::kStandard
                           ? 1.0
                           : std::numeric_limits<double>::infinity();
  const double z0 = NaiveLevel(p, null);
  if (!std::isfinite(z0) && null.normalization != Normalization::kStandard) return z0;
  auto f = [&](double z) { return FapAnalytic(method, z, null) - p; };
  double lo = std::clamp(z0, 0.0, z_max), hi = lo;
  double step = std::max(1e-3, 0.1 * lo);
  for (int i = 0; i < 200 && !(f(lo) > 0); ++i) {
    hi = lo;
    lo = std::max(0.0, lo - step);
    step *= 2;
    if (lo == 0.0) break;
  }
  step = std::max(1e-3, 0.1 * hi);
  for (int i = 0; i < 200 && !(f(hi) < 0); ++i) {
    lo = std::max(lo, hi);
    hi = std::min(z_max, hi + step);
    step *= 2;
    if (hi == z_max) break;
  }
  if (!(f(lo) >= 0 && f(hi) <= 0)) return std::nan("");
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    (f(mid) > 0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

NullHypothesis MakeNullHypothesis(const SeriesSpec& series) {
  NullHypothesis null;
  null.n = static_cast<int64_t>(series.t.size());
  null.normalization = series.normalization;
  const Grid& g = series.grid;
  if (g.uniform) {
    null.fmax = g.uniform->f0 + static_cast<double>(g.uniform->n - 1) * g.uniform->df;
  } else {
    null.fmax = *std::max_element(g.explicit_frequencies.begin(), g.explicit_frequencies.end());
  }
  const auto [lo, hi] = std::minmax_element(series.t.begin(), series.t.end());
  null.baseline = *hi - *lo;
  // Weighted variance about the weighted mean (Astropy: mean(t^2) - mean(t)^2; the same
  // number, formed without the cancellation).
  double sw = 0, swt = 0;
  for (size_t i = 0; i < series.t.size(); ++i) {
    const double w = series.dy.empty() ? 1.0 : 1.0 / (series.dy[i] * series.dy[i]);
    sw += w;
    swt += w * series.t[i];
  }
  const double mean = swt / sw;
  double swd = 0;
  for (size_t i = 0; i < series.t.size(); ++i) {
    const double w = series.dy.empty() ? 1.0 : 1.0 / (series.dy[i] * series.dy[i]);
    swd += w * (series.t[i] - mean) * (series.t[i] - mean);
  }
  null.t_variance = swd / sw;
  return null;
}

double FapSingle(double z, int64_t n, Normalization normalization) {
  const double nk = static_cast<double>(n - 3);
  switch (normalization) {
    case Normalization::kPsd: return std::exp(-z);
    case Normalization::kModel: return std::pow(1 + z, -0.5 * nk);
    case Normalization::kLog: return std::exp(-0.5 * nk * z);
    case Normalization::kStandard:
    default: return std::pow(1 - z, 0.5 * nk);
  }
}

double InverseFapSingle(double p, int64_t n, Normalization normalization) {
  const double nk = static_cast<double>(n - 3);
  switch (normalization) {
    case Normalization::kPsd: return -std::log(p);
    case Normalization::kModel: return -1 + std::pow(p, -2 / nk);
    case Normalization::kLog: return -2 / nk * std::log(p);
    case Normalization::kStandard:
    default: return 1 - std::pow(p, 2 / nk);
  }
}

double FalseAlarmProbability(FalseAlarmMethod method, double z, const NullHypothesis& null,
                             const std::vector<double>& bootstrap_maxima) {
  if (method == FalseAlarmMethod::kBootstrap) {
    if (bootstrap_maxima.empty()) return std::nan("");
    // Astropy: 1 - searchsorted(maxima, z) / n, i.e. the share of maxima >= z.
    const auto below = std::lower_bound(bootstrap_maxima.begin(), bootstrap_maxima.end(), z);
    return 1.0 - static_cast<double>(below - bootstrap_maxima.begin()) /
                     static_cast<double>(bootstrap_maxima.size());
  }
  return FapAnalytic(method, z, null);
}

double FalseAlarmLevel(FalseAlarmMethod method, double p, const NullHypothesis& null,
                       const std::vector<double>& bootstrap_maxima) {
  switch (method) {
    case FalseAlarmMethod::kBootstrap: {
      if (bootstrap_maxima.empty()) return std::nan("");
      const int64_t n = static_cast<int64_t>(bootstrap_maxima.size());
      const int64_t i = std::clamp<int64_t>(
          static_cast<int64_t>(std::floor((1 - p) * static_cast<double>(n))), 0, n - 1);
      return bootstrap_maxima[i];
    }
    case FalseAlarmMethod::kNaive: return NaiveLevel(p, null);
    default: return SolveLevel(method, p, null);
  }
}

absl::Status ValidateFalseAlarm(const Request& request) {
  const FalseAlarmSpec& spec = *request.false_alarm;
  for (size_t i = 0; i < spec.probabilities.size(); ++i) {
    const double p = spec.probabilities[i];
    if (!(p >= 0 && p <= 1)) {  // Astropy takes both ends: the level of 1 is a power of
                                // probability 1, that of 0 the largest (bootstrap) or infinite
      return absl::InvalidArgumentError(absl::StrCat(
          "false_alarm.probabilities: each must be in [0, 1] (index ", i, " is ", p, ")"));
    }
  }
  for (size_t i = 0; i < spec.powers.size(); ++i) {
    if (std::isnan(spec.powers[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("false_alarm.powers: index ", i, " is NaN"));
    }
  }
  for (int64_t i = 0; i < request.user_series; ++i) {
    const SeriesSpec& s = request.series[i];
    if (s.nterms != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "false_alarm: false-alarm probabilities are defined for nterms = 1 only (got nterms ",
          s.nterms, "), as in Astropy"));
    }
    if (!s.fit_mean && !s.center_data) {
      return absl::InvalidArgumentError(
          "false_alarm: false-alarm probabilities need fit_mean or center_data (Astropy's rule)");
    }
    if (s.t.size() < 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "false_alarm: series[", i, "] has ", s.t.size(),
          " samples; false-alarm probabilities need at least 4 (N - 3 degrees of freedom)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<UniformGrid> BootstrapGrid(const SeriesSpec& series) {
  AutoGridParams params;  // Astropy's bootstrap: autopower(maximum_frequency=fmax)
  params.maximum_frequency = MakeNullHypothesis(series).fmax;
  return AutoFrequency(series.t, params);
}

void AppendBootstrapSeries(Request* request,
                           const std::function<Method(const SeriesSpec&)>& choose_method) {
  const FalseAlarmSpec& spec = *request->false_alarm;
  const int64_t user = request->user_series;
  request->series.reserve(static_cast<size_t>(user + user * spec.n_bootstraps));
  for (int64_t i = 0; i < user; ++i) {
    // One generator per series, so that a series' maxima do not depend on the others.
    std::mt19937_64 rng(spec.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1)));
    const SeriesSpec& parent = request->series[i];
    const UniformGrid grid = *BootstrapGrid(parent);
    const size_t n = parent.t.size();
    Method method = Method::kDirect;  // the same for every copy: same sizes, same grid
    for (int b = 0; b < spec.n_bootstraps; ++b) {
      SeriesSpec s;
      s.t = parent.t;
      s.y.resize(n);
      if (!parent.dy.empty()) s.dy.resize(n);
      for (size_t k = 0; k < n; ++k) {
        const size_t pick = static_cast<size_t>((static_cast<unsigned __int128>(rng()) * n) >> 64);
        s.y[k] = parent.y[pick];
        if (!parent.dy.empty()) s.dy[k] = parent.dy[pick];
      }
      s.grid.uniform = grid;
      s.normalization = parent.normalization;  // Astropy: LombScargle defaults otherwise
      s.fit_mean = true;
      s.center_data = true;
      s.nterms = 1;
      s.bootstrap_of = static_cast<int>(i);
      if (b == 0) method = choose_method(s);
      s.method = method;
      s.moments = ComputeMoments(s);
      request->series.push_back(std::move(s));
    }
  }
}

}  // namespace gpucompute::periodogram
