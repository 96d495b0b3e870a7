// A CufftPlan leaves its work area to the caller: building one does not allocate it on the
// device (what the device's free memory shows), and a transform run with a work area taken from
// the stream-ordered pool is right (an impulse's inverse transform, against the formula).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cufft.h>

#include "gtest/gtest.h"
#include "server/device/cufft.h"
#include "server/device/stream_buffers.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

size_t FreeBytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

TEST(CufftPlanTest, BuildingAPlanDoesNotAllocateItsWorkArea) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the context exists before the first reading
  // Sizes whose transforms need a work area as large as their data (not powers of two).
  for (const auto& [n, batch] : {std::pair<int64_t, int64_t>{3 * 5 * 7 * 11 * 13 * 17 * 2, 64},
                                 std::pair<int64_t, int64_t>{(int64_t{1} << 20) * 5 * 3, 8}}) {
    const size_t before = FreeBytes();
    auto plan = CufftPlan::Create1d(n, batch, CUFFT_Z2Z);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const size_t after = FreeBytes();
    const size_t taken = before > after ? before - after : 0;
    std::printf("n %lld batch %lld: work area %zu bytes (the caller's), the plan took %zu bytes\n",
                static_cast<long long>(n), static_cast<long long>(batch), plan->work_bytes(), taken);
    ASSERT_GE(plan->work_bytes(), size_t{64} << 20) << "pick sizes that need a large work area";
    EXPECT_LT(taken, plan->work_bytes() / 2);
  }
}

TEST(CufftPlanTest, TransformRunsInAWorkAreaFromThePool) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int64_t n = 3 * 5 * 7 * 11 * 13, batch = 3;
  auto plan = CufftPlan::Create1d(n, batch, CUFFT_Z2Z);
  ASSERT_TRUE(plan.ok()) << plan.status();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  // Transform b holds an impulse at index b + 1: its inverse transform is exp(2 pi i (b+1) k / n).
  std::vector<std::complex<double>> host(static_cast<size_t>(n * batch));
  for (int64_t b = 0; b < batch; ++b) host[static_cast<size_t>(b * n + b + 1)] = 1.0;
  {
    StreamScratch scratch(pool, stream);
    auto data = scratch.Get(host.size() * sizeof(host[0]));
    auto work = scratch.Get(plan->work_bytes());
    ASSERT_TRUE(data.ok() && work.ok());
    ASSERT_EQ(cudaMemcpyAsync(*data, host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cufftSetStream(plan->get(), stream), CUFFT_SUCCESS);
    ASSERT_EQ(cufftSetWorkArea(plan->get(), *work), CUFFT_SUCCESS);
    auto* cells = static_cast<cufftDoubleComplex*>(*data);
    ASSERT_EQ(cufftExecZ2Z(plan->get(), cells, cells, CUFFT_INVERSE), CUFFT_SUCCESS);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), *data, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
  }  // the scratch is freed behind the copy, in stream order
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  double worst = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < n; ++k) {
      const double angle = 2 * M_PI * static_cast<double>(((b + 1) * k) % n) / static_cast<double>(n);
      worst = std::max(worst, std::abs(host[static_cast<size_t>(b * n + k)] - std::polar(1.0, angle)));
    }
  }
  EXPECT_LT(worst, 1e-12);
}

}  // namespace
}  // namespace gpucompute
