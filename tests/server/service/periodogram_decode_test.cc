// Request decoding: every rule gives INVALID_ARGUMENT or RESOURCE_EXHAUSTED naming the field.
#include "server/service/periodogram_decode.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/tensor_codec.h"
#include "server/runtime/tensor_store.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

v1::Tensor Vec(const std::vector<double>& v) {
  v1::Tensor t;
  std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  EncodeVector(v1::FLOAT64, static_cast<int64_t>(v.size()), std::move(bytes), &t);
  return t;
}

v1::PeriodogramRequest Good() {
  v1::PeriodogramRequest r;
  auto* s = r.add_series();
  *s->mutable_t() = Vec({0, 1.5, 2, 3.7, 5});
  *s->mutable_y() = Vec({1, -1, 0.5, 2, 0});
  *s->mutable_dy() = Vec({1, 1, 2, 1, 0.5});
  return r;
}

void ExpectError(const v1::PeriodogramRequest& r, absl::StatusCode code, const std::string& text,
                 const ServiceLimits& limits = {}) {
  auto d = DecodePeriodogramRequest(r, limits);
  ASSERT_FALSE(d.ok()) << text;
  EXPECT_EQ(d.status().code(), code) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(text));
}

TEST(PeriodogramDecode, GoodRequestUsesDefaults) {
  auto d = DecodePeriodogramRequest(Good(), {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dtype, ElementType::kFloat64);
  ASSERT_EQ(d->series.size(), 1u);
  EXPECT_TRUE(d->series[0].fit_mean);
  EXPECT_TRUE(d->series[0].center_data);
  ASSERT_TRUE(d->series[0].grid.uniform.has_value());  // automatic grid
  EXPECT_DOUBLE_EQ(d->series[0].grid.uniform->df, 1.0 / 5.0 / 5.0);
}

TEST(PeriodogramDecode, RejectsBadSeries) {
  v1::PeriodogramRequest r;
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series: at least one");

  r = Good();
  *r.mutable_series(0)->mutable_y() = Vec({1, 2, 3});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].y: length 3 differs");

  r = Good();
  *r.mutable_series(0)->mutable_dy() = Vec({1, 1, 0, 1, 1});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].dy: values must be finite and > 0 (index 2");

  r = Good();
  *r.mutable_series(0)->mutable_y() = Vec({1, NAN, 0, 0, 0});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].y: values must be finite (index 1");

  r = Good();
  *r.mutable_series(0)->mutable_t() = Vec({0, 1, std::numeric_limits<double>::infinity(), 3, 4});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].t: values must be finite");

  r = Good();
  *r.mutable_series(0)->mutable_t() = Vec({});
  *r.mutable_series(0)->mutable_y() = Vec({});
  r.mutable_series(0)->clear_dy();
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].t: a series needs at least 2 samples");

  r = Good();
  r.mutable_series(0)->mutable_t()->mutable_data()->resize(12);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].t.data: holds 12 bytes");

  r = Good();
  r.mutable_series(0)->mutable_y()->set_dtype(v1::INT32);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].y.dtype: must be float32 or float64");

  r = Good();
  r.mutable_series(0)->mutable_y()->add_shape(1);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].y.shape: must be 1-D");
}

// Two series packed after one Series: the second and third of the request.
v1::PeriodogramRequest GoodPacked() {
  v1::PeriodogramRequest r = Good();
  v1::PackedSeries* p = r.mutable_packed_series();
  *p->mutable_t() = Vec({0, 1, 2.5, 0.5, 1, 1.5, 4});
  *p->mutable_y() = Vec({1, 0, -1, 2, 1, 0, 3});
  p->add_lengths(3);
  p->add_lengths(4);
  return r;
}

