// CPU reference periodogram against known answers and an independent port of Astropy's
// time-shift (tau) formula.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "server/ops/periodogram/nufft.h"
#include "server/ops/periodogram/periodogram.h"
#include "tests/server/ops/periodogram/test_series.h"

namespace gpucompute::periodogram {
namespace {

using testing::RandomSeries;

// Astropy's lombscargle_slow, transcribed loop by loop (the tau form), float64.
std::vector<double> AstropySlow(const SeriesSpec& s, const std::vector<double>& freqs) {
  const size_t n = s.t.size();
  std::vector<double> w(n), y(s.y);
  double wsum = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] = s.dy.empty() ? 1.0 : 1.0 / (s.dy[i] * s.dy[i]);
    wsum += w[i];
  }
  const double dysum = wsum;
  for (double& v : w) v /= wsum;
  if (s.fit_mean || s.center_data) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m += w[i] * y[i];
    for (double& v : y) v -= m;
  }
  std::vector<double> out;
  for (double f : freqs) {
    const double om = 2 * M_PI * f;
    double S2 = 0, C2 = 0, S = 0, C = 0;
    for (size_t i = 0; i < n; ++i) {
      const double sn = std::sin(om * s.t[i]), cs = std::cos(om * s.t[i]);
      S2 += 2 * w[i] * sn * cs;
      C2 += 2 * w[i] * (0.5 - sn * sn);
      S += w[i] * sn;
      C += w[i] * cs;
    }
    if (s.fit_mean) {
      S2 -= 2 * S * C;
      C2 -= C * C - S * S;
    }
    const double tau = 0.5 * std::atan2(S2, C2);
    double Y = 0, YC = 0, YS = 0, CC = 0, SS = 0, Ct = 0, St = 0, YY = 0;
    for (size_t i = 0; i < n; ++i) {
      const double ph = om * s.t[i] - tau;
      const double sn = std::sin(ph), cs = std::cos(ph);
      Y += w[i] * y[i];
      YC += w[i] * y[i] * cs;
      YS += w[i] * y[i] * sn;
      CC += w[i] * cs * cs;
      SS += w[i] * sn * sn;
      Ct += w[i] * cs;
      St += w[i] * sn;
      YY += w[i] * y[i] * y[i];
    }
    if (s.fit_mean) {
      YC -= Y * Ct;
      YS -= Y * St;
      CC -= Ct * Ct;
      SS -= St * St;
    }
    double p = YC * YC / CC + YS * YS / SS;
    switch (s.normalization) {
      case Normalization::kStandard: p /= YY; break;
      case Normalization::kModel: p /= YY - p; break;
      case Normalization::kLog: p = -std::log(1 - p / YY); break;
      case Normalization::kPsd: p *= 0.5 * dysum; break;
    }
    out.push_back(p);
  }
  return out;
}

std::vector<double> PowerOf(const SeriesSpec& s) {
  SeriesPower r = ComputeSeriesCpu(s, ElementType::kFloat64);
  const double* p = reinterpret_cast<const double*>(r.power.data());
  return std::vector<double>(p, p + s.grid.size());
}

std::vector<double> Frequencies(const Grid& g) {
  std::vector<double> f;
  for (int64_t k = 0; k < g.size(); ++k) f.push_back(g.frequency(k));
  return f;
}

TEST(PeriodogramResults, SplitByRequestHandsEachRequestItsSeriesInOrder) {
  Batch batch;
  std::vector<SeriesPower> all;
  for (int sizes : {2, 0, 3}) {
    auto r = std::make_shared<Request>();
    r->series.resize(static_cast<size_t>(sizes));
    batch.requests.push_back(std::move(r));
  }
  for (int i = 0; i < 5; ++i) {
    SeriesPower p;
    p.peak_index = i;
    all.push_back(std::move(p));
  }
  auto split = SplitByRequest(batch, all);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->size(), 3u);
  ASSERT_EQ((*split)[0].size(), 2u);
  EXPECT_TRUE((*split)[1].empty());
  ASSERT_EQ((*split)[2].size(), 3u);
  EXPECT_EQ((*split)[0][1].peak_index, 1);
  EXPECT_EQ((*split)[2][0].peak_index, 2);
  EXPECT_EQ((*split)[2][2].peak_index, 4);
  all.pop_back();
  EXPECT_EQ(SplitByRequest(batch, all).status().code(), absl::StatusCode::kInternal);
}

TEST(PeriodogramCpu, NoiselessSinusoidHasStandardPowerOneAtItsFrequency) {
  std::mt19937_64 rng(1);
  SeriesSpec s = RandomSeries(rng, 57, 1.25, false, 0, 10, 0.0);
  s.grid.explicit_frequencies = {0.5, 1.25, 3.0};
  const auto p = PowerOf(s);
  EXPECT_NEAR(p[1], 1.0, 1e-12);
  EXPECT_LT(p[0], 0.9);
  EXPECT_LT(p[2], 0.9);
}

TEST(PeriodogramCpu, MatchesAstropyTauFormEveryOption) {
  std::mt19937_64 rng(std::random_device{}());
  for (int norm = 0; norm < 4; ++norm) {
    for (int opts = 0; opts < 8; ++opts) {
      SeriesSpec s = RandomSeries(rng, 31 + 17 * opts, 0.7 + 0.1 * norm, opts & 1);
      s.fit_mean = opts & 2;
      s.center_data = opts & 4;
      s.normalization = static_cast<Normalization>(norm);
      s.grid.uniform = UniformGrid{0.05, 0.0137, 301};  // uniform path (rotations)
      const auto ours = PowerOf(s);
      const auto ref = AstropySlow(s, Frequencies(s.grid));
      double peak = 0;
      for (double v : ref) peak = std::max(peak, std::abs(v));
      for (size_t k = 0; k < ref.size(); ++k) {
        ASSERT_NEAR(ours[k], ref[k], 1e-10 * peak) << "norm " << norm << " opts " << opts << " k " << k;
      }
    }
  }
}

TEST(PeriodogramCpu, UniformAndExplicitGridsAgree) {
  std::mt19937_64 rng(7);
  SeriesSpec s = RandomSeries(rng, 200, 2.0, true);
  s.grid.uniform = UniformGrid{0.01, 0.0101, 1000};
  const auto uniform = PowerOf(s);
  s.grid.explicit_frequencies = Frequencies(s.grid);
  s.grid.uniform.reset();
  const auto expl = PowerOf(s);
  for (size_t k = 0; k < uniform.size(); ++k) ASSERT_NEAR(uniform[k], expl[k], 1e-12) << k;
}

TEST(PeriodogramCpu, InvariantToTimeOffset) {
  std::mt19937_64 rng(9);
  SeriesSpec a = RandomSeries(rng, 150, 3.3, false);
  a.grid.uniform = UniformGrid{0.1, 0.05, 200};
  SeriesSpec b = a;
  for (double& t : b.t) t += 2.45e6;  // Julian-date-like offset
  const auto pa = PowerOf(a), pb = PowerOf(b);
  for (size_t k = 0; k < pa.size(); ++k) ASSERT_NEAR(pa[k], pb[k], 1e-9) << k;
}

TEST(PeriodogramCpu, PeakFindsInjectedFrequency) {
  std::mt19937_64 rng(11);
  SeriesSpec s = RandomSeries(rng, 400, 4.2, true, 0, 100);
  auto g = AutoFrequency(s.t, AutoGridParams{});
  ASSERT_TRUE(g.ok());
  s.grid.uniform = *g;
  const SeriesPower r = ComputeSeriesCpu(s, ElementType::kFloat32);
  EXPECT_EQ(r.power.size(), static_cast<size_t>(g->n) * 4);
  EXPECT_NEAR(r.peak_frequency, 4.2, g->df);
  EXPECT_GT(r.peak_power, 0.5);
}

