// Move-only RAII owners of CUDA handles (destructors log, never throw), and the status macros
// that turn CUDA / NVRTC errors into absl::Status at the lowest layer.
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime.h>
#include <nvrtc.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpucompute {

// The file name of a __FILE__ path: error messages can reach clients (as INTERNAL), so they
// carry the file's name, not the build machine's absolute path.
const char* SourceBasename(const char* file);

// INTERNAL status naming the call, file, line and cudaGetErrorName/String.
absl::Status CudaErrorStatus(cudaError_t err, const char* expr, const char* file, int line);

// True for the errors that leave the CUDA context unusable ("sticky": every later call on the
// device fails the same way until the process exits), e.g. an illegal address or a trap in a
// kernel, an uncorrectable ECC error; false for errors confined to one call (out of memory,
// an invalid argument).
bool IsStickyCudaError(cudaError_t err);
absl::Status NvrtcErrorStatus(nvrtcResult err, const char* expr, const char* file, int line);

}  // namespace gpucompute

#define CUDA_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                 \
    cudaError_t _gpucompute_cuda_err = (expr);                                         \
    if (_gpucompute_cuda_err != cudaSuccess)                                           \
      return ::gpucompute::CudaErrorStatus(_gpucompute_cuda_err, #expr, __FILE__, __LINE__); \
  } while (0)

#define NVRTC_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                  \
    nvrtcResult _gpucompute_nvrtc_err = (expr);                                         \
    if (_gpucompute_nvrtc_err != NVRTC_SUCCESS)                                         \
      return ::gpucompute::NvrtcErrorStatus(_gpucompute_nvrtc_err, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error, and with debug_sync a stream synchronise too.
#define CUDA_RETURN_IF_LAUNCH_ERROR(stream, debug_sync)                  \
  do {                                                                  \
    CUDA_RETURN_IF_ERROR(cudaPeekAtLastError());                        \
    if (debug_sync) CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream)); \
  } while (0)

namespace gpucompute {

// A cheap, copyable, non-owning view of a stream.
class StreamView {
 public:
  StreamView() = default;
  explicit StreamView(cudaStream_t s) : stream_(s) {}
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT(google-explicit-constructor)

 private:
  cudaStream_t stream_ = nullptr;
};

// Owns a non-blocking stream.
class CudaStream {
 public:
  CudaStream() = default;
  static absl::StatusOr<CudaStream> Create();
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  StreamView view() const { return StreamView(stream_); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Owns an event (timing enabled unless `disable_timing`).
class CudaEvent {
 public:
  CudaEvent() = default;
  static absl::StatusOr<CudaEvent> Create(bool disable_timing = false);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Page-locked host memory (cudaHostAlloc). Reserve() grows it, never shrinks; growth is the
// only allocation and happens only for a batch larger than any before.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Ensures capacity() >= bytes. The contents are not kept on growth.
  absl::Status Reserve(size_t bytes);
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace gpucompute
