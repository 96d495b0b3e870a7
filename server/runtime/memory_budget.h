// One budget of host memory for the work the server has accepted: a request takes a lease of
// what it will hold (decoded inputs, their working copies, outputs) before it allocates it,
// and gives it back when it is done. A request that does not fit is refused
// RESOURCE_EXHAUSTED at once instead of growing the process until the kernel kills it.
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace gpucompute {

class MemoryBudget;

// Bytes held from a MemoryBudget until the lease is destroyed (or moved from).
class MemoryLease {
 public:
  MemoryLease() = default;
  MemoryLease(MemoryLease&& other) noexcept;
  MemoryLease& operator=(MemoryLease&& other) noexcept;
  MemoryLease(const MemoryLease&) = delete;
  MemoryLease& operator=(const MemoryLease&) = delete;
  ~MemoryLease();

  int64_t bytes() const { return bytes_; }

 private:
  friend class MemoryBudget;
  MemoryLease(MemoryBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
  void Release();

  MemoryBudget* budget_ = nullptr;
  int64_t bytes_ = 0;
};

class MemoryBudget {
 public:
  // `limit_bytes` in all; `flag` names the setting in error messages ("--memory_budget_bytes").
  MemoryBudget(int64_t limit_bytes, std::string flag);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // A lease of `bytes` (>= 0) when they fit beside the leases held now, else
  // RESOURCE_EXHAUSTED saying `what` asked for how much, what is held and the limit.
  absl::StatusOr<MemoryLease> Acquire(int64_t bytes, absl::string_view what);

  int64_t limit() const { return limit_; }
  int64_t in_use() const;

 private:
  friend class MemoryLease;
  void Give(int64_t bytes);

  const int64_t limit_;
  const std::string flag_;
  mutable absl::Mutex mu_;
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpucompute
