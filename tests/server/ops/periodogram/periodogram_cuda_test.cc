// CUDA periodogram against the CPU reference (label gpu; skipped without a device).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "kernels/top_peaks.cuh"
#include "server/ops/periodogram/cuda_periodogram.h"
#include "server/ops/periodogram/nufft.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "tests/server/ops/periodogram/test_series.h"

namespace gpucompute {
namespace {

using periodogram::Normalization;

class PeriodogramCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    BackendOptions o;
    o.kind = "cuda";
    o.streams_per_device = 2;
    auto b = CreateBackend(o, &completions_);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }

  std::vector<periodogram::SeriesPower> Run(std::shared_ptr<periodogram::Request> request) {
    auto batch = std::make_shared<periodogram::Batch>();
    batch->dtype = request->dtype;
    batch->requests.push_back(request);
    absl::Notification done;
    std::vector<periodogram::SeriesPower> out;
    backend_->RunPeriodogram(batch, [&](auto r) {
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) out = *std::move(r);
      done.Notify();
    });
    done.WaitForNotification();
    return out;
  }

  // Compares every series with the CPU reference: float64 to 1e-9 of the peak, float32 to
  // `f32_abs` absolute in standard-power units (psd: relative to the peak). Fast series
  // are compared with the CPU's direct sums (the fast method's accuracy target), and, with
  // `also_cpu_fast`, with the CPU's fast method too. Peak-only series must come back without
  // power and with the right peak.
  void Compare(const periodogram::Request& request, const std::vector<periodogram::SeriesPower>& got,
               double f32_tol = 1e-4, bool also_cpu_fast = false) {
    ASSERT_EQ(got.size(), request.series.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const auto& s = request.series[i];
      periodogram::SeriesSpec direct = s;
      direct.method = periodogram::Method::kDirect;
      std::vector<periodogram::SeriesSpec> refs = {direct};
      if (also_cpu_fast && s.method == periodogram::Method::kFast) refs.push_back(s);
      for (const auto& ref_spec : refs) {
        SCOPED_TRACE(std::string("reference ") + periodogram::MethodName(ref_spec.method) +
                     ", GPU " + periodogram::MethodName(s.method) + ", nterms " +
                     std::to_string(s.nterms) + ", series " + std::to_string(i));
        CompareOne(request.dtype, s, ref_spec, got[i], f32_tol);
      }
    }
  }

  void CompareOne(ElementType dtype, const periodogram::SeriesSpec& s,
                  const periodogram::SeriesSpec& ref_spec, const periodogram::SeriesPower& got,
                  double f32_tol) {
    const auto ref = periodogram::ComputeSeriesCpu(ref_spec, ElementType::kFloat64);
    const double* r = reinterpret_cast<const double*>(ref.power.data());
    const int64_t n = s.grid.size();
    double peak = 0, max_err = 0;
    int64_t worst = -1;
    for (int64_t k = 0; k < n; ++k) {
      if (!std::isnan(r[k])) peak = std::max(peak, std::abs(r[k]));
    }
    // Float32 is compared in the standard normalization's units (p / yy): the model and log
    // normalizations amplify an error of the standard power by 1 / (1 - p)^2 and 1 / (1 - p),
    // 170x at p = 0.92, for any float32 implementation; psd is a scale and is compared
    // relative to the peak.
    const bool f32_standard_units = dtype == ElementType::kFloat32 &&
                                    (s.normalization == Normalization::kModel ||
                                     s.normalization == Normalization::kLog);
    auto units = [&](double x) {
      if (!f32_standard_units) return x;
      return s.normalization == Normalization::kModel ? x / (1 + x) : -std::expm1(-x);
    };
    const double tol = dtype == ElementType::kFloat64
                           ? 1e-9 * peak
                           : (s.normalization != Normalization::kPsd ? f32_tol : f32_tol * peak);
    if (s.peak_only()) {
      EXPECT_TRUE(got.power.empty()) << "peak-only series came back with power";
    } else {
      ASSERT_EQ(got.power.size(), static_cast<size_t>(n) * ElementSize(dtype));
      for (int64_t k = 0; k < n; ++k) {
        const double v = dtype == ElementType::kFloat32
                             ? reinterpret_cast<const float*>(got.power.data())[k]
                             : reinterpret_cast<const double*>(got.power.data())[k];
        if (std::isnan(r[k])) {  // e.g. fit_mean with two samples: NaN, as in Astropy
          EXPECT_TRUE(std::isnan(v)) << "k " << k << ": reference is NaN";
          continue;
        }
        ASSERT_FALSE(std::isnan(v)) << "k " << k;
        if (std::abs(units(v) - units(r[k])) > max_err) {
          max_err = std::abs(units(v) - units(r[k]));
          worst = k;
        }
      }
      EXPECT_LE(max_err, tol) << "n " << s.t.size() << " nf " << n << " worst k " << worst
                              << " (f * baseline " << s.grid.frequency(worst) * (s.t.back() - s.t.front())
                              << ", reference " << r[worst] << ")";
    }
    if (std::isnan(r[ref.peak_index])) return;  // no finite power: no peak to compare
    // The peak: the reference power at the reported index is the maximum within tolerance
    // (near-ties may pick either bin), and the reported value is that bin's power.
    ASSERT_GE(got.peak_index, 0);
    ASSERT_LT(got.peak_index, n);
    EXPECT_GE(units(r[got.peak_index]), units(r[ref.peak_index]) - tol);
    EXPECT_NEAR(units(got.peak_power), units(r[got.peak_index]), tol);
    EXPECT_DOUBLE_EQ(got.peak_frequency, s.grid.frequency(got.peak_index));
  }

  // Runs `request` through EnqueuePeriodogram on a device context of the test's own, with
  // knobs the backend does not expose (forcing the product form, its piece size).
  std::vector<periodogram::SeriesPower> RunWithOptions(std::shared_ptr<periodogram::Request> request,
                                                       const periodogram::EnqueueOptions& options) {
    if (device_ == nullptr) {
      DeviceContext::Options o;
      o.streams = 1;
      o.fft_max_size = periodogram::LargestFftSize(int64_t{1} << 22);
      auto dev = DeviceContext::Create(o);
      EXPECT_TRUE(dev.ok()) << dev.status();
      if (!dev.ok()) return {};
      device_ = *std::move(dev);
    }
    periodogram::Batch batch;
    batch.dtype = request->dtype;
    batch.requests.push_back(request);
    StreamSlot* slot = device_->AcquireSlot();
    std::vector<periodogram::SeriesPower> out;
    auto pending = periodogram::EnqueuePeriodogram(*device_, *slot, batch, &options);
    EXPECT_TRUE(pending.ok()) << pending.status();
    EXPECT_EQ(cudaStreamSynchronize(slot->stream.get()), cudaSuccess);
    if (pending.ok()) out = periodogram::UnpackPeriodogram(*pending, *slot, batch);
    device_->ReleaseSlot(slot);
    return out;
  }

  void CheckLargeGrid(periodogram::Method method, bool with_dy);

  CompletionQueue completions_{1};
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DeviceContext> device_;
};

