#include "server/runtime/memory_budget.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

TEST(MemoryBudget, LeasesFitTheLimitAndAreGivenBackWhenDestroyed) {
  MemoryBudget budget(100, "--memory_budget_bytes");
  {
    auto a = budget.Acquire(60, "a");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(budget.in_use(), 60);
    auto b = budget.Acquire(41, "series[3].t (decoded)");
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(b.status().message()),
                HasSubstr("series[3].t (decoded) would hold 41 bytes of host memory while 60 are held"));
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("limit is 100 bytes (--memory_budget_bytes)"));
    EXPECT_EQ(budget.in_use(), 60);  // a refused lease holds nothing
    auto c = budget.Acquire(40, "c");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(budget.in_use(), 100);
  }
  EXPECT_EQ(budget.in_use(), 0);
}

TEST(MemoryBudget, MovedLeasesAreGivenBackOnce) {
  MemoryBudget budget(100, "--flag");
  auto a = budget.Acquire(30, "a");
  ASSERT_TRUE(a.ok());
  MemoryLease moved = *std::move(a);
  MemoryLease again = std::move(moved);
  EXPECT_EQ(again.bytes(), 30);
  EXPECT_EQ(budget.in_use(), 30);
  auto b = budget.Acquire(20, "b");
  ASSERT_TRUE(b.ok());
  again = *std::move(b);  // gives the 30 back, holds the 20
  EXPECT_EQ(budget.in_use(), 20);
  again = MemoryLease();
  EXPECT_EQ(budget.in_use(), 0);
  EXPECT_FALSE(budget.Acquire(-1, "negative").ok());
}

TEST(MemoryBudget, ConcurrentLeasesNeverPassTheLimit) {
  MemoryBudget budget(1000, "--flag");
  std::atomic<int64_t> held{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto lease = budget.Acquire(300, "x");
        if (!lease.ok()) continue;
        const int64_t now = held.fetch_add(300) + 300;
        int64_t seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        held.fetch_sub(300);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 900);
  EXPECT_GT(most.load(), 0);
  EXPECT_EQ(budget.in_use(), 0);
}

// A budget inside the server's: a lease takes from both, either limit refuses (naming its
// flag), a refused lease holds nothing in either, and bytes the tensor store takes from the
// server's budget (Take, Return) leave less for the work.
TEST(MemoryBudget, NestedBudgetsTakeFromTheirParentToo) {
  MemoryBudget server(100, "--server_memory_bytes");
  MemoryBudget work(60, "--memory_budget_bytes", 1.0, "--memory_budget_share", &server);
  auto a = work.Acquire(50, "a", "alice");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(server.in_use(), 50);
  EXPECT_EQ(server.in_use("alice"), 50);
  auto b = work.Acquire(11, "b");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("(--memory_budget_bytes)"));
  EXPECT_EQ(server.in_use(), 50);  // given back to the parent
  ASSERT_TRUE(server.Take(45, "a tensor", "bob").ok());
  auto c = work.Acquire(6, "c");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("c would hold 6 bytes of host memory while 95 are held; the server's "
                        "limit is 100 bytes (--server_memory_bytes)"));
  EXPECT_EQ(work.in_use(), 50);
  server.Return(45, "bob");
  *a = MemoryLease();
  EXPECT_EQ(work.in_use(), 0);
  EXPECT_EQ(server.in_use(), 0);
  EXPECT_TRUE(work.Acquire(60, "d").ok());
}

// A caller holds at most its share; others still get theirs, and a caller's leases coming back
// free its share again.
TEST(MemoryBudget, EachCallerHoldsAtMostItsShare) {
  MemoryBudget budget(100, "--memory_budget_bytes", 0.5, "--memory_budget_share");
  EXPECT_EQ(budget.caller_limit(), 50);
  auto a1 = budget.Acquire(30, "a1", "alice");
  ASSERT_TRUE(a1.ok());
  auto a2 = budget.Acquire(21, "a2", "alice");
  ASSERT_FALSE(a2.ok());
  EXPECT_EQ(a2.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(a2.status().message()),
              HasSubstr("a2 would hold 21 bytes of host memory while this caller holds 30"));
  EXPECT_THAT(std::string(a2.status().message()),
              HasSubstr("one caller may hold 50 bytes (--memory_budget_share of --memory_budget_bytes)"));
  auto b = budget.Acquire(50, "b", "bob");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(budget.in_use("alice"), 30);
  EXPECT_EQ(budget.in_use("bob"), 50);
  // The budget in all binds before a share does.
  auto c = budget.Acquire(21, "c", "carol");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("the server's limit is 100"));
  *a1 = MemoryLease();
  EXPECT_EQ(budget.in_use("alice"), 0);
  EXPECT_TRUE(budget.Acquire(20, "a3", "alice").ok());
}

}  // namespace
}  // namespace gpucompute
