// The per-slot object cache evicts without synchronising its stream: an evicted object stays
// alive while work queued before the eviction may still read it, and is released by a later
// insert once the stream has passed it. The stream is held busy by a host function that waits
// for the test's word, so "not yet passed" is a fact, not a race.
#include "server/device/cufft.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

// Counts its destructions.
struct Counted {
  explicit Counted(std::atomic<int>* destroyed) : destroyed(destroyed) {}
  ~Counted() { destroyed->fetch_add(1); }
  std::atomic<int>* destroyed;
};

// A stream held busy until Release(): its host function waits for the word.
class HeldStream {
 public:
  HeldStream() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaLaunchHostFunc(stream_, &HeldStream::Wait, &released_), cudaSuccess);
  }
  ~HeldStream() {
    Release();
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  void Release() { released_.store(true); }
  cudaStream_t get() const { return stream_; }

 private:
  static void CUDART_CB Wait(void* word) {
    const auto* released = static_cast<std::atomic<bool>*>(word);
    while (!released->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cudaStream_t stream_ = nullptr;
  std::atomic<bool> released_{false};
};

TEST(SlotCacheTest, EvictsWithoutWaitingForTheStreamAndReleasesOnceItPassed) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::atomic<int> destroyed{0};
  {
    SlotCache cache(2);
    HeldStream held;
    ASSERT_TRUE(cache.Insert("a", std::make_unique<Counted>(&destroyed), held.get()).ok());
    ASSERT_TRUE(cache.Insert("b", std::make_unique<Counted>(&destroyed), held.get()).ok());
    // The stream is busy: a synchronising eviction would block here until Release().
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(cache.Insert("c", std::make_unique<Counted>(&destroyed), held.get()).ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(cache.retired(), 1u);
    EXPECT_EQ(destroyed.load(), 0) << "evicted while queued work may still read it";
    EXPECT_EQ(cache.Find<Counted>("a"), nullptr);
    EXPECT_NE(cache.Find<Counted>("c"), nullptr);

    held.Release();
    ASSERT_EQ(cudaStreamSynchronize(held.get()), cudaSuccess);
    // The next insert releases what the stream has passed, and retires its own eviction.
    ASSERT_TRUE(cache.Insert("d", std::make_unique<Counted>(&destroyed), held.get()).ok());
    EXPECT_EQ(destroyed.load(), 1);
    EXPECT_EQ(cache.retired(), 1u);
    ASSERT_EQ(cudaStreamSynchronize(held.get()), cudaSuccess);
  }
  EXPECT_EQ(destroyed.load(), 4) << "every object is released with the cache";
}

}  // namespace
}  // namespace gpucompute
