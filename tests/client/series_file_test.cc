// Tests of the CLI's CSV / .npy series readers (client/cli/series_file.h).
#include "client/cli/series_file.h"

#include <fstream>
#include <string>

#include "client/cli/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(CsvSeriesTest, ParsesHeaderCommentsAndCrlf) {
  absl::StatusOr<SeriesData> s = ParseCsvSeries(
      "# observations of X\r\nt,y,dy\r\n0.5, 1.0, 0.1\r\n\r\n# a gap\r\n1.5,+2e-1,0.2\r\n2.5,-3,0.3",
      "x.csv", DyColumn::kRequired);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "x.csv");
  EXPECT_EQ(s->columns, 3);
  EXPECT_THAT(s->t, ElementsAre(0.5, 1.5, 2.5));
  EXPECT_THAT(s->y, ElementsAre(1.0, 0.2, -3));
  EXPECT_THAT(s->dy, ElementsAre(0.1, 0.2, 0.3));
}

TEST(CsvSeriesTest, ParsesWhitespaceSeparatedWithoutHeader) {
  absl::StatusOr<SeriesData> s = ParseCsvSeries("1 10\n2\t20\n  3   30  \n", "w.txt", DyColumn::kIgnore);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->columns, 2);
  EXPECT_THAT(s->t, ElementsAre(1, 2, 3));
  EXPECT_THAT(s->y, ElementsAre(10, 20, 30));
  EXPECT_THAT(s->dy, IsEmpty());
}

TEST(CsvSeriesTest, IgnoresThirdColumnWithoutDyFlag) {
  absl::StatusOr<SeriesData> s = ParseCsvSeries("1,2,3\n4,5,6\n", "a.csv", DyColumn::kIgnore);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->columns, 3);
  EXPECT_THAT(s->y, ElementsAre(2, 5));
  EXPECT_THAT(s->dy, IsEmpty());
}

TEST(CsvSeriesTest, ReadsAThirdColumnAsDyByDefault) {
  absl::StatusOr<SeriesData> s = ParseCsvSeries("t,y,dy\n1,2,0.5\n4,5,0.25\n", "a.csv");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->dy, ElementsAre(0.5, 0.25));
  absl::StatusOr<SeriesData> two = ParseCsvSeries("1,2\n4,5\n", "b.csv");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(two->dy, IsEmpty());
}

TEST(CsvSeriesTest, KeepsFullPrecision) {
  absl::StatusOr<SeriesData> s =
      ParseCsvSeries("58000.123456789012,0.30000000000000004\n", "p.csv", DyColumn::kIgnore);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->t[0], 58000.123456789012);
  EXPECT_EQ(s->y[0], 0.30000000000000004);
}

