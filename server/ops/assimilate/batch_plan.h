// The plan of an assimilate batch on the GPU (PlanBatch): its problems grouped by shape and by
// every choice that changes the sequence of library calls, each group's arrays laid out in the
// three arenas of the batch's workspace (inputs as the device reads them, scratch, outputs) and
// where each problem's results will be. Host arithmetic only, no CUDA call: EnqueueAssimilate
// (cuda_assimilate.cc) packs, allocates the workspace and runs each group's steps from it, and
// tests check it without a GPU. The thresholds it applies are in tuning.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/assimilate/assimilate.h"

namespace gpucompute::assimilate {

// Which of a problem's input sections the GPU copies straight from the request's memory,
// skipping the staging buffer (cuda_assimilate.cc decides, from where the memory is: packing
// them would be a second pass over every byte on the host, ~13 ms for the seed EnKF's 216 MB).
struct InPlace {
  bool x = false;    // X, as sent: one copy
  bool obs = false;  // the observation rows [HX | 0 | D]: 2-D copies of HX and D, 2-D zero fills
  bool r = false;    // a full R, as sent: one copy
};

// Problems that share every size and every choice that changes the sequence of library calls.
struct GroupKey {
  int64_t n, m, N;
  int64_t dims;  // the LETKF's coordinates per point (0 for the global methods)
  Method method;
  ObsErrorKind kind;
  Form form;
  bool seeded;
  bool operator<(const GroupKey& o) const;
};

// Byte offsets of one group's arrays in the input, scratch and output arenas (per problem
// `P()` copies back to back).
struct Group {
  GroupKey key;
  int64_t W = 0;                              // columns of the observation rows
  std::vector<std::pair<int, int>> members;  // (request, problem index in it)
  std::vector<InPlace> in_place;              // per member; filled by the caller, not the plan
  int64_t q0 = 0;                             // first per-problem slot
  // in: the inputs as the device needs them (the staging buffer has the same layout)
  size_t x = 0, obs = 0, y = 0, r = 0, params = 0;
  size_t ptr_r = 0, ptr_obs = 0, ptr_f = 0, ptr_rhs = 0;  // device pointer arrays (batched calls)
  size_t ones = 0;  // split-K: kSplitChunks + 1 ones (the reduction's GEMV)
  // LETKF: coordinates (double) and domains per problem, the geometries (kernels::LetkfGeometry,
  // per problem), the inverse square root's table (math/inverse_sqrt.h, once) and the Chebyshev
  // series' (math/chebyshev.h, once)
  size_t state_coords = 0, obs_coords = 0, domain = 0, geometry = 0, table = 0, chebyshev = 0;
  // scratch
  size_t split = 0;  // split-K partial products of C
  size_t xbar = 0, c = 0, s = 0, z = 0, v = 0, vf = 0, t = 0, ev = 0, u = 0, wbar = 0, flag = 0;
  size_t partials = 0;
  // LETKF scratch, reused by the group's problems one after another: the binning's sort, the
  // sorted observations, the cells' starts and the coordinates in cell order (bin_bytes: the
  // sort's scratch, as sized), the local observations' lists (kernels::LetkfListBytes)
  size_t bin = 0, bin_bytes = 0, sorted = 0, cell_start = 0, sorted_coords = 0, lists = 0;
  int64_t max_cells = 0;
  // out
  size_t xa = 0, innovation = 0;

  int P() const { return static_cast<int>(members.size()); }
  // One problem with many observations per member: C = Yw^T [...] is a small output over a
  // long inner dimension, which one GEMM runs on a few SMs; split it into chunks of rows
  // (a strided-batched GEMM) and sum the partial products (a GEMV with ones).
  bool split_k() const;
  bool stochastic() const { return key.method == Method::kStochastic; }
  bool full_r() const { return key.kind == ObsErrorKind::kCovariance; }
  bool ensemble() const { return key.form == Form::kEnsembleSpace; }
  bool letkf() const { return key.method == Method::kLetkf; }
  // Columns per problem of the scratch matrix C.
  int64_t CCols() const { return stochastic() ? 2 * key.N + 1 : key.N + 1; }
};

// Where one problem's results are in the output arena (and the staging buffer it is copied to).
struct ProblemSlot {
  int64_t analysis = 0;    // byte offset of the n x N analysis
  int64_t innovation = 0;  // byte offset of the m innovation means (double)
  int64_t q = 0;           // index into the per-problem arrays (spread, infos)
  Form form = Form::kAuto;
  int64_t n = 0, m = 0;
};

struct BatchPlan {
  std::vector<Group> groups;                    // in first-seen order of their keys
  std::vector<std::vector<ProblemSlot>> slots;  // per request, per problem
  int64_t problems = 0;
  // The arenas' sizes (each section 256-byte aligned); the output arena ends with one spread
  // (double), three infos (int: R's factor, the innovation's factor or eigensolver, the
  // transform's) and the LETKF's candidate pairs (unsigned long long; 0 for other methods) per
  // problem.
  size_t in_bytes = 0, scratch_bytes = 0, out_bytes = 0;
  size_t spread = 0, info = 0, candidates = 0;  // offsets in the output arena
  // The whole workspace: the three arenas back to back.
  size_t workspace_bytes() const { return in_bytes + scratch_bytes + out_bytes; }
};

// The plan of `batch` (its dtype fixes the element size). INVALID_ARGUMENT for a problem whose
// shape is out of the range the device code indexes.
absl::StatusOr<BatchPlan> PlanBatch(const Batch& batch);

}  // namespace gpucompute::assimilate
