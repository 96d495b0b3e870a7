// cuBLAS and cuSOLVER (dense) handle owners and the cuSOLVER status macro. A stream slot owns
// one of each, bound to its stream once (DeviceContext::Create); the Assimilate op borrows them.
#pragma once

#include <cublas_v2.h>
#include <cusolverDn.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/device/cublaslt.h"

namespace gpucompute {

// INTERNAL (RESOURCE_EXHAUSTED for CUSOLVER_STATUS_ALLOC_FAILED) naming the call and location.
absl::Status CusolverErrorStatus(cusolverStatus_t err, const char* expr, const char* file, int line);

}  // namespace gpucompute

#define CUSOLVER_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                        \
    cusolverStatus_t _gpucompute_cusolver_err = (expr);                                       \
    if (_gpucompute_cusolver_err != CUSOLVER_STATUS_SUCCESS)                                  \
      return ::gpucompute::CusolverErrorStatus(_gpucompute_cusolver_err, #expr, __FILE__, __LINE__); \
  } while (0)

namespace gpucompute {

// Owns a cuBLAS handle (created on the current device).
class CublasHandle {
 public:
  CublasHandle() = default;
  static absl::StatusOr<CublasHandle> Create();
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Owns a cuSOLVER dense handle (created on the current device).
class CusolverDnHandle {
 public:
  CusolverDnHandle() = default;
  static absl::StatusOr<CusolverDnHandle> Create();
  ~CusolverDnHandle();
  CusolverDnHandle(CusolverDnHandle&& other) noexcept;
  CusolverDnHandle& operator=(CusolverDnHandle&& other) noexcept;
  CusolverDnHandle(const CusolverDnHandle&) = delete;
  CusolverDnHandle& operator=(const CusolverDnHandle&) = delete;

  cusolverDnHandle_t get() const { return handle_; }

 private:
  cusolverDnHandle_t handle_ = nullptr;
};

}  // namespace gpucompute
