// The periodogram scheduler: a bounded queue with dynamic batching. Requests with the same
// compute dtype that arrive close together are coalesced into one backend launch, up to
// `max_batch_size` requests (and `max_batch_pairs` sample x frequency pairs), waiting at most
// `max_queue_delay` for a batch to fill. Deadlines and cancellation are checked just before
// dispatch. One dispatch thread; the backend's completion threads call each job's `done`.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ops/periodogram/periodogram.h"
#include "server/runtime/backend.h"

namespace gpucompute {

struct SchedulerOptions {
  int max_batch_size = 64;
  absl::Duration max_queue_delay = absl::Microseconds(200);
  int max_queue_depth = 1024;
  int64_t max_batch_pairs = int64_t{1} << 32;
  // When nothing is in flight, dispatch at once instead of waiting max_queue_delay for
  // company: a lone request pays no batching delay, and under load (something in flight)
  // requests still coalesce while they wait.
  bool dispatch_when_idle = true;
};

// Server-side timings of one request (sent back as trailing metadata).
struct JobTimings {
  absl::Duration queue;    // enqueue -> dispatch
  absl::Duration compute;  // dispatch -> results ready (copies and kernels included)
  int batch_requests = 0;  // requests in the launch that carried this one
};

struct BatchingStats {
  int64_t requests = 0;
  int64_t batches = 0;
  int64_t largest_batch = 0;
  int64_t rejected_queue_full = 0;
  int64_t expired_before_dispatch = 0;
};

class PeriodogramScheduler {
 public:
  using Done = std::function<void(absl::StatusOr<std::vector<periodogram::SeriesPower>>,
                                  const JobTimings&)>;
  struct Job {
    std::shared_ptr<const periodogram::Request> request;
    absl::Time deadline = absl::InfiniteFuture();
    std::function<bool()> is_cancelled;  // optional; polled before dispatch
    Done done;                           // called exactly once, unless Enqueue fails
  };

  // `backend` must outlive the scheduler.
  PeriodogramScheduler(Backend* backend, SchedulerOptions options);
  ~PeriodogramScheduler();  // Shutdown()
  PeriodogramScheduler(const PeriodogramScheduler&) = delete;
  PeriodogramScheduler& operator=(const PeriodogramScheduler&) = delete;

  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE after Shutdown; `done` is then
  // not called.
  absl::Status Enqueue(Job job);

  // Stops accepting, dispatches what is queued and waits until every dispatched batch has
  // completed. Idempotent.
  void Shutdown();

  BatchingStats Stats() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Queued {
    Job job;
    absl::Time enqueued;
    uint64_t nvtx_queue;
    int64_t pairs;  // job.request->pairs(), computed once at enqueue
  };

  void DispatchLoop();
  bool BatchReady(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Queued> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(std::vector<Queued> batch);

  Backend* const backend_;
  const SchedulerOptions options_;

  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_batches_ ABSL_GUARDED_BY(mu_) = 0;
  BatchingStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread dispatcher_;
};

}  // namespace gpucompute
