// Rounding sizes up to an alignment: the device buffers' sections start on 256-byte boundaries
// (what cudaMalloc and the stream-ordered pool give, and what vector loads and cuBLASLt want).
#pragma once

#include <cstddef>

namespace gpucompute {

inline constexpr size_t kDeviceAlignment = 256;

constexpr size_t AlignUp(size_t n, size_t alignment = kDeviceAlignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace gpucompute
