// ParseTraceParent against the W3C Trace Context specification's rules and examples.
#include "common/trace_context.h"

#include <string>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kSpan[] = "00f067aa0ba902b7";

std::string Header(const std::string& version, const std::string& trace, const std::string& span,
                   const std::string& flags) {
  return version + "-" + trace + "-" + span + "-" + flags;
}

TEST(TraceParentTest, ReadsTheSpecificationsExample) {
  auto t = ParseTraceParent(Header("00", kTrace, kSpan, "01"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id, kTrace);
  EXPECT_EQ(t->parent_id, kSpan);
  EXPECT_EQ(t->flags, 1);
  EXPECT_EQ(ParseTraceParent(Header("00", kTrace, kSpan, "00"))->flags, 0);
}

TEST(TraceParentTest, RefusesWhatTheSpecificationRefuses) {
  for (const std::string bad : {
           Header("00", std::string(32, '0'), kSpan, "01"),       // all-zero trace-id
           Header("00", kTrace, std::string(16, '0'), "01"),      // all-zero parent-id
           Header("ff", kTrace, kSpan, "01"),                     // version ff
           Header("00", "4BF92F3577B34DA6A3CE929D0E0E4736", kSpan, "01"),  // upper case
           Header("0g", kTrace, kSpan, "01"),
           Header("00", kTrace, kSpan, "0x"),
           Header("00", kTrace, kSpan, "01") + "-extra",          // version 00 has 4 fields
           Header("00", std::string(kTrace) + "0", kSpan, "01"),  // field lengths
           Header("00", kTrace, kSpan, "1"),
           std::string("00_") + kTrace + "-" + kSpan + "-01",
           std::string(""),
       }) {
    EXPECT_FALSE(ParseTraceParent(bad).has_value()) << bad;
  }
}

TEST(TraceParentTest, ALaterVersionMayAddFields) {
  EXPECT_TRUE(ParseTraceParent(Header("cc", kTrace, kSpan, "01")).has_value());
  EXPECT_TRUE(ParseTraceParent(Header("cc", kTrace, kSpan, "01") + "-what-comes-next").has_value());
  EXPECT_FALSE(ParseTraceParent(Header("cc", kTrace, kSpan, "01") + "x").has_value());
}

TEST(TraceParentTest, TheLogTraceIsScopedPerThread) {
  EXPECT_EQ(CurrentLogTrace(), nullptr);
  TraceParent outer{kTrace, kSpan, 1}, inner{kTrace, "1111111111111111", 0};
  {
    ScopedLogTrace a(&outer);
    EXPECT_EQ(CurrentLogTrace(), &outer);
    {
      ScopedLogTrace b(&inner);
      EXPECT_EQ(CurrentLogTrace(), &inner);
    }
    EXPECT_EQ(CurrentLogTrace(), &outer);
  }
  EXPECT_EQ(CurrentLogTrace(), nullptr);
}

}  // namespace
}  // namespace gpucompute