// `count` series of 8..1500 samples with every option and normalization. With two or three
// samples (as many as the model's parameters) the power is 0/0-like near frequencies where the
// fit is singular, and GPU and CPU rounding differ there by far more than 1e-9 (float64) or
// 1e-4 (float32): seen as n = 3 (float64) and n = 2 (float32) in repeated GPU runs. Those
// series are covered by SingleSmallSeriesAndTwoSamples.
std::shared_ptr<periodogram::Request> MixedRequest(std::mt19937_64& rng, ElementType dtype, int count,
                                                   int min_len = 8) {
  auto r = std::make_shared<periodogram::Request>();
  r->dtype = dtype;
  std::uniform_int_distribution<int> len(min_len, 1500);
  for (int i = 0; i < count; ++i) {
    auto s = periodogram::testing::RandomSeries(rng, len(rng), 0.5 + 0.37 * i, i % 2, 0, 10 + i);
    s.normalization = static_cast<Normalization>(i % 4);
    s.fit_mean = i % 3 != 0;
    s.center_data = i % 5 != 0;
    if (i % 7 == 3) {
      for (int k = 0; k < 333; ++k) s.grid.explicit_frequencies.push_back(0.01 + 0.031 * k);
    } else {
      auto g = periodogram::AutoFrequency(s.t, periodogram::AutoGridParams{});
      s.grid.uniform = *g;
    }
    r->series.push_back(std::move(s));
  }
  return r;
}

