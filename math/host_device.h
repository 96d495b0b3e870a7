// GPUCOMPUTE_HOST_DEVICE: marks the functions of math/ that host C++ and CUDA device code both
// compile (__host__ __device__ under nvcc, nothing elsewhere).
#pragma once

#if defined(__CUDACC__)
#define GPUCOMPUTE_HOST_DEVICE __host__ __device__
#else
#define GPUCOMPUTE_HOST_DEVICE
#endif
