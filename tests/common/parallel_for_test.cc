// ParallelFor and PostToSharedWorkers on the shared workers: every index once, whatever the
// split; callers on many threads at once and calls from inside a piece; the workers really run
// pieces beside the caller; no thread is started per call; posted tasks run elsewhere, all of
// them, and release what they hold.
#include "common/parallel_for.h"

#include <dirent.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

// How many times ParallelFor visited each of [0, n).
std::vector<int> Visits(int64_t n, int64_t cost, int64_t min_cost_per_thread) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
  ParallelFor(n, cost, [&](int64_t begin, int64_t end) {
    EXPECT_LE(0, begin);
    EXPECT_LT(begin, end);
    EXPECT_LE(end, n);
    for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
  }, min_cost_per_thread);
  std::vector<int> out;
  for (auto& v : visits) out.push_back(v.load());
  return out;
}

int64_t ThreadsOfThisProcess() {
  int64_t count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) count += e->d_name[0] != '.';
  closedir(dir);
  return count;
}

TEST(ParallelFor, VisitsEveryIndexOnce) {
  for (int64_t n : {1, 2, 3, 7, 64, 1000, 4097}) {
    for (int64_t min_cost : {int64_t{1}, int64_t{3}, int64_t{1} << 18}) {
      const std::vector<int> visits = Visits(n, n * 1000, min_cost);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(visits[static_cast<size_t>(i)], 1) << "n " << n << " min_cost " << min_cost << " index " << i;
      }
    }
  }
  int calls = 0;
  ParallelFor(0, 1000, [&](int64_t, int64_t) { ++calls; }, 1);
  EXPECT_EQ(calls, 0) << "an empty range calls nothing";
}

TEST(ParallelFor, WorkersRunPiecesBesideTheCaller) {
  if (HardwareThreads() < 2) GTEST_SKIP() << "one hardware thread: ParallelFor runs on the caller";
  // The piece holding index 0 waits until a piece has run on another thread: with no worker
  // taking pieces, the caller would hold it until the deadline.
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> elsewhere{false};
  std::atomic<int> visited{0};
  ParallelFor(2, 2, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() != caller) elsewhere = true;
    visited += static_cast<int>(end - begin);
    if (begin == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!elsewhere && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }, 1);
  EXPECT_TRUE(elsewhere.load()) << "no piece ran on a worker";
  EXPECT_EQ(visited.load(), 2);
}

TEST(ParallelFor, ManyCallersAndNestedCallsAtOnce) {
  constexpr int kCallers = 8, kCalls = 200;
  std::atomic<int64_t> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int k = 0; k < kCalls; ++k) {
        const int64_t n = 1 + (c * 131 + k * 17) % 300;
        std::atomic<int64_t> sum{0};
        ParallelFor(n, n, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            // Each index sums 0..i by a nested call.
            std::atomic<int64_t> inner{0};
            ParallelFor(i + 1, i + 1, [&](int64_t b, int64_t e) {
              int64_t s = 0;
              for (int64_t j = b; j < e; ++j) s += j;
              inner += s;
            }, 16);
            sum += inner.load();
          }
        }, 8);
        // sum over i < n of i(i+1)/2 = (n-1)n(n+1)/6
        if (sum.load() != (n - 1) * n * (n + 1) / 6) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ParallelFor, StartsNoThreadPerCall) {
  Visits(1000, 1000, 1);  // the workers exist from here on
  const int64_t before = ThreadsOfThisProcess();
  ASSERT_GT(before, 0);
  for (int k = 0; k < 500; ++k) Visits(64, 64, 1);
  EXPECT_EQ(ThreadsOfThisProcess(), before);
}

TEST(PostToSharedWorkers, RunsEveryTaskOffThePostingThreadAndReleasesIt) {
  constexpr int kTasks = 300;
  const std::thread::id poster = std::this_thread::get_id();
  std::atomic<int> ran{0}, on_poster{0};
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  for (int k = 0; k < kTasks; ++k) {
    // Each task also splits work over the workers, as a batch's launch packs with ParallelFor.
    PostToSharedWorkers([&, held, k] {
      if (std::this_thread::get_id() == poster) on_poster.fetch_add(1);
      const std::vector<int> visits = Visits(50 + k % 50, 1000, 1);
      bool once = *held == 7;
      for (int v : visits) once = once && v == 1;
      if (once) ran.fetch_add(1);
    });
  }
  held.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((ran.load() < kTasks || !watch.expired()) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_EQ(on_poster.load(), 0);
  EXPECT_TRUE(watch.expired()) << "a task that ran still holds what it captured";
}

}  // namespace
}  // namespace gpucompute