TEST_F(PeriodogramCuda, MixedBatchFloat64MatchesCpu) {
  std::mt19937_64 rng(std::random_device{}());
  auto r = MixedRequest(rng, ElementType::kFloat64, 37);
  Compare(*r, Run(r));
}

TEST_F(PeriodogramCuda, MixedBatchFloat32MatchesCpu) {
  std::mt19937_64 rng(std::random_device{}());
  auto r = MixedRequest(rng, ElementType::kFloat32, 37);
  Compare(*r, Run(r));
}

TEST_F(PeriodogramCuda, Float32LongBaselineHighFrequency) {
  std::mt19937_64 rng(std::random_device{}());
  auto r = std::make_shared<periodogram::Request>();
  r->dtype = ElementType::kFloat32;
  // Julian-date times over 3000 days, frequencies up to 50 per day.
  auto s = periodogram::testing::RandomSeries(rng, 1024, 13.7, true, 2.4e6, 3000);
  s.grid.uniform = periodogram::UniformGrid{0.001, 50.0 / 200000, 200000};
  r->series.push_back(std::move(s));
  Compare(*r, Run(r));
}

TEST_F(PeriodogramCuda, SingleSmallSeriesAndTwoSamples) {
  std::mt19937_64 rng(5);
  for (auto dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    auto r = std::make_shared<periodogram::Request>();
    r->dtype = dtype;
    auto s = periodogram::testing::RandomSeries(rng, 3, 1.0, false);
    s.grid.uniform = periodogram::UniformGrid{0.3, 0.1, 1};
    r->series.push_back(s);
    auto s2 = periodogram::testing::RandomSeries(rng, 777, 2.0, true);
    s2.grid.uniform = periodogram::UniformGrid{0.05, 0.01, 1025};  // one past a block's worth
    r->series.push_back(s2);
    Compare(*r, Run(r));
  }
}

// Fast (NUFFT) and multi-harmonic direct series, nterms 1..4, of mixed lengths in one batch
// with nterms = 1 direct series, plus peak-only (bootstrap) series of each kind.
std::shared_ptr<periodogram::Request> FastHarmonicRequest(std::mt19937_64& rng, ElementType dtype,
                                                          int count) {
  auto r = std::make_shared<periodogram::Request>();
  r->dtype = dtype;
  // At least 40 samples: with nterms = 4 (9 parameters) fewer make the fit near-singular at
  // some frequencies, where rounding decides (see MixedRequest).
  std::uniform_int_distribution<int> len(40, 1500);
  for (int i = 0; i < count; ++i) {
    // Every fourth series (fast ones) and series 1 and 9 (fast, nterms 1: the fused form) on
    // a grid 12 times finer than the default, which takes the windowed form of the fast
    // method (kernels/nufft_kernels.cuh); shorter, so that the CPU reference stays quick.
    const bool fine = i % 4 == 3 || i == 1 || i == 9;
    const int n = fine ? 40 + len(rng) % 260 : len(rng);
    auto s = periodogram::testing::RandomSeries(rng, n, 0.7 + 0.29 * i, i % 3 == 1, 0, 10 + 3 * i);
    s.normalization = static_cast<Normalization>((i / 8) % 4);
    s.fit_mean = i % 5 != 4;
    s.center_data = i % 7 != 6;
    s.method = i % 2 ? periodogram::Method::kFast : periodogram::Method::kDirect;
    s.nterms = 1 + (i / 2) % 4;
    // With nterms > 1, below about one cycle over the baseline the harmonics are nearly
    // collinear and the normal matrix is ill-conditioned: there any two float64
    // implementations (CPU and GPU, or Astropy's) differ by rounding times its condition
    // number, far above 1e-9 (seen: 5e-7 at the grid's first bins with nterms = 4). The grid
    // starts at one cycle over the baseline for those series.
    periodogram::AutoGridParams params;
    if (fine) {
      params.samples_per_peak = 60;
      // The default grid's first frequency (a tenth of a cycle over the baseline): lower, with
      // a floating mean, sum w cos^2 - (sum w cos)^2 falls to the NUFFT's own error (the CPU's
      // fast method is off from the direct sums there too: seen 2.5e-8 of the peak in float64
      // at f * baseline = 0.008, and 3e-2 in float32).
      params.minimum_frequency = 0.1 / (s.t.back() - s.t.front());
    }
    if (s.nterms > 1) params.minimum_frequency = 1.0 / (s.t.back() - s.t.front());
    auto g = periodogram::AutoFrequency(s.t, params);
    s.grid.uniform = *g;
    r->series.push_back(std::move(s));
  }
  r->user_series = count;
  // Peak-only resamplings of the first series of each kind (nterms 1 direct, nterms 1 fast,
  // nterms 2 direct, nterms 2 fast).
  for (int i = 0; i < 4 && i < count; ++i) {
    periodogram::SeriesSpec b = r->series[i];
    std::shuffle(b.y.begin(), b.y.end(), rng);
    b.bootstrap_of = i;
    r->series.push_back(std::move(b));
  }
  return r;
}

