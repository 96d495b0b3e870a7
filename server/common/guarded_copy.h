// Copies out of and into client-owned shared memory that the client may shrink under us. A
// read or write past the end of a truncated POSIX shared-memory object raises SIGBUS; these
// copies turn that into a `false` / an error for the one call instead of taking the server
// down. A SIGBUS anywhere else keeps its usual meaning (the previous handler, else a crash).
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace gpucompute
