// cuBLAS and cuSOLVER handle owners (see cusolver.h).
#include "server/device/cusolver.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/device/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

const char* CusolverStatusName(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "CUSOLVER_STATUS_(other)";
  }
}

}  // namespace

absl::Status CusolverErrorStatus(cusolverStatus_t err, const char* expr, const char* file, int line) {
  std::string message = absl::StrCat(CusolverStatusName(err), " (", static_cast<int>(err), ") in ",
                                     expr, " at ", SourceBasename(file), ":", line);
  if (err == CUSOLVER_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::StatusOr<CublasHandle> CublasHandle::Create() {
  CublasHandle h;
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&h.handle_));
  return h;
}

CublasHandle::~CublasHandle() {
  if (handle_ == nullptr) return;
  const cublasStatus_t err = cublasDestroy(handle_);
  if (err != CUBLAS_STATUS_SUCCESS) spdlog::warn("cublasDestroy failed: {}", cublasGetStatusName(err));
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    CublasHandle old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

absl::StatusOr<CusolverDnHandle> CusolverDnHandle::Create() {
  CusolverDnHandle h;
  CUSOLVER_RETURN_IF_ERROR(cusolverDnCreate(&h.handle_));
  return h;
}

CusolverDnHandle::~CusolverDnHandle() {
  if (handle_ == nullptr) return;
  const cusolverStatus_t err = cusolverDnDestroy(handle_);
  if (err != CUSOLVER_STATUS_SUCCESS) spdlog::warn("cusolverDnDestroy failed: {}", CusolverStatusName(err));
}

CusolverDnHandle::CusolverDnHandle(CusolverDnHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CusolverDnHandle& CusolverDnHandle::operator=(CusolverDnHandle&& other) noexcept {
  if (this != &other) {
    CusolverDnHandle old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

}  // namespace gpucompute
