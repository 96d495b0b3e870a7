// Tests of CompletionPoller: watched events finish once, and the thread's offers of itself
// (RunIfAwake, RunIfIdle) are taken only while it is awake, and RunIfIdle only while idle.
#include "server/runtime/cuda/completion_poller.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <cuda_runtime.h>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/runtime/completion_queue.h"
#include "server/device/cuda_resources.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute {
namespace {

// Offers `task` until the poller takes it (it turns idle a moment after a batch's finish).
bool OfferUntilTaken(CompletionPoller& poller, const std::function<void()>& task) {
  for (int i = 0; i < 100; ++i) {
    if (poller.RunIfIdle(task)) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(5));
  }
  return false;
}

// Watches one recorded event on the default stream and waits until its finish ran.
void WatchOne(CompletionPoller& poller, cudaEvent_t event) {
  ASSERT_EQ(cudaEventRecord(event, nullptr), cudaSuccess);
  absl::Notification finished;
  poller.Watch(event, [&](cudaError_t status) {
    EXPECT_EQ(status, cudaSuccess);
    finished.Notify();
  });
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(CompletionPollerTest, RunsIdleTasksOnlyWhileAwakeAndIdleOneAtATime) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto event = CudaEvent::Create(/*disable_timing=*/true);
  ASSERT_TRUE(event.ok()) << event.status();
  CompletionQueue completions(1);
  CompletionPoller poller(&completions, 0);
  EXPECT_FALSE(CompletionPoller::OnPollerThread());

  // Asleep once the linger has passed: nothing is taken.
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(3 * CompletionPoller::kLinger));
  EXPECT_FALSE(poller.RunIfIdle([] {}));
  EXPECT_FALSE(poller.RunIfAwake([] {}));

  // Right after a watched batch finished it lingers, awake and idle: one task is taken and
  // runs on the poller thread; a second offer meanwhile is refused.
  WatchOne(poller, event->get());
  absl::Notification started, release, ran;
  std::atomic<bool> on_poller{false}, inline_launch{false};
  ASSERT_TRUE(OfferUntilTaken(poller, [&] {
    started.Notify();
    on_poller = CompletionPoller::OnPollerThread();
    // A launch offered from the poller thread itself runs at once.
    bool launched = false;
    inline_launch = poller.RunIfAwake([&] { launched = true; }) && launched;
    release.WaitForNotification();
    ran.Notify();
  }));
  EXPECT_FALSE(poller.RunIfIdle([] { ADD_FAILURE() << "a second task taken while one runs"; }));
  // While the task runs, launches from other threads are not queued behind it.
  started.WaitForNotification();
  EXPECT_FALSE(poller.RunIfAwake([] { ADD_FAILURE() << "a launch queued behind a task"; }));
  release.Notify();
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(on_poller);
  EXPECT_TRUE(inline_launch);

  // Idle again once the task is over (it launched nothing): the next task is taken.
  absl::Notification second;
  ASSERT_TRUE(OfferUntilTaken(poller, [&] { second.Notify(); }));
  ASSERT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace gpucompute
