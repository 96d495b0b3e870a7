// Tests of gpucompute-load's flag syntaxes (client/load/config.h).
#include "client/load/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::load {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ByteSizeTest, PlainAndBinarySuffixes) {
  EXPECT_EQ(*ParseByteSize("0"), 0);
  EXPECT_EQ(*ParseByteSize("4096"), 4096);
  EXPECT_EQ(*ParseByteSize("4Ki"), 4096);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096);
  EXPECT_EQ(*ParseByteSize("64Mi"), int64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("256Mi"), int64_t{256} << 20);
  EXPECT_EQ(*ParseByteSize("1Gi"), int64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("2Ti"), int64_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("1.5Mi"), int64_t{3} << 19);
  EXPECT_EQ(*ParseByteSize(" 8 Ki "), 8192);
}

TEST(ByteSizeTest, DecimalSuffixes) {
  EXPECT_EQ(*ParseByteSize("10k"), 10000);
  EXPECT_EQ(*ParseByteSize("10K"), 10000);
  EXPECT_EQ(*ParseByteSize("2M"), 2000000);
  EXPECT_EQ(*ParseByteSize("64MB"), 64000000);
  EXPECT_EQ(*ParseByteSize("1G"), 1000000000);
  EXPECT_EQ(*ParseByteSize("512B"), 512);
}

TEST(ByteSizeTest, Rejects) {
  for (const char* bad : {"", "Mi", "abc", "-1", "-4Ki", "4Qi", "4 Mi Mi", "1e300Gi", "nan"}) {
    absl::StatusOr<int64_t> v = ParseByteSize(bad);
    EXPECT_FALSE(v.ok()) << bad << " -> " << *v;
    if (!v.ok()) EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ByteSizeTest, Formats) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(4096), "4.00 KiB");
  EXPECT_EQ(FormatBytes(256.0 * (1 << 20)), "256.00 MiB");
  EXPECT_EQ(FormatBytes(1.5 * (1 << 30)), "1.50 GiB");
}

TEST(DurationTest, Parses) {
  EXPECT_EQ(*ParseDurationFlag("10s"), absl::Seconds(10));
  EXPECT_EQ(*ParseDurationFlag("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDurationFlag("2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseDurationFlag("1.5"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDurationFlag("0"), absl::ZeroDuration());
  for (const char* bad : {"", "ten", "-1s", "-2", "inf", "5 parsecs"}) {
    EXPECT_FALSE(ParseDurationFlag(bad).ok()) << bad;
  }
}

TEST(ListTest, Concurrency) {
  EXPECT_THAT(*ParseIntList("1,8,64,256"), ElementsAre(1, 8, 64, 256));
  EXPECT_THAT(*ParseIntList("4"), ElementsAre(4));
  EXPECT_THAT(*ParseIntList(" 1 , 2 "), ElementsAre(1, 2));
  for (const char* bad : {"", "0", "1,,2", "-1", "1.5", "x"}) {
    EXPECT_FALSE(ParseIntList(bad).ok()) << bad;
  }
}

TEST(ListTest, Rates) {
  EXPECT_THAT(*ParseRateList("100,2500.5"), ElementsAre(100.0, 2500.5));
  for (const char* bad : {"", "0", "-5", "inf", "nan", "1,x"}) {
    EXPECT_FALSE(ParseRateList(bad).ok()) << bad;
  }
}

TEST(MixTest, WeightsAndDefaults) {
  absl::StatusOr<std::vector<MixEntry>> mix = ParseMix("periodogram:3,dense:1,echo");
  ASSERT_TRUE(mix.ok()) << mix.status();
  ASSERT_EQ(mix->size(), 3u);
  EXPECT_EQ((*mix)[0].op, Op::kPeriodogram);
  EXPECT_EQ((*mix)[0].weight, 3.0);
  EXPECT_EQ((*mix)[1].op, Op::kDense);
  EXPECT_EQ((*mix)[1].weight, 1.0);
  EXPECT_EQ((*mix)[2].op, Op::kEcho);
  EXPECT_EQ((*mix)[2].weight, 1.0);  // no weight: 1

  mix = ParseMix("assimilate:0.25, echo:0");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ((*mix)[0].weight, 0.25);
  EXPECT_EQ((*mix)[1].weight, 0.0);
}

TEST(MixTest, Rejects) {
  EXPECT_THAT(ParseMix("fft:1").status().message(), HasSubstr("expected periodogram"));
  EXPECT_THAT(ParseMix("echo:1,echo:2").status().message(), HasSubstr("twice"));
  EXPECT_THAT(ParseMix("echo:0,dense:0").status().message(), HasSubstr("sum to 0"));
  EXPECT_THAT(ParseMix("echo:-1").status().message(), HasSubstr(">= 0"));
  EXPECT_FALSE(ParseMix("echo:x").ok());
  EXPECT_FALSE(ParseMix("").ok());
  EXPECT_FALSE(ParseMix("mix:1").ok());
}

TEST(TargetTest, Lists) {
  EXPECT_THAT(*ParseTargets("localhost:50051"), ElementsAre("localhost:50051"));
  EXPECT_THAT(*ParseTargets("a:1, b:2"), ElementsAre("a:1", "b:2"));
  EXPECT_THAT(*ParseTargets("dns:///gpucompute.svc:50051"),
              ElementsAre("dns:///gpucompute.svc:50051"));
  EXPECT_FALSE(ParseTargets("a:1,,b:2").ok());
  EXPECT_FALSE(ParseTargets("").ok());
}

TEST(ChannelArgTest, KeyValue) {
  auto kv = ParseChannelArg("grpc.http2.max_frame_size=16777215");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "grpc.http2.max_frame_size");
  EXPECT_EQ(kv->second, "16777215");
  EXPECT_EQ(ParseChannelArg("grpc.lb_policy_name=").value().second, "");
  EXPECT_FALSE(ParseChannelArg("novalue").ok());
  EXPECT_FALSE(ParseChannelArg("=1").ok());
}

TEST(OpTest, NamesRoundTrip) {
  for (Op op : kAllOps) EXPECT_EQ(*ParseOp(OpName(op)), op);
  EXPECT_FALSE(ParseOp("mix").ok());
}

}  // namespace
}  // namespace gpucompute::load
