// ParallelFor: splits [0, n) into contiguous ranges run on the process's shared worker threads
// and the caller. For large host work (packing a batch, converting or copying big arrays);
// small work runs inline on the caller.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/shared_workers.h"

namespace gpucompute {

// Calls fn(begin, end) on disjoint ranges covering [0, n). `cost` estimates the total work in
// arbitrary units (e.g. bytes); below `min_cost_per_thread` per thread it stays serial.
template <typename Fn>
void ParallelFor(int64_t n, int64_t cost, Fn&& fn, int64_t min_cost_per_thread = 1 << 18) {
  const int64_t threads =
      std::min({HardwareThreads(), n, std::max<int64_t>(1, cost / std::max<int64_t>(1, min_cost_per_thread))});
  if (threads <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  const int64_t step = (n + threads - 1) / threads;
  RunPiecesOnSharedWorkers((n + step - 1) / step, [&fn, n, step](int64_t t) {
    fn(t * step, std::min(n, (t + 1) * step));
  });
}

}  // namespace gpucompute