TEST_F(PeriodogramCuda, FastAndHarmonicFloat64MatchCpu) {
  std::mt19937_64 rng(std::random_device{}());
  auto r = FastHarmonicRequest(rng, ElementType::kFloat64, 16);
  Compare(*r, Run(r), 1e-4, /*also_cpu_fast=*/true);
}

TEST_F(PeriodogramCuda, FastAndHarmonicFloat32MatchCpu) {
  std::mt19937_64 rng(std::random_device{}());
  auto r = FastHarmonicRequest(rng, ElementType::kFloat32, 16);
  Compare(*r, Run(r));
}

// The peers' problem (1,024 samples x 1M frequencies from 0.01 to 100, a sinusoid at 1.3) by
// `method`, through the backend: float64 to 1e-9 of the peak, float32 to 1e-4, against the
// CPU's float64 direct sums on every 97th frequency (an explicit grid).
void PeriodogramCuda::CheckLargeGrid(periodogram::Method method, bool with_dy) {
  std::mt19937_64 rng(std::random_device{}());
  for (auto dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
    auto r = std::make_shared<periodogram::Request>();
    r->dtype = dtype;
    auto s = periodogram::testing::RandomSeries(rng, 1024, 1.3, with_dy, 0, 10, 0.1);
    const int64_t nf = int64_t{1} << 20;
    s.grid.uniform = periodogram::UniformGrid{0.01, (100.0 - 0.01) / (nf - 1), nf};
    s.method = method;
    r->series.push_back(s);
    const auto got = Run(r);
    ASSERT_EQ(got.size(), 1u);
    periodogram::SeriesSpec sub = s;
    sub.method = periodogram::Method::kDirect;
    sub.grid = periodogram::Grid{};
    for (int64_t k = 0; k < nf; k += 97) sub.grid.explicit_frequencies.push_back(s.grid.frequency(k));
    const auto ref = periodogram::ComputeSeriesCpu(sub, ElementType::kFloat64);
    const double* rp = reinterpret_cast<const double*>(ref.power.data());
    double peak = 0, err = 0;
    for (size_t i = 0; i < sub.grid.explicit_frequencies.size(); ++i) {
      const int64_t k = static_cast<int64_t>(i) * 97;
      const double v = dtype == ElementType::kFloat32
                           ? reinterpret_cast<const float*>(got[0].power.data())[k]
                           : reinterpret_cast<const double*>(got[0].power.data())[k];
      ASSERT_FALSE(std::isnan(v)) << "k " << k;
      peak = std::max(peak, rp[i]);
      err = std::max(err, std::abs(v - rp[i]));
    }
    const double tol = dtype == ElementType::kFloat64 ? 1e-9 * peak : 1e-4;
    EXPECT_LE(err, tol) << ElementName(dtype);
    std::printf("%s 1024 x 1M %s: max |gpu - cpu direct| = %.3g (peak %.4f)\n",
                periodogram::MethodName(method), ElementName(dtype), err, peak);
    // The peak is the sinusoid's (1.3) and equals the power there.
    EXPECT_NEAR(got[0].peak_frequency, 1.3, 0.01);
  }
}

