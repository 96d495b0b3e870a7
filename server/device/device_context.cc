// DeviceContext: one GPU's stream slots, configured memory pool and kernel cache.
#include "server/device/device_context.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// Allocated and freed once at start-up so that the pool already holds this much (with a
// release threshold above it) when the first request arrives.
constexpr size_t kPoolWarmBytes = size_t{64} << 20;

void LogIfError(cudaError_t err, const char* what, int device) {
  if (err == cudaSuccess) return;
  spdlog::warn("device {}: {} failed: {} ({})", device, what, cudaGetErrorName(err),
               cudaGetErrorString(err));
  (void)cudaGetLastError();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::Create(const Options& options) {
  if (options.streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("streams per device must be at least 1, got ", options.streams));
  }
  int count = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA device ", options.device, " (", count, " visible)"));
  }

  std::unique_ptr<DeviceContext> context(new DeviceContext(options));
  const int device = options.device;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));

  cudaDeviceProp prop{};
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  DeviceDescription& d = context->description_;
  d.index = device;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  d.multiprocessors = prop.multiProcessorCount;
  d.streams = options.streams;

  int pools_supported = 0;
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, device));
  if (!pools_supported) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, " (", d.name, ") has no stream-ordered memory pools"));
  }
  CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&context->pool_, device));
  // The default threshold (0) hands memory back to the OS at every synchronisation, so the
  // next batch pays for cudaMalloc-like growth again; keep what the options say instead.
  uint64_t threshold = options.pool_release_threshold;
  CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(context->pool_, cudaMemPoolAttrReleaseThreshold, &threshold));

  ASSIGN_OR_RETURN(context->kernels_,
                   KernelCache::Create(device, context->arch(), options.kernel_cache_dir));

  context->slots_.reserve(static_cast<size_t>(options.streams));
  for (int i = 0; i < options.streams; ++i) {
    auto slot = std::make_unique<StreamSlot>();
    slot->index = i;
    ASSIGN_OR_RETURN(slot->stream, CudaStream::Create());
    ASSIGN_OR_RETURN(slot->finished, CudaEvent::Create(/*disable_timing=*/true));
    RETURN_IF_ERROR(slot->staging_in.Reserve(options.initial_staging_bytes));
    RETURN_IF_ERROR(slot->staging_out.Reserve(options.initial_staging_bytes));
    ASSIGN_OR_RETURN(slot->cublaslt, CublasLtHandle::Create());
    ASSIGN_OR_RETURN(slot->cublaslt_workspace, DeviceMemory::Allocate(device, kCublasLtWorkspaceBytes));
    ASSIGN_OR_RETURN(slot->cublas, CublasHandle::Create());
    CUBLAS_RETURN_IF_ERROR(cublasSetStream(slot->cublas.get(), slot->stream.get()));
    CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(slot->cublas.get(), slot->cublaslt_workspace.get(),
                                              kCublasLtWorkspaceBytes));
    ASSIGN_OR_RETURN(slot->cusolver, CusolverDnHandle::Create());
    CUSOLVER_RETURN_IF_ERROR(cusolverDnSetStream(slot->cusolver.get(), slot->stream.get()));
    {
      // Listed as free as soon as it exists, so that the destructor's count of lent slots is
      // right even when Create fails half-way.
      absl::MutexLock lock(&context->mu_);
      context->free_slots_.push_back(slot.get());
    }
    context->slots_.push_back(std::move(slot));
  }

  if (options.fft_max_size > 0) RETURN_IF_ERROR(context->MakeFftPlans());

  // Grow the pool now rather than in the first request. With a threshold below the warm-up
  // size the memory goes back at the synchronise below, which costs nothing worse.
  StreamView warm_stream = context->slots_[0]->stream.view();
  void* warm = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&warm, kPoolWarmBytes, context->pool_, warm_stream));
  CUDA_RETURN_IF_ERROR(cudaFreeAsync(warm, warm_stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(warm_stream));

  spdlog::info(
      "device {}: {} (sm_{}), {:.1f} GiB, {} SMs, {} streams, {} MiB pinned staging per stream",
      device, d.name, context->arch(), static_cast<double>(d.total_memory_bytes) / (1 << 30),
      d.multiprocessors, options.streams, 2 * options.initial_staging_bytes >> 20);
  return context;
}

DeviceContext::DeviceContext(const Options& options) : options_(options) {}

