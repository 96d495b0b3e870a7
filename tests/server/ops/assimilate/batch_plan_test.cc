// The plan of an assimilate batch (batch_plan.h) without a GPU: problems grouped by every
// choice that changes the library calls (first-seen order, members in request order), each
// group's sections aligned, disjoint and sized for its problems in every arena, and each
// problem's results found where its group writes them.
#include "server/ops/assimilate/batch_plan.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute::assimilate {
namespace {

Problem Shape(int64_t n, int64_t m, int64_t N, Method method,
              ObsErrorKind kind = ObsErrorKind::kVariances, Form form = Form::kAuto) {
  Problem p;
  p.n = n;
  p.m = m;
  p.N = N;
  p.method = method;
  p.obs_error_kind = kind;
  p.form = form;
  return p;
}

Batch MakeBatch(ElementType dtype, std::vector<std::vector<Problem>> requests) {
  Batch batch;
  batch.dtype = dtype;
  for (auto& problems : requests) {
    auto r = std::make_shared<Request>();
    r->dtype = dtype;
    r->problems = std::move(problems);
    batch.requests.push_back(std::move(r));
  }
  return batch;
}

struct Section {
  size_t begin, end;
  const char* what;
};

// The sections of one arena: inside it, aligned, no two overlapping.
void ExpectDisjoint(std::vector<Section> sections, size_t arena, const char* name) {
  std::sort(sections.begin(), sections.end(),
            [](const Section& a, const Section& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < sections.size(); ++i) {
    EXPECT_EQ(sections[i].begin % 256, 0u) << name << " " << sections[i].what;
    EXPECT_LE(sections[i].end, arena) << name << " " << sections[i].what;
    if (i > 0) {
      EXPECT_LE(sections[i - 1].end, sections[i].begin)
          << name << ": " << sections[i - 1].what << " overlaps " << sections[i].what;
    }
  }
}

// Checks the sections every group has, sized from its shape, in each arena.
void ExpectLayout(const BatchPlan& plan, size_t es) {
  std::vector<Section> in, out;
  for (const Group& g : plan.groups) {
    const size_t P = static_cast<size_t>(g.P()), n = static_cast<size_t>(g.key.n),
                 m = static_cast<size_t>(g.key.m), N = static_cast<size_t>(g.key.N),
                 W = static_cast<size_t>(g.W);
    in.push_back({g.x, g.x + P * n * N * es, "x"});
    in.push_back({g.obs, g.obs + P * m * W * es, "obs"});
    in.push_back({g.y, g.y + P * m * 8, "y"});
    in.push_back({g.r, g.r + P * (g.full_r() ? m * m : m) * es, "r"});
    out.push_back({g.xa, g.xa + P * n * N * es, "xa"});
    out.push_back({g.innovation, g.innovation + P * m * 8, "innovation"});
    EXPECT_EQ(g.W, g.stochastic() ? 2 * g.key.N + 1 : g.key.N + 1);
  }
  const size_t q = static_cast<size_t>(plan.problems);
  out.push_back({plan.spread, plan.spread + q * 8, "spread"});
  out.push_back({plan.info, plan.info + q * 3 * sizeof(int), "info"});
  ExpectDisjoint(in, plan.in_bytes, "in");
  ExpectDisjoint(out, plan.out_bytes, "out");
  EXPECT_EQ(plan.workspace_bytes(), plan.in_bytes + plan.scratch_bytes + plan.out_bytes);
  EXPECT_EQ(plan.in_bytes % 256, 0u);
  EXPECT_EQ(plan.scratch_bytes % 256, 0u);
}

TEST(AssimilateBatchPlanTest, GroupsByShapeAndChoiceInFirstSeenOrder) {
  const Batch batch = MakeBatch(
      ElementType::kFloat64,
      {{Shape(40, 40, 20, Method::kEtkf), Shape(40, 40, 20, Method::kStochastic),
        Shape(40, 40, 20, Method::kEtkf)},
       {Shape(40, 40, 20, Method::kEtkf, ObsErrorKind::kCovariance),
        Shape(40, 40, 20, Method::kEtkf), Shape(100, 30, 10, Method::kEtkf)}});
  const auto plan = PlanBatch(batch);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->groups.size(), 4u);
  EXPECT_EQ(plan->problems, 6);
  const std::vector<std::pair<int, int>> etkf = {{0, 0}, {0, 2}, {1, 1}};
  EXPECT_EQ(plan->groups[0].members, etkf);
  EXPECT_TRUE(plan->groups[1].stochastic());
  EXPECT_TRUE(plan->groups[1].key.seeded);  // no perturbations sent: drawn from the seed
  EXPECT_TRUE(plan->groups[2].full_r());
  EXPECT_EQ(plan->groups[3].key.n, 100);
  for (const Group& g : plan->groups) EXPECT_TRUE(g.in_place.empty());  // the caller's to fill
  ExpectLayout(*plan, 8);
}

TEST(AssimilateBatchPlanTest, SlotsPointAtTheirGroupsRows) {
  const Batch batch = MakeBatch(
      ElementType::kFloat32,
      {{Shape(40, 40, 20, Method::kEtkf), Shape(64, 8, 5, Method::kStochastic)},
       {Shape(64, 8, 5, Method::kStochastic), Shape(40, 40, 20, Method::kEtkf)}});
  const auto plan = PlanBatch(batch);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->slots.size(), 2u);
  std::vector<bool> q_seen(static_cast<size_t>(plan->problems), false);
  for (const Group& g : plan->groups) {
    for (int p = 0; p < g.P(); ++p) {
      const ProblemSlot& s = plan->slots[g.members[p].first][g.members[p].second];
      EXPECT_EQ(s.analysis, static_cast<int64_t>(g.xa) + p * g.key.n * g.key.N * 4);
      EXPECT_EQ(s.innovation, static_cast<int64_t>(g.innovation) + p * g.key.m * 8);
      EXPECT_EQ(s.q, g.q0 + p);
      EXPECT_EQ(s.n, g.key.n);
      EXPECT_EQ(s.m, g.key.m);
      EXPECT_EQ(s.form, g.key.form);
      ASSERT_LT(s.q, plan->problems);
      EXPECT_FALSE(q_seen[static_cast<size_t>(s.q)]) << "slot " << s.q << " twice";
      q_seen[static_cast<size_t>(s.q)] = true;
    }
  }
  ExpectLayout(*plan, 4);
}

