// Backend selection: CUDA when built in and a device is visible, else the CPU reference.
#include "server/runtime/backend.h"

#include "absl/status/status.h"
#include "server/runtime/cpu/cpu_backend.h"
#include "spdlog/spdlog.h"
#if defined(GPUCOMPUTE_WITH_CUDA)
#include "server/runtime/cuda/cuda_backend.h"
#endif

namespace gpucompute {

bool CudaDeviceAvailable() { return VisibleCudaDeviceCount() > 0; }

int VisibleCudaDeviceCount() {
#if defined(GPUCOMPUTE_WITH_CUDA)
  return CudaBackend::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       CompletionQueue* completions) {
  if (options.kind != "auto" && options.kind != "cuda" && options.kind != "cpu") {
    return absl::InvalidArgumentError("--backend must be auto, cuda or cpu");
  }
  const bool want_cuda = options.kind == "cuda" || (options.kind == "auto" && CudaDeviceAvailable());
  if (want_cuda) {
#if defined(GPUCOMPUTE_WITH_CUDA)
    return CudaBackend::Create(options, completions);
#else
    return absl::FailedPreconditionError("this build has no CUDA backend (GPUCOMPUTE_CUDA=OFF)");
#endif
  }
  if (options.kind == "auto") spdlog::info("no CUDA device visible: using the CPU backend");
  return std::unique_ptr<Backend>(new CpuBackend(options.cpu_threads, completions));
}

}  // namespace gpucompute
