// The assimilate batch's plan: see batch_plan.h.
#include "server/ops/assimilate/batch_plan.h"

#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/align.h"
#include "common/status_macros.h"
#include "kernels/assimilate/assimilate_kernels.cuh"
#include "kernels/assimilate/letkf.cuh"
#include "math/chebyshev.h"
#include "math/inverse_sqrt.h"
#include "server/ops/assimilate/letkf_geometry.h"
#include "server/ops/assimilate/tuning.h"

namespace gpucompute::assimilate {
namespace {

// Sections taken one after another, each aligned.
struct Arena {
  size_t size = 0;
  size_t Take(size_t bytes) {
    const size_t at = size;
    size = AlignUp(size + bytes);
    return at;
  }
};

absl::Status CheckShape(const Problem& p, size_t k) {
  if (p.n < 1 || p.m < 1 || p.N < 2 || p.N > (int64_t{1} << 20) || p.m > (int64_t{1} << 30) ||
      p.n * p.N > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("problems[", k, "]: shape ", p.n, " x ", p.m, " x ", p.N, " is out of range"));
  }
  return absl::OkStatus();
}

// The LETKF's own sections (LayOutGroup's ETKF sections hold X, the observation rows and
// the parameters as for the global ETKF).
void LayOutLetkf(Group& g, Arena& in, Arena& sc) {
  const size_t P = static_cast<size_t>(g.P());
  const size_t n = static_cast<size_t>(g.key.n), m = static_cast<size_t>(g.key.m),
               d = static_cast<size_t>(g.key.dims);
  g.state_coords = in.Take(P * n * d * sizeof(double));
  g.obs_coords = in.Take(P * m * d * sizeof(double));
  g.domain = in.Take(P * d * sizeof(double));
  g.geometry = in.Take(P * sizeof(kernels::LetkfGeometry));
  g.table = in.Take(inverse_sqrt::kTableDoubles * sizeof(double));
  g.chebyshev = in.Take(chebyshev::kTableDoubles * sizeof(double));
  g.max_cells = LetkfMaxCells(g.key.m);
  g.bin_bytes = kernels::LetkfBinScratchBytes(g.key.m, g.max_cells);
  g.bin = sc.Take(g.bin_bytes);
  g.sorted = sc.Take(m * sizeof(int));
  g.sorted_coords = sc.Take(m * d * sizeof(double));
  g.cell_start = sc.Take((static_cast<size_t>(g.max_cells) + 1) * sizeof(int));
  g.partials = sc.Take(static_cast<size_t>(kernels::LetkfAnalysisWarps(g.key.n)) * sizeof(double));
  g.lists = sc.Take(kernels::LetkfListBytes(g.key.n, static_cast<int>(g.key.N)));
}

// The global methods' transforms and their scratch.
void LayOutTransforms(Group& g, size_t es, Arena& sc) {
  const size_t P = static_cast<size_t>(g.P());
  const size_t m = static_cast<size_t>(g.key.m), N = static_cast<size_t>(g.key.N);
  const bool etkf = !g.stochastic();
  if (g.ensemble() || etkf) g.c = sc.Take(P * N * static_cast<size_t>(g.CCols()) * es);
  if (!g.ensemble()) g.s = sc.Take(P * m * m * es);
  if (!g.ensemble() && etkf) g.z = sc.Take(P * m * (N + 1) * es);
  if (etkf) {
    g.v = sc.Take(P * N * N * es);
    g.vf = sc.Take(P * N * N * es);
    g.ev = sc.Take(P * N * es);
    g.u = sc.Take(P * N * es);
    g.wbar = sc.Take(P * N * es);
    g.flag = sc.Take(P * sizeof(int));
  }
  if (etkf || !g.ensemble() || P == 1) g.t = sc.Take(P * N * N * es);
  g.partials = sc.Take(P * static_cast<size_t>(kernels::FinishRowsBlocks(g.key.n)) * sizeof(double));
}

// One group's sections: what its steps read (in), work in (scratch) and write (out).
void LayOutGroup(Group& g, size_t es, Arena& in, Arena& sc, Arena& out) {
  const size_t P = static_cast<size_t>(g.P());
  const size_t n = static_cast<size_t>(g.key.n), m = static_cast<size_t>(g.key.m),
               N = static_cast<size_t>(g.key.N), W = static_cast<size_t>(g.W);
  g.x = in.Take(P * n * N * es);
  g.obs = in.Take(P * m * W * es);
  g.y = in.Take(P * m * sizeof(double));
  g.r = in.Take(P * (g.full_r() ? m * m : m) * es);
  g.params = in.Take(P * sizeof(kernels::ProblemParams));
  g.ptr_r = in.Take(P * sizeof(void*));
  g.ptr_obs = in.Take(P * sizeof(void*));
  g.ptr_f = in.Take(P * sizeof(void*));
  g.ptr_rhs = in.Take(P * sizeof(void*));
  if (g.split_k()) {
    g.ones = in.Take((kSplitChunks + 1) * es);
    g.split = sc.Take((kSplitChunks + 1) * N * static_cast<size_t>(g.CCols()) * es);
  }
  g.xbar = sc.Take(P * n * sizeof(double));
  if (g.letkf()) {
    LayOutLetkf(g, in, sc);  // its transforms live in the kernel's shared memory
  } else {
    LayOutTransforms(g, es, sc);
  }
  g.xa = out.Take(P * n * N * es);
  g.innovation = out.Take(P * m * sizeof(double));
}

}  // namespace

