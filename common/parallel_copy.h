// ParallelCopy: memcpy of large buffers over a few threads. One core copies ~5-10 GB/s; the
// memory system of a server moves several times that, and the shared-memory and resident-tensor
// paths are one copy of up to GiBs each.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/parallel_for.h"

namespace gpucompute {

// Calls copy(begin, end) over pieces of [0, n): one piece on the caller's thread below 16 MiB;
// above, pieces of at least 8 MiB over at most 8 threads.
template <typename Copy>
void ForEachCopyPiece(int64_t n, Copy&& copy) {
  constexpr int64_t kSerialBytes = int64_t{16} << 20;
  constexpr int64_t kMaxThreads = 8;
  if (n <= 0) return;
  if (n < kSerialBytes) {
    copy(int64_t{0}, n);
    return;
  }
  const int64_t per_thread = std::max<int64_t>(int64_t{8} << 20, n / kMaxThreads);
  ParallelFor(n, n, copy, per_thread);
}

// Copies `n` bytes from `src` to `dst` (not overlapping).
inline void ParallelCopy(void* dst, const void* src, int64_t n) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  ForEachCopyPiece(n, [d, s](int64_t begin, int64_t end) {
    std::memcpy(d + begin, s + begin, static_cast<size_t>(end - begin));
  });
}

}  // namespace gpucompute
