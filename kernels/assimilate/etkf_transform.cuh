// The ETKF's ensemble-space transform without an eigendecomposition (nvcc-built):
//   T = sqrt(N-1) G^-1/2 + (G^-1 b) 1^T,   G = (N-1) I + Yw^T Yw,   b = Yw^T dw,
// with G^-1/2 from a coupled Newton-Schulz iteration run on the tensor cores (float64 MMA), one
// block per problem. Fifty members on the H200: 0.11 ms where cuSOLVER's SYEVD takes 0.6 ms
// (docs/design/assimilate.md).
//
// Where the iteration's condition bound is too large for a float64 result within ~1e-11 of the
// eigendecomposition's (or a value is not finite), the problem is flagged and its G copied out;
// LaunchEtkfTransform then runs the Jacobi eigendecomposition kernel on the flagged problems
// only and forms their T from it, so every problem gets a T from one launch sequence.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gpucompute::assimilate::kernels {

// Orders the Newton-Schulz kernel takes (shared memory: 5 matrices of order N rounded up to 8).
constexpr int kMaxEtkfNsOrder = 64;

// Above this bound on cond(G) (s / (N-1), s >= lambda_max from Gershgorin / Frobenius), the
// problem takes the eigendecomposition. Measured in float64 against LAPACK
// (docs/design/assimilate.md): at bounds up to 1e5 the two transforms agree within 2e-12, at
// 1e7 within 2e-10 where fewer observations than members leave an eigenvalue N - 1 of high
// multiplicity.
constexpr double kEtkfNsMaxCondition = 1e6;

// P problems of order N (2 <= N <= kMaxEtkfNsOrder). c: per problem (c_stride apart) the
// column-major N x (N + 1) matrix [G | b] (only G's lower triangle is read). t: P contiguous
// column-major N x N transforms. v, ev: fallback scratch (P x N x N, P x N). info[p] = 1 when the
// fallback finds G not positive definite (else untouched). flag: P ints of scratch.
// force_fallback: every problem takes the eigendecomposition (tests).
template <typename T>
cudaError_t LaunchEtkfTransform(int P, int N, const T* c, int64_t c_stride, T* t, T* v, T* ev,
                                int* info, int* flag, bool force_fallback, cudaStream_t stream);

}  // namespace gpucompute::assimilate::kernels