TEST_F(PeriodogramCuda, FastLargeGridMatchesDirect) {
  CheckLargeGrid(periodogram::Method::kFast, /*with_dy=*/false);
}

// The direct method takes the product form by itself at this size.
TEST_F(PeriodogramCuda, DirectLargeGridMatchesCpu) {
  CheckLargeGrid(periodogram::Method::kDirect, /*with_dy=*/true);
}

// The product form (kernels/lombscargle_product.cuh) forced on every nterms = 1 series of a
// mixed batch: grids from near 0 (the lowest frequencies form the direct piece) and above,
// series longer than one chunk of samples, pieces of 1,000 frequencies (so several per series),
// every normalization, with and without a floating mean, weights, and peak-only resamplings.
TEST_F(PeriodogramCuda, ProductFormMatchesCpu) {
  std::mt19937_64 rng(std::random_device{}());
  for (auto dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    SCOPED_TRACE(ElementName(dtype));
    auto r = std::make_shared<periodogram::Request>();
    r->dtype = dtype;
    std::uniform_int_distribution<int> len(20, 900);
    const int count = 12;
    for (int i = 0; i < count; ++i) {
      const int n = i == 0 ? 4500 : i == 1 ? 2049 : len(rng);
      auto s = periodogram::testing::RandomSeries(rng, n, 0.7 + 0.53 * i, i % 2, 100 * i, 10 + 3 * i);
      s.normalization = static_cast<Normalization>(i % 4);
      s.fit_mean = i % 3 != 0;
      s.center_data = i % 5 != 0;
      const double baseline = s.t.back() - s.t.front();
      // Half the grids start near 0 (df / 2, as Astropy's), half above one cycle over the
      // baseline; 3,000-9,000 bins.
      const double f0 = i % 2 == 0 ? 0.1 / baseline : (1.0 + i) / baseline;
      const int64_t nf = 3000 + 500 * i;
      s.grid.uniform = periodogram::UniformGrid{f0, 0.2 / baseline, nf};
      r->series.push_back(std::move(s));
    }
    r->user_series = count;
    for (int i = 0; i < 3; ++i) {
      periodogram::SeriesSpec b = r->series[i];
      std::shuffle(b.y.begin(), b.y.end(), rng);
      b.bootstrap_of = i;
      r->series.push_back(std::move(b));
    }
    periodogram::EnqueueOptions options;
    options.plan.product = periodogram::ProductForm::kAlways;
    options.plan.product_piece = 1000;
    Compare(*r, RunWithOptions(r, options));
  }
}

