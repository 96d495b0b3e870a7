// Stream-ordered scratch from a memory pool, freed on the stream when the owner goes out of
// scope (early error returns too): the work enqueued before that point may still use it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

#include "absl/status/statusor.h"
#include "server/device/cuda_resources.h"

namespace gpucompute {

class StreamScratch {
 public:
  StreamScratch(cudaMemPool_t pool, cudaStream_t stream) : pool_(pool), stream_(stream) {}
  ~StreamScratch() {
    for (void* p : ptrs_) cudaFreeAsync(p, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  absl::StatusOr<void*> Get(size_t bytes) {
    void* p = nullptr;
    CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&p, std::max<size_t>(bytes, 1), pool_, stream_));
    ptrs_.push_back(p);
    return p;
  }

 private:
  cudaMemPool_t pool_;
  cudaStream_t stream_;
  std::vector<void*> ptrs_;
};

}  // namespace gpucompute
