// Tests of PeriodogramRequestBuilder and the grid/result helpers
// (client/cpp/periodogram_request_builder.h).
#include "client/cpp/periodogram_request_builder.h"

#include <string>
#include <vector>

#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::client {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<double> Decode(const v1::Tensor& t) {
  absl::StatusOr<std::vector<double>> v = TensorToDoubles(t);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.value_or(std::vector<double>{});
}

TEST(PeriodogramRequestBuilderTest, DefaultsLeaveOptionalFieldsUnset) {
  const std::vector<double> t = {0, 1, 2}, y = {1, 0, 1};
  absl::StatusOr<v1::PeriodogramRequest> r = PeriodogramRequestBuilder().AddSeries(t, y).Build();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->series_size(), 1);
  EXPECT_EQ(r->dtype(), v1::FLOAT64);
  EXPECT_EQ(r->normalization(), v1::NORMALIZATION_STANDARD);
  EXPECT_FALSE(r->has_fit_mean());
  EXPECT_FALSE(r->has_center_data());
  EXPECT_FALSE(r->has_frequency());
  EXPECT_FALSE(r->series(0).has_dy());
  EXPECT_FALSE(r->series(0).has_frequency());
  EXPECT_EQ(r->series(0).t().dtype(), v1::FLOAT64);
  EXPECT_EQ(Decode(r->series(0).t()), t);
  EXPECT_EQ(Decode(r->series(0).y()), y);
}

TEST(PeriodogramRequestBuilderTest, SetsEveryOption) {
  const std::vector<double> t = {0, 1, 2, 3}, y = {1, 2, 3, 4}, dy = {0.1, 0.2, 0.3, 0.4};
  const std::vector<double> f = {0.1, 0.2};
  PeriodogramRequestBuilder builder;
  builder.AddSeries(t, y, dy)
      .AddSeries(t, y, {}, ExplicitGrid(f))
      .SetGrid(UniformGrid(0.5, 0.01, 100))
      .SetNormalization(v1::NORMALIZATION_PSD)
      .SetDType(v1::FLOAT32)
      .SetFitMean(false)
      .SetCenterData(false)
      .SetSeriesDType(v1::FLOAT32);
  EXPECT_EQ(builder.series_count(), 2);
  absl::StatusOr<v1::PeriodogramRequest> r = builder.Build();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dtype(), v1::FLOAT32);
  EXPECT_EQ(r->normalization(), v1::NORMALIZATION_PSD);
  ASSERT_TRUE(r->has_fit_mean());
  EXPECT_FALSE(r->fit_mean());
  ASSERT_TRUE(r->has_center_data());
  EXPECT_FALSE(r->center_data());
  ASSERT_TRUE(r->frequency().has_uniform());
  EXPECT_EQ(r->frequency().uniform().f0(), 0.5);
  EXPECT_EQ(r->frequency().uniform().df(), 0.01);
  EXPECT_EQ(r->frequency().uniform().n(), 100);
  EXPECT_EQ(r->series(0).t().dtype(), v1::FLOAT32);
  EXPECT_THAT(Decode(r->series(0).dy()),
              ElementsAre(static_cast<float>(0.1), static_cast<float>(0.2),
                          static_cast<float>(0.3), static_cast<float>(0.4)));
  EXPECT_FALSE(r->series(1).has_dy());
  ASSERT_TRUE(r->series(1).frequency().has_explicit_frequencies());
  EXPECT_EQ(Decode(r->series(1).frequency().explicit_frequencies()), f);
}

TEST(PeriodogramRequestBuilderTest, SeriesSharingTheGridGoPacked) {
  const std::vector<double> t3 = {0, 1, 2}, y3 = {1, 0, 1}, t2 = {5, 6}, y2 = {2, 3};
  absl::StatusOr<v1::PeriodogramRequest> r =
      PeriodogramRequestBuilder().AddSeries(t3, y3).AddSeries(t2, y2).Build();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->series_size(), 0);
  ASSERT_TRUE(r->has_packed_series());
  EXPECT_THAT(r->packed_series().lengths(), ElementsAre(3, 2));
  EXPECT_THAT(Decode(r->packed_series().t()), ElementsAre(0, 1, 2, 5, 6));
  EXPECT_THAT(Decode(r->packed_series().y()), ElementsAre(1, 0, 1, 2, 3));
  EXPECT_FALSE(r->packed_series().has_dy());
  // With dy on every series, dy is packed too; on some only, nothing is.
  r = PeriodogramRequestBuilder().AddSeries(t3, y3, y3).AddSeries(t2, y2, y2).Build();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Decode(r->packed_series().dy()), ElementsAre(1, 0, 1, 2, 3));
  r = PeriodogramRequestBuilder().AddSeries(t3, y3, y3).AddSeries(t2, y2).Build();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_packed_series());
  EXPECT_EQ(r->series_size(), 2);
}

