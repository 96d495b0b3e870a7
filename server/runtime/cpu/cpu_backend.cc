// CPU backend (see cpu_backend.h).
#include "server/runtime/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>

#include "server/common/nvtx.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "server/runtime/completion_queue.h"

namespace gpucompute {
namespace {
// Frequencies per task: large enough to amortise scheduling, small enough to spread one long
// series over every worker.
constexpr int64_t kFrequenciesPerTask = 4096;

}  // namespace

CpuBackend::CpuBackend(int threads, CompletionQueue* completions) : completions_(completions) {
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  max_in_flight_batches_ = 2 * n;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

CpuBackend::~CpuBackend() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& w : workers_) w.join();
}

void CpuBackend::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CpuBackend* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
            return b->stopping_ || !b->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void CpuBackend::ReleaseBatch() {
  absl::MutexLock lock(&mu_);
  --in_flight_batches_;
}

void CpuBackend::RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                                PeriodogramDone done) {
  struct State {
    std::shared_ptr<const periodogram::Batch> batch;
    std::vector<const periodogram::SeriesSpec*> series;
    std::vector<periodogram::PreparedSeries> prepared;
    std::vector<periodogram::SeriesPower> results;
    std::atomic<int64_t> remaining{0};
    std::atomic<bool> abandoned{false};
    PeriodogramDone done;
  };
  auto state = std::make_shared<State>();
  state->batch = batch;
  state->done = std::move(done);
  state->series = batch->all_series();
  const int elem = periodogram::ElementSize(batch->dtype);
  state->results.resize(state->series.size());
  state->prepared.resize(state->series.size());
  {
    NVTX_RANGE("periodogram.cpu.prepare");
    for (size_t i = 0; i < state->series.size(); ++i) {
      state->prepared[i] = periodogram::Prepare(*state->series[i]);
      state->results[i].power.resize(static_cast<size_t>(state->series[i]->grid.size()) * elem);
    }
  }
  // Runs on the thread that finishes the batch's last task: peaks, then the completion thread.
  auto finish = [this, state] {
    if (state->abandoned) {
      completions_->Post([this, state] {
        ReleaseBatch();  // before done(): done may let the server destroy this backend
        state->done(absl::DeadlineExceededError(
            "every caller of the batch went away (deadline or cancellation) while it was computed"));
      });
      return;
    }
    for (size_t s = 0; s < state->series.size(); ++s) {
      periodogram::FindPeak(state->batch->dtype, state->series[s]->grid, &state->results[s]);
    }
    completions_->Post([this, state] {
      ReleaseBatch();  // before done(): done may let the server destroy this backend
      state->done(std::move(state->results));
    });
  };
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < state->series.size(); ++i) {
    const int64_t n = state->series[i]->grid.size();
    for (int64_t k = 0; k < n; k += kFrequenciesPerTask) {
      const int64_t end = std::min(n, k + kFrequenciesPerTask);
      tasks.push_back([state, i, k, end, elem, finish] {
        NVTX_RANGE("periodogram.cpu.compute");
        // A long CPU batch nobody waits for any more would hold the workers: stop early.
        if (!state->abandoned && state->batch->abandoned && state->batch->abandoned()) {
          state->abandoned = true;
        }
        if (!state->abandoned) periodogram::ComputePowerCpu(*state->series[i], state->prepared[i], state->batch->dtype, k,
                                     end, state->results[i].power.data() + k * elem);
        if (state->remaining.fetch_sub(1) == 1) finish();
      });
    }
  }
  state->remaining = static_cast<int64_t>(tasks.size());
  absl::MutexLock lock(&mu_);
  // Back-pressure: at most max_in_flight_batches_ batches queued or running.
  mu_.Await(absl::Condition(
      +[](CpuBackend* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
        return b->in_flight_batches_ < b->max_in_flight_batches_;
      },
      this));
  ++in_flight_batches_;
  if (tasks.empty()) {
    tasks_.push_back(finish);  // no frequencies at all: still report through a worker
    return;
  }
  for (auto& t : tasks) tasks_.push_back(std::move(t));
}

}  // namespace gpucompute
