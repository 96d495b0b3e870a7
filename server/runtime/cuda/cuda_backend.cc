// CUDA backend (see cuda_backend.h).
#include "server/runtime/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "kernels/fault_injection.cuh"
#include "common/shared_workers.h"
#include "common/status_macros.h"
#include "server/ops/assimilate/cuda_assimilate.h"
#include "server/ops/dense/cuda_dense.h"
#include "server/ops/periodogram/cuda_periodogram.h"
#include "server/ops/periodogram/nufft.h"
#include "server/runtime/completion_queue.h"
#include "server/device/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// One batch of any operation in flight on a stream slot, from its enqueue until the poller
// sees its stream finish. `Op` names the batch, pending and result types and the unpack step.
template <typename Op>
struct InFlight {
  CudaBackend* backend;
  DeviceContext* device;
  StreamSlot* slot;
  std::shared_ptr<const typename Op::Batch> batch;
  typename Op::Pending pending;
  std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done;
  const metrics::BatchStageMetrics* stages;
  absl::Time taken;     // the backend took the batch
  absl::Time launched;  // its work was queued on the stream
};

void Observe(metrics::Histogram* h, absl::Duration d) {
  if (h != nullptr) h->Observe(absl::ToDoubleSeconds(d));
}

// Finishes a batch once the CompletionPoller has seen its stream pass the slot's event:
// unpacks the results, lends the slot again and calls done (or fails the batch with the
// stream's error).
template <typename Op>
void FinishInFlight(InFlight<Op>* raw, cudaError_t status) {
  std::unique_ptr<InFlight<Op>> f(raw);
  if (status != cudaSuccess) {
    f->device->ReleaseSlot(f->slot);
    f->done(f->backend->OnStreamError(f->device, status, Op::kOnStream));
    return;
  }
  const absl::Time seen = absl::Now();
  f->device->CountBatch();
  auto results = Op::Unpack(f->pending, *f->slot, *f->batch);
  f->device->ReleaseSlot(f->slot);
  // Before done: once the last batch is done the server may destroy the backend and metrics.
  Observe(f->stages->launch_seconds, f->launched - f->taken);
  Observe(f->stages->device_seconds, seen - f->launched);
  Observe(f->stages->finish_seconds, absl::Now() - seen);
  f->done(std::move(results));
}

struct PeriodogramOp {
  using Batch = periodogram::Batch;
  using Pending = periodogram::PendingPeriodogram;
  using Result = periodogram::SeriesPower;
  static constexpr const char* kName = "periodogram";
  static constexpr const char* kOnStream = "periodogram batch on the stream";
  static constexpr bool kLaunchOnSharedWorkers = false;
  static constexpr metrics::BatchStageMetrics BackendOptions::*kStages = &BackendOptions::periodogram_stages;
  static absl::StatusOr<Pending> Enqueue(DeviceContext& d, StreamSlot& s, const Batch& b) {
    return periodogram::EnqueuePeriodogram(d, s, b);
  }
  static std::vector<Result> Unpack(const Pending& p, const StreamSlot& s, const Batch& b) {
    return periodogram::UnpackPeriodogram(p, s, b);
  }
};

struct DenseOp {
  using Batch = dense::Batch;
  using Pending = dense::PendingDense;
  using Result = dense::Output;
  static constexpr const char* kName = "dense";
  static constexpr const char* kOnStream = "dense batch on the stream";
  static constexpr bool kLaunchOnSharedWorkers = false;
  static constexpr metrics::BatchStageMetrics BackendOptions::*kStages = &BackendOptions::dense_stages;
  static absl::StatusOr<Pending> Enqueue(DeviceContext& d, StreamSlot& s, const Batch& b) {
    return dense::EnqueueDense(d, s, b);
  }
  static std::vector<Result> Unpack(const Pending& p, const StreamSlot& s, const Batch& b) {
    return dense::UnpackDense(p, s, b);
  }
};

