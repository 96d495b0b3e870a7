// cuFFT for the ops: a move-only plan owner and the status macro (the plans themselves:
// fft_plans.h); and a small per-slot cache of objects that are expensive to build and are
// reused on one stream (the ops' constant device tables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cufft.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpucompute {

absl::Status CufftErrorStatus(cufftResult err, const char* expr, const char* file, int line);

}  // namespace gpucompute

#define CUFFT_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                   \
    cufftResult _gpucompute_cufft_err = (expr);                                          \
    if (_gpucompute_cufft_err != CUFFT_SUCCESS)                                          \
      return ::gpucompute::CufftErrorStatus(_gpucompute_cufft_err, #expr, __FILE__, __LINE__); \
  } while (0)

namespace gpucompute {

// Owns a cuFFT plan: `batch` contiguous 1-D complex transforms of `n` points, in place or not.
// The plan has no work area of its own (cuFFT's automatic allocation is off, so that building
// one does not cudaMalloc it): before each execution the caller gives it `work_bytes()` of
// stream-ordered memory with cufftSetWorkArea, freed after the execution in stream order.
class CufftPlan {
 public:
  CufftPlan() = default;
  static absl::StatusOr<CufftPlan> Create1d(int64_t n, int64_t batch, cufftType type);
  ~CufftPlan();
  CufftPlan(CufftPlan&& other) noexcept
      : plan_(std::exchange(other.plan_, 0)),
        valid_(std::exchange(other.valid_, false)),
        work_bytes_(other.work_bytes_) {}
  CufftPlan& operator=(CufftPlan&& other) noexcept;
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;

  cufftHandle get() const { return plan_; }
  size_t work_bytes() const { return work_bytes_; }

 private:
  void Release();
  cufftHandle plan_ = 0;
  bool valid_ = false;
  size_t work_bytes_ = 0;
};

// Objects an op builds once and reuses on one slot's stream, by key; beyond `capacity` the
// least recently used goes. Not thread-safe: only the slot's current holder uses it. An evicted
// object is kept until the stream has passed the point where it was evicted (an event recorded
// there), so that work already queued that reads it (a plan's work area, a table) finishes
// first without the stream being synchronised; later calls release those the stream has passed.
class SlotCache {
 public:
  explicit SlotCache(size_t capacity = 6) : capacity_(capacity) {}
  ~SlotCache();
  SlotCache(const SlotCache&) = delete;
  SlotCache& operator=(const SlotCache&) = delete;

  // The object under `key` (now the most recently used), or nullptr.
  template <typename T>
  T* Find(const std::string& key) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key == key) {
        entries_.splice(entries_.begin(), entries_, it);
        return static_cast<T*>(entries_.front().value.get());
      }
    }
    return nullptr;
  }

  // Stores `value` under `key` (which must not be present); may evict others first (retired
  // on `stream`, the stream that uses this cache).
  template <typename T>
  absl::StatusOr<T*> Insert(const std::string& key, std::unique_ptr<T> value, cudaStream_t stream) {
    ReleaseRetired();
    while (entries_.size() >= capacity_) {
      absl::Status retired = Retire(std::move(entries_.back().value), stream);
      entries_.pop_back();
      if (!retired.ok()) return retired;
    }
    T* raw = value.get();
    entries_.push_front(Entry{key, std::shared_ptr<void>(value.release(), [](void* p) {
                                delete static_cast<T*>(p);
                              })});
    return raw;
  }

  size_t size() const { return entries_.size(); }
  // Evicted objects not yet released (the stream had not passed their eviction when last seen).
  size_t retired() const { return retired_.size(); }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<void> value;  // type-erased owner (its deleter knows the type)
  };
  struct Retired {
    std::shared_ptr<void> value;
    cudaEvent_t passed = nullptr;  // recorded on the stream at the eviction
  };
  // Keeps `value` until `stream` passes this point. On a failure to record the event the
  // stream is synchronised instead (an unhealthy device: the batch fails anyway).
  absl::Status Retire(std::shared_ptr<void> value, cudaStream_t stream);
  // Releases the retired objects whose event has completed, and recycles their events.
  void ReleaseRetired();

  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::list<Retired> retired_;
  std::vector<cudaEvent_t> spare_events_;
};

}  // namespace gpucompute
