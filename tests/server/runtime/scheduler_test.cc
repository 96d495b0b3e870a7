// Scheduler: coalescing, queue limits, deadlines and cancellation, on the real CPU backend.
#include "server/runtime/op_schedulers.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/runtime/completion_queue.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "server/runtime/cpu/cpu_backend.h"
#include "tests/server/ops/periodogram/test_series.h"

namespace gpucompute {
namespace {

std::shared_ptr<const periodogram::Request> SmallRequest(std::mt19937_64& rng,
                                                         ElementType dtype) {
  auto r = std::make_shared<periodogram::Request>();
  r->dtype = dtype;
  auto s = periodogram::testing::RandomSeries(rng, 40, 1.0, false);
  s.grid.uniform = periodogram::UniformGrid{0.1, 0.1, 50};
  r->series.push_back(std::move(s));
  return r;
}

struct Harness {
  CompletionQueue completions{1};
  CpuBackend backend{2, &completions};
};

// The names of this process's threads, as `top -H` shows them.
std::set<std::string> ThreadNames() {
  std::set<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.insert(name);
  }
  return names;
}

// An operator profiling the server with `top -H` or perf sees which thread is which.
TEST(Scheduler, ThreadsAreNamed) {
  Harness h;
  PeriodogramScheduler scheduler(&h.backend, SchedulerOptions{});
  const std::set<std::string> wanted = {"gc-disp-periodo", "gc-exp-periodog", "gc-completion",
                                        "gc-cpu-worker"};
  std::set<std::string> names;
  // Each thread names itself as it starts: wait for them (a loaded machine may take a while).
  for (const absl::Time until = absl::Now() + absl::Seconds(30); absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(10))) {
    names = ThreadNames();
    if (std::includes(names.begin(), names.end(), wanted.begin(), wanted.end())) break;
  }
  for (const std::string& name : wanted) EXPECT_TRUE(names.count(name)) << name;
}

TEST(Scheduler, CoalescesConcurrentRequestsAndSplitsResults) {
  Harness h;
  SchedulerOptions o;
  o.max_queue_delay = absl::Milliseconds(200);
  o.max_batch_size = 16;
  o.dispatch_when_idle = false;
  PeriodogramScheduler scheduler(&h.backend, o);
  std::mt19937_64 rng(3);
  std::atomic<int> ok{0};
  absl::Notification all_done;
  std::atomic<int> remaining{16};
  for (int i = 0; i < 16; ++i) {
    PeriodogramScheduler::Job job;
    job.request = SmallRequest(rng, ElementType::kFloat64);
    job.done = [&, req = job.request](absl::StatusOr<std::vector<periodogram::SeriesPower>> r,
                                      const JobTimings& t) {
      if (r.ok() && r->size() == 1 && t.batch_requests == 16) {
        const auto expected = periodogram::ComputeSeriesCpu(req->series[0], req->dtype);
        if (expected.power == (*r)[0].power) ok.fetch_add(1);
      }
      if (remaining.fetch_sub(1) == 1) all_done.Notify();
    };
    ASSERT_TRUE(scheduler.Enqueue(std::move(job)).ok());
  }
  all_done.WaitForNotification();
  EXPECT_EQ(ok.load(), 16);
  const BatchingStats stats = scheduler.Stats();
  EXPECT_EQ(stats.batches, 1);
  EXPECT_EQ(stats.largest_batch, 16);
}

TEST(Scheduler, FullQueueIsResourceExhausted) {
  Harness h;
  SchedulerOptions o;
  o.max_queue_delay = absl::Seconds(1);
  o.max_queue_depth = 2;
  o.max_batch_size = 64;
  o.dispatch_when_idle = false;
  PeriodogramScheduler scheduler(&h.backend, o);
  std::mt19937_64 rng(4);
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) {
    PeriodogramScheduler::Job job;
    job.request = SmallRequest(rng, ElementType::kFloat32);
    job.done = [&](auto, const JobTimings&) { done.fetch_add(1); };
    const absl::Status s = scheduler.Enqueue(std::move(job));
    if (i < 2) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    }
  }
  scheduler.Shutdown();  // dispatches the two queued requests and waits for them
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(scheduler.Stats().rejected_queue_full, 1);
}