// ComputeMoments (partial sums in lanes, weights by blocks) against the plain loops in long
// double, for lengths around the lane and block sizes, with and without dy; the time origin is
// the first sample nearest the span's midpoint, also when the nearest ones tie across lanes.
TEST(ComputeMoments, MatchesPlainSumsAndPicksTheFirstNearestSample) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t n : {1, 2, 3, 4, 5, 7, 255, 256, 257, 1000, 1031}) {
    for (bool with_dy : {false, true}) {
      SeriesSpec s;
      for (size_t i = 0; i < n; ++i) {
        s.t.push_back(100 * u(rng));
        s.y.push_back(3 + u(rng));
        if (with_dy) s.dy.push_back(0.2 + u(rng));
      }
      s.fit_mean = true;
      const SeriesMoments m = ComputeMoments(s);
      long double w_sum = 0, wy_sum = 0;
      for (size_t i = 0; i < n; ++i) {
        const long double w = with_dy ? 1.0L / ((long double)s.dy[i] * s.dy[i]) : 1.0L;
        w_sum += w;
        wy_sum += w * s.y[i];
      }
      const long double mean = wy_sum / w_sum;
      long double yy = 0;
      for (size_t i = 0; i < n; ++i) {
        const long double w = with_dy ? 1.0L / ((long double)s.dy[i] * s.dy[i]) : 1.0L;
        yy += w * (s.y[i] - mean) * (s.y[i] - mean);
      }
      const auto [lo, hi] = std::minmax_element(s.t.begin(), s.t.end());
      const double mid = 0.5 * (*lo + *hi);
      size_t nearest = 0;
      for (size_t i = 1; i < n; ++i) {
        if (std::abs(s.t[i] - mid) < std::abs(s.t[nearest] - mid)) nearest = i;
      }
      EXPECT_EQ(m.t_ref, s.t[nearest]) << n;
      EXPECT_EQ(m.t_absmax, std::max(*hi - m.t_ref, m.t_ref - *lo)) << n;
      EXPECT_NEAR(m.inv_var_sum, static_cast<double>(w_sum), 1e-13 * static_cast<double>(w_sum)) << n;
      EXPECT_NEAR(m.y_mean, static_cast<double>(mean), 1e-14 * std::abs(static_cast<double>(mean))) << n;
      EXPECT_NEAR(m.yy, static_cast<double>(yy / w_sum), 1e-11 * static_cast<double>(yy / w_sum) + 1e-300)
          << n;
    }
  }
  // Midpoint 2: samples 1 and 3 are equally near; the first of them (index 1, then index 2 in
  // another lane) is the origin, whichever lane holds it.
  for (const std::vector<double>& t : {std::vector<double>{0, 1, 3, 4}, std::vector<double>{0, 3, 1, 4},
                                       std::vector<double>{4, 0, 0.5, 3, 1, 3.5}}) {
    SeriesSpec s;
    s.t = t;
    s.y.assign(t.size(), 1.0);
    const double mid = 2.0;
    double expected = t[0];
    for (double v : t) {
      if (std::abs(v - mid) < std::abs(expected - mid)) expected = v;
    }
    EXPECT_EQ(ComputeMoments(s).t_ref, expected);
  }
}

TEST(AutoFrequency, FollowsAstropyRule) {
  std::vector<double> t = {0.0, 1.0, 2.5, 8.0};
  auto g = AutoFrequency(t, AutoGridParams{});
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ(g->df, 1.0 / 8.0 / 5.0);
  EXPECT_DOUBLE_EQ(g->f0, 0.5 * g->df);
  const double fmax = 5 * 0.5 * 4 / 8.0;
  EXPECT_EQ(g->n, 1 + static_cast<int64_t>(std::nearbyint((fmax - g->f0) / g->df)));
  AutoGridParams p;
  p.minimum_frequency = 0.2;
  p.maximum_frequency = 0.7;
  p.samples_per_peak = 10;
  auto h = AutoFrequency(t, p);
  ASSERT_TRUE(h.ok());
  EXPECT_DOUBLE_EQ(h->f0, 0.2);
  EXPECT_EQ(h->n, 1 + static_cast<int64_t>(std::nearbyint(0.5 / (1.0 / 80.0))));
}

