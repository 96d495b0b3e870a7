// Tests of gpucompute-load's workload generation and job picking (client/load/workload.h).
#include "client/load/workload.h"

#include <vector>

#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::load {
namespace {

using ::testing::ElementsAre;

TEST(JobPickerTest, FollowsTheMixWeights) {
  // periodogram:3, dense:1, assimilate:0, echo:4 with 2, 1, 1 and 3 variants.
  const JobPicker picker({3, 1, 0, 4}, {{0, 1}, {2}, {3}, {4, 5, 6}});
  FastRng rng(11);
  std::vector<int> per_job(7, 0);
  const int n = 400000;
  for (int i = 0; i < n; ++i) ++per_job[picker.Pick(rng)];
  const double total = 8;
  auto share = [&](std::initializer_list<int> jobs) {
    double s = 0;
    for (int j : jobs) s += per_job[j];
    return s / n;
  };
  // Binomial standard deviation at n = 4e5 is below 0.0008.
  EXPECT_NEAR(share({0, 1}), 3 / total, 0.004);
  EXPECT_NEAR(share({2}), 1 / total, 0.004);
  EXPECT_EQ(per_job[3], 0);  // weight 0: never
  EXPECT_NEAR(share({4, 5, 6}), 4 / total, 0.004);
  // Variants uniformly within an entry.
  EXPECT_NEAR(share({0}), share({1}), 0.004);
  EXPECT_NEAR(share({4}), share({6}), 0.004);
  EXPECT_DOUBLE_EQ(picker.probability(0), 3 / total);
  EXPECT_DOUBLE_EQ(picker.probability(2), 0);
}

TEST(JobPickerTest, TrailingZeroWeightIsNeverPicked) {
  const JobPicker picker({1, 0}, {{0}, {1}});
  FastRng rng(3);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(picker.Pick(rng), 0);
}

TEST(JobPickerTest, SingleEntry) {
  const JobPicker picker({1}, {{5}});
  FastRng rng(1);
  EXPECT_EQ(picker.Pick(rng), 5);
}

TEST(FastRngTest, UniformInUnitInterval) {
  FastRng rng(9);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

WorkloadConfig SmallConfig() {
  WorkloadConfig c;
  c.periodogram = {.samples = 50, .frequencies = 70, .series = 3};
  c.dense = {.in_features = 8, .out_features = 16, .layers = 2, .rows = 5,
             .model_dtype = v1::BFLOAT16};
  c.assimilate = {.n = 6, .m = 4, .members = 3, .problems = 2,
                  .method = v1::ASSIMILATION_METHOD_ENKF};
  c.echo = {.bytes = 1001, .discard = false};
  c.dtype = v1::FLOAT32;
  return c;
}

TEST(RequestTest, PeriodogramShapes) {
  absl::StatusOr<v1::SubmitRequest> r = MakeRequest(Op::kPeriodogram, SmallConfig(), "", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  // Three series on one grid, all with dy: packed.
  ASSERT_EQ(r->periodogram().packed_series().lengths_size(), 3);
  EXPECT_EQ(r->periodogram().dtype(), v1::FLOAT32);
  EXPECT_EQ(r->periodogram().frequency().uniform().n(), 70);
  EXPECT_EQ(r->periodogram().packed_series().t().dtype(), v1::FLOAT32);
  EXPECT_THAT(r->periodogram().packed_series().y().shape(), ElementsAre(150));
  EXPECT_EQ(InputTensorBytes(*r), 3 * 3 * 50 * 4);  // t, y, dy of 3 series, float32
  EXPECT_EQ(OutputBytesBound(*r, 0), 3 * (320 + 64));  // 70 * 4 = 280 -> 320, plus slack
}

TEST(RequestTest, DenseShapes) {
  absl::StatusOr<v1::SubmitRequest> r = MakeRequest(Op::kDense, SmallConfig(), "m", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dense().model(), "m");
  EXPECT_EQ(r->dense().input().dtype(), v1::BFLOAT16);
  EXPECT_THAT(r->dense().input().shape(), ElementsAre(5, 8));
  EXPECT_EQ(InputTensorBytes(*r), 5 * 8 * 2);
  EXPECT_EQ(OutputBytesBound(*r, 16 * 2), 192 + 64);  // 5 rows x 32 bytes = 160 -> 192
}

TEST(RequestTest, AssimilateShapes) {
  absl::StatusOr<v1::SubmitRequest> r = MakeRequest(Op::kAssimilate, SmallConfig(), "", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->assimilate().problems_size(), 2);
  const v1::AssimilationProblem& p = r->assimilate().problems(1);
  EXPECT_THAT(p.x().shape(), ElementsAre(6, 3));
  EXPECT_THAT(p.hx().shape(), ElementsAre(4, 3));
  EXPECT_EQ(p.method(), v1::ASSIMILATION_METHOD_ENKF);
  EXPECT_EQ(p.perturbation_source_case(), v1::AssimilationProblem::kSeed);
  // x, hx, y, obs_error_variance in float32.
  EXPECT_EQ(InputTensorBytes(*r), 2 * (18 + 12 + 4 + 4) * 4);
}

TEST(RequestTest, EchoBytesAreRandomAndSeeded) {
  const v1::SubmitRequest a = MakeEchoRequest(1001, false, 5);
  const v1::SubmitRequest b = MakeEchoRequest(1001, false, 5);
  const v1::SubmitRequest c = MakeEchoRequest(1001, true, 6);
  EXPECT_EQ(a.echo().tensor().dtype(), v1::UINT8);
  EXPECT_THAT(a.echo().tensor().shape(), ElementsAre(1001));
  EXPECT_EQ(a.echo().tensor().data().size(), 1001u);
  EXPECT_EQ(a.echo().tensor().data(), b.echo().tensor().data());
  EXPECT_NE(a.echo().tensor().data(), c.echo().tensor().data());
  EXPECT_EQ(OutputBytesBound(a, 0), 1024 + 64);
  EXPECT_EQ(OutputBytesBound(c, 0), 0);  // discard: no output
}

TEST(RequestTest, PlacedTensorsStillCountTheirBytes) {
  v1::SubmitRequest r = MakeEchoRequest(4096, false, 1);
  r.mutable_echo()->mutable_tensor()->set_handle("h");
  EXPECT_EQ(InputTensorBytes(r), 4096);
  r.mutable_echo()->mutable_tensor()->mutable_shared_memory()->set_length(4000);
  EXPECT_EQ(InputTensorBytes(r), 4000);
}

TEST(RequestTest, OutputPlacementIsSetOnEveryOp) {
  v1::OutputPlacement shm;
  shm.mutable_shared_memory()->set_region("r");
  for (Op op : {Op::kPeriodogram, Op::kDense, Op::kAssimilate, Op::kEcho}) {
    absl::StatusOr<v1::SubmitRequest> r = MakeRequest(op, SmallConfig(), "m", 1);
    ASSERT_TRUE(r.ok());
    SetOutputPlacement(*r, shm);
    const std::string text = r->ShortDebugString();
    EXPECT_NE(text.find("output_placement { shared_memory { region: \"r\" } }"),
              std::string::npos)
        << OpName(op);
  }
}

TEST(SerializeTest, UnaryAndSubmitBytes) {
  v1::SubmitRequest r = MakeEchoRequest(100, false, 1);
  const Job job = Serialize(Op::kEcho, r, 100);
  EXPECT_EQ(job.op, Op::kEcho);
  EXPECT_EQ(job.size.payload_bytes, 100);
  EXPECT_EQ(job.size.request_bytes, static_cast<int64_t>(r.echo().ByteSizeLong()));
  v1::EchoRequest unary;
  ASSERT_TRUE(unary.ParseFromArray(job.request.begin(), static_cast<int>(job.request.size())));
  EXPECT_EQ(unary.tensor().data(), r.echo().tensor().data());
  v1::SubmitRequest submit;
  ASSERT_TRUE(submit.ParseFromArray(job.submit.begin(), static_cast<int>(job.submit.size())));
  EXPECT_EQ(submit.echo().tensor().data(), r.echo().tensor().data());
  EXPECT_TRUE(submit.id().empty());
}

TEST(DenseModelTest, LayersChain) {
  absl::StatusOr<client::ModelUpload> m = MakeDenseModel(SmallConfig().dense, "load-m", 1);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->header.layers_size(), 2);
  EXPECT_EQ(m->header.name(), "load-m");
  EXPECT_EQ(m->header.dtype(), v1::BFLOAT16);
  EXPECT_THAT(m->header.layers(0).weight().shape(), ElementsAre(8, 16));
  EXPECT_THAT(m->header.layers(1).weight().shape(), ElementsAre(16, 16));
  EXPECT_EQ(m->header.layers(1).activation(), v1::ACTIVATION_GELU_TANH);
}

}  // namespace
}  // namespace gpucompute::load
