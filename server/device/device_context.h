// One GPU's runtime: a fixed pool of streams (each with its own pinned staging buffers), the
// stream-ordered memory pool, and the kernel cache. Nothing here allocates on the request path
// except pinned staging growth, which happens only when a batch is larger than any before.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/device/device_info.h"
#include "server/device/cublaslt.h"
#include "server/device/cuda_resources.h"
#include "server/device/cufft.h"
#include "server/device/cusolver.h"
#include "server/device/fft_plans.h"
#include "server/device/kernel_cache.h"

namespace gpucompute {

// A stream and the pinned host buffers that belong to it. Owned by the DeviceContext; lent to
// one batch at a time between AcquireSlot and ReleaseSlot.
struct StreamSlot {
  int index = 0;
  CudaStream stream;
  CudaEvent finished;        // recorded after a batch's last copy (CompletionPoller)
  PinnedBuffer staging_in;   // host -> device
  PinnedBuffer staging_out;  // device -> host
  // cuBLASLt: a handle and a workspace used only by work on this slot's stream.
  CublasLtHandle cublaslt;
  DeviceMemory cublaslt_workspace;  // kCublasLtWorkspaceBytes
  // cuBLAS and cuSOLVER handles bound to this slot's stream. cuBLAS shares the cuBLASLt
  // workspace above (same stream, so never at the same time); cuSOLVER's workspace comes from
  // the memory pool per call.
  CublasHandle cublas;
  CusolverDnHandle cusolver;
  // Constant tables of the ops, reused on this slot's stream only.
  SlotCache cache;
  // cuFFT plans for the ops' transforms on this slot's stream; null when the context was made
  // without them (Options::fft_max_size 0).
  std::unique_ptr<FftPlans> ffts;
};

inline constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

// Wakes a thread that waits for a stream slot on any of several devices: each device that was
// given the signal notifies it whenever one of its slots may have become free (a slot returned
// to its free list, the device turned unhealthy), after releasing its own lock. Thread-safe.
class SlotSignal {
 public:
  void Notify();
  // Calls `attempt` (under the signal's lock; it may take device locks) until it returns true,
  // waiting for a Notify after every attempt that returned false: a slot freed between an
  // attempt and the wait is not missed.
  void Retry(absl::FunctionRef<bool()> attempt);

 private:
  absl::Mutex mu_;
  absl::CondVar freed_;
  uint64_t notifications_ ABSL_GUARDED_BY(mu_) = 0;
};

class DeviceContext {
 public:
  struct Options {
    int device = 0;
    int streams = 4;
    std::string kernel_cache_dir;                      // empty: memory only
    size_t initial_staging_bytes = size_t{8} << 20;   // per slot, each direction
    uint64_t pool_release_threshold = UINT64_MAX;      // bytes the pool keeps when idle
    bool debug_sync = false;
    std::shared_ptr<SlotSignal> slot_signal;           // notified as slots come free; may be null
    // The largest FFT the ops may run: each slot gets cuFFT plans for every ladder size up to
    // it here (FftPlans). 0: none (a context for the ops that take no FFT).
    int64_t fft_max_size = 0;
  };

  static absl::StatusOr<std::unique_ptr<DeviceContext>> Create(const Options& options);
  ~DeviceContext();  // synchronises its streams, then releases everything (logs errors)
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return options_.device; }
  int arch() const { return description_.cc_major * 10 + description_.cc_minor; }
  const DeviceDescription& description() const { return description_; }
  bool debug_sync() const { return options_.debug_sync; }
  KernelCache& kernels() { return *kernels_; }
  cudaMemPool_t memory_pool() const { return pool_; }
  int num_streams() const { return static_cast<int>(slots_.size()); }

  // Makes this device current on the calling thread.
  absl::Status MakeCurrent() const;

  // Blocks until a slot is free and lends it. Null when the device is (or becomes, while the
  // caller waits) unhealthy: the caller then fails its work with health(). Thread-safe.
  StreamSlot* AcquireSlot();
  // AcquireSlot without blocking: calls `lent(slot)` at once when a slot is free, else later
  // on the thread whose ReleaseSlot frees one (before any AcquireSlot waiter gets it), or with
  // null when the device turns unhealthy (on MarkUnhealthy's thread). For threads that must
  // not wait: a completion poller (only the pollers give slots back). Thread-safe.
  void AcquireSlotThen(std::function<void(StreamSlot*)> lent);
  // A free slot, lent, or null at once when none is free or the device is unhealthy (wait for
  // one on Options::slot_signal). Thread-safe.
  StreamSlot* TryAcquireSlot();
  // Returns a slot once all work enqueued on it has finished. Thread-safe, no CUDA call: may
  // run on a completion thread. A slot that is not lent (double release, foreign pointer) is
  // logged and ignored.
  void ReleaseSlot(StreamSlot* slot);

  // Work lent or waiting for a slot (AcquireSlot callers not yet released): what the backend
  // balances devices by. Thread-safe, lock-free.
  int load() const { return load_.load(std::memory_order_relaxed); }
  // Batches run to completion on this device (counted by the backend as each finishes).
  void CountBatch() { batches_.fetch_add(1, std::memory_order_relaxed); }
  int64_t batches() const { return batches_.load(std::memory_order_relaxed); }

  // Health. A device turns unhealthy after a sticky CUDA error (its context is lost: every
  // later call on it fails) and never turns healthy again; the process must be restarted.
  bool healthy() const { return healthy_.load(std::memory_order_acquire); }
  // OK while healthy; afterwards UNAVAILABLE naming the device and the error that broke it.
  absl::Status health() const;
  // Marks the device unhealthy with `cause` (first cause wins) and wakes every AcquireSlot
  // waiter (and the slot signal's). Returns true for the call that changed the state. Thread-safe, no CUDA call.
  bool MarkUnhealthy(const absl::Status& cause);

 private:
  explicit DeviceContext(const Options& options);
  absl::Status MakeFftPlans();  // every slot's
  bool SlotOrUnhealthy() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !free_slots_.empty() || !healthy();
  }

  Options options_;
  DeviceDescription description_;
  cudaMemPool_t pool_ = nullptr;  // the device's default pool, configured (not owned)
  std::unique_ptr<KernelCache> kernels_;
  std::vector<std::unique_ptr<StreamSlot>> slots_;  // fixed once Create returns

  mutable absl::Mutex mu_;
  std::vector<StreamSlot*> free_slots_ ABSL_GUARDED_BY(mu_);  // LIFO: reuse the warmest slot
  std::deque<std::function<void(StreamSlot*)>> waiting_ ABSL_GUARDED_BY(mu_);  // AcquireSlotThen's
  absl::Status unhealthy_cause_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> healthy_{true};  // written under mu_, read without it
  std::atomic<int> load_{0};
  std::atomic<int64_t> batches_{0};
};

}  // namespace gpucompute
