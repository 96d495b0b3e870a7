// A kernel that faults on purpose, for fault-injection tests of the server's device-health
// handling (--inject_sticky_fault_*). Never launched unless those test-only flags are set.
#pragma once

#include <cuda_runtime.h>

namespace gpucompute::kernels {

// Enqueues one thread that executes a trap instruction: the launch succeeds, and the stream
// then fails with a sticky error (cudaErrorLaunchFailure), as a real kernel fault would; the
// device's context is unusable afterwards.
cudaError_t LaunchTrap(cudaStream_t stream);

}  // namespace gpucompute::kernels