struct AssimilateOp {
  using Batch = assimilate::Batch;
  using Pending = assimilate::PendingAssimilate;
  using Result = assimilate::Output;
  static constexpr const char* kName = "assimilate";
  static constexpr const char* kOnStream = "assimilate batch on the stream";
  // Its launch packs every problem's inputs (~0.85 MB a request of 64 small problems): on a
  // GPU's poller it held up that GPU's completions and every later launch, so it runs on the
  // shared workers, several batches at once.
  static constexpr bool kLaunchOnSharedWorkers = true;
  static constexpr metrics::BatchStageMetrics BackendOptions::*kStages = &BackendOptions::assimilate_stages;
  static absl::StatusOr<Pending> Enqueue(DeviceContext& d, StreamSlot& s, const Batch& b) {
    return assimilate::EnqueueAssimilate(d, s, b);
  }
  static std::vector<Result> Unpack(const Pending& p, const StreamSlot& s, const Batch& b) {
    return assimilate::UnpackAssimilate(p, s, b);
  }
};

}  // namespace

// Takes a free stream slot for `batch` on any device that may run it (blocking while every
// such slot is lent: the scheduler's back-pressure, during which its queue grows into the next
// batch), then launches it there: an op with Op::kLaunchOnSharedWorkers (assimilate, whose
// launch packs for milliseconds) on the shared workers, several batches at once; the others on
// the device's poller thread when that is awake (RunIfAwake), else here. The dispatcher waits
// for the first slot freed on any GPU, not for one chosen GPU's: a GPU that frees a slot while
// the dispatcher waits on another would otherwise stay short of work (docs/server.md "Several
// GPUs"). On a poller thread (a call run there by RunOnIdleThread) it does not block, since only the
// pollers give slots back: it asks the least loaded device, and with every slot there lent the
// launch runs where its next slot is released (DeviceContext::AcquireSlotThen).
template <typename Op>
void CudaBackend::Run(std::shared_ptr<const typename Op::Batch> batch,
                      const dense::LoadedModel* model,
                      std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done) {
  const absl::Time taken = absl::Now();
  auto launch_on = [this, batch = std::move(batch), taken, done = std::move(done)](
                       DeviceContext* device, StreamSlot* slot) mutable {
    if (device == nullptr) {
      return Fail<Op>(std::move(done), absl::UnavailableError(absl::StrCat(
                                           "no healthy GPU can run this ", Op::kName,
                                           " batch; the server must be restarted")));
    }
    if (slot == nullptr) return Fail<Op>(std::move(done), device->health());  // turned unhealthy
    auto launch = [this, batch = std::move(batch), device, slot, taken, done = std::move(done)]() mutable {
      Launch<Op>(std::move(batch), device, slot, taken, std::move(done));
    };
    if constexpr (Op::kLaunchOnSharedWorkers) {
      PostToSharedWorkers(std::move(launch));
    } else {
      if (PollerOf(*device).RunIfAwake(launch)) return;
      launch();
    }
  };
  if (CompletionPoller::OnPollerThread()) {
    const auto devices = DevicesByLoad(model);
    if (devices.empty()) return launch_on(nullptr, nullptr);
    DeviceContext* device = devices.front();
    return device->AcquireSlotThen([device, launch_on = std::move(launch_on)](StreamSlot* slot) mutable {
      launch_on(device, slot);
    });
  }
  auto [device, slot] = AcquireSlotOnAnyDevice(model);
  launch_on(device, slot);
}

template <typename Op>
void CudaBackend::Fail(std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done,
                       absl::Status status) {
  completions_->Post([done = std::move(done), status]() mutable { done(status); });
}

