// cuBLASLt handle and device-memory owners (see cublaslt.h).
#include "server/device/cublaslt.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/device/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
absl::Status CublasErrorStatus(cublasStatus_t err, const char* expr, const char* file, int line) {
  std::string message = absl::StrCat(cublasLtGetStatusName(err), " (", cublasLtGetStatusString(err),
                                     ") in ", expr, " at ", SourceBasename(file), ":", line);
  if (err == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// --- CublasLtHandle -----------------------------------------------------------------------

absl::StatusOr<CublasLtHandle> CublasLtHandle::Create() {
  CublasLtHandle h;
  CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&h.handle_));
  return h;
}

CublasLtHandle::~CublasLtHandle() {
  if (handle_ == nullptr) return;
  const cublasStatus_t err = cublasLtDestroy(handle_);
  if (err != CUBLAS_STATUS_SUCCESS) spdlog::warn("cublasLtDestroy failed: {}", cublasLtGetStatusName(err));
}

CublasLtHandle::CublasLtHandle(CublasLtHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasLtHandle& CublasLtHandle::operator=(CublasLtHandle&& other) noexcept {
  if (this != &other) {
    CublasLtHandle old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

// --- DeviceMemory -------------------------------------------------------------------------

absl::StatusOr<DeviceMemory> DeviceMemory::Allocate(int device, size_t bytes) {
  DeviceMemory m;
  m.device_ = device;
  if (bytes == 0) return m;
  int previous = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  const cudaError_t err = cudaMalloc(&m.data_, bytes);
  (void)cudaSetDevice(previous);
  if (err != cudaSuccess) {
    m.data_ = nullptr;
    (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of device memory: cudaMalloc of ", bytes, " bytes on device ", device));
    }
    return CudaErrorStatus(err, "cudaMalloc", __FILE__, __LINE__);
  }
  m.size_ = bytes;
  return m;
}

void DeviceMemory::Release() {
  if (data_ == nullptr) return;
  int previous = 0;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                        cudaSetDevice(device_) == cudaSuccess;
  const cudaError_t err = cudaFree(data_);
  if (err != cudaSuccess) {
    spdlog::warn("cudaFree({} bytes) on device {} failed: {} ({})", size_, device_,
                 cudaGetErrorName(err), cudaGetErrorString(err));
    (void)cudaGetLastError();
  }
  if (switched) (void)cudaSetDevice(previous);
  data_ = nullptr;
  size_ = 0;
}

DeviceMemory::~DeviceMemory() { Release(); }

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(other.device_) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

}  // namespace gpucompute