TEST(PeriodogramDecode, PackedSeriesFollowTheSeriesWithTheRequestsOptions) {
  v1::PeriodogramRequest r = GoodPacked();
  r.set_fit_mean(false);
  r.mutable_frequency()->mutable_uniform()->set_f0(0.1);
  r.mutable_frequency()->mutable_uniform()->set_df(0.05);
  r.mutable_frequency()->mutable_uniform()->set_n(7);
  auto d = DecodePeriodogramRequest(r, {});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->series.size(), 3u);
  EXPECT_EQ(d->user_series, 3);
  EXPECT_EQ(d->series[1].t, (std::vector<double>{0, 1, 2.5}));
  EXPECT_EQ(d->series[1].y, (std::vector<double>{1, 0, -1}));
  EXPECT_EQ(d->series[2].t, (std::vector<double>{0.5, 1, 1.5, 4}));
  EXPECT_EQ(d->series[2].y, (std::vector<double>{2, 1, 0, 3}));
  for (const periodogram::SeriesSpec& s : d->series) {
    EXPECT_FALSE(s.fit_mean);
    ASSERT_TRUE(s.grid.uniform.has_value());
    EXPECT_EQ(s.grid.uniform->n, 7);
  }
  EXPECT_TRUE(d->series[1].dy.empty());

  // Packed alone, with dy.
  r = GoodPacked();
  r.clear_series();
  *r.mutable_packed_series()->mutable_dy() = Vec({1, 1, 1, 2, 2, 2, 2});
  d = DecodePeriodogramRequest(r, {});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->series.size(), 2u);
  EXPECT_EQ(d->series[1].dy, (std::vector<double>{2, 2, 2, 2}));
}

TEST(PeriodogramDecode, PackedSeriesErrorsNameTheSeries) {
  v1::PeriodogramRequest r = GoodPacked();
  r.mutable_packed_series()->set_lengths(1, 5);
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "packed_series.lengths[1]: 5 samples from sample 3 do not fit in t's 7");
  r = GoodPacked();
  r.mutable_packed_series()->set_lengths(1, -1);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "packed_series.lengths[1]: -1 samples");
  r = GoodPacked();
  r.mutable_packed_series()->set_lengths(1, 3);
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "packed_series.lengths: they add up to 6 samples, but t has 7");
  r = GoodPacked();
  r.mutable_packed_series()->set_lengths(0, 1);
  r.mutable_packed_series()->set_lengths(1, 6);
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "series[1].t: a series needs at least 2 samples (got 1)");
  r = GoodPacked();
  *r.mutable_packed_series()->mutable_y() = Vec({1, 0, -1, 2, 1, NAN, 3});
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "series[2].y: values must be finite (index 2 is nan)");
  r = GoodPacked();
  *r.mutable_packed_series()->mutable_t() = Vec({0, 1, 2.5, INFINITY, 1, 1.5, 4});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[2].t: values must be finite (index 0");
  r = GoodPacked();
  *r.mutable_packed_series()->mutable_dy() = Vec({1, 1, 1, 1, 0, 1, 1});
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "series[2].dy: values must be finite and > 0 (index 1 is 0)");
  r = GoodPacked();
  *r.mutable_packed_series()->mutable_y() = Vec({1, 0});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "packed_series.y: length 2 differs from t's length 7");
  r = GoodPacked();
  r.mutable_packed_series()->clear_t();
  ExpectError(r, absl::StatusCode::kInvalidArgument, "packed_series.t: missing");
  r = GoodPacked();
  r.mutable_packed_series()->mutable_y()->set_dtype(v1::INT32);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "packed_series.y.dtype: must be float32 or float64");
  // Series and packed series count together against the limit.
  ServiceLimits limits;
  limits.max_series_per_request = 2;
  ExpectError(GoodPacked(), absl::StatusCode::kResourceExhausted,
              "series: 3 series is over the limit of 2", limits);
}

TEST(PeriodogramDecode, RejectsBadFrequencies) {
  auto r = Good();
  *r.mutable_frequency()->mutable_explicit_frequencies() = Vec({0.1, 0.0, 0.3});
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "frequency.explicit_frequencies: frequencies must be finite and > 0 (index 1");
  r = Good();
  *r.mutable_frequency()->mutable_explicit_frequencies() = Vec({0.1, NAN});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "frequency.explicit_frequencies");
  r = Good();
  r.mutable_frequency()->mutable_uniform()->set_f0(-1);
  r.mutable_frequency()->mutable_uniform()->set_df(0.1);
  r.mutable_frequency()->mutable_uniform()->set_n(10);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "frequency.uniform.f0: must be finite and > 0");
  r = Good();
  r.mutable_series(0)->mutable_frequency()->mutable_uniform()->set_f0(1);
  r.mutable_series(0)->mutable_frequency()->mutable_uniform()->set_df(0.1);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].frequency.uniform.n: must be >= 1");
  r = Good();
  r.mutable_frequency()->mutable_auto_()->set_samples_per_peak(0);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "frequency.auto.samples_per_peak");
}

