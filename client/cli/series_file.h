// Reading time series (t, y[, dy]) and frequency lists from CSV and .npy files for the CLI.
//
// CSV: one sample per line, columns t,y[,dy] separated by commas (or, on lines without a comma,
// by spaces/tabs). Blank lines and lines starting with '#' are skipped; the first remaining line
// may be a header (it is one when any of its fields is not a number). Every row must have the
// same number of columns, 2 or 3, and every value must be finite.
// .npy: a 2-D float64/float32 array of shape (N, 2) or (N, 3) (see npy.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucompute::cli {

struct SeriesData {
  std::string name;  // the file it came from
  std::vector<double> t;
  std::vector<double> y;
  std::vector<double> dy;  // the third column, unless absent or ignored (DyColumn)
  int columns = 0;         // columns the source had (2 or 3)
};

// What a third column (dy, measurement errors) is: read when there (the default), required, or
// left out (SeriesData::columns still says it was there).
enum class DyColumn { kIfPresent, kRequired, kIgnore };

// Parses CSV `text` (`name` prefixes error messages), its third column as `dy` says.
absl::StatusOr<SeriesData> ParseCsvSeries(absl::string_view text, absl::string_view name,
                                          DyColumn dy = DyColumn::kIfPresent);

// Reads one series from `path`: .npy when the file starts with NumPy's magic, CSV otherwise.
absl::StatusOr<SeriesData> ReadSeriesFile(const std::string& path,
                                          DyColumn dy = DyColumn::kIfPresent);

// Reads an explicit frequency list: a 1-D (or N x 1) .npy array, or text holding numbers
// separated by whitespace, commas or newlines ('#' starts a comment line). Must not be empty.
absl::StatusOr<std::vector<double>> ReadFrequencyFile(const std::string& path);

// Parses the text form of a frequency list (exposed for tests).
absl::StatusOr<std::vector<double>> ParseFrequencyText(absl::string_view text, absl::string_view name);

// Reads a whole file into memory.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace gpucompute::cli
