// A stream slot's FFT plans (server/device/fft_plans.h): every batch is right on the batched
// plans made at start (batches beyond the largest plan's included) and, once the planner has
// built its exact plan, on that; sizes off the ladder or above the largest are refused. Each
// transform holds one impulse, so its inverse transform is known exactly: a exp(2 pi i j k / n).
#include "server/device/fft_plans.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "math/fft_sizes.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

constexpr int64_t kMaxSize = int64_t{1} << 16;

// Transform b's impulse: at index (7 b + 1) mod n, of amplitude 1 + b / batch.
int64_t ImpulseAt(int64_t b, int64_t n) { return (7 * b + 1) % n; }
double Amplitude(int64_t b, int64_t batch) { return 1 + static_cast<double>(b) / static_cast<double>(batch); }

// Runs plans.Inverse on impulses in `dtype` on `stream`; returns the largest error against the
// formula, relative to the amplitude.
template <typename T>
double InverseError(FftPlans& plans, int64_t n, int64_t batch, cudaStream_t stream) {
  const ElementType dtype = sizeof(T) == 8 ? ElementType::kFloat64 : ElementType::kFloat32;
  std::vector<std::complex<T>> host(static_cast<size_t>(n * batch));
  for (int64_t b = 0; b < batch; ++b) {
    host[static_cast<size_t>(b * n + ImpulseAt(b, n))] = static_cast<T>(Amplitude(b, batch));
  }
  const size_t bytes = host.size() * sizeof(host[0]);
  void* data = nullptr;
  cudaMemPool_t pool = nullptr;
  int device = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, device), cudaSuccess);
  EXPECT_EQ(cudaMallocAsync(&data, bytes, stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(data, host.data(), bytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  const absl::Status status = plans.Inverse(dtype, n, batch, data, stream, pool);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(cudaMemcpyAsync(host.data(), data, bytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(data, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  double worst = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const double a = Amplitude(b, batch);
    for (int64_t k = 0; k < n; ++k) {
      const double angle = 2 * M_PI * static_cast<double>((ImpulseAt(b, n) * k) % n) / static_cast<double>(n);
      const std::complex<double> got(host[static_cast<size_t>(b * n + k)]);
      worst = std::max(worst, std::abs(got - std::polar(a, angle)) / a);
    }
  }
  return worst;
}

class FftPlansTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::NoDeviceReason().empty()) return;
    auto plans = FftPlans::Create(0, kMaxSize);
    ASSERT_TRUE(plans.ok()) << plans.status();
    plans_ = plans->release();
  }
  static void TearDownTestSuite() {
    delete plans_;
    plans_ = nullptr;
  }
  void SetUp() override {
    SKIP_WITHOUT_CUDA_DEVICE();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  static inline FftPlans* plans_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(FftPlansTest, EverySizeHasItsBatchedPlans) {
  // Batches 1, 16, 256, ... while a plan covers at most kLevelPoints points, per even ladder
  // size from 2 and element type.
  int64_t expected = 0;
  for (int64_t n : FftSizesBetween(2, kMaxSize)) {
    for (int64_t batch = 1; batch == 1 || batch * n <= FftPlans::kLevelPoints; batch *= 16) expected += 2;
  }
  EXPECT_EQ(plans_->counts().batched_plans, expected);
  EXPECT_EQ(plans_->max_size(), kMaxSize);
}

TEST_F(FftPlansTest, BatchesRunOnTheBatchedPlansThenOnTheirOwn) {
  // (size, batch): 37 = 2 x 16 + 5 executions; 300 = 256 + 2 x 16 + 12; 2 x 65,536; 530 x
  // 16,384, beyond the largest batched plan (256: 2 x 256 + 16 + 2); one of a batched plan's
  // own batches (16) and a single transform (one execution each: no plan of their own); the
  // smallest size.
  struct Case {
    int64_t n, batch;
    bool own_plan;
  };
  for (const Case& c : {Case{90, 37, true}, Case{1280, 3, true}, Case{4096, 300, true},
                        Case{kMaxSize, 2, true}, Case{16384, 530, true}, Case{288, 16, false},
                        Case{16, 1, false}, Case{2, 5, true}}) {
    SCOPED_TRACE(::testing::Message() << c.n << " x " << c.batch);
    const FftPlans::Counts before = plans_->counts();
    EXPECT_LT(InverseError<double>(*plans_, c.n, c.batch, stream_), 1e-12);
    EXPECT_LT(InverseError<float>(*plans_, c.n, c.batch, stream_), 2e-5);
    plans_->WaitForPlanner();
    const FftPlans::Counts built = plans_->counts();
    EXPECT_EQ(built.batched_executions - before.batched_executions, 2);
    EXPECT_EQ(built.exact_plans - before.exact_plans, c.own_plan ? 2 : 0);
    EXPECT_LT(InverseError<double>(*plans_, c.n, c.batch, stream_), 1e-12);
    EXPECT_LT(InverseError<float>(*plans_, c.n, c.batch, stream_), 2e-5);
    const FftPlans::Counts after = plans_->counts();
    EXPECT_EQ(after.exact_executions - built.exact_executions, c.own_plan ? 2 : 0);
    EXPECT_EQ(after.batched_plans, before.batched_plans);  // nothing made on the request path
  }
}

TEST_F(FftPlansTest, SizesWithoutAPlanAreRefused) {
  void* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, size_t{16} << 20), cudaSuccess);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  for (int64_t n : {int64_t{50}, int64_t{45}, 2 * kMaxSize}) {  // off the ladder, odd, above
    const absl::Status status = plans_->Inverse(ElementType::kFloat64, n, 1, data, stream_, pool);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << n << ": " << status;
    EXPECT_NE(status.message().find("no cuFFT plan"), std::string::npos) << status;
  }
  EXPECT_TRUE(plans_->Inverse(ElementType::kFloat64, 50, 0, data, stream_, pool).ok());  // nothing to do
  ASSERT_EQ(cudaFree(data), cudaSuccess);
}

}  // namespace
}  // namespace gpucompute
