// Byte ranges as error messages print them. A peer may send any two int64s as an offset and a
// length: the end they describe can lie beyond int64, where `offset + length` would be
// undefined behaviour, so it is computed in 128 bits.
#pragma once

#include <cstdint>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/strings/str_format.h"

namespace gpucompute {

// "[offset, offset + length)", exact for every pair of int64s.
inline std::string ByteRange(int64_t offset, int64_t length) {
  return absl::StrFormat("[%d, %d)", offset, absl::int128(offset) + absl::int128(length));
}

}  // namespace gpucompute
