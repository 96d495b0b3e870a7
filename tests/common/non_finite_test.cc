// FirstNonFinite: the first NaN or infinity of every float type, at any position (the first of
// several, across the blocks that threads split large arrays into), and -1 for finite values
// including the largest finite ones and subnormals.
#include "common/non_finite.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

// `n` elements of `type` holding finite values (largest magnitudes and subnormals among them),
// as bytes.
std::string Finite(ElementType type, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (i % 7 - 3) * 1.5 + (i % 11 == 0 ? 1e-300 : 0);
  std::string bytes(static_cast<size_t>(n * ElementSize(type)), '\0');
  FromDouble(v.data(), n, type, bytes.data());
  // The largest finite value of the type in element 1 (conversions saturate to it or overflow).
  if (n > 1) {
    switch (type) {
      case ElementType::kFloat64: {
        const double big = std::numeric_limits<double>::max();
        std::memcpy(bytes.data() + 8, &big, 8);
        break;
      }
      case ElementType::kFloat32: {
        const float big = std::numeric_limits<float>::max();
        std::memcpy(bytes.data() + 4, &big, 4);
        break;
      }
      case ElementType::kFloat16: {
        const uint16_t big = 0x7BFF;
        std::memcpy(bytes.data() + 2, &big, 2);
        break;
      }
      case ElementType::kBFloat16: {
        const uint16_t big = 0x7F7F;
        std::memcpy(bytes.data() + 2, &big, 2);
        break;
      }
    }
  }
  return bytes;
}

void Put(ElementType type, std::string* bytes, int64_t i, double v) {
  FromDouble(&v, 1, type, bytes->data() + i * ElementSize(type));
}

TEST(NonFinite, FindsTheFirstNaNOrInfinityOfEveryType) {
  for (ElementType type : {ElementType::kFloat64, ElementType::kFloat32, ElementType::kFloat16,
                           ElementType::kBFloat16}) {
    SCOPED_TRACE(ElementName(type));
    for (int64_t n : {int64_t{1}, int64_t{4097}, int64_t{3} << 20}) {  // the last on threads
      std::string bytes = Finite(type, n);
      EXPECT_EQ(FirstNonFinite(type, bytes), -1);
      for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
        for (int64_t at : {n - 1, n / 2, int64_t{0}}) {
          std::string b = bytes;
          Put(type, &b, at, bad);
          if (at != n - 1) Put(type, &b, n - 1, bad);  // a later one too: the first is found
          EXPECT_EQ(FirstNonFinite(type, b), at) << "n " << n << " bad " << bad;
        }
      }
    }
  }
}

TEST(NonFinite, ATrailingPartialElementIsIgnored) {
  std::string bytes = Finite(ElementType::kFloat64, 3);
  bytes += std::string(5, '\xff');  // would be a NaN's bytes, but not a whole element
  EXPECT_EQ(FirstNonFinite(ElementType::kFloat64, bytes), -1);
  EXPECT_EQ(FirstNonFinite(ElementType::kFloat64, ""), -1);
}

}  // namespace
}  // namespace gpucompute
