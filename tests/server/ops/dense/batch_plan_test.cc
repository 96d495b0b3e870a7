// The plan of a dense batch (batch_plan.h) without a GPU: which kernel takes each layer for
// given answers of the kernel library, when a layer's input is converted first, forced paths
// refused where a layer cannot take them, and a workspace whose sections are aligned, disjoint
// and sized for what each layer writes.
#include "server/ops/dense/batch_plan.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/ops/dense/tuning.h"

namespace gpucompute::dense {
namespace {

ModelInfo Model(ElementType dtype, std::vector<std::pair<int64_t, int64_t>> shapes,
                bool layernorm = true) {
  ModelInfo m;
  m.name = "plan";
  m.dtype = dtype;
  for (const auto& [in, out] : shapes) {
    LayerInfo l;
    l.in = in;
    l.out = out;
    l.layernorm = layernorm;
    m.layers.push_back(l);
  }
  return m;
}

std::vector<LayerKernels> Answers(size_t layers, LayerKernels k) {
  return std::vector<LayerKernels>(layers, k);
}

// Every present section lies inside the workspace, 256-byte aligned, and no two overlap.
void ExpectSectionsDisjoint(const DenseBatchPlan& plan) {
  const DenseWorkspace& w = plan.workspace;
  std::vector<std::pair<size_t, size_t>> sections;  // [begin, end)
  auto add = [&](size_t at, size_t bytes) {
    if (bytes == 0) return;
    EXPECT_EQ(at % 256, 0u);
    EXPECT_LE(at + bytes, w.bytes);
    sections.emplace_back(at, at + bytes);
  };
  add(w.in, plan.in_bytes);
  add(w.act0, plan.act_bytes);
  if (plan.steps.size() > 1) add(w.act1, plan.act_bytes);
  add(w.xhat, plan.xhat_bytes);
  add(w.row_stats, plan.row_stats_bytes);
  std::sort(sections.begin(), sections.end());
  for (size_t i = 1; i < sections.size(); ++i) {
    EXPECT_LE(sections[i - 1].second, sections[i].first) << "sections " << i - 1 << " and " << i;
  }
}

TEST(DenseBatchPlanTest, OneRowOfASmallLayerTakesTheFewRowsKernelRaw) {
  const ModelInfo m = Model(ElementType::kBFloat16, {{1024, 4096}});
  LayerKernels k;
  k.few_rows_raw = k.few_rows_converted = true;
  const auto plan = PlanDenseBatch(m, ElementType::kFloat32, 1, DensePath::kAuto, Answers(1, k));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].kernel, LayerKernel::kFewRows);
  EXPECT_FALSE(plan->steps[0].convert);
  EXPECT_EQ(plan->xhat_bytes, 0u);
  EXPECT_EQ(plan->in_bytes, 1024u * 4);
  EXPECT_EQ(plan->out_bytes, 4096u * 2);
  ExpectSectionsDisjoint(*plan);
}

TEST(DenseBatchPlanTest, FewRowsKernelReadingAnotherTypeConvertsFirst) {
  const ModelInfo m = Model(ElementType::kBFloat16, {{1000, 500}});
  LayerKernels k;
  k.few_rows_converted = true;  // e.g. a float64 input, which the kernel does not read
  const auto plan = PlanDenseBatch(m, ElementType::kFloat64, 2, DensePath::kAuto, Answers(1, k));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->steps[0].kernel, LayerKernel::kFewRows);
  EXPECT_TRUE(plan->steps[0].convert);
  EXPECT_EQ(plan->xhat_bytes, 2u * PaddedCols(1000) * 2);
  ExpectSectionsDisjoint(*plan);
}

TEST(DenseBatchPlanTest, AutoLeavesTheFewRowsKernelWhereItDoesNotPay) {
  LayerKernels k;
  k.few_rows_raw = k.few_rows_converted = true;
  // Too many rows, and one row of a layer too large: both measured slower than cuBLASLt.
  const ModelInfo small = Model(ElementType::kBFloat16, {{1024, 4096}});
  const auto rows = PlanDenseBatch(small, ElementType::kBFloat16, kFewRowsMaxRows + 1,
                                   DensePath::kAuto, Answers(1, k));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->steps[0].kernel, LayerKernel::kGemm);
  const ModelInfo large = Model(ElementType::kFloat32, {{16384, 16384}});
  ASSERT_GT(16384 * 16384 * 4, kFewRowsMaxBytes);
  const auto big = PlanDenseBatch(large, ElementType::kFloat32, 1, DensePath::kAuto, Answers(1, k));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->steps[0].kernel, LayerKernel::kGemm);
  // The forced path takes what fits, paying or not.
  const auto forced = PlanDenseBatch(large, ElementType::kFloat32, 1, DensePath::kFewRows, Answers(1, k));
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->steps[0].kernel, LayerKernel::kFewRows);
}

