// CSV / .npy series readers for the CLI; see series_file.h for the accepted formats.
#include "client/cli/series_file.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/npy.h"

namespace gpucompute::cli {
namespace {

// Parses a whole field as a finite double ("+1.5", "1e-3", " 2 " are fine; "nan", "1x" are not).
std::optional<double> ParseNumber(absl::string_view field) {
  field = absl::StripAsciiWhitespace(field);
  if (!field.empty() && field.front() == '+') field.remove_prefix(1);
  if (field.empty()) return std::nullopt;
  double value = 0;
  auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || ptr != field.data() + field.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::vector<absl::string_view> SplitFields(absl::string_view line) {
  if (line.find(',') != absl::string_view::npos) return absl::StrSplit(line, ',');
  return absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

bool IsNpy(absl::string_view bytes) { return bytes.substr(0, 6) == absl::string_view("\x93NUMPY", 6); }

absl::Status Prefixed(absl::string_view name, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
}

absl::StatusOr<SeriesData> SeriesFromNpy(const NpyArray& array, absl::string_view name,
                                         DyColumn dy) {
  if (array.shape.size() != 2 || (array.shape[1] != 2 && array.shape[1] != 3)) {
    std::string shape;
    for (size_t i = 0; i < array.shape.size(); ++i) {
      absl::StrAppend(&shape, i ? ", " : "", array.shape[i]);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected a 2-D array of shape (N, 2) or (N, 3) holding t, y[, dy] "
                           "columns, got shape (", shape, ")"));
  }
  SeriesData series;
  series.name = std::string(name);
  series.columns = static_cast<int>(array.shape[1]);
  if (dy == DyColumn::kRequired && series.columns < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": dy column requested but the array has only 2 columns"));
  }
  const bool keep_dy = dy != DyColumn::kIgnore && series.columns == 3;
  const int64_t n = array.shape[0];
  series.t.reserve(n);
  series.y.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const double* row = &array.data[i * series.columns];
    for (int c = 0; c < series.columns; ++c) {
      if (!std::isfinite(row[c])) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": row ", i, " column ", c, " is not finite"));
      }
    }
    series.t.push_back(row[0]);
    series.y.push_back(row[1]);
    if (keep_dy) series.dy.push_back(row[2]);
  }
  return series;
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return buffer.str();
}

absl::StatusOr<SeriesData> ParseCsvSeries(absl::string_view text, absl::string_view name,
                                          DyColumn dy) {
  SeriesData series;
  series.name = std::string(name);
  bool first_row = true;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);  // also drops '\r' of CRLF files
    if (line.empty() || line.front() == '#') continue;
    const std::vector<absl::string_view> fields = SplitFields(line);
    std::vector<double> values;
    values.reserve(fields.size());
    bool numeric = true;
    for (absl::string_view field : fields) {
      std::optional<double> v = ParseNumber(field);
      if (!v) {
        numeric = false;
        break;
      }
      values.push_back(*v);
    }
    if (!numeric) {
      if (first_row) {  // a header line
        first_row = false;
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", line_number, ": not a row of finite numbers: '", line, "'"));
    }
    first_row = false;
    const int columns = static_cast<int>(values.size());
    if (series.columns == 0) {
      if (columns != 2 && columns != 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ":", line_number, ": expected 2 or 3 columns (t,y[,dy]), got ", columns));
      }
      if (dy == DyColumn::kRequired && columns < 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ":", line_number, ": dy column requested but the file has only 2 columns"));
      }
      series.columns = columns;
    } else if (columns != series.columns) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line_number, ": ", columns,
                                                     " columns where earlier rows have ",
                                                     series.columns));
    }
    series.t.push_back(values[0]);
    series.y.push_back(values[1]);
    if (dy != DyColumn::kIgnore && series.columns == 3) series.dy.push_back(values[2]);
  }
  if (series.t.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no data rows"));
  }
  return series;
}

absl::StatusOr<SeriesData> ReadSeriesFile(const std::string& path, DyColumn dy) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) return bytes.status();
  if (IsNpy(*bytes)) {
    absl::StatusOr<NpyArray> array = ParseNpy(*bytes);
    if (!array.ok()) return Prefixed(path, array.status());
    return SeriesFromNpy(*array, path, dy);
  }
  return ParseCsvSeries(*bytes, path, dy);
}

absl::StatusOr<std::vector<double>> ParseFrequencyText(absl::string_view text,
                                                       absl::string_view name) {
  std::vector<double> frequencies;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    for (absl::string_view field : absl::StrSplit(line, absl::ByAnyChar(", \t"), absl::SkipEmpty())) {
      std::optional<double> v = ParseNumber(field);
      if (!v) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ":", line_number, ": not a finite number: '", field, "'"));
      }
      frequencies.push_back(*v);
    }
  }
  if (frequencies.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no frequencies"));
  return frequencies;
}

absl::StatusOr<std::vector<double>> ReadFrequencyFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) return bytes.status();
  if (!IsNpy(*bytes)) return ParseFrequencyText(*bytes, path);
  absl::StatusOr<NpyArray> array = ParseNpy(*bytes);
  if (!array.ok()) return Prefixed(path, array.status());
  const bool column = array->shape.size() == 2 && array->shape[1] == 1;
  if (array->shape.size() != 1 && !column) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a 1-D array of frequencies"));
  }
  if (array->data.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no frequencies"));
  return std::move(array->data);
}

}  // namespace gpucompute::cli
