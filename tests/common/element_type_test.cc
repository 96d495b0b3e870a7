// Host conversions to and from float16/bfloat16: round to nearest even, specials preserved.
#include "common/element_type.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

TEST(ElementType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half-way between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is half-way between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6.
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(INFINITY)), INFINITY);
}

TEST(ElementType, HalfMatchesIeeeBinary16) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);        // largest finite
  EXPECT_EQ(FloatToHalf(65536.0f), 0x7c00);        // overflows to infinity
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);        // smallest subnormal
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);  // tie to even
}

TEST(ElementType, RoundTripsThroughEveryType) {
  const double values[] = {0.0, -1.5, 3.140625, 1e-3, 123.25};
  for (ElementType t : {ElementType::kFloat32, ElementType::kFloat64, ElementType::kFloat16,
                        ElementType::kBFloat16}) {
    std::vector<unsigned char> bytes(5 * ElementSize(t));
    FromDouble(values, 5, t, bytes.data());
    double back[5];
    ToDouble(t, bytes.data(), 5, back);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], RoundTo(t, values[i])) << ElementName(t);
  }
}

}  // namespace
}  // namespace gpucompute
