// Tests of DeviceContext: description, slot lending and blocking, pinned staging growth and
// stream-ordered allocation from the configured pool.
#include "server/device/device_context.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

DeviceContext::Options SmallOptions() {
  DeviceContext::Options options;
  options.device = 0;
  options.streams = 3;
  options.initial_staging_bytes = size_t{1} << 20;
  return options;
}

TEST(DeviceContextTest, RejectsZeroStreamsWithoutTouchingTheDevice) {
  DeviceContext::Options options = SmallOptions();
  options.streams = 0;
  EXPECT_EQ(DeviceContext::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceContextTest, RejectsDeviceThatDoesNotExist) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DeviceContext::Options options = SmallOptions();
  options.device = 4096;
  EXPECT_EQ(DeviceContext::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceContextTest, DescribesTheDeviceAndConfiguresThePool) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DeviceContext::Options options = SmallOptions();
  options.pool_release_threshold = uint64_t{256} << 20;
  auto context = DeviceContext::Create(options);
  ASSERT_TRUE(context.ok()) << context.status();
  DeviceContext& ctx = **context;

  const DeviceDescription& d = ctx.description();
  EXPECT_EQ(d.index, 0);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.cc_major, 7);
  EXPECT_GT(d.total_memory_bytes, 0);
  EXPECT_GT(d.multiprocessors, 0);
  EXPECT_EQ(d.streams, 3);
  EXPECT_EQ(ctx.num_streams(), 3);
  EXPECT_EQ(ctx.arch(), d.cc_major * 10 + d.cc_minor);
  EXPECT_EQ(ctx.device(), 0);
  EXPECT_FALSE(ctx.debug_sync());
  EXPECT_TRUE(ctx.MakeCurrent().ok());
  EXPECT_TRUE(ctx.kernels().Stats().directory.empty());

  ASSERT_NE(ctx.memory_pool(), nullptr);
  uint64_t threshold = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(ctx.memory_pool(), cudaMemPoolAttrReleaseThreshold,
                                    &threshold),
            cudaSuccess);
  EXPECT_EQ(threshold, options.pool_release_threshold);
  // The start-up warm-up left memory in the pool (the threshold is above it).
  uint64_t reserved = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(ctx.memory_pool(), cudaMemPoolAttrReservedMemCurrent,
                                    &reserved),
            cudaSuccess);
  EXPECT_GE(reserved, uint64_t{64} << 20);
}