TEST(AssimilateBatchPlanTest, FormsAndSplitProductChangeTheScratch) {
  // One problem with many observations per member: the ensemble-space product split over
  // chunks of rows (a scratch of partial products, ones in the input).
  const auto split = PlanBatch(MakeBatch(ElementType::kFloat64, {{Shape(1000, 100000, 32, Method::kEtkf)}}));
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->groups.size(), 1u);
  EXPECT_EQ(split->groups[0].key.form, Form::kEnsembleSpace);
  EXPECT_TRUE(split->groups[0].split_k());
  // Two such problems are batched instead.
  const auto two = PlanBatch(MakeBatch(ElementType::kFloat64, {{Shape(1000, 100000, 32, Method::kEtkf),
                                                                Shape(1000, 100000, 32, Method::kEtkf)}}));
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->groups[0].split_k());
  // The observation-space form keeps an m x m matrix per problem.
  const auto obs = PlanBatch(MakeBatch(
      ElementType::kFloat64, {{Shape(50, 30, 40, Method::kEtkf, ObsErrorKind::kVariances, Form::kObservationSpace),
                               Shape(50, 30, 40, Method::kEtkf, ObsErrorKind::kVariances, Form::kEnsembleSpace)}}));
  ASSERT_TRUE(obs.ok());
  ASSERT_EQ(obs->groups.size(), 2u);
  const Group& s = obs->groups[0];
  EXPECT_EQ(s.key.form, Form::kObservationSpace);
  EXPECT_GE(obs->scratch_bytes, s.s + 30 * 30 * 8);
  ExpectLayout(*obs, 8);
}

TEST(AssimilateBatchPlanTest, ShapesOutOfRangeAreRefused) {
  for (const Problem& p : {Shape(0, 10, 5, Method::kEtkf), Shape(10, 0, 5, Method::kEtkf),
                           Shape(10, 10, 1, Method::kEtkf), Shape(int64_t{1} << 30, 10, 4, Method::kEtkf)}) {
    const auto plan = PlanBatch(MakeBatch(ElementType::kFloat64, {{Shape(4, 4, 3, Method::kEtkf), p}}));
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find("problems[1]"), std::string::npos) << plan.status();
  }
}

TEST(AssimilateBatchPlanTest, RandomBatchesLayOutEveryProblem) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> size(1, 300), members(2, 80), count(1, 6);
  std::bernoulli_distribution coin(0.5);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::vector<Problem>> requests(static_cast<size_t>(count(rng)));
    for (auto& problems : requests) {
      for (int64_t k = count(rng); k > 0; --k) {
        // Few distinct shapes, so that groups hold several problems.
        const int64_t n = 10 * (size(rng) % 3 + 1), m = 7 * (size(rng) % 2 + 1), N = members(rng) % 3 + 2;
        problems.push_back(Shape(n, m, N, coin(rng) ? Method::kEtkf : Method::kStochastic,
                                 coin(rng) ? ObsErrorKind::kVariances : ObsErrorKind::kCovariance));
      }
    }
    const ElementType dtype = coin(rng) ? ElementType::kFloat64 : ElementType::kFloat32;
    const auto plan = PlanBatch(MakeBatch(dtype, requests));
    ASSERT_TRUE(plan.ok()) << plan.status();
    int64_t problems = 0;
    for (const auto& r : requests) problems += static_cast<int64_t>(r.size());
    EXPECT_EQ(plan->problems, problems);
    int64_t members_total = 0;
    for (const Group& g : plan->groups) members_total += g.P();
    EXPECT_EQ(members_total, problems);
    ExpectLayout(*plan, static_cast<size_t>(ElementSize(dtype)));
  }
}

}  // namespace
}  // namespace gpucompute::assimilate
