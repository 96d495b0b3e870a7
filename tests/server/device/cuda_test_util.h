// GPU-test helpers: skip (GTEST_SKIP) with the reason when no CUDA device is visible.
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gpucompute::testing {

// Empty when a device is visible, else why not.
inline std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  }
  if (count == 0) return "cudaGetDeviceCount returned 0";
  return "";
}

}  // namespace gpucompute::testing

#define SKIP_WITHOUT_CUDA_DEVICE()                                                      \
  do {                                                                                  \
    if (std::string why = ::gpucompute::testing::NoDeviceReason(); !why.empty()) {      \
      GTEST_SKIP() << "no CUDA device visible: " << why;                                \
    }                                                                                   \
  } while (0)
