// Host memory kept for reuse (see host_memory.h).
#include "server/runtime/host_memory.h"

#include <utility>
#include <vector>

namespace gpucompute {

HostMemory::HostMemory(int64_t capacity, int64_t min_bytes, AllocateFn allocate, FreeFn free)
    : capacity_(capacity), min_bytes_(min_bytes), allocate_(std::move(allocate)), free_(std::move(free)) {}

HostMemory::~HostMemory() {
  absl::MutexLock lock(&mu_);
  for (const auto& [size, block] : kept_) free_(block);
}

HostMemory::Block HostMemory::Allocate(size_t bytes) {
  if (bytes == 0 || static_cast<int64_t>(bytes) < min_bytes_) return {};
  const size_t size = Rounded(bytes);
  std::vector<void*> evicted;  // freed outside the lock (freeing page-locked memory waits)
  bool fits = false;
  {
    absl::MutexLock lock(&mu_);
    // A kept block of this size, or up to a quarter larger.
    auto it = kept_.lower_bound(size);
    if (it != kept_.end() && it->first <= size + size / 4) {
      const Block block{it->second, it->first};
      stats_.kept_bytes -= static_cast<int64_t>(block.size);
      stats_.in_use_bytes += static_cast<int64_t>(block.size);
      ++stats_.reused;
      kept_.erase(it);
      return block;
    }
    // Room for a new block, freeing kept ones (largest first) if need be.
    auto over = [&] {
      return stats_.in_use_bytes + stats_.kept_bytes + static_cast<int64_t>(size) > capacity_;
    };
    while (over() && !kept_.empty()) {
      auto largest = std::prev(kept_.end());
      stats_.kept_bytes -= static_cast<int64_t>(largest->first);
      evicted.push_back(largest->second);
      kept_.erase(largest);
    }
    fits = !over();
    if (fits) {
      stats_.in_use_bytes += static_cast<int64_t>(size);  // counted before the slow allocation
    } else {
      ++stats_.refused;
    }
  }
  for (void* block : evicted) free_(block);
  if (!fits) return {};
  void* data = allocate_(size);
  absl::MutexLock lock(&mu_);
  if (data == nullptr) {
    stats_.in_use_bytes -= static_cast<int64_t>(size);
    ++stats_.refused;
    return {};
  }
  ++stats_.allocated;
  return Block{data, size};
}

void HostMemory::Free(Block block) {
  if (block.data == nullptr) return;
  absl::MutexLock lock(&mu_);
  stats_.in_use_bytes -= static_cast<int64_t>(block.size);
  stats_.kept_bytes += static_cast<int64_t>(block.size);
  kept_.emplace(block.size, block.data);
}

HostMemory::Stats HostMemory::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gpucompute
