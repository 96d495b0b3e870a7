// cuBLASLt and plain device-memory RAII owners, and the cuBLAS status macro. A stream slot owns
// one CublasLtHandle and its workspace (DeviceMemory); dense models own their weights in
// DeviceMemory.
#pragma once

#include <cstddef>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpucompute {

// INTERNAL (RESOURCE_EXHAUSTED for CUBLAS_STATUS_ALLOC_FAILED) naming the call and location.
absl::Status CublasErrorStatus(cublasStatus_t err, const char* expr, const char* file, int line);

}  // namespace gpucompute

#define CUBLAS_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                      \
    cublasStatus_t _gpucompute_cublas_err = (expr);                                         \
    if (_gpucompute_cublas_err != CUBLAS_STATUS_SUCCESS)                                    \
      return ::gpucompute::CublasErrorStatus(_gpucompute_cublas_err, #expr, __FILE__, __LINE__); \
  } while (0)

namespace gpucompute {

// Owns a cuBLASLt handle (created on the current device).
class CublasLtHandle {
 public:
  CublasLtHandle() = default;
  static absl::StatusOr<CublasLtHandle> Create();
  ~CublasLtHandle();
  CublasLtHandle(CublasLtHandle&& other) noexcept;
  CublasLtHandle& operator=(CublasLtHandle&& other) noexcept;
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;

  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// Owns a cudaMalloc allocation on one device (not the stream-ordered pool: for long-lived
// memory such as resident weights and library workspaces). The destructor frees it with its
// device current and restores the caller's device.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  // RESOURCE_EXHAUSTED when the device is out of memory.
  static absl::StatusOr<DeviceMemory> Allocate(int device, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return data_; }
  size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  void Release();
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = 0;
};

}  // namespace gpucompute
