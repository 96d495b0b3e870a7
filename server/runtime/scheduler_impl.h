// BatchScheduler's code (scheduler.h): included only by the file that instantiates the
// schedulers (op_schedulers.cc), so that the template's users see its declaration alone.
#pragma once

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/nvtx.h"
#include "common/thread_name.h"
#include "server/runtime/scheduler.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

template <typename Traits>
BatchScheduler<Traits>::BatchScheduler(Traits traits, SchedulerOptions options,
                                       metrics::SchedulerMetrics metrics)
    : traits_(traits), options_(options), metrics_(metrics) {
  dispatcher_ = std::thread([this] {
    NameThisThread(absl::StrCat("gc-disp-", Traits::kName));
    DispatchLoop();
  });
  expirer_ = std::thread([this] {
    NameThisThread(absl::StrCat("gc-exp-", Traits::kName));
    ExpireLoop();
  });
}

template <typename Traits>
BatchScheduler<Traits>::~BatchScheduler() { Shutdown(); }

template <typename Traits>
absl::Status BatchScheduler<Traits>::Enqueue(Job job) {
  const int64_t cost = Traits::Cost(*job.request);
  std::vector<Queued> alone;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("server is shutting down");
    if (static_cast<int>(queue_.size()) >= options_.max_queue_depth) {
      ++stats_.rejected_queue_full;
      return absl::ResourceExhaustedError(absl::StrCat(
          Traits::kName, " queue is full (", options_.max_queue_depth, " requests waiting); retry later"));
    }
    Queued queued{std::move(job), absl::Now(), NvtxStart(Traits::kName), cost};
    if (options_.dispatch_when_idle && in_flight_batches_ == 0 && queue_.empty()) {
      // Nothing to batch with and nothing in flight: this thread dispatches it, which saves
      // waking the dispatcher. Counted in flight from here, so that a request arriving
      // meanwhile queues for a batch instead of dispatching beside it.
      ++in_flight_batches_;
      alone.push_back(std::move(queued));
    } else {
      if (queued.job.deadline < next_expiry_) ++expiry_generation_;
      queue_.push_back(std::move(queued));
      if (metrics_.pending) metrics_.pending->Add(1);
      return absl::OkStatus();
    }
  }
  Dispatch(std::move(alone), /*counted=*/true);
  return absl::OkStatus();
}

template <typename Traits>
void BatchScheduler<Traits>::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !dispatcher_.joinable()) return;
    stopping_ = true;
  }
  if (dispatcher_.joinable()) dispatcher_.join();
  if (expirer_.joinable()) expirer_.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* n) { return *n == 0; }, &in_flight_batches_));
}

template <typename Traits>
BatchingStats BatchScheduler<Traits>::Stats() const {
  absl::MutexLock lock(&mu_);
  BatchingStats stats = stats_;
  stats.queued = static_cast<int64_t>(queue_.size());
  return stats;
}

template <typename Traits>
bool BatchScheduler<Traits>::BatchReady(absl::Time now) const {
  if (queue_.empty()) return false;
  if (stopping_) return true;
  if (options_.dispatch_when_idle && in_flight_batches_ == 0) return true;
  if (now - queue_.front().enqueued >= options_.max_queue_delay) return true;
  // Full when enough compatible requests wait.
  const auto key = Traits::Key(*queue_.front().job.request);
  int count = 0;
  int64_t cost = 0;
  for (const auto& q : queue_) {
    if (Traits::Key(*q.job.request) != key) continue;
    ++count;
    cost += q.cost;
    if (count >= options_.max_batch_size || cost >= options_.max_batch_cost) return true;
  }
  return false;
}

template <typename Traits>
std::vector<typename BatchScheduler<Traits>::Queued> BatchScheduler<Traits>::TakeBatch() {
  std::vector<Queued> batch;
  const auto key = Traits::Key(*queue_.front().job.request);
  int64_t cost = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (static_cast<int>(batch.size()) >= options_.max_batch_size) break;
    if (Traits::Key(*it->job.request) != key) {
      ++it;
      continue;
    }
    const int64_t c = it->cost;
    if (!batch.empty() && cost + c > options_.max_batch_cost) break;
    cost += c;
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  if (metrics_.pending) metrics_.pending->Add(-static_cast<double>(batch.size()));
  return batch;
}

template <typename Traits>
void BatchScheduler<Traits>::DispatchLoop() {
  for (;;) {
    std::vector<Queued> batch;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (queue_.empty() && stopping_) return;
        const absl::Time now = absl::Now();
        if (BatchReady(now)) break;
        if (queue_.empty()) {
          mu_.Await(absl::Condition(
              +[](BatchScheduler* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
                return s->stopping_ || !s->queue_.empty();
              },
              this));
        } else {
          // Wait for more requests until the oldest has waited max_queue_delay.
          const absl::Time fire = queue_.front().enqueued + options_.max_queue_delay;
          const size_t seen = queue_.size();
          struct Arg {
            BatchScheduler* s;
            size_t seen;
          } arg{this, seen};
          mu_.AwaitWithDeadline(
              absl::Condition(
                  +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    return a->s->stopping_ || a->s->queue_.size() != a->seen ||
                           (a->s->options_.dispatch_when_idle && a->s->in_flight_batches_ == 0);
                  },
                  &arg),
              fire);
        }
      }
      batch = TakeBatch();
    }
    Dispatch(std::move(batch), /*counted=*/false);
  }
}

