// Tests of the CLI's .npy reader/writer (client/cli/npy.h).
#include "client/cli/npy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A file as NumPy writes it: magic, version, little-endian header length, the dict padded with
// spaces and a newline so that the data starts at a multiple of 64, then the data.
std::string MakeFile(const std::string& dict, const std::string& data, int major = 1,
                     size_t extra_spaces = 0) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header(dict);
  header.append(extra_spaces, ' ');
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const uint32_t len = header.size();
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>((len >> 8) & 0xff));
  if (major != 1) {
    out.push_back(static_cast<char>((len >> 16) & 0xff));
    out.push_back(static_cast<char>((len >> 24) & 0xff));
  }
  out += header;
  out += data;
  return out;
}

template <typename T>
std::string Raw(std::initializer_list<T> values, bool big_endian = false) {
  std::string out;
  for (T v : values) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    if (big_endian) std::reverse(bytes, bytes + sizeof(T));
    out.append(bytes, sizeof(T));
  }
  return out;
}

TEST(NpyTest, ParsesNumpyV1FileByteForByte) {
  // np.save of np.array([[1., 2.], [3., 4.]]) with NumPy < 1.23: a 118-byte header ('v').
  std::string file("\x93NUMPY\x01\x00v\x00", 10);
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }";
  file += dict;
  file.append(118 - 1 - dict.size(), ' ');
  file += "\n";
  ASSERT_EQ(file.size(), 128u);
  file += Raw<double>({1, 2, 3, 4});
  absl::StatusOr<NpyArray> array = ParseNpy(file);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(2, 2));
  EXPECT_THAT(array->data, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(array->item_size, 8);
  // Our writer produces exactly the same bytes.
  EXPECT_EQ(EncodeNpy({2, 2}, {1, 2, 3, 4}), file);
}

TEST(NpyTest, AcceptsGrowthPaddingOfNewerNumpy) {
  // NumPy >= 1.23 leaves room after the dict so the first axis can grow in place.
  const std::string file = MakeFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }",
                                    Raw<double>({0, 1, 2, 3, 4, 5}), 1, 20);
  absl::StatusOr<NpyArray> array = ParseNpy(file);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(3, 2));
  EXPECT_THAT(array->data, ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(NpyTest, ParsesFloat32) {
  const std::string file = MakeFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                    Raw<float>({0.5f, 1.5f, 2.5f, -1, -2, 1e-3f}));
  absl::StatusOr<NpyArray> array = ParseNpy(file);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->item_size, 4);
  EXPECT_THAT(array->shape, ElementsAre(2, 3));
  EXPECT_THAT(array->data, ElementsAre(0.5, 1.5, 2.5, -1, -2, static_cast<double>(1e-3f)));
}

TEST(NpyTest, ParsesVersion2And3Headers) {
  for (int major : {2, 3}) {
    const std::string file = MakeFile(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }", Raw<double>({7, 8}), major);
    absl::StatusOr<NpyArray> array = ParseNpy(file);
    ASSERT_TRUE(array.ok()) << "v" << major << ": " << array.status();
    EXPECT_THAT(array->data, ElementsAre(7, 8));
  }
}

TEST(NpyTest, ParsesBigEndian) {
  const std::string file = MakeFile("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }",
                                    Raw<double>({1.25, -3, 1e300}, /*big_endian=*/true));
  absl::StatusOr<NpyArray> array = ParseNpy(file);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(3));
  EXPECT_THAT(array->data, ElementsAre(1.25, -3, 1e300));

  const std::string f4 = MakeFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                                  Raw<float>({2.5f, -0.75f}, /*big_endian=*/true));
  array = ParseNpy(f4);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->data, ElementsAre(2.5, -0.75));
}

TEST(NpyTest, ReturnsFortranOrderInCOrder) {
  // Columns t = (0, 1, 2), y = (10, 11, 12) stored column by column.
  const std::string file = MakeFile("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 2), }",
                                    Raw<double>({0, 1, 2, 10, 11, 12}));
  absl::StatusOr<NpyArray> array = ParseNpy(file);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->data, ElementsAre(0, 10, 1, 11, 2, 12));

  // 3-D: element (i, j, k) of shape (2, 3, 2) holds 100 i + 10 j + k.
  std::string data;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) data += Raw<double>({100.0 * i + 10.0 * j + k});
  array = ParseNpy(MakeFile("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 2), }", data));
  ASSERT_TRUE(array.ok()) << array.status();
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) expected.push_back(100.0 * i + 10.0 * j + k);
  EXPECT_EQ(array->data, expected);
}

TEST(NpyTest, ParsesScalarsAndEmptyArrays) {
  absl::StatusOr<NpyArray> scalar = ParseNpy(
      MakeFile("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", Raw<double>({42})));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_THAT(scalar->data, ElementsAre(42));

  absl::StatusOr<NpyArray> empty =
      ParseNpy(MakeFile("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 2), }", ""));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(empty->shape, ElementsAre(0, 2));
  EXPECT_TRUE(empty->data.empty());
}

