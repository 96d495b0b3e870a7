// A kernel that faults on purpose (see fault_injection.cuh).
#include "kernels/fault_injection.cuh"

namespace gpucompute::kernels {
namespace {

__global__ void TrapKernel() { __trap(); }

}  // namespace

cudaError_t LaunchTrap(cudaStream_t stream) {
  TrapKernel<<<1, 1, 0, stream>>>();
  return cudaPeekAtLastError();
}

}  // namespace gpucompute::kernels
