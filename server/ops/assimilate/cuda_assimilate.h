// CUDA host code of the Assimilate op: a batch runs on one stream slot with its cuBLAS and
// cuSOLVER handles. Problems of one shape (n, m, N, method, kind of R, form, perturbation
// source) form a group stored back to back, and each step runs once per group: strided-batched
// GEMM/GEMV, batched Cholesky (potrfBatched) and triangular solves (trsmBatched) and
// syevjBatched for many small problems, the plain routines (SYRK, POTRF, TRSM, SYEVD) for one
// large problem, a few kernels (kernels/assimilate) for what the libraries do not do, and fused
// kernels where the libraries are latency-bound: the whole stochastic analysis of small problems
// in one warp each, the ETKF square root by Newton-Schulz for N <= 64, one pass over the state
// for N <= 64, Jacobi for batched eigenproblems, and G^-1 B by inverted diagonal blocks and
// GEMMs for one large problem (docs/design/assimilate.md); the LETKF bins its observations
// and runs one warp per state variable (kernels/assimilate/letkf.cuh, up to
// CudaLetkfMaxMembers() members). The algebra, conventions and the
// cost model that picks the form are assimilate.h's, so that the results equal the CPU
// reference to rounding (seeded perturbations included).
//
// Layout (all row-major as on the wire, i.e. column-major with the members as rows for cuBLAS):
// per problem X (n x N, centred in place), the observation rows [Yw | dw | Ew or Dw] (m x W, W
// = N + 1 for the ETKF, 2N + 1 for the stochastic filter), R (m x m, its Cholesky factor in
// place) or 1/sqrt(r) (m). No n x m gain is formed: every form ends in Xa = xbar 1^T + A T.
//
// Threading: like the dense op's, a slot is used by one batch at a time.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "absl/status/statusor.h"
#include "server/ops/assimilate/assimilate.h"
#include "server/ops/assimilate/batch_plan.h"
#include "server/device/device_context.h"

namespace gpucompute::assimilate {

// Benchmark and test knobs.
// How one stochastic ensemble-space problem solves T = I + G^-1 B.
enum class SolveVariant {
  kAuto,          // kBlockInverse for one problem of N >= 1024, kTrsm otherwise
  kTrsm,          // two (blocked) triangular solves
  kBlockInverse,  // L's diagonal blocks inverted (order trsm_block rounded up to 32 x 2^k, or
                  // 512), then both block substitutions as GEMMs
};

// How ETKF square roots are taken.
enum class EigVariant {
  kAuto,          // the ensemble-space transform by Newton-Schulz for 2 <= N <= 64
                  // (etkf_transform.cuh; unless no_fused), else eigendecompositions by the
                  // Jacobi kernel for several problems of N <= 64 (unless no_fused or
                  // force_unbatched), SYEVD / syevjBatched otherwise
  kLibrary,       // always an eigendecomposition by the library
  kJacobi,        // the Jacobi kernel where kAuto would take Newton-Schulz
  kBatchedSyev,   // cuSOLVER's XsyevBatched (also for one matrix)
  kNewtonSchulzFallback,  // Newton-Schulz with its eigendecomposition fallback forced on every
                          // problem
};

// The small fused kernel's layout (kernels::LaunchSmallEnkf's variant).
enum class SmallKernel { kWarpPerProblem = 0, kBlockPerProblem = 1 };

// Benchmark and test switches (the defaults are what the server runs).
struct EnqueueOptions {
  cudaEvent_t before = nullptr;  // recorded after the copy in, before the first kernel
  cudaEvent_t after = nullptr;   // recorded after the last kernel, before the copy out
  // Problems per group above which, and orders up to which, the batched library routines are
  // used (tests force both ways).
  bool force_unbatched = false;
  // Tests and benchmarks: take the library path even where a fused kernel applies (the
  // per-problem small stochastic kernel, the one-pass state transform for N <= 64).
  bool no_fused = false;
  // Left triangular solves of order >= 2 x this run blocked (TRSM on diagonal blocks, GEMM for
  // the rest); 0: one cuBLAS TRSM; -1: the default block.
  int trsm_block = -1;
  SolveVariant solve = SolveVariant::kAuto;
  EigVariant eig = EigVariant::kAuto;
  // The one-pass state transform: 0 float64 on the tensor cores (8 rows per warp; float: the
  // scalar kernel with 8); 4 or 8: the scalar kernel with that many rows per warp.
  int rows_per_warp = 0;
  SmallKernel small_kernel = SmallKernel::kWarpPerProblem;
  // Tests and benchmarks: pack every input into the staging buffer, even arrays in page-locked
  // memory that the GPU would otherwise copy where they are.
  bool pack_all = false;
  // Where the time goes: when set, an event is recorded after each step (name, event) and the
  // caller reads the intervals after synchronising (and destroys the events).
  std::vector<std::pair<const char*, cudaEvent_t>>* marks = nullptr;
};

// Where an enqueued batch's results will be in the slot's output staging buffer.
struct PendingAssimilate {
  ElementType dtype = ElementType::kFloat64;
  std::vector<std::vector<ProblemSlot>> requests;  // per request, per problem
  int64_t spread = 0;  // byte offset of the spreads (double, one per problem)
  int64_t info = 0;    // byte offset of the infos (int, 3 per problem)
  int64_t candidates = 0;  // byte offset of the LETKF's candidate pairs (unsigned long long each)
  int64_t problems = 0;
  // Input bytes the GPU copied where they were (page-locked memory), not through the staging
  // buffer.
  int64_t in_place_bytes = 0;
};

// Enqueues `batch` on `slot`'s stream: host packing (conversion to the compute dtype) into
// pinned staging and its copy in (large arrays already in page-locked memory and in the
// compute dtype are copied where they are instead), the analysis, one copy out. The results are valid in
// slot.staging_out once the stream passes this point. Problems must have passed
// ValidateShapes/ValidateValues. A full R that is not positive definite (or an innovation
// matrix that is not numerically so) is found on the device and reported by Unpack, as is an
// LETKF problem over its limit of candidate pairs (which the device counts, then skips).
absl::StatusOr<PendingAssimilate> EnqueueAssimilate(DeviceContext& device, StreamSlot& slot,
                                                    const Batch& batch,
                                                    const EnqueueOptions* options = nullptr);

// One Output per request from the slot's output staging buffer (host work only): the
// analyses, or INVALID_ARGUMENT naming the first problem of the request whose Cholesky
// factorisation or eigendecomposition failed (the CPU reference's messages).
std::vector<Output> UnpackAssimilate(const PendingAssimilate& pending, const StreamSlot& slot,
                                     const Batch& batch);

// The most members of an LETKF problem the GPU path takes.
int64_t CudaLetkfMaxMembers();

// Runs small batches of every variant (both dtypes, methods, forms, kinds of R, batched and
// not) on every stream, so that no request pays for loading the libraries' kernels.
absl::Status WarmUpAssimilate(DeviceContext& device);

}  // namespace gpucompute::assimilate
