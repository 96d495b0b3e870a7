// The metrics registry: exact text exposition of a small registry, histogram bucket
// arithmetic (inclusive bounds, cumulative buckets, +Inf, sum and count), label escaping,
// callback families, number formatting, and recording from many threads.
#include "server/metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/server_metrics.h"

namespace gpucompute::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, ExposesASmallRegistryExactly) {
  Registry r;
  auto& requests = r.AddCounter("demo_requests_total", "Requests by op.", {"op"});
  auto& pending = r.AddGauge("demo_pending", "Pending now.");
  auto& latency = r.AddHistogram("demo_latency_us", "Latency.", {"op"}, {10, 100});
  requests.WithLabels({"dense"}).Increment();
  requests.WithLabels({"dense"}).Increment(2);
  requests.WithLabels({"assimilate"}).Increment();
  pending.Get().Set(3);
  pending.Get().Add(-1);
  Histogram& h = latency.WithLabels({"dense"});
  h.Observe(5);
  h.Observe(10);   // on a bound: counted in le="10" (inclusive)
  h.Observe(50);
  h.Observe(1000); // above every bound: only +Inf
  r.AddCallback(MetricType::kGauge, "demo_memory_bytes", "Memory by GPU.", {"gpu"}, [] {
    return std::vector<Sample>{{{"1"}, 2048}, {{"0"}, 1024}};
  });

  EXPECT_EQ(r.Expose(),
            "# HELP demo_requests_total Requests by op.\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total{op=\"assimilate\"} 1\n"
            "demo_requests_total{op=\"dense\"} 3\n"
            "# HELP demo_pending Pending now.\n"
            "# TYPE demo_pending gauge\n"
            "demo_pending 2\n"
            "# HELP demo_latency_us Latency.\n"
            "# TYPE demo_latency_us histogram\n"
            "demo_latency_us_bucket{op=\"dense\",le=\"10\"} 2\n"
            "demo_latency_us_bucket{op=\"dense\",le=\"100\"} 3\n"
            "demo_latency_us_bucket{op=\"dense\",le=\"+Inf\"} 4\n"
            "demo_latency_us_sum{op=\"dense\"} 1065\n"
            "demo_latency_us_count{op=\"dense\"} 4\n"
            "# HELP demo_memory_bytes Memory by GPU.\n"
            "# TYPE demo_memory_bytes gauge\n"
            "demo_memory_bytes{gpu=\"0\"} 1024\n"
            "demo_memory_bytes{gpu=\"1\"} 2048\n");
}

TEST(MetricsTest, UnlabelledFamiliesAreExposedBeforeAnyRecording) {
  Registry r;
  r.AddCounter("a_total", "A.");
  r.AddHistogram("b", "B.", {}, {1});
  r.AddGauge("c", "C.", {"op"});  // labelled: no series until one is used
  EXPECT_EQ(r.Expose(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n"
            "# HELP b B.\n# TYPE b histogram\nb_bucket{le=\"1\"} 0\nb_bucket{le=\"+Inf\"} 0\n"
            "b_sum 0\nb_count 0\n"
            "# HELP c C.\n# TYPE c gauge\n");
}

TEST(MetricsTest, HistogramBucketArithmetic) {
  Histogram h({1, 2.5, 5});
  h.Observe(0);     // le 1
  h.Observe(1);     // le 1 (inclusive)
  h.Observe(1.0001);  // le 2.5
  h.ObserveN(5, 3);   // le 5, three times
  h.Observe(7);     // +Inf
  h.Observe(-3);    // le 1: negative values count in the first bucket
  EXPECT_EQ(h.BucketCounts(), (std::vector<uint64_t>{3, 1, 3, 1}));
  EXPECT_DOUBLE_EQ(h.sum(), 0 + 1 + 1.0001 + 15 + 7 - 3);
  h.ObserveN(1, 0);  // nothing
  h.Observe(std::nan(""));  // +Inf, sum unchanged
  EXPECT_EQ(h.BucketCounts(), (std::vector<uint64_t>{3, 1, 3, 2}));
  EXPECT_DOUBLE_EQ(h.sum(), 21.0001);

  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());
  const std::vector<double> d = ServerMetrics::DurationBucketsSeconds();
  ASSERT_EQ(d.size(), 21u);
  EXPECT_EQ(d.front(), 1e-5);
  EXPECT_EQ(d[1], 2.5e-5);
  EXPECT_EQ(d[3], 1e-4);
  EXPECT_EQ(d.back(), 50);
  EXPECT_TRUE(std::is_sorted(d.begin(), d.end()));
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry r;
  r.AddCounter("e_total", "Back\\slash and\nnewline.", {"model"})
      .WithLabels({"a\"b\\c\nd"})
      .Increment();
  EXPECT_EQ(r.Expose(),
            "# HELP e_total Back\\\\slash and\\nnewline.\n"
            "# TYPE e_total counter\n"
            "e_total{model=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(MetricsTest, FormatsNumbersAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-7), "-7");
  EXPECT_EQ(FormatValue(141733920768), "141733920768");  // an H200's bytes, exactly
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(2.5e-7), "2.5e-07");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
}