TEST(DenseBatchPlanTest, GemmLayersConvertWithLayerNormOrAnotherInputType) {
  const ModelInfo m = Model(ElementType::kFloat16, {{64, 96}, {96, 40}}, /*layernorm=*/false);
  const auto same = PlanDenseBatch(m, ElementType::kFloat16, 100, DensePath::kGemm, Answers(2, {}));
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->steps[0].convert);
  EXPECT_FALSE(same->steps[1].convert);
  EXPECT_EQ(same->xhat_bytes, 0u);
  const auto other = PlanDenseBatch(m, ElementType::kFloat32, 100, DensePath::kGemm, Answers(2, {}));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->steps[0].convert);    // float32 rows into a float16 model
  EXPECT_FALSE(other->steps[1].convert);   // the first layer's output is float16 already
  EXPECT_EQ(other->xhat_bytes, 100u * PaddedCols(64) * 2);
  const ModelInfo ln = Model(ElementType::kFloat16, {{64, 96}, {96, 40}});
  const auto normalised = PlanDenseBatch(ln, ElementType::kFloat16, 100, DensePath::kAuto, Answers(2, {}));
  ASSERT_TRUE(normalised.ok());
  EXPECT_TRUE(normalised->steps[0].convert && normalised->steps[1].convert);
  EXPECT_EQ(normalised->xhat_bytes, 100u * PaddedCols(96) * 2);  // the larger input
  ExpectSectionsDisjoint(*normalised);
}

TEST(DenseBatchPlanTest, TensorCoreFoldsLayerNormWhereItPays) {
  const ModelInfo m = Model(ElementType::kBFloat16, {{1024, 4096}, {4096, 1024}});
  LayerKernels k;
  k.tensor_core_pays = true;
  const auto plan = PlanDenseBatch(m, ElementType::kBFloat16, 1024, DensePath::kAuto, Answers(2, k));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const LayerStep& s : plan->steps) {
    EXPECT_EQ(s.kernel, LayerKernel::kTensorCore);
    EXPECT_FALSE(s.convert);
  }
  EXPECT_EQ(plan->row_stats_bytes, 1024u * 2 * sizeof(float));
  EXPECT_EQ(plan->act_bytes, 1024u * 4096 * 2);
  EXPECT_GT(plan->workspace.act1, 0u);  // two layers: the activations alternate
  ExpectSectionsDisjoint(*plan);
  // A float32 input is not the model's type: kAuto does not take the kernel for the first
  // layer (it would have to convert, where cuBLASLt measured faster).
  const auto f32 = PlanDenseBatch(m, ElementType::kFloat32, 1024, DensePath::kAuto, Answers(2, k));
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->steps[0].kernel, LayerKernel::kGemm);
  EXPECT_EQ(f32->steps[1].kernel, LayerKernel::kTensorCore);
  // float32 models never take it.
  const ModelInfo wide = Model(ElementType::kFloat32, {{1024, 4096}});
  const auto w = PlanDenseBatch(wide, ElementType::kFloat32, 1024, DensePath::kAuto, Answers(1, k));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->steps[0].kernel, LayerKernel::kGemm);
}

TEST(DenseBatchPlanTest, ForcedTensorCoreReadsRawOrConvertsAndRefusesWhatFitsNeither) {
  const ModelInfo m = Model(ElementType::kFloat16, {{256, 512}});
  LayerKernels raw;
  raw.tensor_core_raw = raw.tensor_core_converted = true;
  const auto direct = PlanDenseBatch(m, ElementType::kFloat16, 300, DensePath::kTensorCore, Answers(1, raw));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->steps[0].kernel, LayerKernel::kTensorCore);
  EXPECT_FALSE(direct->steps[0].convert);
  EXPECT_EQ(direct->row_stats_bytes, 300u * 2 * sizeof(float));
  LayerKernels converted;
  converted.tensor_core_converted = true;
  const auto conv = PlanDenseBatch(m, ElementType::kFloat16, 300, DensePath::kTensorCore,
                                   Answers(1, converted));
  ASSERT_TRUE(conv.ok());
  EXPECT_TRUE(conv->steps[0].convert);
  EXPECT_EQ(conv->row_stats_bytes, 0u);  // the statistics are applied by the normalising pass
  const auto none = PlanDenseBatch(m, ElementType::kFloat16, 300, DensePath::kTensorCore, Answers(1, {}));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  const auto few = PlanDenseBatch(m, ElementType::kFloat16, 300, DensePath::kFewRows, Answers(1, {}));
  EXPECT_EQ(few.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DenseBatchPlanTest, WorkspaceHoldsEveryLayerOfRandomModels) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> width(1, 3000);
  std::uniform_int_distribution<int64_t> rows(0, 700);
  std::bernoulli_distribution coin(0.5);
  const ElementType types[] = {ElementType::kFloat32, ElementType::kFloat16, ElementType::kBFloat16};
  for (int trial = 0; trial < 200; ++trial) {
    const ElementType dtype = types[trial % 3];
    std::vector<std::pair<int64_t, int64_t>> shapes;
    int64_t in = width(rng);
    const int layers = 1 + trial % 4;
    for (int l = 0; l < layers; ++l) {
      const int64_t out = width(rng);
      shapes.emplace_back(in, out);
      in = out;
    }
    const ModelInfo m = Model(dtype, shapes, coin(rng));
    const int64_t r = rows(rng);
    LayerKernels k;
    k.few_rows_converted = coin(rng);
    k.tensor_core_pays = coin(rng);
    const auto plan = PlanDenseBatch(m, ElementType::kFloat64, r, DensePath::kAuto, Answers(layers, k));
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const auto& [lin, lout] : shapes) {
      EXPECT_GE(plan->act_bytes, static_cast<size_t>(r * PaddedCols(lout) * ElementSize(dtype)));
    }
    EXPECT_TRUE(plan->steps[0].convert);  // float64 rows are read by no kernel directly
    EXPECT_GE(plan->xhat_bytes, static_cast<size_t>(r * PaddedCols(shapes[0].first) * ElementSize(dtype)));
    EXPECT_EQ(plan->in_bytes, static_cast<size_t>(r * shapes[0].first * 8));
    ExpectSectionsDisjoint(*plan);
  }
}

}  // namespace
}  // namespace gpucompute::dense