TEST(DeviceContextTest, LendsEverySlotOnceThenBlocksUntilARelease) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto context = DeviceContext::Create(SmallOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  DeviceContext& ctx = **context;

  std::vector<StreamSlot*> lent;
  std::set<int> indices;
  std::set<cudaStream_t> streams;
  for (int i = 0; i < ctx.num_streams(); ++i) {
    StreamSlot* slot = ctx.AcquireSlot();
    ASSERT_NE(slot, nullptr);
    ASSERT_NE(slot->stream.get(), nullptr);
    EXPECT_GE(slot->staging_in.capacity(), size_t{1} << 20);
    EXPECT_GE(slot->staging_out.capacity(), size_t{1} << 20);
    lent.push_back(slot);
    indices.insert(slot->index);
    streams.insert(slot->stream.get());
  }
  EXPECT_EQ(indices, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(streams.size(), 3u);

  std::atomic<StreamSlot*> acquired{nullptr};
  absl::Notification started;
  std::thread waiter([&] {
    started.Notify();
    acquired = ctx.AcquireSlot();
  });
  started.WaitForNotification();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(acquired.load(), nullptr) << "AcquireSlot returned while every slot was lent";

  ctx.ReleaseSlot(lent[1]);
  waiter.join();
  EXPECT_EQ(acquired.load(), lent[1]);

  // A double release is ignored rather than lending one slot twice.
  ctx.ReleaseSlot(lent[0]);
  ctx.ReleaseSlot(lent[0]);
  StreamSlot* again = ctx.AcquireSlot();
  EXPECT_EQ(again, lent[0]);
  ctx.ReleaseSlot(again);
  ctx.ReleaseSlot(lent[1]);
  ctx.ReleaseSlot(lent[2]);
}

TEST(DeviceContextTest, AcquireSlotThenLendsAtOnceOrOnTheNextRelease) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto context = DeviceContext::Create(SmallOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  DeviceContext& ctx = **context;

  // A free slot: lent before AcquireSlotThen returns.
  StreamSlot* first = nullptr;
  ctx.AcquireSlotThen([&](StreamSlot* s) { first = s; });
  ASSERT_NE(first, nullptr);
  std::vector<StreamSlot*> lent = {first, ctx.AcquireSlot(), ctx.AcquireSlot()};
  EXPECT_EQ(ctx.load(), 3);

  // None free: nothing happens until a release, which hands its slot to the first waiter
  // (before a blocking AcquireSlot, and in the order they asked).
  std::vector<StreamSlot*> later;
  ctx.AcquireSlotThen([&](StreamSlot* s) { later.push_back(s); });
  ctx.AcquireSlotThen([&](StreamSlot* s) { later.push_back(s); });
  EXPECT_TRUE(later.empty());
  EXPECT_EQ(ctx.load(), 5);
  ctx.ReleaseSlot(lent[2]);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0], lent[2]);
  EXPECT_EQ(ctx.load(), 4);
  ctx.ReleaseSlot(lent[0]);
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[1], lent[0]);

  // A waiter left when the device turns unhealthy is told so with null.
  StreamSlot* told = lent[1];
  bool called = false;
  ctx.AcquireSlotThen([&](StreamSlot* s) {
    called = true;
    told = s;
  });
  EXPECT_FALSE(called);
  EXPECT_TRUE(ctx.MarkUnhealthy(absl::InternalError("test fault")));
  EXPECT_TRUE(called);
  EXPECT_EQ(told, nullptr);
  EXPECT_EQ(ctx.load(), 3);  // lent[1], later[0], later[1]
  for (StreamSlot* s : {lent[1], later[0], later[1]}) ctx.ReleaseSlot(s);
  EXPECT_EQ(ctx.load(), 0);
}