// Enqueues `batch` on `slot` and has the poller watch it: `done` then runs with the unpacked
// results, or with the error. INVALID_ARGUMENT from Enqueue is the caller's input and is not
// logged.
template <typename Op>
void CudaBackend::Launch(std::shared_ptr<const typename Op::Batch> batch, DeviceContext* device,
                         StreamSlot* slot, absl::Time taken,
                         std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done) {
  auto pending = Op::Enqueue(*device, *slot, *batch);
  absl::Status status = pending.status();
  if (status.ok()) {
    if (InjectFaultNow(*device)) {
      spdlog::warn("device {}: injecting a sticky fault (--inject_sticky_fault_*)", device->device());
      (void)kernels::LaunchTrap(slot->stream.get());
    }
    const cudaError_t err = cudaEventRecord(slot->finished.get(), slot->stream.get());
    if (err == cudaSuccess) {
      auto* f = new InFlight<Op>{this, device, slot, batch, *std::move(pending), std::move(done),
                                 &(options_.*Op::kStages), taken, absl::Now()};
      PollerOf(*device).Watch(slot->finished.get(), [f](cudaError_t stream_status) {
        FinishInFlight<Op>(f, stream_status);
      });
      return;
    }
    status = CudaErrorStatus(err, "cudaEventRecord", __FILE__, __LINE__);
  }
  if (!absl::IsInvalidArgument(status)) {
    spdlog::error("{} batch failed on device {}: {}", Op::kName, device->device(), status.ToString());
  }
  // The stream may still hold work that reads the slot's buffers: wait before lending it again.
  // Its result also says whether the device survived.
  const cudaError_t sync = cudaStreamSynchronize(slot->stream.get());
  (void)cudaGetLastError();
  device->ReleaseSlot(slot);
  if (sync != cudaSuccess) status = OnStreamError(device, sync, Op::kOnStream);
  Fail<Op>(std::move(done), std::move(status));
}

absl::Status CudaBackend::OnStreamError(DeviceContext* device, cudaError_t err, const char* what) {
  absl::Status status = CudaErrorStatus(err, what, __FILE__, __LINE__);
  if (!IsStickyCudaError(err)) return status;
  // CUDA's rule for sticky errors is per process, not per device: measured on the 2 x H200
  // machine, a trap on GPU 1 made the next batch on GPU 0 fail the same way and every later
  // call (cudaFreeHost included) too. So a fault on one GPU ends CUDA for every GPU of the
  // process; all are marked at once so that no request is sent to a lost device, and the
  // server reports NOT_SERVING for a restart. Isolation between GPUs needs one process per
  // GPU (the one-GPU-per-pod deployment).
  for (const auto& d : devices_) {
    const absl::Status cause =
        d.get() == device
            ? status
            : absl::UnavailableError(absl::StrCat("a sticky CUDA error on GPU ", device->device(),
                                                  " ends CUDA for the whole process: ",
                                                  status.message()));
    if (d->MarkUnhealthy(cause)) {
      spdlog::critical("device {}: {}; marked unhealthy", d->device(), cause.ToString());
      if (options_.on_device_unhealthy) options_.on_device_unhealthy(d->device(), cause);
    }
  }
  return device->health();
}

bool CudaBackend::InjectFaultNow(const DeviceContext& device) {
  if (device.device() != options_.inject_fault_device) return false;
  return injected_batches_.fetch_add(1) + 1 == std::max<int64_t>(1, options_.inject_fault_after_batches);
}

