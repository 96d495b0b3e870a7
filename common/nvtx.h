// NVTX ranges for Nsight Systems; compiled out when the CUDA Toolkit is absent.
#pragma once

#if defined(GPUCOMPUTE_WITH_CUDA)
#include <nvtx3/nvToolsExt.h>
namespace gpucompute {
// Scoped NVTX range: pushed on construction, popped on destruction (same thread).
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};
// Marks a stage that spans threads (e.g. queue wait): start/end by id.
inline uint64_t NvtxStart(const char* name) { return nvtxRangeStartA(name); }
inline void NvtxEnd(uint64_t id) { nvtxRangeEnd(id); }
}  // namespace gpucompute
#else
#include <cstdint>
namespace gpucompute {
class NvtxRange {
 public:
  explicit NvtxRange(const char*) {}
};
inline uint64_t NvtxStart(const char*) { return 0; }
inline void NvtxEnd(uint64_t) {}
}  // namespace gpucompute
#endif

#define GPUCOMPUTE_NVTX_CONCAT_INNER(a, b) a##b
#define GPUCOMPUTE_NVTX_CONCAT(a, b) GPUCOMPUTE_NVTX_CONCAT_INNER(a, b)
#define NVTX_RANGE(name) ::gpucompute::NvtxRange GPUCOMPUTE_NVTX_CONCAT(_nvtx_range_, __LINE__)(name)