TEST(NpyTest, HeaderKeysInAnyOrderAndDoubleQuotes) {
  absl::StatusOr<NpyHeader> header =
      ParseNpyHeader("{\"shape\": (4, 3), \"fortran_order\": False, \"descr\": \"<f4\"}\n");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->descr, "<f4");
  EXPECT_FALSE(header->fortran_order);
  EXPECT_THAT(header->shape, ElementsAre(4, 3));
  // Python 2 long literals.
  header = ParseNpyHeader("{'descr': '<f8', 'fortran_order': True, 'shape': (5L, 2L), }");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_TRUE(header->fortran_order);
  EXPECT_THAT(header->shape, ElementsAre(5, 2));
}

TEST(NpyTest, RoundTripsThroughTheWriter) {
  std::vector<double> values;
  for (int i = 0; i < 300; ++i) values.push_back(i * 0.1 - 7);
  for (int item_size : {8, 4}) {
    const std::string file = EncodeNpy({100, 3}, values, item_size);
    const size_t header_end = file.find('\n') + 1;
    EXPECT_EQ(header_end % 64, 0u);
    absl::StatusOr<NpyArray> array = ParseNpy(file);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_THAT(array->shape, ElementsAre(100, 3));
    ASSERT_EQ(array->data.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const double expected = item_size == 8 ? values[i] : static_cast<float>(values[i]);
      EXPECT_EQ(array->data[i], expected) << i;
    }
  }
  // 1-D shapes are written with Python's one-element tuple syntax.
  const std::string one_d = EncodeNpy({3}, {1, 2, 3});
  EXPECT_THAT(one_d, HasSubstr("'shape': (3,), }"));
  absl::StatusOr<NpyArray> array = ParseNpy(one_d);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(3));
}

TEST(NpyTest, Float16ReadAndWrite) {
  // np.array([1, -2.5, 65504, 2**-24], dtype='<f2') and its big-endian twin.
  const std::string le = MakeFile("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }",
                                  Raw<uint16_t>({0x3c00, 0xc100, 0x7bff, 0x0001}));
  absl::StatusOr<NpyArray> array = ParseNpy(le);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->item_size, 2);
  EXPECT_THAT(array->shape, ElementsAre(2, 2));
  EXPECT_THAT(array->data, ElementsAre(1.0, -2.5, 65504.0, std::ldexp(1.0, -24)));
  const std::string be = MakeFile("{'descr': '>f2', 'fortran_order': False, 'shape': (1,), }",
                                  Raw<uint16_t>({0x3c00}, /*big_endian=*/true));
  array = ParseNpy(be);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->data, ElementsAre(1.0));

  // Written as '<f2', rounded to nearest even; values that are halves come back exactly.
  const std::string file = EncodeNpy({4}, {1.0, -2.5, 0.1, 1e6}, 2);
  EXPECT_THAT(file, HasSubstr("'descr': '<f2'"));
  array = ParseNpy(file);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->item_size, 2);
  EXPECT_THAT(array->data, ElementsAre(1.0, -2.5, 0.0999755859375, INFINITY));
}

TEST(NpyTest, RejectsMalformedFiles) {
  const std::string good_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  const std::string good_data = Raw<double>({1, 2});
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  std::string bad_version = MakeFile(good_dict, good_data);
  bad_version[6] = 4;
  std::string huge_header_len = MakeFile(good_dict, good_data);
  huge_header_len[8] = '\xff';
  huge_header_len[9] = '\xff';
  const std::vector<Case> cases = {
      {"empty", "", "magic"},
      {"not npy", "t,y\n1,2\n", "magic"},
      {"version", bad_version, "version 4"},
      {"header length", huge_header_len, "truncated"},
      {"short data", MakeFile(good_dict, good_data.substr(0, 12)), "needs 16"},
      {"long data", MakeFile(good_dict, good_data + "xx"), "needs 16"},
      {"int dtype", MakeFile("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", good_data),
       "dtype '<i8'"},
      {"complex dtype",
       MakeFile("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", good_data), "dtype"},
      {"structured", MakeFile("{'descr': [('t', '<f8')], 'fortran_order': False, 'shape': (2,), }",
                              good_data),
       "structured"},
      {"missing key", MakeFile("{'descr': '<f8', 'shape': (2,), }", good_data), "fortran_order"},
      {"unknown key",
       MakeFile("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", good_data),
       "unexpected key"},
      {"bad bool", MakeFile("{'descr': '<f8', 'fortran_order': false, 'shape': (2,), }", good_data),
       "True or False"},
      {"negative dim",
       MakeFile("{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }", good_data),
       "non-negative"},
      {"unterminated", MakeFile("{'descr': '<f8, 'fortran_order': False", good_data), "npy header"},
      {"huge shape",
       MakeFile("{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 2), }",
                good_data),
       "too large"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NpyArray> array = ParseNpy(c.bytes);
    ASSERT_FALSE(array.ok()) << c.name;
    EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(array.status().message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(NpyTest, ReadFileReportsMissingFile) {
  absl::StatusOr<NpyArray> array = ReadNpyFile("/nonexistent/x.npy");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucompute::cli