TEST(Scheduler, ExpiredAndCancelledJobsAreNotComputed) {
  Harness h;
  PeriodogramScheduler scheduler(&h.backend, SchedulerOptions{});
  std::mt19937_64 rng(5);
  absl::Notification n1, n2;
  absl::StatusCode c1, c2;
  PeriodogramScheduler::Job expired;
  expired.request = SmallRequest(rng, ElementType::kFloat64);
  expired.deadline = absl::Now() - absl::Seconds(1);
  expired.done = [&](auto r, const JobTimings&) { c1 = r.status().code(); n1.Notify(); };
  PeriodogramScheduler::Job cancelled;
  cancelled.request = SmallRequest(rng, ElementType::kFloat64);
  cancelled.is_cancelled = [] { return true; };
  cancelled.done = [&](auto r, const JobTimings&) { c2 = r.status().code(); n2.Notify(); };
  ASSERT_TRUE(scheduler.Enqueue(std::move(expired)).ok());
  ASSERT_TRUE(scheduler.Enqueue(std::move(cancelled)).ok());
  n1.WaitForNotification();
  n2.WaitForNotification();
  EXPECT_EQ(c1, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(c2, absl::StatusCode::kCancelled);
  EXPECT_EQ(scheduler.Stats().expired_before_dispatch, 2);
}

// The dispatcher blocks in the backend while every worker is busy; a queued request whose
// deadline passes meanwhile is still answered at its deadline, not when the dispatcher is back.
TEST(Scheduler, QueuedRequestFailsAtItsDeadlineWhileTheBackendIsBusy) {
  CompletionQueue completions{1};
  CpuBackend backend{1, &completions};  // one worker, two batches in flight at most
  SchedulerOptions o;
  o.max_batch_size = 1;
  o.max_queue_delay = absl::Milliseconds(1);
  PeriodogramScheduler scheduler(&backend, o);
  std::mt19937_64 rng(8);
  absl::Mutex mu;
  absl::Time first_long_done = absl::InfiniteFuture();
  std::atomic<int> remaining{4};
  absl::Notification all_done;
  for (int i = 0; i < 3; ++i) {  // two fill the backend, the third blocks the dispatcher
    auto r = std::make_shared<periodogram::Request>();
    r->dtype = ElementType::kFloat64;
    auto series = periodogram::testing::RandomSeries(rng, 2000, 1.0, false);
    series.grid.uniform = periodogram::UniformGrid{0.1, 0.001, 150000};
    r->series.push_back(std::move(series));
    PeriodogramScheduler::Job job;
    job.request = r;
    job.done = [&](auto result, const JobTimings&) {
      EXPECT_TRUE(result.ok()) << result.status();
      {
        absl::MutexLock lock(&mu);
        first_long_done = std::min(first_long_done, absl::Now());
      }
      if (remaining.fetch_sub(1) == 1) all_done.Notify();
    };
    ASSERT_TRUE(scheduler.Enqueue(std::move(job)).ok());
  }
  absl::SleepFor(absl::Milliseconds(20));  // the dispatcher is now blocked on the third
  PeriodogramScheduler::Job late;
  late.request = SmallRequest(rng, ElementType::kFloat64);
  const absl::Time enqueued = absl::Now();
  late.deadline = enqueued + absl::Milliseconds(50);
  absl::StatusCode code = absl::StatusCode::kOk;
  absl::Time late_done;
  late.done = [&](auto result, const JobTimings&) {
    code = result.status().code();
    late_done = absl::Now();
    if (remaining.fetch_sub(1) == 1) all_done.Notify();
  };
  ASSERT_TRUE(scheduler.Enqueue(std::move(late)).ok());
  all_done.WaitForNotification();
  EXPECT_EQ(code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(late_done - enqueued, absl::Milliseconds(50));
  absl::MutexLock lock(&mu);
  EXPECT_LT(late_done, first_long_done) << "the expired request waited for the backend";
}

TEST(Scheduler, DifferentDtypesGoToDifferentBatches) {
  Harness h;
  SchedulerOptions o;
  o.max_queue_delay = absl::Milliseconds(100);
  o.dispatch_when_idle = false;
  PeriodogramScheduler scheduler(&h.backend, o);
  std::mt19937_64 rng(6);
  std::atomic<int> remaining{4};
  absl::Notification done;
  for (int i = 0; i < 4; ++i) {
    PeriodogramScheduler::Job job;
    job.request = SmallRequest(rng, i % 2 ? ElementType::kFloat32
                                          : ElementType::kFloat64);
    job.done = [&, dtype = job.request->dtype](auto r, const JobTimings& t) {
      EXPECT_TRUE(r.ok());
      EXPECT_EQ(t.batch_requests, 2);
      EXPECT_EQ((*r)[0].power.size(), 50u * ElementSize(dtype));
      if (remaining.fetch_sub(1) == 1) done.Notify();
    };
    ASSERT_TRUE(scheduler.Enqueue(std::move(job)).ok());
  }
  done.WaitForNotification();
  EXPECT_EQ(scheduler.Stats().batches, 2);
}

TEST(Scheduler, LoneRequestOnIdleBackendSkipsTheQueueDelay) {
  Harness h;
  SchedulerOptions o;
  o.max_queue_delay = absl::Seconds(30);  // would time the test out if waited for
  PeriodogramScheduler scheduler(&h.backend, o);
  std::mt19937_64 rng(9);
  absl::Notification done;
  PeriodogramScheduler::Job job;
  job.request = SmallRequest(rng, ElementType::kFloat64);
  job.done = [&](auto r, const JobTimings& t) {
    EXPECT_TRUE(r.ok());
    EXPECT_LT(t.queue, absl::Seconds(5));
    done.Notify();
  };
  ASSERT_TRUE(scheduler.Enqueue(std::move(job)).ok());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(Scheduler, EnqueueAfterShutdownIsUnavailable) {
  Harness h;
  PeriodogramScheduler scheduler(&h.backend, SchedulerOptions{});
  scheduler.Shutdown();
  std::mt19937_64 rng(8);
  PeriodogramScheduler::Job job;
  job.request = SmallRequest(rng, ElementType::kFloat64);
  job.done = [](auto, const JobTimings&) { FAIL() << "must not run"; };
  EXPECT_EQ(scheduler.Enqueue(std::move(job)).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpucompute
