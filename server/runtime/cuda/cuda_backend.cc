// CUDA backend (see cuda_backend.h).
#include "server/runtime/cuda/cuda_backend.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "server/common/status_macros.h"
#include "server/ops/dense/cuda_dense.h"
#include "server/ops/periodogram/cuda_periodogram.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/cuda/cuda_resources.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// What the host function hands to the completion thread.
struct InFlight {
  DeviceContext* device;
  StreamSlot* slot;
  std::shared_ptr<const periodogram::Batch> batch;
  periodogram::PendingPeriodogram pending;
  Backend::PeriodogramDone done;
  CompletionQueue* completions;
};

// Runs on a CUDA-internal thread once the stream reaches it: no CUDA calls here. A stream
// callback (unlike cudaLaunchHostFunc) also runs after a device fault, with the error, so no
// call is left waiting and no slot is lost.
void CUDART_CB OnStreamDone(cudaStream_t /*stream*/, cudaError_t status, void* data) {
  auto* raw = static_cast<InFlight*>(data);
  raw->completions->Post([raw, status] {
    std::unique_ptr<InFlight> f(raw);
    if (status != cudaSuccess) {
      f->device->ReleaseSlot(f->slot);
      f->done(CudaErrorStatus(status, "periodogram batch on the stream", __FILE__, __LINE__));
      return;
    }
    std::vector<periodogram::SeriesPower> results =
        periodogram::UnpackPeriodogram(f->pending, *f->slot, *f->batch);
    f->device->ReleaseSlot(f->slot);
    f->done(std::move(results));
  });
}

struct DenseInFlight {
  DeviceContext* device;
  StreamSlot* slot;
  std::shared_ptr<const dense::Batch> batch;
  dense::PendingDense pending;
  Backend::DenseDone done;
  CompletionQueue* completions;
};

// As OnStreamDone, for dense batches.
void CUDART_CB OnDenseStreamDone(cudaStream_t /*stream*/, cudaError_t status, void* data) {
  auto* raw = static_cast<DenseInFlight*>(data);
  raw->completions->Post([raw, status] {
    std::unique_ptr<DenseInFlight> f(raw);
    if (status != cudaSuccess) {
      f->device->ReleaseSlot(f->slot);
      f->done(CudaErrorStatus(status, "dense batch on the stream", __FILE__, __LINE__));
      return;
    }
    std::vector<dense::Output> outputs = dense::UnpackDense(f->pending, *f->slot, *f->batch);
    f->device->ReleaseSlot(f->slot);
    f->done(std::move(outputs));
  });
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
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("device {}: {} (sm_{}), {} streams, kernels and pipeline warmed in {:.1f} ms", d,
                 ctx->description().name, ctx->arch(), ctx->num_streams(), ms);
    devices.push_back(std::move(ctx));
  }
  return std::unique_ptr<Backend>(new CudaBackend(std::move(devices), completions));
}

CudaBackend::~CudaBackend() = default;  // each DeviceContext synchronises its streams

void CudaBackend::RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                                 PeriodogramDone done) {
  DeviceContext* device = devices_[next_device_.fetch_add(1) % devices_.size()].get();
  StreamSlot* slot = device->AcquireSlot();  // back-pressure: blocks while all streams are busy
  auto pending = periodogram::EnqueuePeriodogram(*device, *slot, *batch);
  absl::Status status = pending.status();
  if (status.ok()) {
    auto* f = new InFlight{device, slot, batch, *std::move(pending), std::move(done), completions_};
    const cudaError_t err = cudaStreamAddCallback(slot->stream.get(), OnStreamDone, f, 0);
    if (err == cudaSuccess) return;
    status = CudaErrorStatus(err, "cudaStreamAddCallback", __FILE__, __LINE__);
    done = std::move(f->done);
    delete f;
  }
  spdlog::error("periodogram batch failed on device {}: {}", device->device(), status.ToString());
  // The stream may still hold work that reads the slot's buffers: wait before lending it again.
  cudaStreamSynchronize(slot->stream.get());
  cudaGetLastError();
  device->ReleaseSlot(slot);
  completions_->Post([done = std::move(done), status]() mutable { done(status); });
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
  DeviceContext* device = devices_[next_device_.fetch_add(1) % devices_.size()].get();
  StreamSlot* slot = device->AcquireSlot();  // back-pressure: blocks while all streams are busy
  auto pending = dense::EnqueueDense(*device, *slot, *batch);
  absl::Status status = pending.status();
  if (status.ok()) {
    auto* f = new DenseInFlight{device, slot, batch, *std::move(pending), std::move(done), completions_};
    const cudaError_t err = cudaStreamAddCallback(slot->stream.get(), OnDenseStreamDone, f, 0);
    if (err == cudaSuccess) return;
    status = CudaErrorStatus(err, "cudaStreamAddCallback", __FILE__, __LINE__);
    done = std::move(f->done);
    delete f;
  }
  if (!absl::IsInvalidArgument(status)) {
    spdlog::error("dense batch failed on device {}: {}", device->device(), status.ToString());
  }
  // The stream may still hold work that reads the slot's buffers: wait before lending it again.
  cudaStreamSynchronize(slot->stream.get());
  cudaGetLastError();
  device->ReleaseSlot(slot);
  completions_->Post([done = std::move(done), status]() mutable { done(status); });
}

std::vector<DeviceDescription> CudaBackend::Devices() const {
  std::vector<DeviceDescription> out;
  for (const auto& d : devices_) out.push_back(d->description());
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