// Two contexts (of the same GPU here) sharing one SlotSignal, as the backend's devices do: a
// thread waiting for a slot on either takes the first one freed, on whichever context frees it.
TEST(DeviceContextTest, ASlotSignalWakesTheWaiterForTheFirstSlotFreedOnAnyDevice) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto signal = std::make_shared<SlotSignal>();
  DeviceContext::Options options = SmallOptions();
  options.streams = 1;
  options.slot_signal = signal;
  auto a = DeviceContext::Create(options);
  auto b = DeviceContext::Create(options);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  StreamSlot* lent_a = (*a)->TryAcquireSlot();
  StreamSlot* lent_b = (*b)->TryAcquireSlot();
  ASSERT_NE(lent_a, nullptr);
  ASSERT_NE(lent_b, nullptr);
  EXPECT_EQ((*a)->TryAcquireSlot(), nullptr);  // none left: null at once
  EXPECT_EQ((*a)->load(), 1);

  // The waiter tries `a` first; `b` frees its slot first.
  std::atomic<int> attempts{0};
  DeviceContext* where = nullptr;
  StreamSlot* taken = nullptr;
  absl::Notification done;
  std::thread waiter([&] {
    signal->Retry([&] {
      attempts.fetch_add(1);
      for (DeviceContext* d : {a->get(), b->get()}) {
        if (StreamSlot* s = d->TryAcquireSlot()) {
          where = d;
          taken = s;
          return true;
        }
      }
      return false;
    });
    done.Notify();
  });
  while (attempts.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));  // waits
  (*b)->ReleaseSlot(lent_b);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
  EXPECT_EQ(where, b->get());
  EXPECT_EQ(taken, lent_b);

  // An unhealthy device notifies too (its waiters look elsewhere or give up).
  std::atomic<bool> gave_up{false};
  std::thread waiter2([&] {
    signal->Retry([&] { return !(*a)->healthy(); });
    gave_up = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(gave_up.load());
  EXPECT_TRUE((*a)->MarkUnhealthy(absl::InternalError("test fault")));
  waiter2.join();
  EXPECT_TRUE(gave_up.load());
  EXPECT_EQ((*a)->TryAcquireSlot(), nullptr);
  (*a)->ReleaseSlot(lent_a);
  (*b)->ReleaseSlot(taken);
}

TEST(DeviceContextTest, PinnedStagingGrowsAndCarriesCopies) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto context = DeviceContext::Create(SmallOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  DeviceContext& ctx = **context;
  StreamSlot* slot = ctx.AcquireSlot();

  const size_t before = slot->staging_in.capacity();
  void* const old_data = slot->staging_in.data();
  ASSERT_TRUE(slot->staging_in.Reserve(before / 2).ok());
  EXPECT_EQ(slot->staging_in.data(), old_data) << "a smaller Reserve must not reallocate";
  EXPECT_EQ(slot->staging_in.capacity(), before);

  const size_t bytes = before * 3 + 5;
  ASSERT_TRUE(slot->staging_in.Reserve(bytes).ok());
  ASSERT_TRUE(slot->staging_out.Reserve(bytes).ok());
  EXPECT_GE(slot->staging_in.capacity(), bytes);
  ASSERT_NE(slot->staging_in.data(), nullptr);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, slot->staging_in.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);

  // Round trip host -> device -> host through the pool on the slot's stream.
  auto* in = static_cast<unsigned char*>(slot->staging_in.data());
  auto* out = static_cast<unsigned char*>(slot->staging_out.data());
  for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memset(out, 0, bytes);
  cudaStream_t stream = slot->stream.get();
  void* device = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&device, bytes, ctx.memory_pool(), stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, in, bytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out, device, bytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(device, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(std::memcmp(in, out, bytes), 0);
  ctx.ReleaseSlot(slot);
}

TEST(DeviceContextTest, PoolAllocationOnEverySlotStream) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto context = DeviceContext::Create(SmallOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  DeviceContext& ctx = **context;
  std::vector<StreamSlot*> slots;
  for (int i = 0; i < ctx.num_streams(); ++i) slots.push_back(ctx.AcquireSlot());
  constexpr size_t kBytes = size_t{4} << 20;
  std::vector<void*> buffers(slots.size(), nullptr);
  for (size_t i = 0; i < slots.size(); ++i) {
    ASSERT_EQ(cudaMallocFromPoolAsync(&buffers[i], kBytes, ctx.memory_pool(),
                                      slots[i]->stream.get()),
              cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(buffers[i], static_cast<int>(i + 1), kBytes,
                              slots[i]->stream.get()),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(slots[i]->staging_out.data(), buffers[i], 1,
                              cudaMemcpyDeviceToHost, slots[i]->stream.get()),
              cudaSuccess);
    ASSERT_EQ(cudaFreeAsync(buffers[i], slots[i]->stream.get()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(slots[i]->stream.get()), cudaSuccess);
    const unsigned char probe = *static_cast<unsigned char*>(slots[i]->staging_out.data());
    EXPECT_EQ(probe, static_cast<unsigned char>(i + 1));
  }
  for (StreamSlot* slot : slots) ctx.ReleaseSlot(slot);
}

TEST(DeviceContextTest, DestroyingWithQueuedWorkWaitsForIt) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto context = DeviceContext::Create(SmallOptions());
  ASSERT_TRUE(context.ok()) << context.status();
  StreamSlot* slot = (*context)->AcquireSlot();
  void* device = nullptr;
  const size_t bytes = size_t{1} << 20;
  ASSERT_EQ(cudaMallocFromPoolAsync(&device, bytes, (*context)->memory_pool(),
                                    slot->stream.get()),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(slot->staging_in.data(), device, bytes, cudaMemcpyDeviceToHost,
                            slot->stream.get()),
            cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(device, slot->stream.get()), cudaSuccess);
  (*context)->ReleaseSlot(slot);
  context->reset();  // synchronises the stream before freeing the pinned buffer
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(DeviceContextTest, KernelCacheUsesTheGivenDirectory) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DeviceContext::Options options = SmallOptions();
  options.kernel_cache_dir =
      absl::StrCat(::testing::TempDir(), "/device_context_test_kernels_", getpid());
  auto context = DeviceContext::Create(options);
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ((*context)->kernels().Stats().directory, options.kernel_cache_dir);
  context->reset();
  std::error_code ignored;
  std::filesystem::remove_all(options.kernel_cache_dir, ignored);
}

}  // namespace
}  // namespace gpucompute