TEST(PeriodogramRequestBuilderTest, RejectsMismatchedLengths) {
  const std::vector<double> t3 = {0, 1, 2}, t2 = {0, 1};
  absl::StatusOr<v1::PeriodogramRequest> r =
      PeriodogramRequestBuilder().AddSeries(t3, t3).AddSeries(t3, t2).Build();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("series[1]"));
  r = PeriodogramRequestBuilder().AddSeries(t3, t3, t2).Build();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("dy has 2 values"));
  r = PeriodogramRequestBuilder().AddSeries(t3, t3).SetDType(v1::INT32).Build();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = PeriodogramRequestBuilder().AddSeries(t3, t3).SetSeriesDType(v1::FLOAT16).Build();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GridTest, RangeGrid) {
  absl::StatusOr<v1::FrequencyGrid> g = RangeGrid(0.1, 1.1, 11);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->uniform().f0(), 0.1);
  EXPECT_DOUBLE_EQ(g->uniform().df(), 0.1);
  EXPECT_EQ(g->uniform().n(), 11);
  g = RangeGrid(2, 2, 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->uniform().n(), 1);
  EXPECT_GT(g->uniform().df(), 0);
  EXPECT_FALSE(RangeGrid(0, 1, 10).ok());
  EXPECT_FALSE(RangeGrid(1, 0.5, 10).ok());
  EXPECT_FALSE(RangeGrid(1, 1, 10).ok());
  EXPECT_FALSE(RangeGrid(1, 2, 0).ok());
  EXPECT_FALSE(RangeGrid(1, std::numeric_limits<double>::infinity(), 10).ok());
}

TEST(GridTest, AutoGridSetsOnlyGivenFields) {
  v1::FrequencyGrid g = AutoGrid();
  ASSERT_TRUE(g.has_auto_());
  EXPECT_FALSE(g.auto_().has_samples_per_peak());
  EXPECT_FALSE(g.auto_().has_maximum_frequency());
  g = AutoGrid({.samples_per_peak = 10, .maximum_frequency = 3});
  EXPECT_EQ(g.auto_().samples_per_peak(), 10);
  EXPECT_FALSE(g.auto_().has_nyquist_factor());
  EXPECT_FALSE(g.auto_().has_minimum_frequency());
  EXPECT_EQ(g.auto_().maximum_frequency(), 3);
}

TEST(GridTest, ParsesNames) {
  EXPECT_EQ(*ParseNormalization("standard"), v1::NORMALIZATION_STANDARD);
  EXPECT_EQ(*ParseNormalization("model"), v1::NORMALIZATION_MODEL);
  EXPECT_EQ(*ParseNormalization("log"), v1::NORMALIZATION_LOG);
  EXPECT_EQ(*ParseNormalization("psd"), v1::NORMALIZATION_PSD);
  EXPECT_FALSE(ParseNormalization("PSD").ok());
  EXPECT_EQ(NormalizationName(v1::NORMALIZATION_LOG), "log");
  EXPECT_EQ(*ParseComputeDType("float32"), v1::FLOAT32);
  EXPECT_EQ(*ParseComputeDType("float64"), v1::FLOAT64);
  EXPECT_FALSE(ParseComputeDType("int8").ok());
}

TEST(ResultTest, FrequenciesFromGridOrExplicitList) {
  v1::SeriesResult result;
  const std::vector<double> power = {0.1, 0.9, 0.2};
  *result.mutable_power() = MakeTensor(power);
  result.set_peak_frequency(1.5);
  result.set_peak_power(0.9);
  result.set_peak_index(1);

  // Explicit grid: the response has no grid; the caller's list is used.
  const std::vector<double> list = {1, 1.5, 4};
  absl::StatusOr<DecodedSeriesResult> d = DecodeSeriesResult(result, list);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->frequency, list);
  EXPECT_EQ(d->power, power);
  EXPECT_EQ(d->peak_index, 1);
  EXPECT_EQ(d->peak_frequency, 1.5);
  EXPECT_FALSE(DecodeSeriesResult(result).ok());  // no grid and no list

  *result.mutable_grid() = UniformGrid(1, 0.5, 3).uniform();
  d = DecodeSeriesResult(result);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->frequency, ElementsAre(1, 1.5, 2));

  result.mutable_grid()->set_n(4);
  EXPECT_FALSE(DecodeSeriesResult(result).ok());
  absl::StatusOr<std::vector<double>> f = ResultFrequencies(result, 4);
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(*f, ElementsAre(1, 1.5, 2, DoubleNear(2.5, 1e-15)));
}

}  // namespace
}  // namespace gpucompute::client
