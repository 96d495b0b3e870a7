// ParallelFor: splits [0, n) into contiguous ranges over a few short-lived threads. For large,
// occasional host work (packing a big batch); small work runs inline on the caller.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpucompute {

// The machine's hardware threads, read once: std::thread::hardware_concurrency() reads
// /sys/devices/system/cpu/online on every call (open, read, close), and ParallelFor is asked
// on every request, however small (a 1,000-sample periodogram asked ~5 times).
inline int64_t HardwareThreads() {
  static const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  return threads;
}

// Calls fn(begin, end) on disjoint ranges covering [0, n). `cost` estimates the total work in
// arbitrary units (e.g. samples); below `min_cost_per_thread` per thread it stays serial.
template <typename Fn>
void ParallelFor(int64_t n, int64_t cost, Fn&& fn, int64_t min_cost_per_thread = 1 << 18) {
  const int64_t threads =
      std::min({HardwareThreads(), n, std::max<int64_t>(1, cost / min_cost_per_thread)});
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  const int64_t step = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * step), end = std::min(n, begin + step);
    if (begin < end) pool.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  fn(int64_t{0}, std::min(n, step));
  for (auto& th : pool) th.join();
}

}  // namespace gpucompute
