// The compute backend behind the scheduler: CUDA (one DeviceContext per GPU) or the CPU
// reference. Backends run batches asynchronously and report through the completion queue.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/metrics/server_metrics.h"
#include "server/ops/assimilate/assimilate.h"
#include "server/ops/dense/dense.h"
#include "server/ops/periodogram/periodogram.h"
#include "server/device/device_info.h"
#include "server/runtime/host_memory.h"

namespace gpucompute {

class CompletionQueue;

struct BackendOptions {
  std::string kind = "auto";     // auto | cuda | cpu
  int streams_per_device = 4;
  // Page-locked staging per stream slot and direction, pinned at start (DeviceContext::Options::
  // initial_staging_bytes); a larger batch grows its slot's on its own path.
  int64_t staging_bytes = int64_t{8} << 20;
  std::string kernel_cache_dir;  // empty: in memory only
  int cpu_threads = 0;           // 0: hardware concurrency
  bool debug_sync = false;       // synchronise after each launch (pins faults)
  // Dense models: on every device (true) or on the one device with the most free memory
  // (false, the default: a node's GPUs then hold different models).
  bool replicate_models = false;
  // Page-locked host memory for resident tensors (TensorMemory), in bytes; 0: none; negative:
  // PinnedTensorBytes' default.
  int64_t pinned_tensor_bytes = -1;
  // The most frequencies a periodogram series may have (the service's limit): the CUDA
  // backend makes cuFFT plans at start for every FFT such a series may take.
  int64_t max_frequencies_per_series = int64_t{1} << 26;
  // Called once per device that turns unhealthy (a sticky CUDA error: its context is lost),
  // with the cause, from whichever thread saw the fault; must not block. The server turns its
  // health to NOT_SERVING so that the orchestrator restarts it.
  std::function<void(int device, const absl::Status& cause)> on_device_unhealthy;
  // Test-only fault injection (flags --inject_sticky_fault_*): device `inject_fault_device`
  // runs a trapping kernel after its `inject_fault_after_batches`-th batch. -1: never.
  int inject_fault_device = -1;
  int64_t inject_fault_after_batches = 0;
  // Where each op's GPU batches spend their time (the CUDA backend records them).
  metrics::BatchStageMetrics periodogram_stages, dense_stages, assimilate_stages;
};

class Backend {
 public:
  using PeriodogramDone =
      std::function<void(absl::StatusOr<std::vector<periodogram::SeriesPower>>)>;

  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cuda" or "cpu"

  // Computes every series of every request in `batch` (one SeriesPower each, in order) and
  // calls `done` exactly once, on a completion-queue thread. May block the caller while every
  // stream (or worker) is busy: that is the scheduler's back-pressure. Never call it from a
  // gRPC thread.
  virtual void RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                              PeriodogramDone done) = 0;

  // ---- dense models
  using DenseDone = std::function<void(absl::StatusOr<std::vector<dense::Output>>)>;

  // OK when a model of `stored_bytes` (dense::StoredBytes) can be made resident now;
  // RESOURCE_EXHAUSTED naming the bytes needed and free otherwise. Checked before a model's
  // bytes are received.
  virtual absl::Status CheckModelFits(int64_t stored_bytes) const = 0;

  // Makes `spec` resident (on every device). Blocking, and long for large models: call it off
  // the gRPC threads. RESOURCE_EXHAUSTED when memory runs out; nothing stays allocated on
  // failure.
  virtual absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> LoadDenseModel(
      dense::ModelSpec spec) = 0;

  // Runs every request of `batch` (concatenated by rows) through its model and calls `done`
  // exactly once, on a completion-queue thread, with one Output per request in order. Blocks
  // like RunPeriodogram while every stream (or worker) is busy.
  virtual void RunDense(std::shared_ptr<const dense::Batch> batch, DenseDone done) = 0;

  // ---- data assimilation
  using AssimilateDone = std::function<void(absl::StatusOr<std::vector<assimilate::Output>>)>;

  // Runs every problem of every request of `batch` (each problem's `form` already resolved by
  // the service: never kAuto) and calls `done` exactly once, on a completion-queue thread, with
  // one Output per request in order. A problem that fails (R not positive definite: its
  // INVALID_ARGUMENT names the problem) fails its own request's Output, not the batch; the
  // StatusOr is an error only when the whole batch failed (device fault, abandoned). Blocks
  // like RunPeriodogram while every stream (or worker) is busy.
  virtual void RunAssimilate(std::shared_ptr<const assimilate::Batch> batch, AssimilateDone done) = 0;
  // The most members of an LETKF problem (assimilate::Method::kLetkf) RunAssimilate takes; the
  // service answers UNIMPLEMENTED for larger ones.
  virtual int64_t LetkfMaxMembers() const { return 0; }

  virtual std::vector<DeviceDescription> Devices() const = 0;
  // Memory of each device now; empty without devices. Thread-safe and cheap enough to call
  // at every scrape (no synchronisation with the streams).
  virtual std::vector<DeviceMemoryUsage> MemoryUsage() const = 0;
  virtual KernelCacheStats KernelStats() const { return {}; }
  virtual std::string NvrtcVersion() const { return ""; }
  // Where resident tensors should live so that this backend reads them without a staging copy
  // (the CUDA backend's page-locked blocks, BackendOptions::pinned_tensor_bytes of them); null:
  // plain memory is as good.
  virtual std::shared_ptr<HostMemory> TensorMemory() const { return nullptr; }
  // Runs `task` soon on one of the backend's threads that is awake with nothing to do (the
  // CUDA backend's completion pollers, spinning on a hot core while they linger) and returns
  // true; false, without running it, when none is. What a small call's parse, decode and
  // launch run on when the server is idle (compute_service.cc). `task` must not block.
  virtual bool RunOnIdleThread(std::function<void()> task) { return false; }
};

// Picks the backend: "cuda" requires a device (error otherwise), "cpu" always works, "auto"
// takes CUDA when the build has it and a device is visible, else the CPU. `completions` must
// outlive the backend.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       CompletionQueue* completions);

// True when this build includes the CUDA backend and at least one device is visible.
bool CudaDeviceAvailable();
// GPUs visible to this process (0 without a CUDA build or driver). Creates no context.
int VisibleCudaDeviceCount();

}  // namespace gpucompute
