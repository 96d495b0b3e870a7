// CPU backend (see cpu_backend.h).
#include "server/runtime/cpu/cpu_backend.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <new>

#include "absl/strings/str_cat.h"
#include "server/ops/assimilate/cpu_assimilate.h"
#include "server/ops/dense/cpu_dense.h"

#include "common/nvtx.h"
#include "common/parallel_for.h"
#include "common/thread_name.h"
#include "server/ops/periodogram/cpu_periodogram.h"
#include "server/runtime/completion_queue.h"

namespace gpucompute {
namespace {
// Frequencies per task: large enough to amortise scheduling, small enough to spread one long
// series over every worker.
constexpr int64_t kFrequenciesPerTask = 4096;
// Rows per dense task: each task runs the whole stack on its rows with single-threaded BLAS.
constexpr int64_t kDenseRowsPerTask = 32;
// Assimilate: state rows per task aim at this many flops (2 N^2 per row); a problem whose
// whole update is below it applies its rows in the transform's task.
constexpr double kAssimilateFlopsPerTask = 4e6;

}  // namespace

CpuBackend::CpuBackend(int threads, CompletionQueue* completions) : completions_(completions) {
  const int n = threads > 0 ? threads : static_cast<int>(HardwareThreads());
  max_in_flight_batches_ = 2 * n;
  openblas_set_num_threads(1);  // the workers are the parallelism
  for (int i = 0; i < n; ++i) {
    workers_.emplace_back([this] {
      NameThisThread("gc-cpu-worker");
      WorkerLoop();
    });
  }
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
  const int elem = ElementSize(batch->dtype);
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
      if (state->series[s]->peak_only()) std::string().swap(state->results[s].power);
    }
    completions_->Post([this, state] {
      ReleaseBatch();  // before done(): done may let the server destroy this backend
      state->done(std::move(state->results));
    });
  };
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < state->series.size(); ++i) {
    const int64_t n = state->series[i]->grid.size();
    const int64_t per_task = periodogram::CpuTaskFrequencies(*state->series[i], kFrequenciesPerTask);
    for (int64_t k = 0; k < n; k += per_task) {
      const int64_t end = std::min(n, k + per_task);
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
  if (tasks.empty()) tasks.push_back(finish);  // no frequencies at all: still report through a worker
  Submit(std::move(tasks));
}

void CpuBackend::Push(std::vector<std::function<void()>> tasks) {
  absl::MutexLock lock(&mu_);
  for (auto& t : tasks) tasks_.push_back(std::move(t));
}

void CpuBackend::Submit(std::vector<std::function<void()>> tasks) {
  absl::MutexLock lock(&mu_);
  // Back-pressure: at most max_in_flight_batches_ batches queued or running.
  mu_.Await(absl::Condition(
      +[](CpuBackend* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
        return b->in_flight_batches_ < b->max_in_flight_batches_;
      },
      this));
  ++in_flight_batches_;
  for (auto& t : tasks) tasks_.push_back(std::move(t));
}

absl::Status CpuBackend::CheckModelFits(int64_t stored_bytes) const {
  // The CPU model holds float64 copies: at most 4x the stored bytes (bfloat16 -> double).
  const int64_t needed = stored_bytes * 4;
  const int64_t available = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (available > 0 && needed > available) {
    return absl::ResourceExhaustedError(absl::StrCat("model needs up to ", needed,
                                                     " bytes of host memory on the CPU backend but only ",
                                                     available, " are free"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> CpuBackend::LoadDenseModel(
    dense::ModelSpec spec) {
  try {
    return std::shared_ptr<const dense::LoadedModel>(dense::CpuModel::Make(std::move(spec)));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of host memory while loading the model");
  }
}

void CpuBackend::RunDense(std::shared_ptr<const dense::Batch> batch, DenseDone done) {
  struct State {
    std::shared_ptr<const dense::Batch> batch;
    const dense::CpuModel* model;
    std::vector<double> x;  // every request's rows, concatenated
    std::vector<double> y;
    std::atomic<int64_t> remaining{0};
    std::atomic<bool> abandoned{false};
    DenseDone done;
  };
  auto state = std::make_shared<State>();
  state->batch = batch;
  state->model = static_cast<const dense::CpuModel*>(batch->model.get());
  state->done = std::move(done);
  const int64_t rows = batch->rows();
  const int64_t in = state->model->info().in_features();
  const int64_t out = state->model->info().out_features();
  state->x.resize(static_cast<size_t>(rows * in));
  state->y.resize(static_cast<size_t>(rows * out));
  int64_t row = 0;
  for (const auto& r : batch->requests) {
    ToDouble(batch->input_dtype, r->input.data(), r->rows * in, state->x.data() + row * in);
    row += r->rows;
  }
  auto finish = [this, state, out] {
    completions_->Post([this, state, out] {
      ReleaseBatch();  // before done(): done may let the server destroy this backend
      if (state->abandoned) {
        state->done(absl::DeadlineExceededError(
            "every caller of the batch went away (deadline or cancellation) while it was computed"));
        return;
      }
      std::vector<dense::Output> outputs;
      const ElementType dtype = state->model->dtype();
      int64_t first = 0;
      for (const auto& r : state->batch->requests) {
        dense::Output o(static_cast<size_t>(r->rows * out * ElementSize(dtype)), '\0');
        FromDouble(state->y.data() + first * out, r->rows * out, dtype, o.data());
        outputs.push_back(std::move(o));
        first += r->rows;
      }
      state->done(std::move(outputs));
    });
  };
  std::vector<std::function<void()>> tasks;
  for (int64_t first = 0; first < rows; first += kDenseRowsPerTask) {
    const int64_t n = std::min(kDenseRowsPerTask, rows - first);
    tasks.push_back([state, first, n, in, out, finish] {
      NVTX_RANGE("dense.cpu.forward");
      if (!state->abandoned && state->batch->abandoned && state->batch->abandoned()) {
        state->abandoned = true;
      }
      if (!state->abandoned) {
        dense::CpuForward(*state->model, state->x.data() + first * in, n, state->y.data() + first * out);
      }
      if (state->remaining.fetch_sub(1) == 1) finish();
    });
  }
  state->remaining = static_cast<int64_t>(tasks.size());
  if (tasks.empty()) tasks.push_back(finish);
  Submit(std::move(tasks));
}

void CpuBackend::RunAssimilate(std::shared_ptr<const assimilate::Batch> batch, AssimilateDone done) {
  struct RequestState {
    absl::Mutex mu;
    absl::Status status ABSL_GUARDED_BY(mu);
    std::atomic<bool> failed{false};
    std::vector<std::unique_ptr<assimilate::CpuAnalysis>> problems;
  };
  struct State {
    std::shared_ptr<const assimilate::Batch> batch;
    std::vector<std::unique_ptr<RequestState>> requests;
    std::atomic<int64_t> remaining{0};
    std::atomic<bool> abandoned{false};
    AssimilateDone done;
  };
  auto state = std::make_shared<State>();
  state->batch = batch;
  state->done = std::move(done);
  for (const auto& r : batch->requests) {
    auto rs = std::make_unique<RequestState>();
    for (size_t i = 0; i < r->problems.size(); ++i) {
      rs->problems.push_back(assimilate::CpuAnalysis::Create(r->problems[i], static_cast<int64_t>(i),
                                                             batch->dtype, assimilate::Limits{}));
    }
    state->requests.push_back(std::move(rs));
  }
  auto finish = [this, state] {
    completions_->Post([this, state] {
      ReleaseBatch();  // before done(): done may let the server destroy this backend
      if (state->abandoned) {
        state->done(absl::DeadlineExceededError(
            "every caller of the batch went away (deadline or cancellation) while it was computed"));
        return;
      }
      std::vector<assimilate::Output> outputs(state->requests.size());
      for (size_t r = 0; r < state->requests.size(); ++r) {
        RequestState& rs = *state->requests[r];
        {
          absl::MutexLock lock(&rs.mu);
          outputs[r].status = rs.status;
        }
        if (!outputs[r].status.ok()) continue;
        for (auto& a : rs.problems) outputs[r].problems.push_back(a->Finish());
      }
      state->done(std::move(outputs));
    });
  };
  auto stop_early = [state] {
    if (!state->abandoned && state->batch->abandoned && state->batch->abandoned()) state->abandoned = true;
    return state->abandoned.load();
  };
  std::vector<std::function<void()>> tasks;
  for (size_t r = 0; r < state->requests.size(); ++r) {
    RequestState* rs = state->requests[r].get();
    for (size_t i = 0; i < rs->problems.size(); ++i) {
      const assimilate::Problem* p = &batch->requests[r]->problems[i];
      assimilate::CpuAnalysis* a = rs->problems[i].get();
      tasks.push_back([this, state, rs, p, a, finish, stop_early] {
        NVTX_RANGE("assimilate.cpu.transform");
        if (!stop_early() && !rs->failed) {
          absl::Status s = a->ComputeTransform();
          if (!s.ok()) {
            absl::MutexLock lock(&rs->mu);
            if (rs->status.ok()) rs->status = std::move(s);
            rs->failed = true;
          } else {
            // The global methods' rows cost their share of A T; an LETKF row is a whole local
            // analysis (assimilate::ProblemFlops).
            const double row_flops = p->method == assimilate::Method::kLetkf
                                         ? assimilate::ProblemFlops(*p) / static_cast<double>(p->n)
                                         : 2.0 * static_cast<double>(p->N) * static_cast<double>(p->N);
            const int64_t rows_per_task =
                std::max<int64_t>(1, static_cast<int64_t>(kAssimilateFlopsPerTask / row_flops));
            if (p->n <= rows_per_task) {
              a->ApplyRows(0, p->n);
            } else {
              std::vector<std::function<void()>> rows;
              for (int64_t b = 0; b < p->n; b += rows_per_task) {
                const int64_t e = std::min(p->n, b + rows_per_task);
                rows.push_back([state, rs, a, b, e, finish, stop_early] {
                  NVTX_RANGE("assimilate.cpu.rows");
                  if (!stop_early() && !rs->failed) a->ApplyRows(b, e);
                  if (state->remaining.fetch_sub(1) == 1) finish();
                });
              }
              state->remaining += static_cast<int64_t>(rows.size());  // before this task's own decrement
              Push(std::move(rows));
            }
          }
        }
        if (state->remaining.fetch_sub(1) == 1) finish();
      });
    }
  }
  state->remaining = static_cast<int64_t>(tasks.size());
  if (tasks.empty()) tasks.push_back(finish);
  Submit(std::move(tasks));
}

std::vector<DeviceMemoryUsage> CpuBackend::MemoryUsage() const { return {}; }

}  // namespace gpucompute
