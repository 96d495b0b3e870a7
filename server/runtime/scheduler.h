// The schedulers: a bounded queue with dynamic batching, one per operation. Compatible
// requests (same key: the periodogram's dtype; the dense model and input dtype) that arrive
// close together are coalesced into one backend launch, up to `max_batch_size` requests and
// `max_batch_cost` units of work (sample x frequency pairs; rows), waiting at most
// `max_queue_delay` for a batch to fill. Deadlines and cancellation are checked just before
// dispatch, and a second thread answers queued requests DEADLINE_EXCEEDED as their deadlines
// pass, so none waits past its deadline even while the dispatcher is blocked on busy
// devices. One dispatch thread per scheduler; the backend's completion threads call each
// job's `done`. The batching logic is one template (BatchScheduler); each operation supplies
// a small traits class that says what a key, a cost and a run are (op_schedulers.h has the
// three operations'; scheduler_impl.h the template's code, for the file that instantiates it).
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
#include "server/metrics/server_metrics.h"

namespace gpucompute {

struct SchedulerOptions {
  int max_batch_size = 64;
  absl::Duration max_queue_delay = absl::Microseconds(200);
  int max_queue_depth = 1024;
  int64_t max_batch_cost = int64_t{1} << 32;  // pairs (periodogram), rows (dense), flops (assimilate)
  // When nothing is in flight, dispatch at once instead of waiting max_queue_delay for
  // company: a lone request pays no batching delay (Enqueue's caller dispatches it, without
  // waking the dispatcher), and under load (something in flight) requests still coalesce
  // while they wait.
  bool dispatch_when_idle = true;
};

// Server-side timings of one request (sent back as trailing metadata).
struct JobTimings {
  absl::Duration queue;    // enqueue -> dispatch
  absl::Duration compute;  // dispatch -> results ready (copies and kernels included)
  int batch_requests = 0;  // requests in the launch that carried this one
  absl::Duration decode;   // receipt -> enqueue (parsing and decoding; set by the service)
};

struct BatchingStats {
  int64_t requests = 0;
  int64_t batches = 0;
  int64_t largest_batch = 0;
  int64_t rejected_queue_full = 0;
  int64_t expired_before_dispatch = 0;
  int64_t queued = 0;  // waiting now, not yet dispatched
};

// Traits: `Request`, `Result` (one per request), `Key(request)` (equality-comparable),
// `Cost(request)`, and `Run(requests, abandoned, done)` which runs one batch on the backend
// and calls done with one Result per request, in order.
template <typename Traits>
class BatchScheduler {
 public:
  using Request = typename Traits::Request;
  using Result = typename Traits::Result;
  using Done = std::function<void(absl::StatusOr<Result>, const JobTimings&)>;
  struct Job {
    std::shared_ptr<const Request> request;
    absl::Time deadline = absl::InfiniteFuture();
    std::function<bool()> is_cancelled;  // optional; polled before dispatch
    Done done;                           // called exactly once, unless Enqueue fails
  };

  // `traits` holds the backend, which must outlive the scheduler, as must the series in
  // `metrics` (queue/compute time, batch size, pending count; null ones record nothing).
  BatchScheduler(Traits traits, SchedulerOptions options, metrics::SchedulerMetrics metrics = {});
  ~BatchScheduler();  // Shutdown()
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE after Shutdown; `done` is then
  // not called. A request that finds the scheduler idle (dispatch_when_idle, nothing queued
  // or in flight) is handed to the backend on the calling thread: Enqueue then returns after
  // the backend has taken it (a stream slot, the launches), and `done` may have run already.
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
    int64_t cost;  // Traits::Cost(*job.request), computed once at enqueue
  };

  void DispatchLoop();
  // Fails queued jobs whose deadline has passed, waking at the earliest deadline.
  void ExpireLoop();
  bool BatchReady(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Queued> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `batch` on the backend (on the calling thread: the dispatcher, or Enqueue's caller
  // for a request dispatched at once). `counted`: the caller has already counted it in
  // in_flight_batches_.
  void Dispatch(std::vector<Queued> batch, bool counted);

  const Traits traits_;
  const SchedulerOptions options_;
  const metrics::SchedulerMetrics metrics_;

  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_batches_ ABSL_GUARDED_BY(mu_) = 0;
  BatchingStats stats_ ABSL_GUARDED_BY(mu_);
  // The expirer sleeps until next_expiry_; an enqueue with an earlier deadline bumps
  // expiry_generation_ to wake it.
  absl::Time next_expiry_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t expiry_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread dispatcher_;
  std::thread expirer_;
};

}  // namespace gpucompute