TEST(PeriodogramDecode, RejectsBadEnums) {
  auto r = Good();
  r.set_dtype(v1::INT64);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "dtype: must be float32 or float64");
  r = Good();
  r.set_normalization(static_cast<v1::Normalization>(17));
  ExpectError(r, absl::StatusCode::kInvalidArgument, "normalization: unknown value 17");
}

TEST(PeriodogramDecode, AnalysisOptionsAreCheckedAndResolved) {
  auto r = Good();
  r.set_method(static_cast<v1::PeriodogramMethod>(9));
  ExpectError(r, absl::StatusCode::kInvalidArgument, "method: unknown value 9");
  r = Good();
  r.set_nterms(9);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "nterms: must be 1 .. 8 (got 9)");
  // An explicit 0 (Astropy's offset-only model) is refused, not read as the default 1.
  r = Good();
  r.set_nterms(0);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "nterms: 0 (Astropy's offset-only model");
  r = Good();
  r.set_top_k(-2);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "top_k: must be 0 .. 10000 (got -2)");
  r = Good();
  r.mutable_false_alarm()->set_method(static_cast<v1::FalseAlarmMethod>(7));
  ExpectError(r, absl::StatusCode::kInvalidArgument, "false_alarm.method: unknown value 7");
  r = Good();
  r.mutable_false_alarm()->add_probabilities(1.5);
  ExpectError(r, absl::StatusCode::kInvalidArgument,
              "false_alarm.probabilities: each must be in [0, 1] (index 0 is 1.5)");
  r = Good();
  r.set_nterms(2);
  r.mutable_false_alarm();
  ExpectError(r, absl::StatusCode::kInvalidArgument, "false_alarm: false-alarm probabilities are defined for nterms = 1");
  r = Good();
  r.mutable_series(0)->mutable_model()->set_frequency(-1);
  ExpectError(r, absl::StatusCode::kInvalidArgument, "series[0].model.frequency: must be finite and > 0");
  // Fast needs a uniform grid.
  r = Good();
  r.set_method(v1::PERIODOGRAM_METHOD_FAST);
  *r.mutable_frequency()->mutable_explicit_frequencies() = Vec({0.5, 1.0, 2.0});
  ExpectError(r, absl::StatusCode::kInvalidArgument, "method: fast needs a uniform or automatic grid");

  // Resolved: nterms defaults to 1, the method is chosen, bootstrap series follow the caller's.
  r = Good();
  r.set_method(v1::PERIODOGRAM_METHOD_FAST);
  r.mutable_false_alarm()->set_method(v1::FALSE_ALARM_METHOD_BOOTSTRAP);
  r.mutable_false_alarm()->set_n_bootstraps(3);
  r.set_model_parameters(true);
  auto d = DecodePeriodogramRequest(r, ServiceLimits{});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->user_series, 1);
  ASSERT_EQ(d->series.size(), 4u);
  EXPECT_EQ(d->series[0].nterms, 1);
  EXPECT_EQ(d->series[0].method, periodogram::Method::kFast);
  EXPECT_TRUE(d->series[0].model.has_value());
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(d->series[i].bootstrap_of, 0);
    EXPECT_EQ(d->series[i].t, d->series[0].t);
    EXPECT_FALSE(d->series[i].model.has_value());
  }
}

