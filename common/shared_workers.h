// The process's shared worker threads: HardwareThreads() - 1 threads named gc-parallel,
// started by the first use and kept for the process's life, for host work split into pieces
// (ParallelFor) and for tasks handed off a thread that must not wait (PostToSharedWorkers).
// No thread is started per call: a thread start costs a process-wide TLB shootdown on virtual
// machines, which made short-lived threads cost more than the small batches they packed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/functional/function_ref.h"

namespace gpucompute {

// The machine's hardware threads, read once: std::thread::hardware_concurrency() reads
// /sys/devices/system/cpu/online on every call (open, read, close), and ParallelFor is asked
// on every request, however small (a 1,000-sample periodogram asked ~5 times).
inline int64_t HardwareThreads() {
  static const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  return threads;
}

// Runs piece(0) ... piece(pieces - 1), each once, on the shared workers and on the calling
// thread, and returns when all have run. The caller runs pieces itself until none is left, so
// a call makes progress however busy the workers are, and a piece may call it again.
void RunPiecesOnSharedWorkers(int64_t pieces, absl::FunctionRef<void(int64_t piece)> piece);

// Runs `task` on a shared worker, after the calls and tasks posted before it have been taken;
// returns at once. For work that the posting thread must not do itself (a batch's packing and
// launch, which would hold up a GPU's completion poller).
void PostToSharedWorkers(std::function<void()> task);

}  // namespace gpucompute