TEST(AutoFrequency, RejectsZeroBaselineAndEmptyGrid) {
  EXPECT_FALSE(AutoFrequency({1.0, 1.0}, AutoGridParams{}).ok());
  AutoGridParams p;
  p.minimum_frequency = 10;
  p.maximum_frequency = 1;
  EXPECT_FALSE(AutoFrequency({0.0, 1.0}, p).ok());
  AutoGridParams tiny;
  tiny.samples_per_peak = 1e-310;  // step 1 / (baseline * 1e-310) overflows to infinity
  tiny.minimum_frequency = 1;
  EXPECT_EQ(AutoFrequency({0.0, 1.0}, tiny).status().code(), absl::StatusCode::kInvalidArgument);
}

// The CUDA fast path's power kernel (kernels/nufft_kernels.cu, PowerFromTransforms) reads
// transform i as: w at j = i + 1 for i < 2q (for q = 1 without fit_mean, w at j = 2 first),
// then w y at j = i - 2q + 1. HarmonicTerms must list them in that order.
TEST(NufftTerms, OrderIsThePowerKernels) {
  for (int q = 1; q <= 8; ++q) {
    for (bool fit_mean : {true, false}) {
      const std::vector<HarmonicTerm> terms = HarmonicTerms(q, fit_mean);
      const bool skip_first = q == 1 && !fit_mean;
      ASSERT_EQ(terms.size(), static_cast<size_t>(3 * q - (skip_first ? 1 : 0)));
      size_t i = 0;
      for (int j = skip_first ? 2 : 1; j <= 2 * q; ++j, ++i) {
        EXPECT_FALSE(terms[i].weighted_y) << "q " << q << " term " << i;
        EXPECT_EQ(terms[i].j, j) << "q " << q << " term " << i;
      }
      for (int j = 1; j <= q; ++j, ++i) {
        EXPECT_TRUE(terms[i].weighted_y) << "q " << q << " term " << i;
        EXPECT_EQ(terms[i].j, j) << "q " << q << " term " << i;
      }
    }
  }
}

}  // namespace
}  // namespace gpucompute::periodogram

namespace gpucompute::periodogram {
namespace {

// The k highest local maxima by their definition (no non-NaN neighbour larger; a plateau
// counts at its first index; ties by lower index), found the slow way.
std::vector<int64_t> ReferenceTopPeaks(const std::vector<double>& p, int k) {
  std::vector<int64_t> maxima;
  for (int64_t i = 0; i < static_cast<int64_t>(p.size()); ++i) {
    if (std::isnan(p[i])) continue;
    int64_t left = i - 1, right = i + 1;
    while (left >= 0 && std::isnan(p[left])) --left;
    while (right < static_cast<int64_t>(p.size()) && std::isnan(p[right])) ++right;
    if ((left < 0 || p[i] > p[left]) && (right >= static_cast<int64_t>(p.size()) || p[i] >= p[right])) {
      maxima.push_back(i);
    }
  }
  std::stable_sort(maxima.begin(), maxima.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  if (static_cast<int64_t>(maxima.size()) > k) maxima.resize(k);
  return maxima;
}

TEST(TopPeaks, MatchTheirDefinitionWithNaNsPlateausAndTies) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 300);
    std::vector<double> p(n);
    for (double& v : p) {
      const uint64_t r = rng() % 10;
      v = r == 0   ? std::nan("")
          : r == 1 ? std::numeric_limits<double>::infinity()
                   : static_cast<double>(rng() % 7);  // few values: many ties
    }
    Grid grid;
    grid.uniform = UniformGrid{0.5, 0.25, n};
    const std::string bytes(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(double));
    for (int k : {1, 3, 10, 1000}) {
      const std::vector<Peak> got = TopPeaks(ElementType::kFloat64, bytes, grid, k);
      const std::vector<int64_t> want = ReferenceTopPeaks(p, k);
      ASSERT_EQ(got.size(), want.size()) << "trial " << trial << " k " << k;
      for (size_t j = 0; j < got.size(); ++j) {
        EXPECT_EQ(got[j].index, want[j]) << "trial " << trial << " k " << k << " peak " << j;
        EXPECT_EQ(got[j].power, p[want[j]]);
        EXPECT_DOUBLE_EQ(got[j].frequency, 0.5 + 0.25 * want[j]);
      }
    }
  }
}

}  // namespace
}  // namespace gpucompute::periodogram
