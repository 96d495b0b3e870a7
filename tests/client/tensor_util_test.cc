// Tests of the client's Tensor helpers (client/cpp/tensor_util.h).
#include "client/cpp/tensor_util.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::Tensor RawTensor(v1::DType dtype, std::vector<int64_t> shape, std::string data) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.set_data(std::move(data));
  return t;
}

TEST(TensorUtilTest, EncodesFloat64LittleEndian) {
  const std::vector<double> values = {1.0, -2.0};
  const v1::Tensor t = MakeTensor(values);
  EXPECT_EQ(t.dtype(), v1::FLOAT64);
  EXPECT_THAT(t.shape(), ElementsAre(2));
  EXPECT_EQ(t.data(), std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f"
                                  "\x00\x00\x00\x00\x00\x00\x00\xc0",
                                  16));
}

TEST(TensorUtilTest, EncodesFloat32LittleEndian) {
  const std::vector<float> values = {1.0f, 0.5f, -1.0f};
  const v1::Tensor t = MakeTensor(values);
  EXPECT_EQ(t.dtype(), v1::FLOAT32);
  EXPECT_THAT(t.shape(), ElementsAre(3));
  EXPECT_EQ(t.data(), std::string("\x00\x00\x80\x3f\x00\x00\x00\x3f\x00\x00\x80\xbf", 12));
}

TEST(TensorUtilTest, RoundTrips) {
  std::vector<double> values;
  for (int i = 0; i < 1001; ++i) values.push_back(std::sin(i) * 1e3);
  values.push_back(std::numeric_limits<double>::denorm_min());
  values.push_back(-0.0);
  absl::StatusOr<std::vector<double>> back = TensorToDoubles(MakeTensor(values));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, values);

  std::vector<float> floats(values.begin(), values.end());
  absl::StatusOr<std::vector<float>> fback = TensorToFloats(MakeTensor(floats));
  ASSERT_TRUE(fback.ok()) << fback.status();
  EXPECT_EQ(*fback, floats);
  // Widening float32 to double is exact.
  absl::StatusOr<std::vector<double>> widened = TensorToDoubles(MakeTensor(floats));
  ASSERT_TRUE(widened.ok());
  for (size_t i = 0; i < floats.size(); ++i) EXPECT_EQ((*widened)[i], floats[i]);
}

TEST(TensorUtilTest, EmptyTensor) {
  const v1::Tensor t = MakeTensor(std::vector<double>{});
  EXPECT_THAT(t.shape(), ElementsAre(0));
  EXPECT_TRUE(t.has_data() || t.payload_case() == v1::Tensor::kData);
  absl::StatusOr<std::vector<double>> back = TensorToDoubles(t);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back, IsEmpty());
}

TEST(TensorUtilTest, ConvertsToRequestedDType) {
  const std::vector<double> values = {0.1, 1e10};
  absl::StatusOr<v1::Tensor> f32 = MakeTensor(values, v1::FLOAT32);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->dtype(), v1::FLOAT32);
  EXPECT_EQ(f32->data().size(), 8u);
  absl::StatusOr<std::vector<double>> back = TensorToDoubles(*f32);
  ASSERT_TRUE(back.ok());
  EXPECT_THAT(*back, ElementsAre(static_cast<float>(0.1), static_cast<float>(1e10)));
  absl::StatusOr<v1::Tensor> f64 = MakeTensor(values, v1::FLOAT64);
  ASSERT_TRUE(f64.ok());
  EXPECT_EQ(f64->data().size(), 16u);
  EXPECT_EQ(MakeTensor(values, v1::INT32).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorUtilTest, ShapedTensors) {
  const std::vector<double> six = {1, 2, 3, 4, 5, 6};
  absl::StatusOr<v1::Tensor> t = MakeTensor(six, std::vector<int64_t>{2, 3});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->shape(), ElementsAre(2, 3));
  absl::StatusOr<std::vector<double>> back = TensorToDoubles(*t);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, six);

  absl::StatusOr<v1::Tensor> bad = MakeTensor(six, std::vector<int64_t>{4, 2});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("8 elements but 6 values"));
  const std::vector<float> sixf = {1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(MakeTensor(sixf, std::vector<int64_t>{3, 2}).ok());
  EXPECT_FALSE(MakeTensor(sixf, std::vector<int64_t>{3, -2}).ok());
  // A scalar: shape () holds one element.
  const std::vector<double> one = {7};
  EXPECT_TRUE(MakeTensor(one, std::vector<int64_t>{}).ok());
}

TEST(TensorUtilTest, DecodesEveryDType) {
  const auto decode = [](v1::DType dtype, std::string data) {
    const int64_t n = static_cast<int64_t>(data.size()) / DTypeSize(dtype);
    absl::StatusOr<std::vector<double>> v = TensorToDoubles(RawTensor(dtype, {n}, std::move(data)));
    EXPECT_TRUE(v.ok()) << v.status();
    return v.value_or(std::vector<double>{});
  };
  EXPECT_THAT(decode(v1::INT32, std::string("\x01\x00\x00\x00\xff\xff\xff\xff", 8)),
              ElementsAre(1, -1));
  EXPECT_THAT(decode(v1::INT64, std::string("\x00\x01\x00\x00\x00\x00\x00\x00", 8)),
              ElementsAre(256));
  EXPECT_THAT(decode(v1::UINT8, std::string("\x00\x7f\xff", 3)), ElementsAre(0, 127, 255));
  // float16: 1, -2, 65504 (largest), 2^-24 (smallest subnormal)
  EXPECT_THAT(decode(v1::FLOAT16, std::string("\x00\x3c\x00\xc0\xff\x7b\x01\x00", 8)),
              ElementsAre(1, -2, 65504, std::ldexp(1.0, -24)));
  // bfloat16: 1, -0.5
  EXPECT_THAT(decode(v1::BFLOAT16, std::string("\x80\x3f\x00\xbf", 4)), ElementsAre(1, -0.5));
}

