// Host memory a backend can move to and from its devices without a staging copy, for resident
// tensors (their bytes are written once as they arrive and read by operations in place).
//
// The CUDA backend's is page-locked memory (cudaHostAlloc): a GPU copies such bytes by DMA where
// they are, where plain memory is first packed into the stream's own pinned buffer (a second
// pass over every byte: ~13 ms for the seed EnKF's 216 MB). Allocating page-locked memory is slow
// (tens of ms for tens of MB) and freeing it waits for the device, so blocks are kept for reuse:
// a call's inputs, uploaded as resident tensors and deleted after it, take the previous call's
// blocks.
//
// Bounded: at most `capacity` bytes are held (in use plus kept), so that locked memory stays a
// fixed share of the host's; a request that does not fit even after the kept blocks are freed
// gets nothing, and the caller uses plain memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpucompute {

class HostMemory {
 public:
  // Allocates and frees the underlying blocks (cudaHostAlloc / cudaFreeHost): null on failure.
  using AllocateFn = std::function<void*(size_t bytes)>;
  using FreeFn = std::function<void(void* block)>;

  struct Stats {
    int64_t in_use_bytes = 0;  // handed out, not yet given back
    int64_t kept_bytes = 0;    // given back, kept for reuse
    int64_t reused = 0;        // allocations served by a kept block, since start
    int64_t allocated = 0;     // allocations that took a new block
    int64_t refused = 0;       // requests that did not fit (the caller used plain memory)
  };

  // `min_bytes`: smaller requests get nothing (packing a small tensor costs less than the DMA
  // call it would save, and rounding would waste most of a block).
  HostMemory(int64_t capacity, int64_t min_bytes, AllocateFn allocate, FreeFn free);
  ~HostMemory();  // frees every kept block; blocks still in use must have been given back
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  struct Block {
    void* data = nullptr;
    size_t size = 0;  // what the block holds: at least what was asked, a multiple of kGranule
  };

  // A block of at least `bytes`, or an empty one (null data): below min_bytes, beyond the
  // capacity, or when the underlying allocation fails. The block stays valid until Free.
  Block Allocate(size_t bytes);
  // Gives back a block from Allocate, kept for reuse.
  void Free(Block block);

  Stats stats() const;
  int64_t capacity() const { return capacity_; }

  static constexpr size_t kGranule = size_t{1} << 20;

 private:
  static size_t Rounded(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

  const int64_t capacity_;
  const int64_t min_bytes_;
  const AllocateFn allocate_;
  const FreeFn free_;

  mutable absl::Mutex mu_;
  std::multimap<size_t, void*> kept_ ABSL_GUARDED_BY(mu_);  // rounded size -> block
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucompute
