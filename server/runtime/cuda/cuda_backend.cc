// CUDA backend (see cuda_backend.h).
#include "server/runtime/cuda/cuda_backend.h"

#include <chrono>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "server/common/status_macros.h"
#include "server/ops/assimilate/cuda_assimilate.h"
#include "server/ops/dense/cuda_dense.h"
#include "server/ops/periodogram/cuda_periodogram.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/cuda/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// One batch of any operation in flight on a stream slot: what the stream callback hands to the
// completion thread. `Op` names the batch, pending and result types and the unpack step.
template <typename Op>
struct InFlight {
  DeviceContext* device;
  StreamSlot* slot;
  std::shared_ptr<const typename Op::Batch> batch;
  typename Op::Pending pending;
  std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done;
  CompletionQueue* completions;
};

// Runs on a CUDA-internal thread once the stream reaches it: no CUDA calls here. A stream
// callback (unlike cudaLaunchHostFunc) also runs after a device fault, with the error, so no
// call is left waiting and no slot is lost.
template <typename Op>
void CUDART_CB OnStreamDone(cudaStream_t /*stream*/, cudaError_t status, void* data) {
  auto* raw = static_cast<InFlight<Op>*>(data);
  raw->completions->Post([raw, status] {
    std::unique_ptr<InFlight<Op>> f(raw);
    if (status != cudaSuccess) {
      f->device->ReleaseSlot(f->slot);
      f->done(CudaErrorStatus(status, Op::kOnStream, __FILE__, __LINE__));
      return;
    }
    auto results = Op::Unpack(f->pending, *f->slot, *f->batch);
    f->device->ReleaseSlot(f->slot);
    f->done(std::move(results));
  });
}

struct PeriodogramOp {
  using Batch = periodogram::Batch;
  using Pending = periodogram::PendingPeriodogram;
  using Result = periodogram::SeriesPower;
  static constexpr const char* kName = "periodogram";
  static constexpr const char* kOnStream = "periodogram batch on the stream";
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
  static absl::StatusOr<Pending> Enqueue(DeviceContext& d, StreamSlot& s, const Batch& b) {
    return assimilate::EnqueueAssimilate(d, s, b);
  }
  static std::vector<Result> Unpack(const Pending& p, const StreamSlot& s, const Batch& b) {
    return assimilate::UnpackAssimilate(p, s, b);
  }
};

// Enqueues `batch` on a free slot of `device` (blocking while every stream is busy: the
// scheduler's back-pressure) and arranges for `done` to run on a completion thread with the
// unpacked results, or with the error. INVALID_ARGUMENT from Enqueue is the caller's input
// and is not logged.
template <typename Op>
void RunOnStream(DeviceContext* device, CompletionQueue* completions,
                 std::shared_ptr<const typename Op::Batch> batch,
                 std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done) {
  StreamSlot* slot = device->AcquireSlot();
  auto pending = Op::Enqueue(*device, *slot, *batch);
  absl::Status status = pending.status();
  if (status.ok()) {
    auto* f = new InFlight<Op>{device, slot, batch, *std::move(pending), std::move(done), completions};
    const cudaError_t err = cudaStreamAddCallback(slot->stream.get(), OnStreamDone<Op>, f, 0);
    if (err == cudaSuccess) return;
    status = CudaErrorStatus(err, "cudaStreamAddCallback", __FILE__, __LINE__);
    done = std::move(f->done);
    delete f;
  }
  if (!absl::IsInvalidArgument(status)) {
    spdlog::error("{} batch failed on device {}: {}", Op::kName, device->device(), status.ToString());
  }
  // The stream may still hold work that reads the slot's buffers: wait before lending it again.
  cudaStreamSynchronize(slot->stream.get());
  cudaGetLastError();
  device->ReleaseSlot(slot);
  completions->Post([done = std::move(done), status]() mutable { done(status); });
}

}  // namespace

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
  for (int d = 0; d < count; ++d) {
    DeviceContext::Options o;
    o.device = d;
    o.streams = std::max(1, options.streams_per_device);
    o.kernel_cache_dir = options.kernel_cache_dir;
    o.debug_sync = options.debug_sync;
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
  return std::unique_ptr<Backend>(new CudaBackend(std::move(devices), completions));
}

CudaBackend::CudaBackend(std::vector<std::unique_ptr<DeviceContext>> devices,
                         CompletionQueue* completions)
    : devices_(std::move(devices)),
      completions_(completions) {}

CudaBackend::~CudaBackend() = default;  // each DeviceContext synchronises its streams

void CudaBackend::RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                                 PeriodogramDone done) {
  RunOnStream<PeriodogramOp>(NextDevice(), completions_, std::move(batch), std::move(done));
}

absl::Status CudaBackend::CheckModelFits(int64_t stored_bytes) const {
  for (const auto& d : devices_) RETURN_IF_ERROR(dense::CheckFitsOnDevice(*d, stored_bytes));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> CudaBackend::LoadDenseModel(
    dense::ModelSpec spec) {
  std::vector<DeviceContext*> devices;
  for (const auto& d : devices_) devices.push_back(d.get());
  return dense::LoadModelOnDevices(devices, spec);
}

void CudaBackend::RunDense(std::shared_ptr<const dense::Batch> batch, DenseDone done) {
  if (batch->abandoned && batch->abandoned()) {
    completions_->Post([done = std::move(done)]() mutable {
      done(absl::CancelledError("every caller of the dense batch has gone"));
    });
    return;
  }
  RunOnStream<DenseOp>(NextDevice(), completions_, std::move(batch), std::move(done));
}

void CudaBackend::RunAssimilate(std::shared_ptr<const assimilate::Batch> batch, AssimilateDone done) {
  if (batch->abandoned && batch->abandoned()) {
    completions_->Post([done = std::move(done)]() mutable {
      done(absl::CancelledError("every caller of the assimilate batch has gone"));
    });
    return;
  }
  RunOnStream<AssimilateOp>(NextDevice(), completions_, std::move(batch), std::move(done));
}

std::vector<DeviceDescription> CudaBackend::Devices() const {
  std::vector<DeviceDescription> out;
  for (const auto& d : devices_) out.push_back(d->description());
  return out;
}

std::vector<DeviceMemoryUsage> CudaBackend::MemoryUsage() const {
  std::vector<DeviceMemoryUsage> out;
  for (const auto& d : devices_) {
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
