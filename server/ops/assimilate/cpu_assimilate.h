// The CPU reference of the Assimilate op (float64 or float32 throughout), with CBLAS and LAPACKE
// (OpenBLAS): SYRK for the N x N or m x m matrices, POTRF/POTRS, SYEVD for the ETKF's symmetric
// square root, TRSM to whiten by a full R's Cholesky factor, GEMM for the final ensemble
// transform. Both forms of assimilate.h, both methods, both kinds of R. Also the oracle of the
// GPU tests.
//
// A problem runs in two phases so that a backend can spread the state-sized part:
//   ComputeTransform()  everything that is not state-sized: the N x N transform T
//                       (O(m N^2 + N^3) or O(m^2 N + m^3)), one thread;
//   ApplyRows(b, e)     analysis rows [b, e): Xa = xbar 1^T + A T, relaxation, spread terms;
//                       disjoint ranges may run concurrently;
//   Finish()            the result, once every row is done.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/assimilate/assimilate.h"

namespace gpucompute::assimilate {

class CpuAnalysis {
 public:
  // `problem` (and the request bytes it views) must outlive this object. `index` is the
  // problem's position in its request: it keys the perturbation draw and names the problem in
  // errors. `dtype`: kFloat64 or kFloat32.
  static std::unique_ptr<CpuAnalysis> Create(const Problem& problem, int64_t index,
                                             ElementType dtype, const Limits& limits);
  virtual ~CpuAnalysis() = default;

  // Phase 1. INVALID_ARGUMENT naming the problem when a full R is not positive definite (or,
  // rarely, when the innovation covariance is not numerically positive definite in float32).
  virtual absl::Status ComputeTransform() = 0;
  // Phase 2, after ComputeTransform succeeded.
  virtual void ApplyRows(int64_t begin, int64_t end) = 0;
  // Phase 3: the analysis (n x N in `dtype`), innovation mean, spread and the form used.
  virtual ProblemResult Finish() = 0;

  // The N x N transform T (row-major), for tests: Xa = xbar 1^T + A T.
  virtual std::vector<double> TransformMatrix() const = 0;
  Form form() const { return form_; }

 protected:
  explicit CpuAnalysis(Form form) : form_(form) {}
  Form form_;
};

// All three phases on the calling thread.
absl::StatusOr<ProblemResult> CpuAnalyse(const Problem& problem, int64_t index, ElementType dtype,
                                         const Limits& limits = {});

// Every problem of every request of `batch`, one after the other on the calling thread: one
// Output per request (a failing problem fails its request only).
std::vector<Output> CpuAnalyseBatch(const Batch& batch);

// The whitened, centred perturbations the server draws for a problem (m x N, row-major):
// z_ij from philox::Normal(seed, index, i * N + j), minus each row's mean. E = L Z.
std::vector<double> DrawWhitenedPerturbations(uint64_t seed, int64_t index, int64_t m, int64_t N);

}  // namespace gpucompute::assimilate
