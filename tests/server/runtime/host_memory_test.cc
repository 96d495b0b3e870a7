// HostMemory: blocks kept and reused, the capacity (kept blocks freed to make room, requests
// beyond it refused), small requests refused, a failing allocation; and a TensorStore whose
// tensors live in it, giving their blocks back when they leave.
#include "server/runtime/host_memory.h"

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/runtime/tensor_store.h"

namespace gpucompute {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Real memory (aligned_alloc), with the blocks live at any time recorded.
struct Blocks {
  std::set<void*> live;
  int frees = 0;
  bool fail = false;
  HostMemory::AllocateFn allocate() {
    return [this](size_t bytes) -> void* {
      if (fail) return nullptr;
      void* p = std::aligned_alloc(4096, bytes);
      live.insert(p);
      return p;
    };
  }
  HostMemory::FreeFn free() {
    return [this](void* p) {
      live.erase(p);
      ++frees;
      std::free(p);
    };
  }
};

TEST(HostMemory, KeepsGivenBackBlocksForTheNextAllocationOfTheirSize) {
  Blocks blocks;
  HostMemory memory(64 * kMiB, kMiB, blocks.allocate(), blocks.free());
  HostMemory::Block a = memory.Allocate(3 * kMiB + 5);
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(a.size, 4 * kMiB);
  memory.Free(a);
  EXPECT_EQ(memory.stats().kept_bytes, int64_t{4} << 20);
  HostMemory::Block b = memory.Allocate(4 * kMiB);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(memory.stats().reused, 1);
  EXPECT_EQ(memory.stats().allocated, 1);
  // Much smaller requests do not take a large kept block.
  memory.Free(b);
  HostMemory::Block c = memory.Allocate(kMiB);
  EXPECT_NE(c.data, a.data);
  EXPECT_EQ(c.size, kMiB);
  memory.Free(c);
  EXPECT_EQ(blocks.live.size(), 2u);
}

TEST(HostMemory, FreesKeptBlocksToMakeRoomAndRefusesBeyondTheCapacity) {
  Blocks blocks;
  HostMemory memory(10 * kMiB, kMiB, blocks.allocate(), blocks.free());
  HostMemory::Block a = memory.Allocate(6 * kMiB);
  ASSERT_NE(a.data, nullptr);
  // 6 in use + 5 > 10: refused, nothing allocated.
  EXPECT_EQ(memory.Allocate(5 * kMiB).data, nullptr);
  EXPECT_EQ(memory.stats().refused, 1);
  memory.Free(a);
  // The kept 6 MiB block is freed to make room for 8.
  HostMemory::Block b = memory.Allocate(8 * kMiB);
  ASSERT_NE(b.data, nullptr);
  EXPECT_EQ(blocks.frees, 1);
  EXPECT_EQ(memory.stats().kept_bytes, 0);
  EXPECT_EQ(memory.stats().in_use_bytes, int64_t{8} << 20);
  memory.Free(b);
}

TEST(HostMemory, RefusesSmallRequestsAndSurvivesAFailingAllocation) {
  Blocks blocks;
  HostMemory memory(64 * kMiB, kMiB, blocks.allocate(), blocks.free());
  EXPECT_EQ(memory.Allocate(kMiB - 1).data, nullptr);
  EXPECT_EQ(memory.Allocate(0).data, nullptr);
  blocks.fail = true;
  EXPECT_EQ(memory.Allocate(2 * kMiB).data, nullptr);
  EXPECT_EQ(memory.stats().in_use_bytes, 0);
  blocks.fail = false;
  HostMemory::Block a = memory.Allocate(2 * kMiB);
  EXPECT_NE(a.data, nullptr);
  memory.Free(a);
}

TEST(HostMemory, DestructionFreesTheKeptBlocks) {
  Blocks blocks;
  {
    HostMemory memory(64 * kMiB, kMiB, blocks.allocate(), blocks.free());
    memory.Free(memory.Allocate(2 * kMiB));
    memory.Free(memory.Allocate(9 * kMiB));
    EXPECT_EQ(blocks.live.size(), 2u);
  }
  EXPECT_TRUE(blocks.live.empty());
}

TEST(HostMemory, ResidentTensorsLiveInItAndGiveTheirBlocksBack) {
  Blocks blocks;
  auto memory = std::make_shared<HostMemory>(8 * kMiB, kMiB, blocks.allocate(), blocks.free());
  TensorStoreOptions options;
  options.sweep_interval = absl::ZeroDuration();
  options.host_memory = memory;
  TensorStore store(options);
  const TensorSpec big{2, 8, {int64_t{3} << 17}};  // 3 MiB
  auto a = store.Create("c", big);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(blocks.live.count(const_cast<char*>((*a)->data().data())));
  std::vector<double> values(size_t{3} << 17, 1.5);
  ASSERT_TRUE((*a)->Write(0, absl::string_view(reinterpret_cast<const char*>(values.data()),
                                               values.size() * 8)).ok());
  // Beyond the capacity (3 + 6 > 8): plain memory, same behaviour.
  auto b = store.Create("c", TensorSpec{2, 8, {int64_t{6} << 17}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(blocks.live.count(const_cast<char*>((*b)->data().data())));
  // Small tensors: plain memory.
  auto c = store.Create("c", TensorSpec{2, 8, {4}});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(blocks.live.count(const_cast<char*>((*c)->data().data())));
  const std::string handle = (*a)->handle();
  a->reset();
  ASSERT_TRUE(store.Delete("c", handle).ok());
  EXPECT_EQ(memory->stats().in_use_bytes, 0);
  EXPECT_EQ(memory->stats().kept_bytes, int64_t{3} << 20);
  // The next tensor of that size reuses the block.
  auto d = store.Create("c", big);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(memory->stats().reused, 1);
}

}  // namespace
}  // namespace gpucompute