absl::InlinedVector<DeviceContext*, 8> CudaBackend::DevicesByLoad(const dense::LoadedModel* model) {
  const auto* cuda_model = dynamic_cast<const dense::CudaLoadedModel*>(model);
  const size_t n = devices_.size();
  const size_t first = static_cast<size_t>(next_device_.fetch_add(1) % n);
  absl::InlinedVector<std::pair<int, DeviceContext*>, 8> loads;
  for (size_t i = 0; i < n; ++i) {
    DeviceContext* d = devices_[(first + i) % n].get();
    if (!d->healthy()) continue;
    if (model != nullptr && (cuda_model == nullptr || cuda_model->on_device(d->device()) == nullptr)) continue;
    loads.emplace_back(d->load(), d);
  }
  std::stable_sort(loads.begin(), loads.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  absl::InlinedVector<DeviceContext*, 8> devices;
  for (const auto& [load, d] : loads) devices.push_back(d);
  return devices;
}

std::pair<DeviceContext*, StreamSlot*> CudaBackend::AcquireSlotOnAnyDevice(
    const dense::LoadedModel* model) {
  std::pair<DeviceContext*, StreamSlot*> taken{nullptr, nullptr};
  slot_signal_->Retry([&] {
    const auto devices = DevicesByLoad(model);
    if (devices.empty()) return true;  // nothing healthy to wait for
    for (DeviceContext* d : devices) {
      if (StreamSlot* slot = d->TryAcquireSlot()) {
        taken = {d, slot};
        return true;
      }
    }
    return false;
  });
  return taken;
}

int CudaBackend::DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

absl::StatusOr<std::unique_ptr<Backend>> CudaBackend::Create(const BackendOptions& options,
                                                              CompletionQueue* completions) {
  const int count = DeviceCount();
  if (count == 0) return absl::FailedPreconditionError("--backend=cuda but no CUDA device is visible");
  std::vector<std::unique_ptr<DeviceContext>> devices;
  auto slot_signal = std::make_shared<SlotSignal>();
  for (int d = 0; d < count; ++d) {
    DeviceContext::Options o;
    o.device = d;
    o.slot_signal = slot_signal;
    o.streams = std::max(1, options.streams_per_device);
    o.initial_staging_bytes = static_cast<size_t>(std::max<int64_t>(1, options.staging_bytes));
    o.kernel_cache_dir = options.kernel_cache_dir;
    o.debug_sync = options.debug_sync;
    o.fft_max_size = periodogram::LargestFftSize(options.max_frequencies_per_series);
    ASSIGN_OR_RETURN(auto ctx, DeviceContext::Create(o));
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(periodogram::WarmUpPeriodogram(*ctx));
    RETURN_IF_ERROR(dense::WarmUpDense(*ctx));
    RETURN_IF_ERROR(assimilate::WarmUpAssimilate(*ctx));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("device {}: {} (sm_{}), {} streams, kernels and pipeline warmed in {:.1f} ms", d,
                 ctx->description().name, ctx->arch(), ctx->num_streams(), ms);
    devices.push_back(std::move(ctx));
  }
  return std::unique_ptr<Backend>(
      new CudaBackend(std::move(devices), std::move(slot_signal), completions, options));
}

CudaBackend::CudaBackend(std::vector<std::unique_ptr<DeviceContext>> devices,
                         std::shared_ptr<SlotSignal> slot_signal, CompletionQueue* completions,
                         const BackendOptions& options)
    : devices_(std::move(devices)),
      slot_signal_(std::move(slot_signal)),
      completions_(completions),
      options_(options) {
  for (const auto& d : devices_) {
    pollers_.push_back(std::make_unique<CompletionPoller>(completions, d->device()));
  }
  if (options.pinned_tensor_bytes > 0) {
    // Tensors under 1 MiB are packed as cheaply as a DMA call is queued.
    tensor_memory_ = std::make_shared<HostMemory>(
        options.pinned_tensor_bytes, int64_t{1} << 20,
        [](size_t bytes) -> void* {
          void* p = nullptr;
          const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
          if (err != cudaSuccess) {
            spdlog::warn("cudaHostAlloc of {} bytes for resident tensors failed ({}): plain memory",
                         bytes, cudaGetErrorString(err));
            return nullptr;
          }
          return p;
        },
        [](void* p) { cudaFreeHost(p); });
  }
}

CudaBackend::~CudaBackend() = default;  // each DeviceContext synchronises its streams

void CudaBackend::RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                                 PeriodogramDone done) {
  Run<PeriodogramOp>(std::move(batch), nullptr, std::move(done));
}

bool CudaBackend::RunOnIdleThread(std::function<void()> task) {
  const size_t n = devices_.size();
  const size_t first = static_cast<size_t>(next_device_.fetch_add(1) % n);
  for (size_t i = 0; i < n; ++i) {
    const size_t d = (first + i) % n;
    if (devices_[d]->healthy() && pollers_[d]->RunIfIdle(task)) return true;
  }
  return false;
}

absl::Status CudaBackend::CheckModelFits(int64_t stored_bytes) const {
  return ModelDevices(stored_bytes).status();
}

absl::StatusOr<std::vector<DeviceContext*>> CudaBackend::ModelDevices(int64_t stored_bytes) const {
  std::vector<DeviceContext*> healthy;
  for (const auto& d : devices_) {
    if (d->healthy()) healthy.push_back(d.get());
  }
  if (healthy.empty()) return absl::UnavailableError("no healthy GPU to load the model on");
  if (options_.replicate_models) {
    for (DeviceContext* d : healthy) RETURN_IF_ERROR(dense::CheckFitsOnDevice(*d, stored_bytes));
    return healthy;
  }
  // One device: the one with the most free memory (the fit check's error names the best one).
  DeviceContext* best = nullptr;
  int64_t best_free = -1;
  for (const DeviceMemoryUsage& u : MemoryUsage()) {
    const int64_t free = u.total_bytes - u.used_bytes + (u.pool_reserved_bytes - u.pool_used_bytes);
    DeviceContext* d = devices_[static_cast<size_t>(u.index)].get();
    if (d->healthy() && free > best_free) {
      best = d;
      best_free = free;
    }
  }
  if (best == nullptr) best = healthy.front();
  RETURN_IF_ERROR(dense::CheckFitsOnDevice(*best, stored_bytes));
  return std::vector<DeviceContext*>{best};
}

absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> CudaBackend::LoadDenseModel(
    dense::ModelSpec spec) {
  ASSIGN_OR_RETURN(std::vector<DeviceContext*> devices, ModelDevices(dense::StoredBytes(spec)));
  return dense::LoadModelOnDevices(devices, spec);
}

void CudaBackend::RunDense(std::shared_ptr<const dense::Batch> batch, DenseDone done) {
  if (batch->abandoned && batch->abandoned()) {
    completions_->Post([done = std::move(done)]() mutable {
      done(absl::CancelledError("every caller of the dense batch has gone"));
    });
    return;
  }
  const dense::LoadedModel* model = batch->model.get();
  Run<DenseOp>(std::move(batch), model, std::move(done));
}

int64_t CudaBackend::LetkfMaxMembers() const { return assimilate::CudaLetkfMaxMembers(); }

void CudaBackend::RunAssimilate(std::shared_ptr<const assimilate::Batch> batch, AssimilateDone done) {
  if (batch->abandoned && batch->abandoned()) {
    completions_->Post([done = std::move(done)]() mutable {
      done(absl::CancelledError("every caller of the assimilate batch has gone"));
    });
    return;
  }
  Run<AssimilateOp>(std::move(batch), nullptr, std::move(done));
}

std::vector<DeviceDescription> CudaBackend::Devices() const {
  std::vector<DeviceDescription> out;
  for (const auto& d : devices_) {
    DeviceDescription desc = d->description();
    desc.healthy = d->healthy();
    if (!desc.healthy) desc.health_message = std::string(d->health().message());
    desc.batches = d->batches();
    out.push_back(std::move(desc));
  }
  return out;
}

std::vector<DeviceMemoryUsage> CudaBackend::MemoryUsage() const {
  std::vector<DeviceMemoryUsage> out;
  for (const auto& d : devices_) {
    if (!d->healthy()) continue;  // its context is lost: every query would fail
    // Runs on the scraping thread: making the device current there changes no other thread.
    if (absl::Status s = d->MakeCurrent(); !s.ok()) {
      spdlog::warn("device {}: memory query: {}", d->device(), s.ToString());
      continue;
    }
    size_t free = 0, total = 0;
    uint64_t reserved = 0, used = 0;
    cudaError_t err = cudaMemGetInfo(&free, &total);
    if (err == cudaSuccess) {
      err = cudaMemPoolGetAttribute(d->memory_pool(), cudaMemPoolAttrReservedMemCurrent, &reserved);
    }
    if (err == cudaSuccess) {
      err = cudaMemPoolGetAttribute(d->memory_pool(), cudaMemPoolAttrUsedMemCurrent, &used);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      spdlog::warn("device {}: memory query: {}", d->device(), cudaGetErrorName(err));
      continue;
    }
    DeviceMemoryUsage u;
    u.index = d->device();
    u.total_bytes = static_cast<int64_t>(total);
    u.used_bytes = static_cast<int64_t>(total - free);
    u.pool_reserved_bytes = static_cast<int64_t>(reserved);
    u.pool_used_bytes = static_cast<int64_t>(used);
    out.push_back(u);
  }
  return out;
}

KernelCacheStats CudaBackend::KernelStats() const {
  KernelCacheStats total;
  for (const auto& d : devices_) {
    const KernelCacheStats s = d->kernels().Stats();
    total.entries += s.entries;
    total.hits += s.hits;
    total.misses += s.misses;
    total.disk_hits += s.disk_hits;
    total.compile_ms_total += s.compile_ms_total;
    total.kernels.insert(total.kernels.end(), s.kernels.begin(), s.kernels.end());
    total.directory = s.directory;
  }
  return total;
}

}  // namespace gpucompute
