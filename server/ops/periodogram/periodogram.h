// The periodogram operation's semantics, shared by every backend: Astropy's LombScargle
// (floating mean, weights from dy, normalizations standard/model/log/psd, nterms >= 1 with
// the "chi2" semantics; see math/lombscargle_harmonic.cuh for nterms > 1), two ways of
// forming the sums (direct, or NUFFT on uniform grids: nufft.h), and the results built on
// the power: top-k peaks, false-alarm probabilities (false_alarm.h) and best-fit models
// (model.h).
//
// Conventions (the same as astropy.timeseries.LombScargle, method "slow"/"cython"):
//   w_i = dy_i^-2 / sum(dy^-2)            (dy absent: dy_i = 1)
//   y  <- y - sum(w y)                     if fit_mean or center_data
//   p(f) = v^T M^-1 v, the weighted least-squares power of a sinusoid at f, where with
//   c_i = cos(2 pi f t_i), s_i = sin(2 pi f t_i):
//     v = (sum w y c, sum w y s),  M = [[sum w c c, sum w c s], [sum w c s, sum w s s]]
//   and, with fit_mean, every sum is taken about the weighted means (M_hat = M - m m^T with
//   m = (sum w c, sum w s)). This equals Astropy's time-shift (tau) form exactly in exact
//   arithmetic: tau is the rotation that diagonalises M.
//   YY = sum w y^2;  standard p/YY, model p/(YY-p), log -log(1-p/YY), psd p * sum(dy^-2)/2.
// Frequencies are in cycles per unit of t. Time is re-centred on the sample nearest the middle
// of the series before any phase is formed (the power is invariant to a time shift), which
// keeps f*t small.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/element_type.h"

namespace gpucompute::periodogram {

enum class Normalization : int { kStandard = 0, kModel = 1, kLog = 2, kPsd = 3 };
// A periodogram computes in ElementType::kFloat32 or kFloat64 (the decoder refuses the others).

// f_k = f0 + k * df, k = 0 .. n-1.
struct UniformGrid {
  double f0 = 0;
  double df = 0;
  int64_t n = 0;
};

// A frequency grid: uniform (also what AutoGrid produces) or an explicit list.
struct Grid {
  std::optional<UniformGrid> uniform;
  std::vector<double> explicit_frequencies;  // used when `uniform` is unset

  int64_t size() const { return uniform ? uniform->n : static_cast<int64_t>(explicit_frequencies.size()); }
  double frequency(int64_t k) const {
    return uniform ? uniform->f0 + static_cast<double>(k) * uniform->df : explicit_frequencies[k];
  }
};

// Astropy's LombScargle.autofrequency parameters.
struct AutoGridParams {
  double samples_per_peak = 5;
  double nyquist_factor = 5;
  std::optional<double> minimum_frequency;
  std::optional<double> maximum_frequency;
};

// Astropy's autofrequency rule for sample times `t` (baseline = max - min). Fails with
// INVALID_ARGUMENT when the rule yields no valid grid (zero baseline, max <= min, ...).
absl::StatusOr<UniformGrid> AutoFrequency(const std::vector<double>& t, const AutoGridParams& params);

// How the sums over the samples are formed (the request's `auto` is resolved at decoding).
enum class Method { kDirect, kFast };
const char* MethodName(Method m);

// The best-fit model asked for a series (Astropy's model_parameters / model).
struct ModelSpec {
  std::optional<double> frequency;  // unset: the series' peak frequency
  std::vector<double> t;            // times at which to evaluate the model (may be empty)
};

// False-alarm options of a request (Astropy's false_alarm_probability / false_alarm_level).
enum class FalseAlarmMethod : int { kBaluev = 0, kDavies = 1, kNaive = 2, kBootstrap = 3 };
struct FalseAlarmSpec {
  FalseAlarmMethod method = FalseAlarmMethod::kBaluev;
  std::vector<double> probabilities;  // levels wanted at these probabilities
  std::vector<double> powers;         // probabilities wanted at these powers
  int n_bootstraps = 1000;
  uint64_t seed = 0;
};

// One validated series with its resolved grid and options.
// The per-series scalars of the preparation (a few passes over the samples, no allocation).
struct SeriesMoments {
  double t_ref = 0;          // the sample nearest the midpoint of [min t, max t]
  double t_absmax = 0;       // max |t - t_ref|
  double inv_var_sum = 0;    // sum(dy^-2) (n without dy)
  double y_mean = 0;         // weighted mean removed from y (0 unless fit_mean or center_data)
  double yy = 0;             // sum w (y - y_mean)^2, w normalised
};

struct SeriesSpec {
  std::vector<double> t;
  std::vector<double> y;
  std::vector<double> dy;  // empty: no measurement errors
  Grid grid;
  bool fit_mean = true;
  bool center_data = true;
  Normalization normalization = Normalization::kStandard;
  Method method = Method::kDirect;
  int nterms = 1;
  std::optional<ModelSpec> model;
  // A bootstrap resampling of series `bootstrap_of` of the same request (false alarm by
  // bootstrap): only its peak is used, so backends may skip returning its power.
  int bootstrap_of = -1;
  bool peak_only() const { return bootstrap_of >= 0; }
  // The caller discards the power (output_placement.discard): a backend may leave it where it
  // was computed and return only what the results are built from (peak, top-k peaks).
  bool power_discarded = false;
  // ComputeMoments(*this), set by whoever made the series once its samples and options are
  // final (the request's decoder: on the thread that received the call, so that the thread
  // launching its batch on a GPU need not make the passes); unset, backends compute it.
  std::optional<SeriesMoments> moments;
};

// One decoded request: all its series share the compute dtype. The caller's series come
// first; any bootstrap resamplings follow them.
struct Request {
  ElementType dtype = ElementType::kFloat64;
  std::vector<SeriesSpec> series;
  int64_t user_series = 0;  // series[0 .. user_series) are the caller's
  int top_k = 0;
  std::optional<FalseAlarmSpec> false_alarm;