bool GroupKey::operator<(const GroupKey& o) const {
  return std::tie(n, m, N, dims, method, kind, form, seeded) <
         std::tie(o.n, o.m, o.N, o.dims, o.method, o.kind, o.form, o.seeded);
}

bool Group::split_k() const {
  return P() == 1 && ensemble() && key.m >= kSplitMinObservations &&
         key.m >= kSplitMinObservationsPerMember * key.N;
}

absl::StatusOr<BatchPlan> PlanBatch(const Batch& batch) {
  const Limits limits;  // the CPU reference's: forms are chosen alike
  BatchPlan plan;
  plan.slots.resize(batch.requests.size());
  std::map<GroupKey, size_t> index;
  for (size_t r = 0; r < batch.requests.size(); ++r) {
    const Request& request = *batch.requests[r];
    plan.slots[r].resize(request.problems.size());
    for (size_t k = 0; k < request.problems.size(); ++k) {
      const Problem& p = request.problems[k];
      RETURN_IF_ERROR(CheckShape(p, k));
      const GroupKey key{p.n, p.m, p.N, p.method == Method::kLetkf ? p.localization.dims : 0,
                         p.method, p.obs_error_kind, ChooseForm(p, limits),
                         p.method == Method::kStochastic && !p.has_perturbations};
      auto [it, fresh] = index.emplace(key, plan.groups.size());
      if (fresh) {
        plan.groups.emplace_back();
        plan.groups.back().key = key;
        plan.groups.back().W = key.method == Method::kStochastic ? 2 * key.N + 1 : key.N + 1;
      }
      plan.groups[it->second].members.emplace_back(static_cast<int>(r), static_cast<int>(k));
    }
  }

  Arena in, sc, out;
  const size_t es = static_cast<size_t>(ElementSize(batch.dtype));
  for (Group& g : plan.groups) {
    g.q0 = plan.problems;
    plan.problems += g.P();
    LayOutGroup(g, es, in, sc, out);
  }
  const size_t q = static_cast<size_t>(plan.problems);
  plan.spread = out.Take(q * sizeof(double));
  plan.info = out.Take(q * 3 * sizeof(int));
  plan.candidates = out.Take(q * sizeof(unsigned long long));
  for (const Group& g : plan.groups) {
    for (int p = 0; p < g.P(); ++p) {
      ProblemSlot& s = plan.slots[g.members[p].first][g.members[p].second];
      s.analysis = static_cast<int64_t>(g.xa) + int64_t{p} * g.key.n * g.key.N * static_cast<int64_t>(es);
      s.innovation = static_cast<int64_t>(g.innovation) + int64_t{p} * g.key.m * 8;
      s.q = g.q0 + p;
      s.form = g.key.form;
      s.n = g.key.n;
      s.m = g.key.m;
    }
  }
  plan.in_bytes = in.size;
  plan.scratch_bytes = sc.size;
  plan.out_bytes = out.size;
  return plan;
}

}  // namespace gpucompute::assimilate