TEST(PeriodogramDecode, BootstrapSizeIsBoundedBeforeAllocating) {
  ServiceLimits limits;
  limits.max_bootstrap_samples = 1000;
  auto r = Good();
  r.mutable_false_alarm()->set_method(v1::FALSE_ALARM_METHOD_BOOTSTRAP);
  r.mutable_false_alarm()->set_n_bootstraps(std::numeric_limits<int32_t>::max());
  ExpectError(r, absl::StatusCode::kResourceExhausted, "false_alarm.n_bootstraps: 2147483647 resamplings", limits);
  limits = {};
  limits.max_pairs_per_request = 100000;
  r.mutable_false_alarm()->set_n_bootstraps(100000);
  ExpectError(r, absl::StatusCode::kResourceExhausted, "take the request over the limit of 100000 pairs", limits);
}

TEST(PeriodogramDecode, LimitsAreResourceExhausted) {
  ServiceLimits limits;
  limits.max_frequencies_per_series = 100;
  auto r = Good();
  r.mutable_frequency()->mutable_uniform()->set_f0(1);
  r.mutable_frequency()->mutable_uniform()->set_df(0.1);
  r.mutable_frequency()->mutable_uniform()->set_n(101);
  ExpectError(r, absl::StatusCode::kResourceExhausted, "frequency.uniform.n: 101 frequencies is over the limit of 100", limits);
  limits = {};
  limits.max_samples_per_series = 4;
  ExpectError(Good(), absl::StatusCode::kResourceExhausted, "series[0].t: 5 samples is over the limit of 4", limits);
  limits = {};
  limits.max_series_per_request = 1;
  r = Good();
  *r.add_series() = r.series(0);
  ExpectError(r, absl::StatusCode::kResourceExhausted, "series: 2 series is over the limit of 1", limits);
  limits = {};
  limits.max_response_bytes = (1 << 20) + 100000;  // room for 100,000 bytes beyond the margin
  r = Good();
  r.mutable_frequency()->mutable_uniform()->set_f0(1);
  r.mutable_frequency()->mutable_uniform()->set_df(0.1);
  r.mutable_frequency()->mutable_uniform()->set_n(12000);  // 96,000 bytes of float64 power
  EXPECT_TRUE(DecodePeriodogramRequest(r, limits).ok());
  for (int i = 0; i < 40; ++i) *r.add_series() = r.series(0);  // + per-result overhead
  ExpectError(r, absl::StatusCode::kResourceExhausted, "the response would hold", limits);
  limits = {};
  limits.max_pairs_per_request = 10;
  ExpectError(Good(), absl::StatusCode::kResourceExhausted, "sample-frequency pairs", limits);
}

// Many series naming one resident tensor: the decoded inputs are bounded (twice
// max_request_bytes) before they are copied, not after (the pair limit alone would let 100,000
// series x 16M samples through decoding: 25 TB).
TEST(PeriodogramDecode, ResidentInputsNamedManyTimesAreBoundedBeforeCopying) {
  TensorStoreOptions o;
  o.sweep_interval = absl::ZeroDuration();
  TensorStore store(o);
  const int64_t n = 1000;
  auto tensor = store.Create("c", TensorSpec{v1::FLOAT64, 8, {n}});
  ASSERT_TRUE(tensor.ok());
  std::vector<double> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = 0.01 * i;
  ASSERT_TRUE((*tensor)->Write(0, std::string(reinterpret_cast<const char*>(t.data()), n * 8)).ok());
  v1::PeriodogramRequest r;
  for (int i = 0; i < 50; ++i) {
    auto* s = r.add_series();
    s->mutable_t()->set_handle((*tensor)->handle());
    s->mutable_y()->set_handle((*tensor)->handle());
    auto* u = s->mutable_frequency()->mutable_uniform();
    u->set_f0(0.1);
    u->set_df(0.1);
    u->set_n(10);
  }
  ServiceLimits limits;
  limits.max_request_bytes = 200000;  // budget 400,000 bytes: 25 series' t and y
  TensorResolver resolver(TensorContext{&store, nullptr, "c"});
  auto d = DecodePeriodogramRequest(r, limits, &resolver);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("series[25].t: 1000 values"));
  // Within the budget the same request decodes.
  limits.max_request_bytes = 1 << 20;
  TensorResolver again(TensorContext{&store, nullptr, "c"});
  EXPECT_TRUE(DecodePeriodogramRequest(r, limits, &again).ok());
}

}  // namespace
}  // namespace gpucompute
