// Device kernels of the Assimilate op where cuBLAS/cuSOLVER have no routine: centring and
// whitening of the observation-space ensemble with the innovation, server-drawn perturbations
// (philox.h, the same numbers as the CPU reference), centring the state ensemble, diagonal
// shifts, the eigenvalue functions of the ETKF square root, and the epilogue of the ensemble
// transform (mean back, RTPP/RTPS, spread). Launchers are host functions (nvcc-built), templated
// on the compute type T (float or double), for a group of P problems of one shape stored back to
// back (see server/ops/assimilate/cuda_assimilate.cc for the layouts).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gpucompute::assimilate::kernels {

// Per-problem settings the kernels read (one per problem of a group, on the device).
struct ProblemParams {
  double inflation = 1.0;
  double relaxation_factor = 0.0;
  uint64_t seed = 0;
  uint32_t index = 0;     // the problem's index in its request (keys the perturbation draw)
  int32_t relaxation = 0;  // 0 none, 1 RTPP, 2 RTPS
  // LETKF: the most candidate pairs (LaunchLetkfCountCandidates); more, and the analysis
  // kernel skips every variable.
  uint64_t max_candidates = ~uint64_t{0};
};

// Observation rows, in place. obs: P x m rows of W values: columns [0, N) hold HX on entry and
// lambda (HX - ybar) on exit, column N gets d = y - ybar, and for the stochastic filter columns
// [N+1, 2N+1) hold the client's perturbations on entry (or get the centred seed-drawn ones),
// and on exit Ew (form_d = false) or Dw = d 1^T + Ew - Yw (form_d = true). inv_sqrt_r (P x m,
// or null): rows are whitened by it (diagonal R), except seed-drawn perturbations (already
// whitened). innovation (P x m, double): y - ybar before whitening.
template <typename T>
cudaError_t LaunchPrepareObs(int P, int64_t m, int N, int W, T* obs, const double* y,
                             const T* inv_sqrt_r, const ProblemParams* params, bool stochastic,
                             bool seeded, bool form_d, double* innovation, cudaStream_t stream);

// Dw = d 1^T + Ew - Yw in columns [N+1, 2N+1) of each obs row (after whitening by a full R).
template <typename T>
cudaError_t LaunchFormD(int P, int64_t m, int N, int W, T* obs, cudaStream_t stream);

// State rows, in place: x (P x n rows of N) <- lambda (x - xbar); xbar (P x n) <- row means.
template <typename T>
cudaError_t LaunchCentreState(int P, int64_t n, int N, T* x, double* xbar,
                              const ProblemParams* params, cudaStream_t stream);

// a_p(i, i) += value for P matrices of order n, leading dimension lda, `stride` apart.
template <typename T>
cudaError_t LaunchAddDiagonal(int P, int n, T* a, int64_t lda, int64_t stride, T value,
                              cudaStream_t stream);

// M = I - (C + C^T) / 2 for P N x N matrices C (leading dimension N, `c_stride` apart) into m
// (contiguous N x N each).
template <typename T>
cudaError_t LaunchIdentityMinusSym(int P, int N, const T* c, int64_t c_stride, T* m,
                                   cudaStream_t stream);

// After SYEVD of P symmetric N x N matrices (eigenvectors V in v, contiguous N x N each,
// eigenvalues ev, N each, ascending): vf = V diag(f(ev)), with f = sqrt((N-1)/ev) (ensemble
// space, `ensemble` true) or sqrt(max(ev, 0)) (observation space). Ensemble space also
// divides u (N per problem) by ev and sets info[p] = 1 when an eigenvalue is not positive.
template <typename T>
cudaError_t LaunchEigenFunction(int P, int N, const T* v, const T* ev, T* vf, T* u, bool ensemble,
                                int* info, cudaStream_t stream);

// t_p(j, k) += w_p(j) for P N x N matrices (contiguous) and vectors `w_stride` apart.
template <typename T>
cudaError_t LaunchAddColumnVector(int P, int N, T* t, const T* w, int64_t w_stride,
                                  cudaStream_t stream);

// The analysis rows, in place in xa (P x n rows of N, holding A T on entry): relaxation
// against af (the centred, inflated forecast rows), the mean xbar added back, and per block the
// sum of the rows' N - 1 sample variances into partials (P x blocks_per_problem).
template <typename T>
cudaError_t LaunchFinishRows(int P, int64_t n, int N, T* xa, const T* af, const double* xbar,
                             const ProblemParams* params, double* partials,
                             int* blocks_per_problem, cudaStream_t stream);

// spread[p] = sqrt(sum of partials of problem p / n) (fixed order: deterministic).
cudaError_t LaunchReduceSpread(int P, int blocks_per_problem, int64_t n, const double* partials,
                               double* spread, cudaStream_t stream);

// Blocks per problem that LaunchFinishRows uses for n rows (to size `partials`).
int FinishRowsBlocks(int64_t n);

// Fused state pass for N <= kMaxFusedRowsMembers: reads the RAW forecast rows x (P x n rows
// of N) once and writes the finished analysis rows xa: per tile of rows, the row means, the
// anomalies A = lambda (x - xbar), A T (T column-major N x N, t_stride apart per problem, in
// shared memory), relaxation, the mean back and the spread partials (as LaunchFinishRows).
// Replaces LaunchCentreState + the update GEMM + LaunchFinishRows. *blocks_per_problem <=
// FinishRowsBlocks(n).
constexpr int kMaxFusedRowsMembers = 64;
template <typename T>
cudaError_t LaunchTransformRows(int P, int64_t n, int N, const T* x, const T* t, int64_t t_stride,
                                const ProblemParams* params, T* xa, double* partials,
                                int* blocks_per_problem, cudaStream_t stream,
                                int rows_per_warp = 0);  // 0: double on the tensor cores (8
                                                         // rows per warp), else as float;
                                                         // float: 4 or 8 (0: 8) rows per warp


// Symmetric eigendecomposition of P contiguous N x N matrices (N <= kMaxJacobiOrder) in place
// by parallel cyclic Jacobi, one block each: a <- eigenvectors (column-major, as SYEVD),
// ev (N per problem) <- eigenvalues (in no particular order). only (P ints, or null): problems
// with only[p] == 0 are left as they are.
constexpr int kMaxJacobiOrder = 64;
template <typename T>
cudaError_t LaunchJacobiEig(int P, int N, T* a, T* ev, cudaStream_t stream, const int* only = nullptr);

// Lp (npad x npad, column-major): the diagonal blocks of order nb of the lower factor l (n x n),
// padded with an identity to npad (a multiple of nb); only the diagonal blocks are written.
template <typename T>
cudaError_t LaunchPadDiagonalBlocks(int n, int npad, int nb, const T* l, T* lp, cudaStream_t stream);
// Inverses of lp's diagonal blocks of order kInverseBase (npad a multiple of it) into dp (same
// positions and leading dimension).
constexpr int kInverseBase = 32;
template <typename T>
cudaError_t LaunchInvertBaseBlocks(int npad, const T* lp, T* dp, cudaStream_t stream);

// The whole stochastic EnKF (ensemble space, diagonal R, W = 2N + 1) of each of P small problems
// in one launch: observation rows (obs as for LaunchPrepareObs, on entry), the ensemble-space
// solve (info[p] = 1 when a pivot of G = U D U^T is not positive), T = I + G^-1 B, the state rows
// (raw x) transformed and finished, spread[p]. variant 0: one warp per problem (no block
// barriers; [G | RHS] and Gauss-Jordan in registers); 1: one 128-thread block per problem
// (slower; kept for tests and benchmarks). Fits: 2 <= N <= 32 and the variant's shared memory
// <= 48 KiB.
bool SmallEnkfFits(int64_t n, int64_t m, int N, int element_size, int variant = 0);
template <typename T>
cudaError_t LaunchSmallEnkf(int P, int64_t n, int64_t m, int N, int W, const T* x, const T* obs,
                            const double* y, const T* inv_sqrt_r, const ProblemParams* params,
                            bool seeded, T* xa, double* innovation, double* spread, int* info,
                            cudaStream_t stream, int variant = 0);

}  // namespace gpucompute::assimilate::kernels
