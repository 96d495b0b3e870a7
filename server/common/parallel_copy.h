// ParallelCopy: memcpy of large buffers over a few threads. One core copies ~5-10 GB/s; the
// memory system of a server moves several times that, and the shared-memory and resident-tensor
// paths are one copy of up to GiBs each.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "server/common/parallel_for.h"

namespace gpucompute {

// Copies `n` bytes from `src` to `dst` (not overlapping). Below 16 MiB on the caller's thread;
// above, in pieces of at least 8 MiB over at most 8 threads.
inline void ParallelCopy(void* dst, const void* src, int64_t n) {
  constexpr int64_t kSerialBytes = int64_t{16} << 20;
  constexpr int64_t kMaxThreads = 8;
  if (n <= 0) return;
  if (n < kSerialBytes) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const int64_t per_thread = std::max<int64_t>(int64_t{8} << 20, n / kMaxThreads);
  ParallelFor(
      n, n,
      [d, s](int64_t begin, int64_t end) {
        std::memcpy(d + begin, s + begin, static_cast<size_t>(end - begin));
      },
      per_thread);
}

}  // namespace gpucompute
