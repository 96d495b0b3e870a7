// A budget of host memory: a request takes a lease of what it will hold (decoded inputs, their
// working copies, outputs) before it allocates it, and gives it back when it is done; the
// resident tensor store takes the bytes of each tensor it reserves (Take) and returns them
// when the tensor is freed (Return). What does not fit is refused RESOURCE_EXHAUSTED at once
// instead of growing the process until the kernel kills it. Each caller may hold only its
// share of the budget, so that one caller cannot take all of it from the others.
//
// Budgets nest: the server's work in progress has a budget of its own (--memory_budget_bytes)
// inside the one budget of the whole server (--server_memory_bytes), which the resident
// tensors take from too; bytes taken from a budget are taken from its parent as well, so
// either limit refuses. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
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
  MemoryLease(MemoryBudget* budget, int64_t bytes, std::string caller)
      : budget_(budget), bytes_(bytes), caller_(std::move(caller)) {}
  void Release();

  MemoryBudget* budget_ = nullptr;
  int64_t bytes_ = 0;
  std::string caller_;
};

class MemoryBudget {
 public:
  // `limit_bytes` in all, of which one caller may hold `caller_share` (a fraction, 0 < share
  // <= 1); `flag` and `share_flag` name the settings in error messages. Bytes taken here are
  // taken from `parent` (borrowed, outliving this budget) too, when there is one.
  MemoryBudget(int64_t limit_bytes, std::string flag, double caller_share = 1.0,
               std::string share_flag = "", MemoryBudget* parent = nullptr);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // A lease of `bytes` (>= 0) for `caller` when they fit beside the leases held now, in all and
  // within the caller's share, else RESOURCE_EXHAUSTED saying `what` asked for how much, what
  // is held and the limit.
  absl::StatusOr<MemoryLease> Acquire(int64_t bytes, absl::string_view what,
                                      absl::string_view caller = "");
  // Acquire's check without a lease: the bytes stay taken until Return(bytes, caller).
  absl::Status Take(int64_t bytes, absl::string_view what, absl::string_view caller = "");
  void Return(int64_t bytes, absl::string_view caller = "");

  int64_t limit() const { return limit_; }
  int64_t caller_limit() const { return caller_limit_; }
  int64_t in_use() const;
  int64_t in_use(absl::string_view caller) const;

 private:
  friend class MemoryLease;
  // This budget's own check and count (not the parent's).
  absl::Status TakeHere(int64_t bytes, absl::string_view what, absl::string_view caller);
  void ReturnHere(int64_t bytes, absl::string_view caller);

  MemoryBudget* const parent_;
  const int64_t limit_;
  const std::string flag_;
  const int64_t caller_limit_;
  const std::string share_flag_;
  mutable absl::Mutex mu_;
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int64_t> by_caller_ ABSL_GUARDED_BY(mu_);  // > 0 only
};

}  // namespace gpucompute