// A request whose power is discarded keeps it on the device and finds its top-k peaks there:
// the same peaks as the host finds in the same power copied back, for every kind of series
// (nterms 1 direct, product form, fast, multi-harmonic; explicit grids; peak-only
// resamplings), grids of one and three frequencies, a series whose power is all NaN, and a k
// above the device's limit (the power then comes back and the host finds them). The fast
// method spreads with atomic additions, so two runs of a fast series differ in the last bits:
// there the peaks must match within rounding (rank by rank, and each at its index in the
// other run's power), elsewhere exactly.
void ExpectSamePeaks(ElementType dtype, const periodogram::SeriesSpec& s,
                     const periodogram::SeriesPower& want, const periodogram::SeriesPower& got, int k) {
  const auto peaks = periodogram::TopPeaks(dtype, want.power, s.grid, k);
  ASSERT_EQ(got.peaks.size(), peaks.size());
  if (s.method != periodogram::Method::kFast) {
    EXPECT_EQ(got.peak_index, want.peak_index);
    for (size_t j = 0; j < peaks.size(); ++j) {
      EXPECT_EQ(got.peaks[j].index, peaks[j].index) << "peak " << j;
      EXPECT_EQ(got.peaks[j].power, peaks[j].power) << "peak " << j;
      EXPECT_EQ(got.peaks[j].frequency, peaks[j].frequency) << "peak " << j;
    }
    return;
  }
  auto power_at = [&](int64_t i) {
    return dtype == ElementType::kFloat32 ? reinterpret_cast<const float*>(want.power.data())[i]
                                          : reinterpret_cast<const double*>(want.power.data())[i];
  };
  const double tol = (dtype == ElementType::kFloat64 ? 1e-9 : 1e-4) * std::max(1.0, std::abs(want.peak_power));
  EXPECT_NEAR(got.peak_power, want.peak_power, tol);
  for (size_t j = 0; j < peaks.size(); ++j) {
    EXPECT_NEAR(got.peaks[j].power, peaks[j].power, tol) << "peak " << j;
    EXPECT_NEAR(got.peaks[j].power, power_at(got.peaks[j].index), tol) << "peak " << j;
    EXPECT_EQ(got.peaks[j].frequency, s.grid.frequency(got.peaks[j].index)) << "peak " << j;
  }
}

TEST_F(PeriodogramCuda, DiscardedPowerStaysOnTheDeviceWithItsPeaks) {
  std::mt19937_64 rng(std::random_device{}());
  for (auto dtype : {ElementType::kFloat64, ElementType::kFloat32}) {
    for (int k : {1, 5, kernels::kMaxDeviceTopPeaks, kernels::kMaxDeviceTopPeaks + 1}) {
      SCOPED_TRACE(std::string(ElementName(dtype)) + " top_k " + std::to_string(k));
      auto kept = FastHarmonicRequest(rng, dtype, 12);
      kept->series.resize(static_cast<size_t>(kept->user_series));  // resamplings appended below
      const auto mixed = MixedRequest(rng, dtype, 8);
      for (const auto& s : mixed->series) kept->series.push_back(s);
      auto tiny = periodogram::testing::RandomSeries(rng, 30, 1.0, false);
      tiny.grid.uniform = periodogram::UniformGrid{0.3, 0.1, 1};
      kept->series.push_back(tiny);
      tiny.grid.uniform->n = 3;
      kept->series.push_back(tiny);
      auto flat = periodogram::testing::RandomSeries(rng, 50, 1.0, false);
      std::fill(flat.y.begin(), flat.y.end(), 2.0);  // yy = 0: every power is NaN
      flat.grid.uniform = periodogram::UniformGrid{0.1, 0.05, 200};
      kept->series.push_back(flat);
      kept->user_series = static_cast<int64_t>(kept->series.size());
      for (int i = 0; i < 2; ++i) {
        periodogram::SeriesSpec b = kept->series[i];
        std::shuffle(b.y.begin(), b.y.end(), rng);
        b.bootstrap_of = i;
        kept->series.push_back(std::move(b));
      }
      kept->top_k = k;
      auto discarded = std::make_shared<periodogram::Request>(*kept);
      for (auto& s : discarded->series) s.power_discarded = true;
      periodogram::EnqueueOptions product;
      product.plan.product = periodogram::ProductForm::kAlways;  // the product form's pieces too, for the nterms 1 direct series
      product.plan.product_piece = 1000;
      const std::vector<const periodogram::EnqueueOptions*> runs = {nullptr, &product};
      for (const periodogram::EnqueueOptions* o : runs) {
        auto want = o ? RunWithOptions(kept, *o) : Run(kept);
        auto got = o ? RunWithOptions(discarded, *o) : Run(discarded);
        ASSERT_EQ(got.size(), want.size());
        for (int64_t i = 0; i < kept->user_series; ++i) {
          SCOPED_TRACE("series " + std::to_string(i) + (o ? ", product form" : ""));
          const auto& s = kept->series[i];
          if (k > kernels::kMaxDeviceTopPeaks) {
            EXPECT_EQ(got[i].power.size(), want[i].power.size())
                << "more peaks than the device finds: the power comes back";
            EXPECT_TRUE(got[i].peaks.empty()) << "the host finds them";
            continue;
          }
          EXPECT_TRUE(got[i].power.empty()) << "discarded power came back";
          ExpectSamePeaks(dtype, s, want[i], got[i], k);
        }
      }
    }
  }
}

