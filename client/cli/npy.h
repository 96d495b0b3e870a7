// A small reader and writer for NumPy's .npy format (versions 1.0, 2.0 and 3.0).
//
// Format (numpy/lib/format.py): the magic "\x93NUMPY", a major and minor version byte, the
// header length (uint16 LE in v1, uint32 LE in v2/v3), then an ASCII (v3: UTF-8) Python dict
// literal {'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), } padded with spaces and a
// newline, then the raw elements. Supported dtypes: float64, float32 and float16 in either byte
// order ('<', '>', '=', '|'); arrays in Fortran order are returned in C order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gpucompute::cli {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> data;  // product(shape) values in row-major (C) order
  int item_size = 8;         // 2 (float16), 4 (float32) or 8 (float64), as stored in the file
};

// Parses a whole .npy file held in `bytes`. INVALID_ARGUMENT, with a reason, for a bad magic,
// an unsupported version or dtype, a malformed header, or a data size that does not match.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);

// Reads and parses `path` (NOT_FOUND when it cannot be opened).
absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);

// Encodes `data` (row-major, product(shape) values) as a version 1.0 .npy file of little-endian
// float64 (item_size 8), float32 (4) or float16 (2; rounded to nearest even), header padded to
// 64 bytes as NumPy does.
std::string EncodeNpy(absl::Span<const int64_t> shape, absl::Span<const double> data,
                      int item_size = 8);

// The dict-literal header alone, parsed (exposed for tests).
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view header);

}  // namespace gpucompute::cli
