// Tests of gpucompute-load's percentiles and per-level figures (client/load/stats.h).
#include "client/load/stats.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::load {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(PercentileTest, NearestRankOfOneToHundred) {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);  // 1 .. 100
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile(v, 0.01), 1);
  EXPECT_EQ(Percentile(v, 0.5), 50);
  EXPECT_EQ(Percentile(v, 0.9), 90);
  EXPECT_EQ(Percentile(v, 0.95), 95);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 0.999), 100);
  EXPECT_EQ(Percentile(v, 1.0), 100);
}

TEST(PercentileTest, SmallAndEmpty) {
  EXPECT_EQ(Percentile({}, 0.5), 0);
  const std::vector<double> one = {7};
  EXPECT_EQ(Percentile(one, 0.0), 7);
  EXPECT_EQ(Percentile(one, 0.999), 7);
  const std::vector<double> two = {1, 2};
  EXPECT_EQ(Percentile(two, 0.5), 1);   // rank ceil(1.0) = 1
  EXPECT_EQ(Percentile(two, 0.51), 2);
}

TEST(SummarizeTest, ShuffledThousand) {
  std::vector<double> v(1000);
  std::iota(v.begin(), v.end(), 1.0);  // 1 .. 1000
  std::shuffle(v.begin(), v.end(), std::mt19937(3));
  const Distribution d = Summarize(v);
  EXPECT_EQ(d.count, 1000);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 1000);
  EXPECT_DOUBLE_EQ(d.mean, 500.5);
  EXPECT_EQ(d.p50, 500);
  EXPECT_EQ(d.p90, 900);
  EXPECT_EQ(d.p95, 950);
  EXPECT_EQ(d.p99, 990);
  EXPECT_EQ(d.p999, 999);
}

TEST(SummarizeTest, OrderedOnSkewedData) {
  std::mt19937 rng(5);
  std::lognormal_distribution<double> lognormal(0, 1.5);
  std::vector<double> v(12345);
  for (double& x : v) x = lognormal(rng);
  const Distribution d = Summarize(v);
  EXPECT_LE(d.min, d.p50);
  EXPECT_LE(d.p50, d.p90);
  EXPECT_LE(d.p90, d.p95);
  EXPECT_LE(d.p95, d.p99);
  EXPECT_LE(d.p99, d.p999);
  EXPECT_LE(d.p999, d.max);
  EXPECT_GT(d.mean, d.p50);  // right-skewed
}

Record Ok(int64_t start_us, int64_t latency_us, int job, bool measured = true) {
  Record r;
  r.start_ns = start_us * 1000;
  r.end_ns = (start_us + latency_us) * 1000;
  r.code = 0;
  r.job = job;
  r.response_bytes = 10;
  r.queue_us = 5;
  r.decode_us = latency_us / 8;
  r.compute_us = latency_us / 2;
  r.total_us = latency_us - 1;
  r.batch_requests = job + 1;
  r.measured = measured;
  return r;
}

TEST(FiguresTest, ThroughputLatencyErrorsAndBatches) {
  const std::vector<JobSize> jobs = {{100, 64}, {200, 128}};
  std::vector<Record> records;
  for (int i = 1; i <= 10; ++i) records.push_back(Ok(i * 100, i * 10, i % 2));
  records.push_back(Ok(0, 999999, 0, /*measured=*/false));  // warm-up: ignored
  Record failed = Ok(50, 5, 0);
  failed.code = 14;  // UNAVAILABLE
  records.push_back(failed);
  Record dropped;
  dropped.code = kDropped;
  dropped.measured = true;
  records.push_back(dropped);

  const Figures f = ComputeFigures(records, jobs, 2.0);
  EXPECT_EQ(f.requests, 11);
  EXPECT_EQ(f.ok, 10);
  EXPECT_EQ(f.errors, 1);
  EXPECT_EQ(f.dropped, 1);
  EXPECT_THAT(f.errors_by_code, ElementsAre(Pair("DROPPED", 1), Pair("UNAVAILABLE", 1)));
  EXPECT_DOUBLE_EQ(f.requests_per_s, 5.0);
  // Five of job 0 (64 payload, 100 request bytes), five of job 1 (128, 200), over 2 s.
  EXPECT_DOUBLE_EQ(f.payload_bytes_per_s, (5 * 64 + 5 * 128) / 2.0);
  EXPECT_DOUBLE_EQ(f.request_bytes_per_s, (5 * 100 + 5 * 200) / 2.0);
  EXPECT_DOUBLE_EQ(f.response_bytes_per_s, 10 * 10 / 2.0);
  EXPECT_EQ(f.latency_us.count, 10);
  EXPECT_DOUBLE_EQ(f.latency_us.min, 10);
  EXPECT_DOUBLE_EQ(f.latency_us.p50, 50);
  EXPECT_DOUBLE_EQ(f.latency_us.max, 100);
  EXPECT_DOUBLE_EQ(f.queue_us.p50, 5);
  EXPECT_DOUBLE_EQ(f.compute_us.max, 50);
  EXPECT_DOUBLE_EQ(f.decode_us.max, 12);  // 100 / 8, truncated
  EXPECT_THAT(f.batch_histogram, ElementsAre(Pair(1, 5), Pair(2, 5)));
  EXPECT_DOUBLE_EQ(f.batch_requests.mean, 1.5);
}

TEST(FiguresTest, JobFilterAndMissingTimings) {
  const std::vector<JobSize> jobs = {{1, 1}, {1, 1}, {1, 1}};
  std::vector<Record> records = {Ok(0, 10, 0), Ok(0, 20, 1), Ok(0, 30, 2)};
  records[2].decode_us = records[2].queue_us = records[2].compute_us = records[2].total_us = -1;
  records[2].batch_requests = -1;
  const std::vector<int> filter = {1, 2};
  const Figures f = ComputeFigures(records, jobs, 1.0, filter);
  EXPECT_EQ(f.ok, 2);
  EXPECT_DOUBLE_EQ(f.latency_us.min, 20);
  EXPECT_EQ(f.queue_us.count, 1);  // the server did not report record 2's
  EXPECT_EQ(f.batch_requests.count, 1);
}

TEST(FiguresTest, EmptyWindow) {
  const Figures f = ComputeFigures({}, {}, 0);
  EXPECT_EQ(f.requests, 0);
  EXPECT_EQ(f.requests_per_s, 0);
  EXPECT_EQ(f.latency_us.count, 0);
}

TEST(StatusCodeNameTest, Names) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(kDropped), "DROPPED");
  EXPECT_EQ(StatusCodeName(99), "CODE_99");
}

}  // namespace
}  // namespace gpucompute::load