// The device's top-k against the host's definition (periodogram::TopPeaks) on power made to
// be hard: values from a handful of levels (ties within and across threads, plateaus), NaN
// runs, lengths around the block's 256 threads.
template <typename T>
void CheckTopPeaksKernel(std::mt19937_64& rng) {
  const ElementType dtype = sizeof(T) == 4 ? ElementType::kFloat32 : ElementType::kFloat64;
  const std::vector<long long> lengths = {1, 2, 3, 255, 256, 257, 513, 5000};
  std::vector<T> power;
  std::vector<kernels::TopPeaksDesc> descs;
  long long out_at = 0;
  std::vector<int> ks;
  std::uniform_int_distribution<int> level(0, 5), kind(0, 2);
  std::uniform_real_distribution<double> u(0, 1);
  for (int rep = 0; rep < 6; ++rep) {
    for (long long n : lengths) {
      const int k = rep % 3 == 0 ? 1 : rep % 3 == 1 ? 7 : kernels::kMaxDeviceTopPeaks;
      descs.push_back(kernels::TopPeaksDesc{static_cast<long long>(power.size()), n, out_at, k, 0});
      out_at += k;
      ks.push_back(k);
      const int style = kind(rng);
      for (long long i = 0; i < n; ++i) {
        const int l = level(rng);
        double v = style == 0 ? u(rng) : l;       // continuous, or few levels
        if (style == 2 && l == 5) v = std::nan("");  // with NaN
        power.push_back(static_cast<T>(v));
      }
    }
  }
  T* d_power = nullptr;
  kernels::TopPeaksDesc* d_descs = nullptr;
  kernels::LsPeak* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_power, power.size() * sizeof(T)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_descs, descs.size() * sizeof(descs[0])), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, out_at * sizeof(kernels::LsPeak)), cudaSuccess);
  cudaMemcpy(d_power, power.data(), power.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(d_descs, descs.data(), descs.size() * sizeof(descs[0]), cudaMemcpyHostToDevice);
  ASSERT_EQ(kernels::LaunchTopPeaks(d_power, d_descs, static_cast<int>(descs.size()), d_out, nullptr),
            cudaSuccess);
  std::vector<kernels::LsPeak> out(out_at);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * sizeof(out[0]), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(d_power);
  cudaFree(d_descs);
  cudaFree(d_out);
  for (size_t s = 0; s < descs.size(); ++s) {
    const auto& d = descs[s];
    SCOPED_TRACE("n " + std::to_string(d.n) + " k " + std::to_string(d.k));
    const std::string bytes(reinterpret_cast<const char*>(power.data() + d.power_offset), d.n * sizeof(T));
    periodogram::Grid grid;
    grid.uniform = periodogram::UniformGrid{0, 1, d.n};
    const auto want = periodogram::TopPeaks(dtype, bytes, grid, d.k);
    for (int j = 0; j < d.k; ++j) {
      const kernels::LsPeak& e = out[d.out_offset + j];
      if (j >= static_cast<int>(want.size())) {
        EXPECT_EQ(e.index, -1) << "entry " << j << " past the last maximum";
        continue;
      }
      EXPECT_EQ(e.index, want[j].index) << "entry " << j;
      EXPECT_EQ(e.value, want[j].power) << "entry " << j;
    }
  }
}

TEST_F(PeriodogramCuda, TopPeaksKernelFollowsTheHostDefinition) {
  std::mt19937_64 rng(std::random_device{}());
  CheckTopPeaksKernel<double>(rng);
  CheckTopPeaksKernel<float>(rng);
}

}  // namespace
}  // namespace gpucompute
