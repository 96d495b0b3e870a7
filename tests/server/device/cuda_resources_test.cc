// Tests of the CUDA/NVRTC error statuses (no device needed) and the RAII owners (on a device).
#include "server/device/cuda_resources.h"

#include <string>
#include <utility>

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::Status FailingCall() {
  CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue);
  return absl::OkStatus();
}

absl::Status FailingNvrtcCall() {
  NVRTC_RETURN_IF_ERROR(NVRTC_ERROR_COMPILATION);
  return absl::OkStatus();
}

TEST(CudaErrorStatusTest, NamesErrorExpressionAndPlace) {
  absl::Status status =
      CudaErrorStatus(cudaErrorInvalidValue, "cudaMemcpy(a, b)", "/build/dir/server/x.cc", 42);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("cudaErrorInvalidValue"));
  EXPECT_THAT(status.message(), HasSubstr(cudaGetErrorString(cudaErrorInvalidValue)));
  EXPECT_THAT(status.message(), HasSubstr("cudaMemcpy(a, b)"));
  EXPECT_THAT(status.message(), HasSubstr("x.cc:42"));
  EXPECT_THAT(status.message(), Not(HasSubstr("/build/dir")));
}

TEST(CudaErrorStatusTest, OutOfMemoryIsResourceExhausted) {
  EXPECT_EQ(CudaErrorStatus(cudaErrorMemoryAllocation, "cudaMallocAsync", "f.cc", 1).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(CudaErrorStatusTest, MacrosReturnTheStatus) {
  absl::Status status = FailingCall();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("cudaErrorInvalidValue"));
  EXPECT_THAT(status.message(), HasSubstr("cuda_resources_test.cc:"));

  status = FailingNvrtcCall();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr(nvrtcGetErrorString(NVRTC_ERROR_COMPILATION)));
  EXPECT_THAT(status.message(), HasSubstr("NVRTC_ERROR_COMPILATION"));
}

TEST(CudaResourcesTest, EmptyOwnersAreHarmless) {
  CudaStream stream;
  CudaEvent event;
  PinnedBuffer buffer;
  EXPECT_EQ(stream.get(), nullptr);
  EXPECT_EQ(event.get(), nullptr);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_EQ(buffer.capacity(), 0u);
  EXPECT_TRUE(buffer.Reserve(0).ok());  // no growth, so no CUDA call
}

TEST(CudaResourcesTest, StreamsEventsAndPinnedBuffersMove) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  unsigned int flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(stream->get(), &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  cudaStream_t raw = stream->get();
  CudaStream moved = std::move(*stream);
  EXPECT_EQ(moved.get(), raw);
  EXPECT_EQ(stream->get(), nullptr);  // NOLINT(bugprone-use-after-move)
  StreamView view = moved.view();
  EXPECT_EQ(view.get(), raw);

  auto start = CudaEvent::Create();
  auto stop = CudaEvent::Create();
  ASSERT_TRUE(start.ok() && stop.ok());
  ASSERT_EQ(cudaEventRecord(start->get(), view), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop->get(), view), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop->get()), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start->get(), stop->get()), cudaSuccess);
  EXPECT_GE(ms, 0);
  CudaEvent other;
  other = std::move(*start);
  EXPECT_NE(other.get(), nullptr);
  EXPECT_EQ(start->get(), nullptr);  // NOLINT(bugprone-use-after-move)

  auto untimed = CudaEvent::Create(/*disable_timing=*/true);
  ASSERT_TRUE(untimed.ok());
  ASSERT_EQ(cudaEventRecord(untimed->get(), view), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(untimed->get()), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, untimed->get(), stop->get()), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();

  PinnedBuffer buffer;
  ASSERT_TRUE(buffer.Reserve(1000).ok());
  EXPECT_GE(buffer.capacity(), 1000u);
  void* data = buffer.data();
  ASSERT_TRUE(buffer.Reserve(10).ok());
  EXPECT_EQ(buffer.data(), data);
  PinnedBuffer taken = std::move(buffer);
  EXPECT_EQ(taken.data(), data);
  EXPECT_EQ(buffer.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(buffer.capacity(), 0u);   // NOLINT(bugprone-use-after-move)
  ASSERT_TRUE(taken.Reserve(taken.capacity() + 1).ok());
  EXPECT_GT(taken.capacity(), 1000u);
}

}  // namespace
}  // namespace gpucompute
