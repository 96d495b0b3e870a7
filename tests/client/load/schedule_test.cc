// Tests of the open-loop arrival schedules (client/load/schedule.h).
#include "client/load/schedule.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::load {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kSecond = 1000000000;

TEST(ScheduleTest, ConstantIsEvenlySpaced) {
  EXPECT_THAT(ArrivalTimes(Arrival::kConstant, 4, kSecond, 0, 1),
              ElementsAre(0, 250000000, 500000000, 750000000));
  // 3 per second does not divide a second: no drift from accumulated rounding.
  const std::vector<int64_t> t = ArrivalTimes(Arrival::kConstant, 3, 100 * kSecond, 0, 1);
  ASSERT_EQ(t.size(), 300u);
  EXPECT_EQ(t[299], 99666666667);
}

TEST(ScheduleTest, ConstantByCount) {
  const std::vector<int64_t> t = ArrivalTimes(Arrival::kConstant, 1000, 0, 5, 1);
  EXPECT_THAT(t, ElementsAre(0, 1000000, 2000000, 3000000, 4000000));
}

TEST(ScheduleTest, PoissonRateAndExponentialGaps) {
  const double rate = 10000;
  const std::vector<int64_t> t = ArrivalTimes(Arrival::kPoisson, rate, 10 * kSecond, 0, 42);
  // 100,000 expected; the count of a Poisson process has standard deviation sqrt(1e5) = 316.
  EXPECT_NEAR(static_cast<double>(t.size()), 1e5, 5 * 316);
  double sum = 0, sum2 = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    ASSERT_GE(t[i], t[i - 1]);
    const double gap = static_cast<double>(t[i] - t[i - 1]);
    sum += gap;
    sum2 += gap * gap;
  }
  const double n = static_cast<double>(t.size() - 1);
  const double mean = sum / n;
  const double cv = std::sqrt(sum2 / n - mean * mean) / mean;
  EXPECT_NEAR(mean, 1e9 / rate, 0.02 * 1e9 / rate);
  EXPECT_NEAR(cv, 1.0, 0.02);  // exponential: standard deviation equals the mean
  EXPECT_LT(t.back(), 10 * kSecond);
}

TEST(ScheduleTest, PoissonIsSeededAndItsPrefixIsStable) {
  const std::vector<int64_t> a = ArrivalTimes(Arrival::kPoisson, 500, kSecond, 0, 7);
  const std::vector<int64_t> b = ArrivalTimes(Arrival::kPoisson, 500, kSecond, 0, 7);
  const std::vector<int64_t> c = ArrivalTimes(Arrival::kPoisson, 500, kSecond, 0, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The runner relies on this: the warm-up's arrivals begin the by-count schedule.
  const std::vector<int64_t> longer =
      ArrivalTimes(Arrival::kPoisson, 500, 0, static_cast<int64_t>(a.size()) + 10, 7);
  ASSERT_EQ(longer.size(), a.size() + 10);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), longer.begin()));
}

TEST(ScheduleTest, Empty) {
  EXPECT_TRUE(ArrivalTimes(Arrival::kConstant, 100, 0, 0, 1).empty());
  EXPECT_TRUE(ArrivalTimes(Arrival::kConstant, 0, kSecond, 0, 1).empty());
}

}  // namespace
}  // namespace gpucompute::load