TEST(CsvSeriesTest, RejectsBadInput) {
  struct Case {
    std::string text;
    DyColumn dy;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", DyColumn::kIfPresent, "no data rows"},
      {"# only a comment\nt,y\n", DyColumn::kIfPresent, "no data rows"},
      {"1,2\n3,4\n", DyColumn::kRequired, "only 2 columns"},
      {"1,2\n3,4,5\n", DyColumn::kIfPresent, "x.csv:2: 3 columns where earlier rows have 2"},
      {"1\n", DyColumn::kIfPresent, "expected 2 or 3 columns"},
      {"1,2,3,4\n", DyColumn::kIfPresent, "expected 2 or 3 columns"},
      {"1,2\nt,y\n", DyColumn::kIfPresent, "x.csv:2: not a row of finite numbers"},
      {"1,2\n3,nan\n", DyColumn::kIfPresent, "x.csv:2"},
      {"1,2\n3,inf\n", DyColumn::kIfPresent, "x.csv:2"},
      {"1,2\n3,4x\n", DyColumn::kIfPresent, "x.csv:2"},
      {"t,y\n1,\n", DyColumn::kIfPresent, "x.csv:2"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SeriesData> s = ParseCsvSeries(c.text, "x.csv", c.dy);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(SeriesFileTest, ReadsCsvAndNpyFiles) {
  absl::StatusOr<SeriesData> csv = ReadSeriesFile(WriteTemp("s.csv", "t,y\n1,2\n3,4\n"), DyColumn::kIgnore);
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_THAT(csv->t, ElementsAre(1, 3));

  // .npy is recognised by its magic, whatever the file is called.
  const std::string npy = EncodeNpy({2, 3}, {1, 2, 0.5, 3, 4, 0.25});
  absl::StatusOr<SeriesData> with_dy = ReadSeriesFile(WriteTemp("s.dat", npy), DyColumn::kRequired);
  ASSERT_TRUE(with_dy.ok()) << with_dy.status();
  EXPECT_THAT(with_dy->t, ElementsAre(1, 3));
  EXPECT_THAT(with_dy->y, ElementsAre(2, 4));
  EXPECT_THAT(with_dy->dy, ElementsAre(0.5, 0.25));
  EXPECT_EQ(with_dy->columns, 3);

  absl::StatusOr<SeriesData> f32 =
      ReadSeriesFile(WriteTemp("s32.npy", EncodeNpy({2, 2}, {1, 2, 3, 4}, 4)), DyColumn::kIgnore);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_THAT(f32->y, ElementsAre(2, 4));
}

TEST(SeriesFileTest, RejectsNpyOfWrongShape) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{6}, {1, 6}, {3, 2, 1}, {2, 4}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::string path =
        WriteTemp("bad.npy", EncodeNpy(shape, std::vector<double>(static_cast<size_t>(n), 1.0)));
    absl::StatusOr<SeriesData> s = ReadSeriesFile(path, DyColumn::kIgnore);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("(N, 2) or (N, 3)"));
  }
  absl::StatusOr<SeriesData> no_dy =
      ReadSeriesFile(WriteTemp("two.npy", EncodeNpy({1, 2}, {1, 2})), DyColumn::kRequired);
  ASSERT_FALSE(no_dy.ok());
  EXPECT_THAT(std::string(no_dy.status().message()), HasSubstr("only 2 columns"));
  absl::StatusOr<SeriesData> nan = ReadSeriesFile(
      WriteTemp("nan.npy", EncodeNpy({1, 2}, {1, std::numeric_limits<double>::quiet_NaN()})));
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(std::string(nan.status().message()), HasSubstr("not finite"));
}

TEST(SeriesFileTest, MissingFileIsNotFound) {
  absl::StatusOr<SeriesData> s = ReadSeriesFile("/nonexistent/s.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
}

TEST(FrequencyFileTest, ReadsTextAndNpy) {
  absl::StatusOr<std::vector<double>> text =
      ReadFrequencyFile(WriteTemp("f.txt", "# frequencies\n0.1 0.2\n0.3,0.4\n\n0.5\n"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, ElementsAre(0.1, 0.2, 0.3, 0.4, 0.5));

  absl::StatusOr<std::vector<double>> npy =
      ReadFrequencyFile(WriteTemp("f.npy", EncodeNpy({3}, {1, 2, 3})));
  ASSERT_TRUE(npy.ok()) << npy.status();
  EXPECT_THAT(*npy, ElementsAre(1, 2, 3));

  absl::StatusOr<std::vector<double>> column =
      ReadFrequencyFile(WriteTemp("fc.npy", EncodeNpy({2, 1}, {4, 5})));
  ASSERT_TRUE(column.ok()) << column.status();
  EXPECT_THAT(*column, ElementsAre(4, 5));

  EXPECT_FALSE(ReadFrequencyFile(WriteTemp("f2.npy", EncodeNpy({2, 2}, {1, 2, 3, 4}))).ok());
  EXPECT_FALSE(ReadFrequencyFile(WriteTemp("empty.txt", "# nothing\n")).ok());
  EXPECT_FALSE(ReadFrequencyFile(WriteTemp("bad.txt", "0.1 abc\n")).ok());
}

}  // namespace
}  // namespace gpucompute::cli