  int64_t pairs() const;  // sum over series of samples x frequencies
};

// A batch of requests coalesced by the scheduler; all have the same dtype. Backends compute
// every series of every request, in order.
struct Batch {
  ElementType dtype = ElementType::kFloat64;
  std::vector<std::shared_ptr<const Request>> requests;
  // Optional; true once no caller waits any more (every deadline passed or call cancelled).
  // Backends that compute in pieces poll it and stop early (reporting DEADLINE_EXCEEDED).
  std::function<bool()> abandoned;

  int64_t series_count() const;
  // Every series of every request, in order (the order of the results).
  std::vector<const SeriesSpec*> all_series() const;
};

SeriesMoments ComputeMoments(const SeriesSpec& series);
// series.moments when set, else ComputeMoments(series).
SeriesMoments MomentsOf(const SeriesSpec& series);

// Writes, for every sample, t - t_ref, the normalised weight and w * (y - y_mean) into the
// caller's arrays (n elements each; T is float or double): straight into pinned staging on
// the CUDA path.
template <typename T>
void WritePrepared(const SeriesSpec& series, const SeriesMoments& m, double* t, T* w, T* wy);

// Everything a backend needs of one series besides its grid, computed once on the host.
struct PreparedSeries {
  std::vector<double> t;   // relative to the sample nearest the midpoint of [min t, max t]
  std::vector<double> w;   // normalised weights (sum 1)
  std::vector<double> wy;  // w * y, y centred when fit_mean or center_data
  double yy = 0;           // sum w y^2 (y as above)
  double psd_scale = 0;    // sum(dy^-2) / 2
};
PreparedSeries Prepare(const SeriesSpec& series);

// A local maximum of a series' power.
struct Peak {
  int64_t index = 0;
  double frequency = 0;
  double power = 0;
  double false_alarm_probability = 0;
};

struct FalseAlarmResult {
  double peak_probability = 0;
  std::vector<double> probabilities;  // of FalseAlarmSpec::powers
  std::vector<double> levels;         // of FalseAlarmSpec::probabilities
};

struct ModelResult {
  double frequency = 0;
  std::vector<double> parameters;
  double offset = 0;
  std::vector<double> y;  // at ModelSpec::t
};

// The result for one series: power in the request's dtype as raw little-endian bytes (moved
// into the response Tensor without a copy), the peak, and what FinishResults adds.
struct SeriesPower {
  // Empty for peak-only (bootstrap) series, and for discarded power the backend kept to itself
  // (it then found the top-k peaks too).
  std::string power;
  int64_t peak_index = 0;
  double peak_frequency = 0;
  double peak_power = 0;
  std::vector<Peak> peaks;
  std::optional<FalseAlarmResult> false_alarm;
  std::optional<ModelResult> model;
};

// Finds the peak of `power` (n values of type T) over `grid`; NaN values are skipped.
template <typename T>
void FindPeak(const T* power, const Grid& grid, SeriesPower* out);
// The same for out->power, read as `dtype`.
void FindPeak(ElementType dtype, const Grid& grid, SeriesPower* out);

// The k highest local maxima of `power` (n values of `dtype`; NaN skipped), highest first,
// ties to the lower index. A value counts as a local maximum when no neighbour is larger.
std::vector<Peak> TopPeaks(ElementType dtype, const std::string& power, const Grid& grid, int k);

// Everything a request asks for beyond power and peak, from the backend's results (one per
// series of `request`, bootstrap series included): top-k peaks, false-alarm probabilities and
// levels, best-fit models. Drops the bootstrap series' results. Host work only.
void FinishResults(const Request& request, std::vector<SeriesPower>* results);

// A batch's results (one per series of every request, in order, as a backend returns them)
// split back into the requests that sent them. INTERNAL when the count is not the batch's.
absl::StatusOr<std::vector<std::vector<SeriesPower>>> SplitByRequest(const Batch& batch,
                                                                     std::vector<SeriesPower> all);

}  // namespace gpucompute::periodogram