TEST(MetricsTest, SeriesAreResolvedOnceAndStayPut) {
  Registry r;
  auto& f = r.AddCounter("x_total", "X.", {"op", "code"});
  Counter& a = f.WithLabels({"dense", "NOT_FOUND"});
  Counter& b = f.WithLabels({"dense", "NOT_FOUND"});
  for (int i = 0; i < 100; ++i) f.WithLabels({"op" + std::to_string(i), "OK"});  // grow the map
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&a, &f.WithLabels({"dense", "NOT_FOUND"}));
}

TEST(MetricsTest, RecordsFromManyThreads) {
  Registry r;
  Counter& c = r.AddCounter("t_total", "T.").Get();
  Histogram& h = r.AddHistogram("t_us", "T.", {}, {10}).Get();
  Gauge& g = r.AddGauge("t_pending", "T.").Get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Increment();
        h.Observe(i % 2 == 0 ? 1 : 100);
        g.Add(1);
        g.Add(-1);
      }
    });
  }
  for (int i = 0; i < 20; ++i) r.Expose();  // scrapes racing the recording
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 80000);
  EXPECT_EQ(h.BucketCounts(), (std::vector<uint64_t>{40000, 40000}));
  EXPECT_EQ(h.sum(), 40000 * 1 + 40000 * 100);
  EXPECT_EQ(g.value(), 0);
}

TEST(MetricsTest, CallMetricsCountOutcomesByOpAndCode) {
  Registry r;
  ServerMetrics m(&r);
  m.RecordCall("dense", absl::StatusCode::kOk, absl::Microseconds(30));
  m.RecordCall("dense", absl::StatusCode::kOk, absl::Microseconds(300));
  m.RecordCall("dense", absl::StatusCode::kInvalidArgument, absl::Microseconds(20));
  m.Calls("periodogram").Record(absl::StatusCode::kResourceExhausted, absl::Microseconds(5));
  m.Calls("periodogram").Record(static_cast<absl::StatusCode>(99), absl::Microseconds(5));
  const std::string text = r.Expose();
  EXPECT_THAT(text, HasSubstr("gpucompute_request_success_total{op=\"dense\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(
      "gpucompute_request_failure_total{op=\"dense\",code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(
      "gpucompute_request_failure_total{op=\"periodogram\",code=\"RESOURCE_EXHAUSTED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(
      "gpucompute_request_failure_total{op=\"periodogram\",code=\"UNKNOWN\"} 1\n"));
  // In seconds, the bounds as Prometheus writes them.
  EXPECT_THAT(text, HasSubstr("gpucompute_request_duration_seconds_count{op=\"dense\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("gpucompute_request_duration_seconds_sum{op=\"dense\"} 0.00035"));
  EXPECT_THAT(text, HasSubstr(
      "gpucompute_request_duration_seconds_bucket{op=\"dense\",le=\"2.5e-05\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(
      "gpucompute_request_duration_seconds_bucket{op=\"dense\",le=\"5e-05\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(
      "gpucompute_request_duration_seconds_bucket{op=\"dense\",le=\"5e-04\"} 3\n"));

  SchedulerMetrics s = m.ForScheduler("dense");
  s.pending->Add(4);
  s.batch_size->Observe(3);
  EXPECT_THAT(r.Expose(), HasSubstr("gpucompute_pending_requests{op=\"dense\"} 4\n"));
  EXPECT_THAT(r.Expose(), HasSubstr("gpucompute_batch_size_bucket{op=\"dense\",le=\"2\"} 0\n"
                                    "gpucompute_batch_size_bucket{op=\"dense\",le=\"4\"} 1\n"));
}

TEST(MetricsTest, ResidentTensorsAreCountedAtScrapeTime) {
  Registry r;
  ServerMetrics m(&r);
  ResidentTensorCounts now{2, 4096};
  m.AddResidentTensors([&now] { return now; });
  EXPECT_THAT(r.Expose(), HasSubstr("gpucompute_resident_tensors 2\n"));
  now = {3, 1 << 20};
  const std::string text = r.Expose();
  EXPECT_THAT(text, HasSubstr("gpucompute_resident_tensors 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE gpucompute_resident_tensor_bytes gauge\n"
                              "gpucompute_resident_tensor_bytes 1048576\n"));
}

TEST(MetricsDeathTest, DuplicateOrInvalidNamesAreProgrammingErrors) {
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("dup_total", "A.");
        r.AddGauge("dup_total", "B.");
      },
      "registered twice");
  EXPECT_DEATH({ Registry().AddGauge("bad-name", "A."); }, "invalid metric name");
  EXPECT_DEATH({ Registry().AddGauge("g", "A.", {"le"}); }, "invalid label name");
  EXPECT_DEATH({ Registry().AddHistogram("h", "A.", {}, {2, 1}); }, "strictly increasing");
}

}  // namespace
}  // namespace gpucompute::metrics