TEST(TensorUtilTest, HalfSpecialValues) {
  EXPECT_EQ(HalfToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(BFloat16ToFloat(0x7f80), std::numeric_limits<float>::infinity());
}

TEST(TensorUtilTest, NarrowingRoundTripsEveryHalfAndBFloat16) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float h = HalfToFloat(b);
    if (std::isnan(h)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(h)))) << bits;
    } else {
      EXPECT_EQ(FloatToHalf(h), b) << bits;
    }
    const float bf = BFloat16ToFloat(b);
    if (std::isnan(bf)) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(bf)))) << bits;
    } else {
      EXPECT_EQ(FloatToBFloat16(bf), b) << bits;
    }
  }
}

TEST(TensorUtilTest, NarrowingRoundsToNearestEven) {
  // Ties go to the even neighbour.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);      // half the smallest subnormal
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -30)), 0x8000);      // signed zero
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);                    // below the tie: 65504
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                    // the tie: infinity
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400);    // carries into the normals
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  // Random floats: the result is a nearest representable value.
  uint32_t state = 12345;
  for (int i = 0; i < 100000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float f = std::ldexp(static_cast<float>(state >> 8) / (1 << 24) - 0.5f,
                               static_cast<int>(state % 40) - 26);
    const uint16_t h = FloatToHalf(f);
    const double err = std::abs(double{f} - HalfToFloat(h));
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + d);
      if ((n & 0x7c00) == 0x7c00 || ((h ^ n) & 0x8000)) continue;  // inf/nan or sign change
      EXPECT_LE(err, std::abs(double{f} - HalfToFloat(n))) << f;
    }
    const uint16_t b = FloatToBFloat16(f);
    const double berr = std::abs(double{f} - BFloat16ToFloat(b));
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(b + d);
      if ((n & 0x7f80) == 0x7f80 || ((b ^ n) & 0x8000)) continue;
      EXPECT_LE(berr, std::abs(double{f} - BFloat16ToFloat(n))) << f;
    }
  }
}

TEST(TensorUtilTest, EncodesFloatsInEveryFloatDType) {
  const std::vector<float> values = {1.0f, -0.5f, 3.0f, 0.1f};
  const int64_t shape[] = {2, 2};
  for (v1::DType dtype : {v1::FLOAT32, v1::FLOAT64, v1::FLOAT16, v1::BFLOAT16}) {
    absl::StatusOr<v1::Tensor> t = MakeTensor(values, shape, dtype);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->dtype(), dtype);
    EXPECT_THAT(t->shape(), ElementsAre(2, 2));
    EXPECT_EQ(t->data().size(), 4u * DTypeSize(dtype));
    absl::StatusOr<std::vector<float>> back = TensorToFloats(*t);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_THAT(std::vector<float>(back->begin(), back->begin() + 3), ElementsAre(1, -0.5, 3));
    const float tenth = dtype == v1::FLOAT16    ? 0.0999755859375f
                        : dtype == v1::BFLOAT16 ? 0.10009765625f
                                                : 0.1f;
    EXPECT_EQ((*back)[3], tenth) << DTypeName(dtype);
  }
  EXPECT_EQ(*EncodeFloats(std::vector<float>{1.0f}, v1::BFLOAT16), std::string("\x80\x3f", 2));
  EXPECT_EQ(*EncodeFloats(std::vector<float>{1.0f}, v1::FLOAT16), std::string("\x00\x3c", 2));
  EXPECT_FALSE(EncodeFloats(values, v1::INT32).ok());
  EXPECT_FALSE(MakeTensor(values, std::vector<int64_t>{3}, v1::FLOAT32).ok());
}

TEST(TensorUtilTest, RejectsInconsistentTensors) {
  struct Case {
    std::string name;
    v1::Tensor tensor;
    std::string message;
  };
  v1::Tensor no_payload;
  no_payload.set_dtype(v1::FLOAT64);
  no_payload.add_shape(0);
  const std::vector<Case> cases = {
      {"unspecified", RawTensor(v1::DTYPE_UNSPECIFIED, {1}, std::string(8, '\0')), "unspecified"},
      {"no payload", no_payload, "no inline data"},
      {"short", RawTensor(v1::FLOAT64, {2}, std::string(15, '\0')), "holds 15 bytes"},
      {"long", RawTensor(v1::FLOAT32, {2}, std::string(9, '\0')), "holds 9 bytes"},
      {"negative", RawTensor(v1::FLOAT32, {-1}, ""), "negative dimension"},
      {"overflow", RawTensor(v1::FLOAT32, {1LL << 40, 1LL << 40}, ""), "too many"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<double>> v = TensorToDoubles(c.tensor);
    ASSERT_FALSE(v.ok()) << c.name;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(TensorUtilTest, NamesAndSizes) {
  EXPECT_EQ(DTypeSize(v1::FLOAT64), 8);
  EXPECT_EQ(DTypeSize(v1::FLOAT16), 2);
  EXPECT_EQ(DTypeSize(v1::DTYPE_UNSPECIFIED), 0);
  EXPECT_EQ(DTypeName(v1::FLOAT32), "float32");
  EXPECT_EQ(DTypeName(v1::BFLOAT16), "bfloat16");
  absl::StatusOr<int64_t> n = NumElements(std::vector<int64_t>{3, 0, 5});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(*NumElements(std::vector<int64_t>{}), 1);
}

}  // namespace
}  // namespace gpucompute::client
