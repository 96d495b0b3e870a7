// CUDA / NVRTC error statuses and the RAII owners of streams, events and pinned host memory.
#include "server/device/cuda_resources.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
const char* SourceBasename(const char* file) {
  const char* base = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (*p == '/' || *p == '\\') base = p + 1;
  }
  return base;
}

absl::Status CudaErrorStatus(cudaError_t err, const char* expr, const char* file, int line) {
  // A failed runtime call also records itself as the thread's "last error", which a later
  // cudaPeekAtLastError() after an unrelated, successful launch would report again. Clear it
  // here so each error is reported once (sticky errors stay sticky: the context is lost).
  (void)cudaGetLastError();
  std::string message = absl::StrCat(cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                     ") in ", expr, " at ", SourceBasename(file), ":", line);
  // Out of device memory is a resource limit the caller may shed load on; all else is a fault.
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

absl::Status NvrtcErrorStatus(nvrtcResult err, const char* expr, const char* file, int line) {
  return absl::InternalError(absl::StrCat(nvrtcGetErrorString(err), " in ", expr, " at ",
                                          SourceBasename(file), ":", line));
}

// --- CudaStream ---------------------------------------------------------------------------

absl::StatusOr<CudaStream> CudaStream::Create() {
  CudaStream stream;
  // Non-blocking: no implicit synchronisation with the legacy default stream, which other
  // libraries in the process may use.
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking));
  return stream;
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  cudaError_t err = cudaStreamDestroy(stream_);
  if (err != cudaSuccess) {
    spdlog::warn("cudaStreamDestroy failed: {} ({})", cudaGetErrorName(err),
                 cudaGetErrorString(err));
    (void)cudaGetLastError();
  }
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    CudaStream old(std::move(*this));  // destroys our current stream, if any
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

// --- CudaEvent ----------------------------------------------------------------------------

absl::StatusOr<CudaEvent> CudaEvent::Create(bool disable_timing) {
  CudaEvent event;
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(
      &event.event_, disable_timing ? cudaEventDisableTiming : cudaEventDefault));
  return event;
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  cudaError_t err = cudaEventDestroy(event_);
  if (err != cudaSuccess) {
    spdlog::warn("cudaEventDestroy failed: {} ({})", cudaGetErrorName(err),
                 cudaGetErrorString(err));
    (void)cudaGetLastError();
  }
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    CudaEvent old(std::move(*this));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

// --- PinnedBuffer -------------------------------------------------------------------------

PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
  cudaError_t err = cudaFreeHost(data_);
  if (err != cudaSuccess) {
    spdlog::warn("cudaFreeHost({} bytes) failed: {} ({})", capacity_, cudaGetErrorName(err),
                 cudaGetErrorString(err));
    (void)cudaGetLastError();
  }
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    PinnedBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

absl::Status PinnedBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return absl::OkStatus();
  // Grow geometrically (x1.5) so that slowly rising batch sizes do not re-pin on every batch,
  // rounded up to whole pages since pinning works in pages anyway.
  constexpr size_t kPage = size_t{4} << 10;
  size_t target = std::max(bytes, capacity_ + capacity_ / 2);
  if (target <= SIZE_MAX - (kPage - 1)) target = (target + kPage - 1) / kPage * kPage;
  void* fresh = nullptr;
  // Portable: the staging buffer is pinned for every device's context, not only the current.
  // Allocate first so that a failure leaves the old buffer in place.
  CUDA_RETURN_IF_ERROR(cudaHostAlloc(&fresh, target, cudaHostAllocPortable));
  PinnedBuffer old(std::move(*this));  // frees the old buffer; contents are not kept
  data_ = fresh;
  capacity_ = target;
  return absl::OkStatus();
}

}  // namespace gpucompute