template <typename Traits>
void BatchScheduler<Traits>::ExpireLoop() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  mu_.Lock();
  while (!stopping_) {
    const absl::Time now = absl::Now();
    std::vector<Queued> expired;
    absl::Time next = absl::InfiniteFuture();
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->job.deadline < now) {
        expired.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        next = std::min(next, it->job.deadline);
        ++it;
      }
    }
    if (!expired.empty()) {
      stats_.expired_before_dispatch += static_cast<int64_t>(expired.size());
      if (metrics_.pending) metrics_.pending->Add(-static_cast<double>(expired.size()));
      mu_.Unlock();
      for (Queued& q : expired) {
        NvtxEnd(q.nvtx_queue);
        if (metrics_.queue_seconds) metrics_.queue_seconds->Observe(absl::ToDoubleSeconds(now - q.enqueued));
        q.job.done(absl::DeadlineExceededError(absl::StrCat(
                       "deadline passed while queued for ", Traits::kName, " (waited ",
                       absl::FormatDuration(now - q.enqueued), ")")),
                   JobTimings{now - q.enqueued, absl::ZeroDuration(), 0});
      }
      mu_.Lock();
      continue;
    }
    next_expiry_ = next;
    struct Arg {
      BatchScheduler* s;
      uint64_t generation;
    } arg{this, expiry_generation_};
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                return a->s->stopping_ || a->s->expiry_generation_ != a->generation;
                              },
                              &arg),
                          next);
  }
  mu_.Unlock();
}

template <typename Traits>
void BatchScheduler<Traits>::Dispatch(std::vector<Queued> queued, bool counted) {
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<const Request>> requests;
  std::vector<Queued> live;
  std::vector<std::pair<Queued, absl::Status>> dropped;
  live.reserve(queued.size());
  for (auto& q : queued) {
    NvtxEnd(q.nvtx_queue);
    if (metrics_.queue_seconds) metrics_.queue_seconds->Observe(absl::ToDoubleSeconds(now - q.enqueued));
    if (q.job.is_cancelled && q.job.is_cancelled()) {
      dropped.emplace_back(std::move(q), absl::CancelledError("request cancelled before dispatch"));
    } else if (now > q.job.deadline) {
      dropped.emplace_back(std::move(q), absl::DeadlineExceededError("deadline passed while queued"));
    } else {
      requests.push_back(q.job.request);
      live.push_back(std::move(q));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.expired_before_dispatch += static_cast<int64_t>(dropped.size());
    if (!live.empty()) {
      stats_.requests += static_cast<int64_t>(live.size());
      stats_.batches += 1;
      stats_.largest_batch = std::max<int64_t>(stats_.largest_batch, live.size());
      if (!counted) ++in_flight_batches_;
    } else if (counted) {
      --in_flight_batches_;
    }
  }
  // Statistics first, then the callbacks: whoever a callback wakes sees consistent stats.
  for (auto& [q, status] : dropped) q.job.done(status, JobTimings{now - q.enqueued, absl::ZeroDuration(), 0});
  if (live.empty()) return;
  if (metrics_.batch_size) metrics_.batch_size->Observe(static_cast<double>(live.size()));
  if (live.size() > 1) SPDLOG_DEBUG("{} batch of {} requests", Traits::kName, live.size());
  std::vector<std::pair<absl::Time, std::function<bool()>>> waiting;
  for (const auto& q : live) waiting.emplace_back(q.job.deadline, q.job.is_cancelled);
  auto abandoned = [waiting = std::move(waiting)] {
    const absl::Time now = absl::Now();
    for (const auto& [deadline, cancelled] : waiting) {
      if (now <= deadline && !(cancelled && cancelled())) return false;
    }
    return true;
  };
  auto jobs = std::make_shared<std::vector<Queued>>(std::move(live));
  traits_.Run(std::move(requests), std::move(abandoned),
              [this, jobs, dispatched = now](absl::StatusOr<std::vector<Result>> result) {
                const absl::Duration compute = absl::Now() - dispatched;
                const int n = static_cast<int>(jobs->size());
                if (metrics_.compute_seconds) {
                  metrics_.compute_seconds->ObserveN(absl::ToDoubleSeconds(compute), n);
                }
                for (size_t i = 0; i < jobs->size(); ++i) {
                  Queued& q = (*jobs)[i];
                  const JobTimings timings{dispatched - q.enqueued, compute, n};
                  if (!result.ok()) {
                    q.job.done(result.status(), timings);
                  } else {
                    q.job.done(std::move((*result)[i]), timings);
                  }
                }
                absl::MutexLock lock(&mu_);
                --in_flight_batches_;
              });
}

}  // namespace gpucompute
