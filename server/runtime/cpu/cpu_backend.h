// CPU backend: the CPU references (periodogram, dense, assimilate) on a pool of worker threads.
// A batch is cut into tasks (series x frequency ranges, row blocks, problems then state rows)
// so that one large item uses every core.
#pragma once

#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/runtime/backend.h"

namespace gpucompute {

class CpuBackend final : public Backend {
 public:
  // `threads` <= 0: hardware concurrency. `completions` must outlive the backend.
  CpuBackend(int threads, CompletionQueue* completions);
  ~CpuBackend() override;  // finishes queued tasks, joins workers

  std::string name() const override { return "cpu"; }
  void RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                      PeriodogramDone done) override;
  absl::Status CheckModelFits(int64_t stored_bytes) const override;
  absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> LoadDenseModel(
      dense::ModelSpec spec) override;
  void RunDense(std::shared_ptr<const dense::Batch> batch, DenseDone done) override;
  // Each problem's transform is one task; its state rows are then cut into tasks that run
  // on any worker, so one large problem uses every core.
  void RunAssimilate(std::shared_ptr<const assimilate::Batch> batch, AssimilateDone done) override;
  int64_t LetkfMaxMembers() const override { return std::numeric_limits<int64_t>::max(); }
  std::vector<DeviceDescription> Devices() const override { return {}; }
  std::vector<DeviceMemoryUsage> MemoryUsage() const override;  // none: no devices

 private:
  void WorkerLoop();
  void ReleaseBatch();  // a batch finished: admits the next one
  // Queues a batch's tasks once fewer than max_in_flight_batches_ are queued or running.
  void Submit(std::vector<std::function<void()>> tasks);
  // Queues follow-up tasks of a batch already admitted (no back-pressure: callable from a
  // worker).
  void Push(std::vector<std::function<void()>> tasks);

  CompletionQueue* const completions_;
  int max_in_flight_batches_ = 1;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int in_flight_batches_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace gpucompute
