// Copies out of and into client-owned shared memory that the client may shrink under us. A
// read or write past the end of a truncated POSIX shared-memory object raises SIGBUS; these
// copies turn that into a `false` / an error for the one call instead of taking the server
// down. A SIGBUS anywhere else keeps its usual meaning (the previous handler, else a crash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpucompute {

// memmove(dst, src, n) on this thread; false when a bus error stopped it part-way.
bool GuardedMemmove(void* dst, const void* src, size_t n);

// Copies n bytes (they may overlap) as ParallelCopy does (parallel_copy.h: a few threads
// above 16 MiB).
// INVALID_ARGUMENT naming `what` when a bus error stopped it: the shared-memory object was
// shrunk below the registered region while the server was reading or writing it.
absl::Status GuardedCopy(void* dst, const void* src, int64_t n, absl::string_view what);

// GuardedCopy of non-overlapping buffers in blocks of `block` bytes (the last may be shorter),
// calling `visit(begin, end)` on each block of `dst` as soon as it is copied, while it is in
// cache: the caller reads what it just copied at cache speed instead of in a second pass over
// memory. Blocks run on a few threads above 16 MiB, so `visit` must be thread-safe.
absl::Status GuardedCopyInBlocks(void* dst, const void* src, int64_t n, absl::string_view what,
                                 int64_t block,
                                 const std::function<void(int64_t begin, int64_t end)>& visit);

}  // namespace gpucompute
