// Dynamic batching scheduler (see scheduler.h).
#include "server/runtime/scheduler.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/nvtx.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

PeriodogramScheduler::PeriodogramScheduler(Backend* backend, SchedulerOptions options)
    : backend_(backend), options_(options) {
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

PeriodogramScheduler::~PeriodogramScheduler() { Shutdown(); }

absl::Status PeriodogramScheduler::Enqueue(Job job) {
  const int64_t pairs = job.request->pairs();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (static_cast<int>(queue_.size()) >= options_.max_queue_depth) {
    ++stats_.rejected_queue_full;
    return absl::ResourceExhaustedError(absl::StrCat(
        "periodogram queue is full (", options_.max_queue_depth, " requests waiting); retry later"));
  }
  queue_.push_back(Queued{std::move(job), absl::Now(), NvtxStart("periodogram.queue"), pairs});
  return absl::OkStatus();
}

void PeriodogramScheduler::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !dispatcher_.joinable()) return;
    stopping_ = true;
  }
  if (dispatcher_.joinable()) dispatcher_.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* n) { return *n == 0; }, &in_flight_batches_));
}

BatchingStats PeriodogramScheduler::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool PeriodogramScheduler::BatchReady(absl::Time now) const {
  if (queue_.empty()) return false;
  if (stopping_) return true;
  if (options_.dispatch_when_idle && in_flight_batches_ == 0) return true;
  if (now - queue_.front().enqueued >= options_.max_queue_delay) return true;
  // Full when enough compatible requests wait.
  const auto dtype = queue_.front().job.request->dtype;
  int count = 0;
  int64_t pairs = 0;
  for (const auto& q : queue_) {
    if (q.job.request->dtype != dtype) continue;
    ++count;
    pairs += q.pairs;
    if (count >= options_.max_batch_size || pairs >= options_.max_batch_pairs) return true;
  }
  return false;
}

std::vector<PeriodogramScheduler::Queued> PeriodogramScheduler::TakeBatch() {
  std::vector<Queued> batch;
  const auto dtype = queue_.front().job.request->dtype;
  int64_t pairs = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (static_cast<int>(batch.size()) >= options_.max_batch_size) break;
    if (it->job.request->dtype != dtype) {
      ++it;
      continue;
    }
    const int64_t p = it->pairs;
    if (!batch.empty() && pairs + p > options_.max_batch_pairs) break;
    pairs += p;
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return batch;
}

void PeriodogramScheduler::DispatchLoop() {
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
              +[](PeriodogramScheduler* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
                return s->stopping_ || !s->queue_.empty();
              },
              this));
        } else {
          // Wait for more requests until the oldest has waited max_queue_delay.
          const absl::Time fire = queue_.front().enqueued + options_.max_queue_delay;
          const size_t seen = queue_.size();
          struct Arg {
            PeriodogramScheduler* s;
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
    Dispatch(std::move(batch));
  }
}

void PeriodogramScheduler::Dispatch(std::vector<Queued> queued) {
  const absl::Time now = absl::Now();
  auto batch = std::make_shared<periodogram::Batch>();
  batch->dtype = queued.front().job.request->dtype;
  std::vector<Queued> live;
  std::vector<std::pair<Queued, absl::Status>> dropped;
  live.reserve(queued.size());
  for (auto& q : queued) {
    NvtxEnd(q.nvtx_queue);
    if (q.job.is_cancelled && q.job.is_cancelled()) {
      dropped.emplace_back(std::move(q), absl::CancelledError("request cancelled before dispatch"));
    } else if (now > q.job.deadline) {
      dropped.emplace_back(std::move(q), absl::DeadlineExceededError("deadline passed while queued"));
    } else {
      batch->requests.push_back(q.job.request);
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
      ++in_flight_batches_;
    }
  }
  // Statistics first, then the callbacks: whoever a callback wakes sees consistent stats.
  for (auto& [q, status] : dropped) q.job.done(status, JobTimings{now - q.enqueued, absl::ZeroDuration(), 0});
  if (live.empty()) return;
  if (live.size() > 1) {
    SPDLOG_DEBUG("periodogram batch of {} requests ({} series)", live.size(),
                 batch->series_count());
  }
  std::vector<std::pair<absl::Time, std::function<bool()>>> waiting;
  for (const auto& q : live) waiting.emplace_back(q.job.deadline, q.job.is_cancelled);
  batch->abandoned = [waiting = std::move(waiting)] {
    const absl::Time now = absl::Now();
    for (const auto& [deadline, cancelled] : waiting) {
      if (now <= deadline && !(cancelled && cancelled())) return false;
    }
    return true;
  };
  auto jobs = std::make_shared<std::vector<Queued>>(std::move(live));
  backend_->RunPeriodogram(
      batch, [this, jobs, dispatched = now](
                 absl::StatusOr<std::vector<periodogram::SeriesPower>> result) {
        const absl::Duration compute = absl::Now() - dispatched;
        const int n = static_cast<int>(jobs->size());
        size_t next = 0;
        for (auto& q : *jobs) {
          const JobTimings timings{dispatched - q.enqueued, compute, n};
          if (!result.ok()) {
            q.job.done(result.status(), timings);
            continue;
          }
          const size_t count = q.job.request->series.size();
          std::vector<periodogram::SeriesPower> mine;
          mine.reserve(count);
          for (size_t i = 0; i < count; ++i) mine.push_back(std::move((*result)[next + i]));
          next += count;
          q.job.done(std::move(mine), timings);
        }
        absl::MutexLock lock(&mu_);
        --in_flight_batches_;
      });
}

}  // namespace gpucompute
