// False-alarm probabilities of periodogram peaks under the null hypothesis (pure Gaussian
// noise), by Astropy's methods for nterms = 1 (astropy.timeseries LombScargle
// false_alarm_probability / false_alarm_level, after Baluev 2008, MNRAS 385, 1279):
//   single:    Table 1 of Baluev 2008, with N - 3 degrees of freedom;
//   naive:     1 - (1 - single)^N_eff with N_eff = fmax * (max t - min t);
//   davies:    single + tau(z), the Davies upper bound;
//   baluev:    1 - exp(-tau) + single * exp(-tau), the alias-free approximation (default);
//   bootstrap: the share of bootstrap maxima >= z; y (and dy) resampled with replacement at
//              the same times, each periodogram on Astropy's automatic grid up to fmax.
// fmax is the largest frequency of the series' grid (Astropy takes it from autofrequency's
// arguments, which for an automatic grid is the same number). Levels invert these: in
// closed form for single/naive, by a bracketed root search from the naive level (Astropy:
// scipy.optimize.root from the same start) for davies/baluev, by the order statistic for
// bootstrap.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/ops/periodogram/periodogram.h"

namespace gpucompute::periodogram {

// What the analytic methods need of a series.
struct NullHypothesis {
  int64_t n = 0;              // samples
  double fmax = 0;            // largest frequency of the grid
  double baseline = 0;        // max t - min t
  double t_variance = 0;      // weighted variance of t (weights dy^-2)
  Normalization normalization = Normalization::kStandard;
};
NullHypothesis MakeNullHypothesis(const SeriesSpec& series);

// Single-frequency probability of power >= z, and its inverse.
double FapSingle(double z, int64_t n, Normalization normalization);
double InverseFapSingle(double p, int64_t n, Normalization normalization);

// The false-alarm probability of a highest peak `z`, and the level whose probability is `p`.
// `bootstrap_maxima`: the sorted peak powers of the bootstrap periodograms (bootstrap only).
double FalseAlarmProbability(FalseAlarmMethod method, double z, const NullHypothesis& null,
                             const std::vector<double>& bootstrap_maxima);
double FalseAlarmLevel(FalseAlarmMethod method, double p, const NullHypothesis& null,
                       const std::vector<double>& bootstrap_maxima);

// Checks that the request's series allow false-alarm probabilities (nterms = 1 and fit_mean
// or center_data: Astropy's rule) and that the probabilities lie in [0, 1].
absl::Status ValidateFalseAlarm(const Request& request);

// Astropy's grid for the bootstrap periodograms of `series`: the automatic grid with its
// default samples_per_peak, up to the series' fmax.
absl::StatusOr<UniformGrid> BootstrapGrid(const SeriesSpec& series);

// Appends spec.n_bootstraps resampled copies of each of the caller's series to the request
// (SeriesSpec::bootstrap_of set), deterministic in spec.seed. `choose_method` resolves each
// copy's method from its grid, as the request's own method was. The caller has checked
// BootstrapGrid and the sizes against its limits.
void AppendBootstrapSeries(Request* request,
                           const std::function<Method(const SeriesSpec&)>& choose_method);

}  // namespace gpucompute::periodogram