DeviceContext::~DeviceContext() {
  {
    absl::MutexLock lock(&mu_);
    if (free_slots_.size() != slots_.size()) {
      spdlog::warn("device {}: destroyed with {} of {} stream slots still lent", options_.device,
                   slots_.size() - free_slots_.size(), slots_.size());
    }
  }
  LogIfError(cudaSetDevice(options_.device), "cudaSetDevice", options_.device);
  // Work may still be queued on the streams, reading pinned buffers and device memory that are
  // about to go: let it finish before anything is released.
  for (const auto& slot : slots_) {
    if (slot->stream.get() == nullptr) continue;
    LogIfError(cudaStreamSynchronize(slot->stream.get()), "cudaStreamSynchronize",
               options_.device);
  }
  // The pool is the device's and outlives us; hand back what it keeps idle on our behalf.
  if (pool_ != nullptr) LogIfError(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo", options_.device);
  // Members then go in reverse order: slots (streams, pinned buffers, FFT plans), then the
  // kernel cache.
}

absl::Status DeviceContext::MakeFftPlans() {
  // ~0.2 s a slot once cuFFT's kernels are in the JIT cache; cuFFT makes plans one at a time,
  // so threads would not make them faster.
  const auto start = std::chrono::steady_clock::now();
  for (const auto& slot : slots_) {
    ASSIGN_OR_RETURN(slot->ffts, FftPlans::Create(options_.device, options_.fft_max_size));
  }
  spdlog::info("device {}: cuFFT plans for the sizes up to {} ({} a slot) made in {:.0f} ms",
               options_.device, options_.fft_max_size, slots_[0]->ffts->counts().batched_plans,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

absl::Status DeviceContext::MakeCurrent() const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  return absl::OkStatus();
}

void SlotSignal::Notify() {
  absl::MutexLock lock(&mu_);
  ++notifications_;
  freed_.SignalAll();
}

void SlotSignal::Retry(absl::FunctionRef<bool()> attempt) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const uint64_t seen = notifications_;
    if (attempt()) return;
    while (notifications_ == seen) freed_.Wait(&mu_);
  }
}

StreamSlot* DeviceContext::TryAcquireSlot() {
  absl::MutexLock lock(&mu_);
  if (!healthy() || free_slots_.empty()) return nullptr;
  load_.fetch_add(1, std::memory_order_relaxed);
  StreamSlot* slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

StreamSlot* DeviceContext::AcquireSlot() {
  load_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &DeviceContext::SlotOrUnhealthy));
  if (!healthy()) {
    load_.fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  StreamSlot* slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

void DeviceContext::AcquireSlotThen(std::function<void(StreamSlot*)> lent) {
  load_.fetch_add(1, std::memory_order_relaxed);
  StreamSlot* slot = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (healthy() && free_slots_.empty()) {
      waiting_.push_back(std::move(lent));
      return;
    }
    if (healthy()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
  }
  if (slot == nullptr) load_.fetch_sub(1, std::memory_order_relaxed);
  lent(slot);
}

absl::Status DeviceContext::health() const {
  if (healthy()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return unhealthy_cause_;
}

bool DeviceContext::MarkUnhealthy(const absl::Status& cause) {
  absl::ReleasableMutexLock lock(&mu_);
  if (!healthy()) return false;
  unhealthy_cause_ = absl::UnavailableError(
      absl::StrCat("GPU ", options_.device, " is unhealthy after a device fault (",
                   cause.message(), "); the server must be restarted, other replicas keep serving"));
  healthy_.store(false, std::memory_order_release);
  std::deque<std::function<void(StreamSlot*)>> waiting;
  waiting.swap(waiting_);
  lock.Release();
  for (auto& lent : waiting) {
    load_.fetch_sub(1, std::memory_order_relaxed);
    lent(nullptr);
  }
  if (options_.slot_signal != nullptr) options_.slot_signal->Notify();
  return true;
}

void DeviceContext::ReleaseSlot(StreamSlot* slot) {
  if (slot == nullptr || slot->index < 0 || slot->index >= num_streams() ||
      slots_[static_cast<size_t>(slot->index)].get() != slot) {
    spdlog::error("device {}: ReleaseSlot of a slot it does not own", options_.device);
    return;
  }
  absl::ReleasableMutexLock lock(&mu_);
  if (std::find(free_slots_.begin(), free_slots_.end(), slot) != free_slots_.end()) {
    spdlog::error("device {}: stream slot {} released twice", options_.device, slot->index);
    return;
  }
  load_.fetch_sub(1, std::memory_order_relaxed);
  if (waiting_.empty()) {
    free_slots_.push_back(slot);
    lock.Release();
    if (options_.slot_signal != nullptr) options_.slot_signal->Notify();
    return;
  }
  std::function<void(StreamSlot*)> lent = std::move(waiting_.front());
  waiting_.pop_front();
  lock.Release();
  lent(slot);  // the waiter's load was counted when it asked
}

}  // namespace gpucompute
