// cuFFT plan owner and the per-slot object cache (see cufft.h).
#include "server/device/cufft.h"

#include "absl/strings/str_cat.h"
#include "server/device/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

const char* CufftResultName(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    default: return "CUFFT_ERROR";
  }
}

}  // namespace

absl::Status CufftErrorStatus(cufftResult err, const char* expr, const char* file, int line) {
  const std::string msg = absl::StrCat(expr, " failed: ", CufftResultName(err), " (",
                                       static_cast<int>(err), ") at ", SourceBasename(file), ":", line);
  // A plan's work area that cannot be allocated is the device running out of memory.
  if (err == CUFFT_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<CufftPlan> CufftPlan::Create1d(int64_t n, int64_t batch, cufftType type) {
  CufftPlan plan;
  CUFFT_RETURN_IF_ERROR(cufftCreate(&plan.plan_));
  plan.valid_ = true;
  CUFFT_RETURN_IF_ERROR(cufftSetAutoAllocation(plan.plan_, 0));
  long long size = n;
  CUFFT_RETURN_IF_ERROR(cufftMakePlanMany64(plan.plan_, 1, &size, nullptr, 1, n, nullptr, 1, n,
                                            type, batch, &plan.work_bytes_));
  return plan;
}

CufftPlan& CufftPlan::operator=(CufftPlan&& other) noexcept {
  if (this != &other) {
    Release();
    plan_ = std::exchange(other.plan_, 0);
    valid_ = std::exchange(other.valid_, false);
    work_bytes_ = other.work_bytes_;
  }
  return *this;
}

CufftPlan::~CufftPlan() { Release(); }

void CufftPlan::Release() {
  if (!valid_) return;
  const cufftResult r = cufftDestroy(plan_);
  if (r != CUFFT_SUCCESS) spdlog::warn("cufftDestroy failed: {}", CufftResultName(r));
  valid_ = false;
  plan_ = 0;
}

SlotCache::~SlotCache() {
  // The slot's owner synchronises the stream before its slots go (DeviceContext), so nothing
  // queued reads these any more.
  for (Retired& r : retired_) (void)cudaEventDestroy(r.passed);
  retired_.clear();
  entries_.clear();
  for (cudaEvent_t e : spare_events_) (void)cudaEventDestroy(e);
}

absl::Status SlotCache::Retire(std::shared_ptr<void> value, cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else {
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  if (const cudaError_t err = cudaEventRecord(event, stream); err != cudaSuccess) {
    (void)cudaEventDestroy(event);
    const cudaError_t sync = cudaStreamSynchronize(stream);
    return CudaErrorStatus(sync != cudaSuccess ? sync : err, "cudaEventRecord (slot cache eviction)",
                           __FILE__, __LINE__);
  }
  retired_.push_back(Retired{std::move(value), event});
  return absl::OkStatus();
}

void SlotCache::ReleaseRetired() {
  for (auto it = retired_.begin(); it != retired_.end();) {
    const cudaError_t state = cudaEventQuery(it->passed);
    if (state == cudaErrorNotReady) {
      ++it;
      continue;
    }
    // Passed, or the device failed (nothing more runs on the stream): either way it is free.
    if (state != cudaSuccess) (void)cudaGetLastError();
    spare_events_.push_back(it->passed);
    it = retired_.erase(it);
  }
}

}  // namespace gpucompute
